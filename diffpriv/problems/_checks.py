"""Validation helpers of the problem specification: each raises :class:`SpecError` naming the
field. numpy only (the certifier depends on the specification)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

__all__ = ["SpecError", "add_kind", "check_distribution"]

_SUM_TOL = 1e-9


class SpecError(ValueError):
    """A problem specification is invalid; the message names the field and the problem."""


def _float_array(field: str, value) -> np.ndarray:
    """``value`` as a float64 array; anything numpy cannot read as numbers is a SpecError."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as e:
        raise SpecError(f"{field}: expected an array of numbers ({e})") from None


def _integer(field: str, value) -> int:
    """``value`` as an int: an integer, or a float equal to one (not a bool)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
        if math.isfinite(value) and float(value).is_integer():
            return int(value)
    raise SpecError(f"{field}: expected an integer, got {value!r}")


def _is_sequence(value) -> bool:
    """A list, tuple or 1-d+ array (not a string)."""
    if isinstance(value, np.ndarray):
        return value.ndim >= 1
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def check_distribution(field: str, p: np.ndarray, n: int | None = None) -> np.ndarray:
    """Returns ``p`` as a float64 vector after checking it is a probability distribution.

    A vector whose float sum is within ``2^-40`` of 1 is returned as is (not renormalised), so
    that a stored distribution reads back bit-identical: consumers that need the exact
    distribution take it as proportional to the vector (the certifier does).
    """
    p = _float_array(field, p)
    if p.ndim != 1:
        raise SpecError(f"{field}: expected a vector, got shape {p.shape}")
    if n is not None and p.shape[0] != n:
        raise SpecError(f"{field}: has {p.shape[0]} entries, expected {n}")
    if p.shape[0] == 0:
        raise SpecError(f"{field}: is empty")
    if not np.all(np.isfinite(p)):
        raise SpecError(f"{field}: has a NaN or infinite entry at index {int(np.argmin(np.isfinite(p)))}")
    if np.any(p < 0):
        raise SpecError(f"{field}: has a negative entry {p.min():g} at index {int(np.argmin(p))}")
    with np.errstate(over="ignore"):  # entries near 1e308: a sum of inf is reported below
        total = float(p.sum())
    if abs(total - 1.0) > _SUM_TOL:
        raise SpecError(f"{field}: sums to {total:.6g}, expected 1")
    # Renormalise only beyond rounding, so a stored distribution reads back bit-identical.
    return p / total if abs(total - 1.0) > 2.0**-40 else p


def _check_budget(field: str, value: float, *, upper: float = math.inf, closed_upper=False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise SpecError(f"{field}: expected a number, got {value!r}")
    try:
        value = float(value)
    except OverflowError:
        raise SpecError(f"{field}: must be finite, got an integer too large for float64") from None
    if not math.isfinite(value):
        raise SpecError(f"{field}: must be finite, got {value}")
    if value < 0:
        raise SpecError(f"{field}: must be >= 0, got {value:g}")
    if value > upper or (value == upper and not closed_upper):
        raise SpecError(f"{field}: must be in [0, {upper:g}), got {value:g}")
    return value


def _check_labels(field: str, labels: Sequence[str]) -> tuple[str, ...]:
    if not _is_sequence(labels):
        raise SpecError(f"{field}: expected a sequence of labels, got {labels!r}")
    labels = tuple(str(label) for label in labels)
    if not labels:
        raise SpecError(f"{field}: is empty")
    seen: set[str] = set()
    for label in labels:
        if label in seen:
            raise SpecError(f"{field}: duplicate label {label!r}")
        seen.add(label)
    return labels


def add_kind(table: dict[str, type], cls: type, what: str) -> type:
    """Registers ``cls`` in ``table`` under its ``kind``; a ValueError if the kind is taken."""
    if cls.kind in table:
        raise ValueError(f"{what} kind {cls.kind!r} is registered twice")
    table[cls.kind] = cls
    return cls
