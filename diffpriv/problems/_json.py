"""A problem as plain JSON data, and its hash.

Certificates carry the whole problem in this form so that ``diffpriv certify`` can rebuild it
and recompute every claim without the original config. numpy only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from diffpriv.problems._checks import SpecError
from diffpriv.problems._constraints import constraint_from_dict
from diffpriv.problems._problem import Domain, Item, Problem

__all__ = ["problem_to_dict", "problem_from_dict", "problem_hash"]


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
        return Domain(labels, _get(d, "coords", where, None))
    except SpecError as e:  # Domain does not know its role: name it
        raise SpecError(str(e).replace("domain.", f"{where}.", 1)) from None


def _item_from_dict(i: int, d: Any) -> Item:
    where = f"items[{i}]"
    d = _mapping(d, where)
    return Item(_get(d, "name", where), _get(d, "dist", where), _get(d, "profile", where))


def _domain_to_dict(d: Domain) -> dict[str, Any]:
    return {
        "labels": list(d.labels),
        "coords": None if d.coords is None else d.coords.tolist(),
    }


def problem_to_dict(p: Problem) -> dict[str, Any]:
    """A JSON-ready dict holding every number of the problem (float64 survives a round trip)."""
    return {
        "inputs": _domain_to_dict(p.inputs),
        "outputs": _domain_to_dict(p.outputs),
        "loss": p.loss.tolist(),
        "prior": p.prior.tolist(),
        "profiles": list(p.profiles),
        "items": [{"name": it.name, "profile": it.profile, "dist": it.dist.tolist()} for it in p.items],
        "constraints": [c.to_dict() for c in p.constraints],
        "support": None if p.support is None else p.support.astype(int).tolist(),
        "input_metric": None if p.input_metric is None else p.input_metric.tolist(),
        "objective": p.objective,
    }


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


def problem_hash(p: Problem) -> str:
    """SHA-256 of the canonical JSON form of the problem."""
    blob = json.dumps(problem_to_dict(p), sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()
