"""The certificate format: every key :func:`._verify.verify` reads, with its type and shape.

:func:`check_certificate` checks that a certificate (the JSON, as a dict) holds everything the
format promises — each key present, of the right type, arrays of numbers of the right shape —
and rebuilds its problem and table. It checks no claim: whether the numbers are right is
:func:`._verify.verify`'s job, which runs this check first. A field that does not hold what the
format says raises :class:`CertificateFormatError` with one line ``"<field>: <problem>"``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from diffpriv.certification._certificate import FORMAT
from diffpriv.problems._json import problem_from_dict
from diffpriv.problems._problem import Problem, SpecError

__all__ = ["CertificateFormatError", "CheckedCertificate", "check_certificate"]


class CertificateFormatError(ValueError):
    """A certificate's field does not hold what the format says: ``"<field>: <problem>"``."""


class CheckedCertificate(NamedTuple):
    """A certificate whose format :func:`check_certificate` has checked (not its claims)."""

    data: Mapping[str, Any]  # the JSON, for verify
    problem: Problem
    table: np.ndarray  # [n_profiles, n_in, n_out] float64


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


def _or_null(check: _Check) -> _Check:
    return (lambda v: v is None or check[0](v)), f"{check[1]} or null"


_CERTIFICATE = {"format": _STR, "ok": _BOOL, "problem_hash": _STR, "objective": _STR,
                "loss": _STORED, "expected_loss": _STORED, "worst_loss": _STORED,
                "problem": _OBJECT, "table": _LIST, "constraints": _LIST, "repair": _OBJECT,
                "seed": _or_null(_INT)}
_CONSTRAINT = {"index": _INT, "kind": _STR, "name": _STR, "epsilon": _STORED, "delta": _STORED,
               "level": _STORED, "epsilon_at_delta": _or_null(_STORED), "margin": _STORED,
               "ok": _BOOL, "worst": _or_null(_INT), "witness": _or_null(_OBJECT),
               "n_comparisons": _INT, "n_failed": _INT}
_WITNESS = {"pair": _OBJECT, "P": _LIST, "Q": _LIST}
_REPAIR = {"t": _NUMBER, "nu": _or_null(_LIST), "strategy": _STR}


def _short(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):  # not JSON (a Mapping given to verify directly)
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _keys(where: str, d: Mapping[str, Any], spec: dict[str, _Check]) -> None:
    for key, (ok, what) in spec.items():
        field = f"{where}.{key}" if where else key
        if key not in d:
            raise CertificateFormatError(f"{field}: required key is missing")
        if not ok(d[key]):
            raise CertificateFormatError(f"{field}: expected {what}, got {_short(d[key])}")


def _array(field: str, value: Any, shape: tuple[int, ...]) -> np.ndarray:
    try:
        a = np.asarray(value)
    except ValueError:  # ragged
        a = np.asarray(None)
    if a.dtype.kind not in "iuf" and not (a.dtype.kind == "O" and all(map(_number, a.flat))):
        raise CertificateFormatError(f"{field}: not an array of numbers")
    if a.shape != shape:
        raise CertificateFormatError(f"{field}: shape {a.shape}, expected {shape}")
    return a.astype(np.float64)


def _problem(spec: Mapping[str, Any]) -> Problem:
    try:
        return problem_from_dict(spec)
    except SpecError as e:
        msg = str(e) if str(e).startswith("problem") else f"problem.{e}"
        raise CertificateFormatError(msg) from None
    except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError) as e:
        raise CertificateFormatError(f"problem: malformed ({type(e).__name__}: {e})") from None


def check_certificate(data: Any) -> CheckedCertificate:
    """Checks that every key :func:`diffpriv.certification.verify` reads is there, of the right type
    and shape (not that the claims hold: that is verify's job).

    Args:
      data: a certificate as read from its JSON (``Certificate.to_dict()`` form).

    Returns:
      The data, the problem rebuilt from it and the table as a float64 array.

    Raises:
      CertificateFormatError: the first field that does not hold what the format says, as one
        line ``"<field>: <problem>"``.
    """
    if not isinstance(data, Mapping):
        raise CertificateFormatError("certificate: expected a JSON object")
    _keys("", data, _CERTIFICATE)
    if data["format"] != FORMAT:
        raise CertificateFormatError(f"format: {data['format']!r}, expected {FORMAT!r}")
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
    if data["repair"]["nu"] is not None:
        _array("repair.nu", data["repair"]["nu"], n_out)
    return CheckedCertificate(data, problem, table)
