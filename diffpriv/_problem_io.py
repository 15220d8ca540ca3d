"""A problem as plain JSON data, and its hash.

Certificates carry the whole problem in this form so that ``diffpriv certify`` can rebuild it
and recompute every claim without the original config. numpy only.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from ._problem import Constraint, DistP, Domain, ExtendedDP, Item, LocalDP, Problem, SpecError

__all__ = ["problem_to_dict", "problem_from_dict", "problem_hash"]


def _pairs(pairs):
    return None if pairs is None else [[int(i), int(j)] for i, j in pairs]


def _constraint_to_dict(c: Constraint) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": c.kind, "name": c.name, "epsilon": float(c.epsilon)}
    if not isinstance(c, ExtendedDP):
        out["delta"] = float(c.delta)
    out["pairs"] = _pairs(c.pairs)
    return out


def _constraint_from_dict(i: int, d: dict[str, Any]) -> Constraint:
    kind = d.get("kind")
    pairs = d.get("pairs")
    pairs = None if pairs is None else tuple(tuple(p) for p in pairs)
    if kind == "distp":
        return DistP(pairs=pairs, epsilon=d["epsilon"], delta=d.get("delta", 0.0), name=d["name"])
    if kind == "ldp":
        return LocalDP(epsilon=d["epsilon"], delta=d.get("delta", 0.0), pairs=pairs, name=d["name"])
    if kind == "xdp":
        return ExtendedDP(epsilon=d["epsilon"], pairs=pairs, name=d["name"])
    raise SpecError(f"constraints[{i}].kind: unknown constraint kind {kind!r}")


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
        "constraints": [_constraint_to_dict(c) for c in p.constraints],
        "support": None if p.support is None else p.support.astype(int).tolist(),
        "input_metric": None if p.input_metric is None else p.input_metric.tolist(),
        "objective": p.objective,
    }


def problem_from_dict(d: dict[str, Any]) -> Problem:
    """Rebuilds (and re-validates) a problem written by :func:`problem_to_dict`."""
    try:
        return Problem(
            inputs=Domain(tuple(d["inputs"]["labels"]), d["inputs"]["coords"]),
            outputs=Domain(tuple(d["outputs"]["labels"]), d["outputs"]["coords"]),
            loss=np.asarray(d["loss"], dtype=np.float64),
            prior=np.asarray(d["prior"], dtype=np.float64),
            profiles=tuple(d["profiles"]),
            items=tuple(
                Item(it["name"], np.asarray(it["dist"], dtype=np.float64), int(it["profile"]))
                for it in d["items"]
            ),
            constraints=tuple(_constraint_from_dict(i, c) for i, c in enumerate(d["constraints"])),
            support=None if d.get("support") is None else np.asarray(d["support"], dtype=bool),
            input_metric=None if d.get("input_metric") is None else np.asarray(d["input_metric"]),
            objective=d.get("objective", "expected"),
        )
    except KeyError as e:
        raise SpecError(f"problem: missing field {e.args[0]!r}") from None
    except (TypeError, ValueError) as e:
        if isinstance(e, SpecError):
            raise
        raise SpecError(f"problem: malformed ({e})") from None


def problem_hash(p: Problem) -> str:
    """SHA-256 of the canonical JSON form of the problem."""
    blob = json.dumps(problem_to_dict(p), sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()
