"""The certificate format: every key :func:`._verify.verify` reads, with its type and shape.

:func:`read_certificate` reads a certificate file within the limits stated here (a regular
file of at most :data:`MAX_CERTIFICATE_BYTES`, that this machine's memory can parse), with the
arrays its references name (:mod:`._arrays`: a reference ``{"$array", "shape", "dtype",
"sha256"}`` may stand only where an array may, for the array of that field), and
:func:`check_certificate` checks that a certificate (the JSON, as a dict) holds everything the
format promises — each key present and no other, of the right type, every string valid
Unicode, arrays of numbers of the right shape — and rebuilds its problem and table. It checks
no claim: whether the numbers are right is :func:`._verify.verify`'s job, which runs this
check first. A field that does not hold what the format says raises
:class:`CertificateFormatError` with one line ``"<field>: <problem>"``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from diffpriv._files import FileFormatError, file_size, human_bytes, parse_json, read_text
from diffpriv.certification import _arrays
from diffpriv.certification._arrays import (
    MAX_ARRAYS_BYTES,
    arrays_bytes,
    arrays_path,
    certificate_arrays,
    field_dtype,
    map_certificate,
    read_arrays,
)
from diffpriv.problems._json import problem_from_dict
from diffpriv.problems._problem import Problem, SpecError
from diffpriv.problems._size import SizeError, memory_limit

__all__ = ["FORMAT", "JSON_MEMORY_PER_BYTE", "MAX_ARRAYS_BYTES", "MAX_CERTIFICATE_BYTES",
           "CertificateFormatError", "CheckedCertificate", "admit_certificate", "certificate_bytes",
           "check_certificate", "read_certificate"]

FORMAT = "diffpriv-certificate/1"
"""The certificate format this version writes and reads (the ``format`` key)."""

MAX_CERTIFICATE_BYTES = 4 * 2**30
"""Largest certificate JSON file read, in bytes: the JSON text of about 1.7·10⁸ numbers (a
certificate written by diffpriv keeps at most :data:`._arrays.INLINE_LIMIT` entries of an array
in its JSON, and the larger arrays in its arrays file, of at most :data:`MAX_ARRAYS_BYTES`).
The one place these limits are stated: ``diffpriv optimize`` and ``reference`` refuse up front
a problem whose certificate would be larger (:func:`admit_certificate`)."""
JSON_MEMORY_PER_BYTE = 32
"""Bytes of memory per byte of JSON text at the peak of reading a certificate (measured: up
to 27 for the worst shapes, ``[[0],[0],…]``; 11 for a table of floats)."""


class CertificateFormatError(ValueError):
    """A certificate's field does not hold what the format says: ``"<field>: <problem>"``."""


class CheckedCertificate(NamedTuple):
    """A certificate whose format :func:`check_certificate` has checked (not its claims)."""

    data: Mapping[str, Any]  # the JSON, for verify
    problem: Problem
    table: np.ndarray  # [n_profiles, n_in, n_out] float64


# -- reading, within limits ------------------------------------------------------------------


def read_certificate(path: str | os.PathLike) -> Any:
    """The JSON of the certificate file ``path``, read only if this machine can read it, with
    each array reference replaced by its array from the arrays file beside it (:mod:`._arrays`).

    Raises:
      FileFormatError: ``"<path>: <problem>"``: missing, not a regular file, not strict JSON,
        or ``"<path>: cannot be checked: <why>"`` when the file is larger than
        :data:`MAX_CERTIFICATE_BYTES`, parsing it would need more memory than
        :func:`diffpriv.problems.memory_limit` allows (:data:`JSON_MEMORY_PER_BYTE`), or its
        arrays file is missing, unreadable, too large or does not hold the referenced arrays
        (:func:`_resolve`).
      CertificateFormatError: ``"certificate: expected a JSON object"``, found from its first
        character, before anything is parsed; a malformed array reference, naming its field.
    """
    try:
        size = file_size(path, limit=MAX_CERTIFICATE_BYTES, what="a certificate")
    except FileFormatError as e:
        if e.reason.startswith("a certificate may have"):
            raise FileFormatError(f"{path}: cannot be checked: {e.reason}") from None
        raise
    need, limit = JSON_MEMORY_PER_BYTE * size, memory_limit()
    if need > limit:
        raise FileFormatError(f"{path}: cannot be checked: reading {human_bytes(size)} of JSON "
                              f"needs ~{human_bytes(need)}, above the {human_bytes(limit)} limit")
    text = read_text(path, limit=MAX_CERTIFICATE_BYTES, what="a certificate")
    if not text.lstrip(" \t\r\n").startswith("{"):
        raise CertificateFormatError("certificate: expected a JSON object")
    return _resolve(parse_json(text, path), path, need)


def _resolve(data: Any, path: str | os.PathLike, need: int) -> Any:
    """``data`` with each array reference replaced by its array from the arrays file
    (:func:`._arrays.read_arrays`), after checking every reference (:func:`_reference`) and
    that reading them fits the memory limit along with the JSON (``need`` bytes).

    Raises:
      CertificateFormatError: a malformed reference, naming its field.
      FileFormatError: ``"<path>: cannot be checked: <arrays file>: <why>"``: the arrays file is
        missing, not a regular file, too large, malformed, or does not hold exactly the
        referenced arrays with their digests.
    """
    refs = {field: _reference(field, value) for field, value in certificate_arrays(data)
            if isinstance(value, Mapping)}
    if not refs:  # a pure-JSON certificate: an arrays file beside it is not read
        return data
    need += arrays_bytes(refs)
    limit = memory_limit()
    if need > limit:
        raise FileFormatError(f"{path}: cannot be checked: reading it and its arrays needs "
                              f"~{human_bytes(need)}, above the {human_bytes(limit)} limit")
    try:
        arrays = read_arrays(arrays_path(path), refs)
    except FileFormatError as e:
        raise FileFormatError(f"{path}: cannot be checked: {e}") from None
    return map_certificate(data, lambda field, value: arrays.get(field, value))


_REFERENCE_KEYS = ("$array", "shape", "dtype", "sha256")
_DIGEST = re.compile(r"[0-9a-f]{64}")


def _reference(field: str, ref: Mapping[str, Any]) -> tuple[tuple[int, ...], np.dtype, str]:
    """``(shape, dtype, sha256)`` of the array reference ``ref`` standing for ``field``; it must
    have exactly the keys ``$array`` (the field's own name, never a path), ``shape`` (a list of
    1 to 3 non-negative integers), ``dtype`` (:func:`._arrays.field_dtype`) and ``sha256`` (64
    lowercase hex digits)."""
    if set(ref) != set(_REFERENCE_KEYS):
        raise CertificateFormatError(f"{field}: an array reference has the keys "
                                     f"{', '.join(_REFERENCE_KEYS)}; got {_short(list(ref))}")
    if ref["$array"] != field:
        raise CertificateFormatError(f"{field}.$array: names {_short(ref['$array'])}, expected "
                                     f"{field!r} (a reference names the field it stands for)")
    shape = ref["shape"]
    if (not isinstance(shape, list) or not 1 <= len(shape) <= 3
            or not all(_int(n) and 0 <= n <= 2**40 for n in shape)):
        raise CertificateFormatError(f"{field}.shape: expected a list of 1 to 3 non-negative "
                                     f"integers, got {_short(shape)}")
    dtype = field_dtype(field)
    if ref["dtype"] != dtype.name:
        raise CertificateFormatError(f"{field}.dtype: expected {dtype.name!r}, got "
                                     f"{_short(ref['dtype'])}")
    if not isinstance(ref["sha256"], str) or not _DIGEST.fullmatch(ref["sha256"]):
        raise CertificateFormatError(f"{field}.sha256: expected 64 lowercase hex digits, got "
                                     f"{_short(ref['sha256'])}")
    return tuple(shape), dtype, ref["sha256"]


class CertificateSize(NamedTuple):
    """Bytes of a certificate's two files (:func:`certificate_bytes`)."""

    json: int
    arrays: int  # 0: no arrays file


def certificate_bytes(problem: Problem) -> CertificateSize:
    """About how many bytes the certificate of ``problem`` takes: an array field of at most
    :data:`._arrays.INLINE_LIMIT` entries in the JSON (25 bytes a number, 3 an entry of a
    support), a larger one in the arrays file (8 bytes a number, 1 an entry of a support)."""
    ns, nx, ny = problem.shape
    sizes = [(ns * nx * ny, 8), (nx * ny, 8), (ns * nx, 8)]  # table, loss, prior
    sizes += [(nx, 8)] * len(problem.items)
    sizes += [(c.size, 8) for c in (problem.inputs.coords, problem.outputs.coords) if c is not None]
    if problem.support is not None:
        sizes.append((ns * nx * ny, 1))
    if problem.input_metric is not None:
        sizes.append((nx * nx, 8))
    inline = _arrays.INLINE_LIMIT
    text = sum(n * (25 if size == 8 else 3) for n, size in sizes if n <= inline)
    return CertificateSize(text, sum(n * size for n, size in sizes if n > inline))


def admit_certificate(problem: Problem) -> None:
    """Raises :class:`~diffpriv.problems.SizeError` when the certificate of ``problem`` would
    be larger than a certificate may be (:data:`MAX_CERTIFICATE_BYTES` of JSON,
    :data:`MAX_ARRAYS_BYTES` of arrays)."""
    need = certificate_bytes(problem)
    for size, limit, what in ((need.json, MAX_CERTIFICATE_BYTES, "a certificate"),
                              (need.arrays, MAX_ARRAYS_BYTES, "a certificate's arrays file")):
        if size > limit:
            ns, nx, ny = problem.shape
            raise SizeError(f"inputs: {nx} inputs × {ny} outputs × {ns} profile(s) make "
                            f"{what} of ~{human_bytes(size)}, above the {human_bytes(limit)} "
                            f"{what} may have; use fewer inputs or outputs")


# -- what each key must hold; the values themselves are verify's to check ---------------------


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _stored(v: Any) -> bool:  # a float as json_number stores it: non-finite ones as strings
    return _number(v) or (isinstance(v, str) and v in ("inf", "-inf", "nan"))


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_Check = tuple[Callable[[Any], bool], str]
_NUMBER: _Check = (_number, "a number")
_STORED: _Check = (_stored, 'a number or "inf", "-inf", "nan"')
_INT: _Check = (_int, "an integer")
_BOOL: _Check = (lambda v: isinstance(v, bool), "true or false")
_STR: _Check = (lambda v: isinstance(v, str), "a string")
_OBJECT: _Check = (lambda v: isinstance(v, Mapping), "an object")
_LIST: _Check = (lambda v: isinstance(v, list), "a list")
_ARRAY: _Check = (lambda v: isinstance(v, (list, np.ndarray)), "a list")  # an array: resolved


def _or_null(check: _Check) -> _Check:
    return (lambda v: v is None or check[0](v)), f"{check[1]} or null"


_OBJECTIVE: _Check = (lambda v: isinstance(v, (str, Mapping)), "a string or an object")
_CERTIFICATE = {"format": _STR, "ok": _BOOL, "problem_hash": _STR, "objective": _OBJECTIVE,
                "loss": _STORED, "expected_loss": _STORED, "worst_loss": _STORED,
                "problem": _OBJECT, "table": _ARRAY, "constraints": _LIST, "repair": _OBJECT,
                "seed": _or_null(_INT)}
_OPTIONAL = {"versions": _OBJECT, "meta": _OBJECT,  # free information, not checked by verify
             "quantization": _OBJECT}  # checked by verify: the table is dyadic over 2^bits
_QUANTIZATION = {"bits": _INT}
_CONSTRAINT = {"index": _INT, "kind": _STR, "name": _STR, "epsilon": _STORED, "delta": _STORED,
               "level": _STORED, "epsilon_at_delta": _or_null(_STORED), "margin": _STORED,
               "ok": _BOOL, "worst": _or_null(_INT), "witness": _or_null(_OBJECT),
               "n_comparisons": _INT, "n_failed": _INT}
_WITNESS = {"pair": _OBJECT, "P": _LIST, "Q": _LIST}
_REPAIR = {"t": _NUMBER, "nu": _or_null(_LIST), "strategy": _STR}
# The problem's JSON form (diffpriv.problems._json): the keys each object may have.
_PROBLEM_KEYS = frozenset({"inputs", "outputs", "loss", "prior", "profiles", "items",
                           "constraints", "support", "input_metric", "objective"})
_DOMAIN_KEYS = frozenset({"labels", "coords", "units", "geo"})
_ITEM_KEYS = frozenset({"name", "profile", "dist"})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _short(value: Any) -> str:
    try:
        text = json.dumps(value)  # ASCII: a lone surrogate is shown escaped
    except (TypeError, ValueError):  # not JSON (a Mapping given to verify directly)
        text = ascii(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _keys(where: str, d: Mapping[str, Any], spec: dict[str, _Check],
          optional: dict[str, _Check] | None = None) -> None:
    """Every key of ``spec`` present and of its type, those of ``optional`` of theirs if
    present, and no other key."""
    for key, (ok, what) in spec.items():
        field = f"{where}.{key}" if where else key
        if key not in d:
            raise CertificateFormatError(f"{field}: required key is missing")
        if not ok(d[key]):
            raise CertificateFormatError(f"{field}: expected {what}, got {_short(d[key])}")
    for key, (ok, what) in (optional or {}).items():
        if key in d and not ok(d[key]):
            field = f"{where}.{key}" if where else key
            raise CertificateFormatError(f"{field}: expected {what}, got {_short(d[key])}")
    _closed(where, d, spec.keys() | (optional or {}).keys())


def _closed(where: str, d: Mapping[str, Any], allowed) -> None:
    for key in d:
        if key not in allowed:
            field = f"{where}.{_name(key)}" if where else _name(key)
            raise CertificateFormatError(f"{field}: unknown key")


def _name(key: Any) -> str:
    """A key as a field path shows it: bare if it is a short identifier, else as JSON (cut)."""
    return key if isinstance(key, str) and _IDENTIFIER.fullmatch(key) else _short(key)


def _array(field: str, value: Any, shape: tuple[int, ...]) -> np.ndarray:
    try:
        a = np.asarray(value)
    except ValueError:  # ragged
        a = np.asarray(None)
    if a.dtype.kind not in "iuf" and not (a.dtype.kind == "O" and all(map(_number, a.flat))):
        raise CertificateFormatError(f"{field}: not an array of numbers")
    if a.shape != shape:
        raise CertificateFormatError(f"{field}: shape {a.shape}, expected {shape}")
    return a.astype(np.float64, copy=False)  # an array read from the arrays file: not copied


def _unresolved(data: Mapping[str, Any]) -> None:
    """An array reference left in a certificate given as a dict: only a certificate read from
    its file (:func:`read_certificate`) has its arrays file to resolve it."""
    for field, value in certificate_arrays(data):
        if isinstance(value, Mapping):
            raise CertificateFormatError(f"{field}: an array reference, resolved only when the "
                                         "certificate is read from its file, beside its arrays file")


def _unicode(data: Any) -> None:
    """Every string (and key) is valid Unicode: a JSON ``\\ud800`` escape decodes to a lone
    surrogate, which no UTF-8 output (a summary, an export, a plot) can write."""
    stack: list[tuple[str, Any]] = [("certificate", data)]
    while stack:  # a loop: JSON nests deeper than Python's recursion limit
        where, value = stack.pop()
        if isinstance(value, Mapping):
            for key, v in value.items():
                field = f"{where}.{_name(key)}" if where != "certificate" else _name(key)
                if isinstance(key, str) and not _encodable(key):
                    raise CertificateFormatError(f"{field}: the key is not valid Unicode (a lone "
                                                 "surrogate)")
                stack.append((field, v))
        elif isinstance(value, list):
            kinds = set(map(type, value))  # in C: a table of floats costs little
            if any(issubclass(k, (str, list, Mapping)) for k in kinds):
                stack += [(f"{where}[{i}]", v) for i, v in enumerate(value)
                          if isinstance(v, (str, list, Mapping))]
        elif isinstance(value, str) and not _encodable(value):
            raise CertificateFormatError(f"{where}: {_short(value)} is not valid Unicode (a lone "
                                         "surrogate)")


def _encodable(s: str) -> bool:
    if s.isascii():
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _problem(spec: Mapping[str, Any]) -> Problem:
    try:
        problem = problem_from_dict(spec)
    except SpecError as e:
        msg = str(e) if str(e).startswith("problem") else f"problem.{e}"
        raise CertificateFormatError(msg) from None
    except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError) as e:
        raise CertificateFormatError(f"problem: malformed ({type(e).__name__}: {e})") from None
    # The problem's JSON form is closed too (problem_from_dict has read every key it knows).
    _closed("problem", spec, _PROBLEM_KEYS)
    for side in ("inputs", "outputs"):
        _closed(f"problem.{side}", spec[side], _DOMAIN_KEYS)
    for i, item in enumerate(spec["items"]):
        _closed(f"problem.items[{i}]", item, _ITEM_KEYS)
    for i, (stored, c) in enumerate(zip(spec["constraints"], problem.constraints, strict=True)):
        _closed(f"problem.constraints[{i}]", stored, c.to_dict().keys())
    return problem


def _meta(meta: Mapping[str, Any]) -> None:
    """The one claim in ``meta`` that verify checks: the optimizer's lower bound."""
    opt = meta.get("optimizer")
    if isinstance(opt, Mapping) and "lower_bound" in opt and not _stored(opt["lower_bound"]):
        raise CertificateFormatError(f"meta.optimizer.lower_bound: expected {_STORED[1]}, got "
                                     f"{_short(opt['lower_bound'])}")


def check_certificate(data: Any) -> CheckedCertificate:
    """Checks that every key :func:`diffpriv.certification.verify` reads is there, of the right type
    and shape, that there is no other key, and that every string is valid Unicode (not that the
    claims hold: that is verify's job).

    Args:
      data: a certificate as :func:`read_certificate` reads it (``Certificate.to_dict()`` form;
        array fields as lists or, read from the arrays file, as numpy arrays).

    Returns:
      The data, the problem rebuilt from it and the table as a float64 array.

    Raises:
      CertificateFormatError: the first field that does not hold what the format says, as one
        line ``"<field>: <problem>"``.
    """
    if not isinstance(data, Mapping):
        raise CertificateFormatError("certificate: expected a JSON object")
    _unresolved(data)
    _keys("", data, _CERTIFICATE, _OPTIONAL)
    _unicode(data)
    if data["format"] != FORMAT:
        raise CertificateFormatError(f"format: {data['format'][:40]!r}, expected {FORMAT!r}")
    if "meta" in data:
        _meta(data["meta"])
    problem = _problem(data["problem"])
    table = _array("table", data["table"], problem.shape)
    n_out = (problem.outputs.size,)
    stored = data["constraints"]
    if len(stored) != len(problem.constraints):
        raise CertificateFormatError(f"constraints: has {len(stored)} entries, the problem has "
                                     f"{len(problem.constraints)} constraints")
    for i, c in enumerate(stored):
        if not isinstance(c, Mapping):
            raise CertificateFormatError(f"constraints[{i}]: expected an object, got {_short(c)}")
        _keys(f"constraints[{i}]", c, _CONSTRAINT)
        if c["witness"] is not None:
            _keys(f"constraints[{i}].witness", c["witness"], _WITNESS)
            for side in ("P", "Q"):
                _array(f"constraints[{i}].witness.{side}", c["witness"][side], n_out)
    _keys("repair", data["repair"], _REPAIR)
    if "quantization" in data:
        _keys("quantization", data["quantization"], _QUANTIZATION)
    if data["repair"]["nu"] is not None:
        _array("repair.nu", data["repair"]["nu"], n_out)
    return CheckedCertificate(data, problem, table)
