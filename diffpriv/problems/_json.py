"""A problem as plain JSON data, and its hash.

Certificates carry the whole problem in this form so that ``diffpriv certify`` can rebuild it
and recompute every claim without the original config. The form has a few *array fields*
(:data:`ARRAY_FIELDS`: the loss, the prior, the items' distributions, coordinates, the support
and the input metric), nested lists of numbers in JSON; ``problem_to_dict(p, arrays=True)``
keeps them as numpy arrays, so that a large problem never becomes Python lists (a certificate
stores its large arrays in a binary file beside its JSON). numpy only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from diffpriv.problems._checks import SpecError
from diffpriv.problems._constraints import constraint_from_dict
from diffpriv.problems._geo import LatLon
from diffpriv.problems._problem import Domain, Item, Problem

__all__ = ["ARRAY_FIELDS", "DIGEST_LIMIT", "LEGACY_DIGEST_LIMIT", "array_digest", "array_fields",
           "array_ref", "array_to_list", "hash_matches", "map_arrays", "problem_to_dict", "problem_from_dict",
           "problem_hash"]

ARRAY_FIELDS = ("inputs.coords", "outputs.coords", "loss", "prior", "items[].dist", "support",
                "input_metric")
"""The fields of the JSON form that hold arrays of numbers (``items[].dist``: of every item)."""

DIGEST_LIMIT = 2**17
"""Arrays with more entries enter :func:`problem_hash` by their SHA-256 (:func:`array_ref`), not
by their numbers. Part of the hash's definition: changing it changes the hash of problems with
arrays of between the old and the new number of entries (:data:`LEGACY_DIGEST_LIMIT`). Writing
a float's shortest decimal takes about 0.8 µs: the 2²⁰ numbers of a 32×32 grid's loss took 0.7 s,
their digest 0.03 s."""

LEGACY_DIGEST_LIMIT = 2**20
""":data:`DIGEST_LIMIT` of the certificates and sweep folders written before it was lowered from 2²⁰: their
``problem_hash`` is accepted too (:func:`hash_matches`)."""


_MISSING = object()


def _get(d: Mapping[str, Any], key: str, where: str, default: Any = _MISSING) -> Any:
    """``d[key]``, or ``default``; a SpecError naming ``where`` and ``key`` if neither exists."""
    if key in d:
        return d[key]
    if default is _MISSING:
        raise SpecError(f"{where}: missing field {key!r}")
    return default


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SpecError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise SpecError(f"{where}: expected a list, got {type(value).__name__}")
    return list(value)


def _domain_from_dict(d: Any, where: str) -> Domain:
    d = _mapping(d, where)
    labels = tuple(_list(_get(d, "labels", where), f"{where}.labels"))
    try:
        units = _get(d, "units", where, "")
        if not isinstance(units, str):
            raise SpecError(f"{where}.units: expected a string, got {type(units).__name__}")
        geo = _get(d, "geo", where, None)
        if geo is not None:
            geo = _mapping(geo, f"{where}.geo")
            keys = {f.name for f in dataclasses.fields(LatLon)}
            if set(geo) != keys:
                raise SpecError(f"{where}.geo: expected the keys {sorted(keys)}, got {sorted(geo)}")
            try:
                geo = LatLon(**{k: (int(v) if k in ("rows", "cols") else float(v)) for k, v in geo.items()})
            except (TypeError, ValueError) as e:
                raise SpecError(f"{where}.{e}") from None
        return Domain(labels, _get(d, "coords", where, None), units, geo)
    except SpecError as e:  # Domain does not know its role: name it
        raise SpecError(str(e).replace("domain.", f"{where}.", 1)) from None


def _item_from_dict(i: int, d: Any) -> Item:
    where = f"items[{i}]"
    d = _mapping(d, where)
    return Item(_get(d, "name", where), _get(d, "dist", where), _get(d, "profile", where))


def array_to_list(a: Any) -> Any:
    """An array field's value as JSON: a float array as nested floats, a boolean support as
    0/1 integers; a list (already JSON) as it is."""
    if not isinstance(a, np.ndarray):
        return a
    return (a.astype(int) if a.dtype == bool else a).tolist()


def problem_to_dict(p: Problem, *, arrays: bool = False) -> dict[str, Any]:
    """A JSON-ready dict holding every number of the problem (float64 survives a round trip).

    Args:
      p: the problem.
      arrays: keep the array fields (:data:`ARRAY_FIELDS`) as C-ordered numpy arrays — float64,
        the support boolean — instead of nested lists: no Python list of a large problem is
        built. ``map_arrays(d, lambda field, a: array_to_list(a))`` is then ``problem_to_dict(p)``.
    """
    def array(a: np.ndarray | None) -> Any:
        if a is None:
            return None
        a = np.ascontiguousarray(a)  # as a reader rebuilds it: memory layout changes float sums
        return a if arrays else array_to_list(a)

    def domain(dom) -> dict[str, Any]:  # units and geo only when given: older readers accept the rest
        units = {"units": dom.units} if dom.units else {}
        geo = {"geo": dom.geo.to_dict()} if dom.geo is not None else {}
        return {"labels": list(dom.labels), "coords": array(dom.coords), **units, **geo}

    return {
        "inputs": domain(p.inputs),
        "outputs": domain(p.outputs),
        "loss": array(p.loss),
        "prior": array(p.prior),
        "profiles": list(p.profiles),
        "items": [{"name": it.name, "profile": it.profile, "dist": array(it.dist)} for it in p.items],
        "constraints": [c.to_dict() for c in p.constraints],
        "support": array(p.support),
        "input_metric": array(p.input_metric),
        "objective": p.objective.to_json(),
    }


def array_fields(d: Any) -> Iterator[tuple[str, dict[str, Any], str]]:
    """``(field, container, key)`` of every array field present in the problem dict ``d``
    (``"items[2].dist"``, ``d["items"][2]``, ``"dist"``), in a fixed order; a field whose value
    is ``None``, or whose container is malformed (not a dict, not a list), is skipped: reading
    that is :func:`problem_from_dict`'s job."""
    if not isinstance(d, dict):
        return
    for side in ("inputs", "outputs"):
        dom = d.get(side)
        if isinstance(dom, dict) and dom.get("coords") is not None:
            yield f"{side}.coords", dom, "coords"
    for key in ("loss", "prior"):
        if key in d:
            yield key, d, key
    items = d.get("items")
    if isinstance(items, list):
        for i, item in enumerate(items):
            if isinstance(item, dict) and "dist" in item:
                yield f"items[{i}].dist", item, "dist"
    for key in ("support", "input_metric"):
        if d.get(key) is not None:
            yield key, d, key


def map_arrays(d: dict[str, Any], fn: Callable[[str, Any], Any]) -> dict[str, Any]:
    """A copy of the problem dict ``d`` with each array field's value ``v`` replaced by
    ``fn(field, v)``. Only the containers on the way are copied (the dict, the domains, the
    items), never an array."""
    out = dict(d)
    for side in ("inputs", "outputs"):
        if isinstance(out.get(side), dict):
            out[side] = dict(out[side])
    if isinstance(out.get("items"), list):
        out["items"] = [dict(it) if isinstance(it, dict) else it for it in out["items"]]
    for field, box, key in list(array_fields(out)):
        box[key] = fn(field, box[key])
    return out


def array_digest(a: np.ndarray) -> str:
    """SHA-256 (hex) of the array's raw bytes: little-endian, C order, no header."""
    a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
    return hashlib.sha256(a.reshape(-1).view(np.uint8).data).hexdigest()


def array_ref(name: str, a: np.ndarray) -> dict[str, Any]:
    """The reference that stands for the array ``a`` in JSON: ``{"$array": name, "shape": [...],
    "dtype": "float64" | "bool", "sha256": array_digest(a)}``."""
    return {"$array": name, "shape": list(a.shape), "dtype": a.dtype.name,
            "sha256": array_digest(a)}


def problem_from_dict(d: Any) -> Problem:
    """Rebuilds (and re-validates) a problem written by :func:`problem_to_dict`.

    Raises:
      SpecError: naming the field, for any malformed structure (a missing field, an entry that
        is not a mapping or a list, a value of the wrong type, a number too large for float64)
        or invalid problem.
    """
    d = _mapping(d, "problem")

    def field(key: str, default: Any = _MISSING) -> Any:
        return _get(d, key, "problem", default)

    try:
        items = _list(field("items"), "items")
        constraints = _list(field("constraints"), "constraints")
        return Problem(
            inputs=_domain_from_dict(field("inputs"), "inputs"),
            outputs=_domain_from_dict(field("outputs"), "outputs"),
            loss=field("loss"),
            prior=field("prior"),
            profiles=tuple(_list(field("profiles"), "profiles")),
            items=tuple(_item_from_dict(i, it) for i, it in enumerate(items)),
            constraints=tuple(constraint_from_dict(c, f"constraints[{i}]")
                              for i, c in enumerate(constraints)),
            support=field("support", None),
            input_metric=field("input_metric", None),
            objective=field("objective", "expected"),
        )
    except SpecError:
        raise
    except (TypeError, ValueError, OverflowError, KeyError, IndexError) as e:  # a fallback
        raise SpecError(f"problem: malformed ({type(e).__name__}: {e})") from None


def problem_hash(p: Problem, limit: int | None = None) -> str:
    """SHA-256 of the canonical JSON form of the problem (sorted keys, no spaces).

    An array field with more than :data:`DIGEST_LIMIT` entries enters that JSON as its
    reference :func:`array_ref` named by the field (``{"$array": "loss", "shape": [n_in, n_out],
    "dtype": "float64", "sha256": ...}``, the digest of its little-endian bytes), not as a list of
    its numbers; smaller ones as lists, so a problem without large arrays hashes as
    ``sha256(json.dumps(problem_to_dict(p), sort_keys=True, separators=(",", ":")))``. The hash
    depends on the problem only, never on how a certificate stores it. ``limit`` replaces
    :data:`DIGEST_LIMIT` (:data:`LEGACY_DIGEST_LIMIT`: the hash written before).
    """
    limit = DIGEST_LIMIT if limit is None else limit

    def canonical(field: str, a: np.ndarray) -> Any:
        return array_ref(field, a) if a.size > limit else array_to_list(a)

    d = map_arrays(problem_to_dict(p, arrays=True), canonical)
    blob = json.dumps(d, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def hash_matches(p: Problem, stored: Any) -> bool:
    """Whether ``stored`` is ``p``'s :func:`problem_hash`, or its hash by the legacy limit where an
    array of ``p`` has between :data:`DIGEST_LIMIT` and :data:`LEGACY_DIGEST_LIMIT` entries (a
    certificate or a sweep folder written before the limit was lowered). Both are SHA-256 of the
    whole problem."""
    if stored == problem_hash(p):
        return True
    sizes = [a.size for a in (p.loss, p.prior, p.support, p.input_metric, p.inputs.coords,
                              p.outputs.coords, *(it.dist for it in p.items)) if a is not None]
    return any(DIGEST_LIMIT < n <= LEGACY_DIGEST_LIMIT for n in sizes) and \
        stored == problem_hash(p, LEGACY_DIGEST_LIMIT)
