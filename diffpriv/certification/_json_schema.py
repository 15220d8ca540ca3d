"""The certificate format as a JSON Schema, generated from the loader's own key tables.

:mod:`._schema` checks a certificate against key tables (each key's type, which keys are
required, which optional, that no other key appears). :func:`json_schema` turns the same tables
into a JSON Schema (draft 2020-12), published as ``docs/certificate.schema.json`` for readers in
other languages; a test keeps the file equal to this function's output, so the two cannot drift.
What a schema cannot say (array shapes that depend on the problem, the problem's own
constraint families, every number's value) the loader and :func:`._verify.verify` check.
"""

from __future__ import annotations

from typing import Any

from diffpriv.certification import _schema as s

__all__ = ["json_schema"]

_NUMBER = {"type": "number"}
_STORED = {"anyOf": [{"type": "number"}, {"enum": ["inf", "-inf", "nan"]}]}
_REFERENCE = {"type": "object", "required": ["$array", "shape", "dtype", "sha256"],
              "additionalProperties": False,
              "properties": {"$array": {"type": "string"},
                             "shape": {"type": "array", "items": {"type": "integer", "minimum": 0},
                                       "minItems": 1, "maxItems": 3},
                             "dtype": {"type": "string"},
                             "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}}
_BY_TEXT: dict[str, dict[str, Any]] = {
    "a number": _NUMBER,
    'a number or "inf", "-inf", "nan"': _STORED,
    "an integer": {"type": "integer"},
    "true or false": {"type": "boolean"},
    "a string": {"type": "string"},
    "an object": {"type": "object"},
    "a list": {"type": "array"},
    "a string or an object": {"anyOf": [{"type": "string"}, {"type": "object"}]},
}


def _type(check: tuple) -> dict[str, Any]:
    text = check[1]
    if text.endswith(" or null"):
        return {"anyOf": [_type((None, text.removesuffix(" or null"))), {"type": "null"}]}
    return dict(_BY_TEXT[text])


def _object(spec: dict, optional: dict | None = None, **extra: dict) -> dict[str, Any]:
    props = {k: _type(v) for k, v in {**spec, **(optional or {})}.items()}
    props.update(extra)
    return {"type": "object", "required": sorted(spec), "additionalProperties": False,
            "properties": dict(sorted(props.items()))}


def json_schema() -> dict[str, Any]:
    """The certificate format (:data:`._certificate.FORMAT`) as a JSON Schema dict."""
    array = {"anyOf": [{"type": "array"}, _REFERENCE]}
    witness = {"anyOf": [_object(s._WITNESS), {"type": "null"}]}
    problem = {"type": "object", "additionalProperties": False,
               "required": ["inputs", "outputs", "loss", "prior", "constraints"],
               "properties": {k: {"type": "object"} if k in ("objective",) else {} for k in
                              sorted(s._PROBLEM_KEYS)}}
    domain = {"type": "object", "additionalProperties": False, "required": ["labels"],
              "properties": {"labels": {"type": "array", "items": {"type": "string"}}, "coords": {},
                             "units": {"type": "string"}, "geo": {"type": "object"}}}
    nullable = {"anyOf": [*array["anyOf"], {"type": "null"}]}
    problem["properties"].update(inputs=domain, outputs=domain, loss=array, prior=array,
                                 support=nullable, input_metric=nullable,
                                 items={"type": "array", "items": {
                                     "type": "object", "additionalProperties": False,
                                     "required": ["name", "dist"],
                                     "properties": {"name": {"type": "string"}, "profile": {},
                                                    "dist": array}}},
                                 constraints={"type": "array", "items": {"type": "object"}},
                                 objective={"anyOf": [{"type": "string"}, {"type": "object"}]})
    top = _object(s._CERTIFICATE, s._OPTIONAL,
                  format={"const": s.FORMAT}, table=array, problem=problem,
                  constraints={"type": "array", "items": _object(s._CONSTRAINT, witness=witness)},
                  repair=_object(s._REPAIR),
                  quantization=_object(s._QUANTIZATION, bits={"type": "integer", "minimum": 1,
                                                               "maximum": 53}))
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": f"diffpriv certificate ({s.FORMAT})", **top}
