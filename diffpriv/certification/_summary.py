"""Per-constraint summaries of a table: budget, certified level, margin, worst pair, witness.

Every constraint of a problem expands into blocks of comparisons (``Problem.blocks()``; each
block names its constraint). A constraint's certified level is the worst over its comparisons:

* pure DistP / LDP (``δ = 0``): the largest pure level ``max_y |ln P − ln Q|``;
* extended DP: the effective ε, the largest ``level_k / d(x, x')`` (a pair at distance 0 must
  have ``P = Q``: its ratio is 0 if so, ``+∞`` otherwise);
* approximate (``δ > 0``): the largest hockey-stick δ at the budget ε, and, separately, the
  largest tight ε at the budget δ (``epsilon_at_delta``);
* a divergence (divergence DistP / DP: KL, χ², Rényi, …): the largest certified divergence level;
  extended DistP: the largest ``level_k / W(λ_i, λ_j)``, per unit of transport distance.

The witness of a claim is the worst comparison's two output laws ``P``, ``Q`` and what was
compared (two items, or a profile and two inputs): anyone can recompute the level from it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from diffpriv._files import json_number
from diffpriv.certification._levels import ComparisonLevels, comparison_levels
from diffpriv.certification._safety import holds
from diffpriv.problems._blocks import Block, budgets
from diffpriv.problems._problem import Problem

__all__ = ["ConstraintLevel", "constraint_levels", "summarize"]


@dataclasses.dataclass(frozen=True, eq=False)
class ConstraintLevel:
    """What a table achieves on one constraint.

    Attributes:
      index: the constraint's position in ``problem.constraints``.
      kind: the constraint family's kind (``"distp"``, ``"ldp"``, ``"xdp"``, ``"divergence_distp"``,
        …).
      name: the constraint's name.
      epsilon: budget ε (per unit of distance for ``"xdp"``).
      delta: budget δ (0 for pure constraints and ``"xdp"``).
      level: certified level: the effective ε for pure and extended DP, the worst δ(ε) at the
        budget ε for approximate constraints.
      epsilon_at_delta: approximate constraints: the worst least ε with δ(ε) ≤ δ; else ``None``.
      margin: budget minus level (``epsilon − level`` or ``delta − level``).
      ok: every comparison of the constraint holds with the float64 safety margin.
      worst: index of the worst comparison in the flat order of ``problem.blocks()`` (block by
        block, in block order); ``None`` if none.
      witness: ``{"pair": …, "P": [n_out], "Q": [n_out]}`` of the worst comparison, or ``None``.
      n_comparisons: how many comparisons the constraint expands to.
      n_failed: how many of them do not hold.
    """

    index: int
    kind: str
    name: str
    epsilon: float
    delta: float
    level: float
    epsilon_at_delta: float | None
    margin: float
    ok: bool
    worst: int | None
    witness: dict[str, Any] | None
    n_comparisons: int
    n_failed: int

    @property
    def pure(self) -> bool:
        """Whether the budget is a pure one (``δ = 0``)."""
        return self.delta == 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; non-finite numbers become the strings ``"inf"``, ``"-inf"``."""
        out = dataclasses.asdict(self)
        for key in ("epsilon", "delta", "level", "epsilon_at_delta", "margin"):
            out[key] = json_number(out[key])
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ConstraintLevel:
        """Inverse of :meth:`to_dict` (no checking: :func:`verify` recomputes everything)."""
        d = dict(d)
        for key in ("epsilon", "delta", "level", "epsilon_at_delta", "margin"):
            d[key] = None if d[key] is None else float(d[key])
        return cls(**d)


def _effective_eps(pure: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``pure / scale``, with ``0/0 = 0`` and ``x/0 = +∞`` for ``x > 0`` (and ``+∞`` where the
    quotient exceeds float64, e.g. a level of 1 over a distance of ``5e-324``)."""
    safe = np.where(scale > 0, scale, 1.0)
    with np.errstate(over="ignore"):
        return np.where(scale > 0, pure / safe, np.where(pure > 0, np.inf, 0.0))


def summarize(
    problem: Problem, blocks: tuple[Block, ...], levels: ComparisonLevels
) -> tuple[ConstraintLevel, ...]:
    """One :class:`ConstraintLevel` per constraint, from precomputed comparison levels.

    ``levels`` must be :func:`comparison_levels` of the same ``blocks`` (``problem.blocks()``).
    """
    bud = budgets(blocks)
    ok = holds(levels, bud, problem.shape)
    out = []
    for g, c in enumerate(problem.constraints):
        ks = np.flatnonzero(bud.constraint == g)
        delta = float(c.delta)
        approx = delta > 0
        if ks.size == 0:
            score = np.zeros(0)
        elif approx:
            score = levels.delta[ks]
        elif bud.divergent[ks].any():
            score = _effective_eps(levels.divergence[ks], bud.scale[ks])
        else:
            score = _effective_eps(levels.pure[ks], bud.scale[ks])
        worst = int(ks[np.argmax(score)]) if ks.size else None
        level = float(score.max(initial=0.0))
        witness = None
        if worst is not None:
            P, Q = levels.laws.at(worst)
            witness = {
                "pair": blocks[int(bud.block[worst])].describe(int(bud.local[worst]), problem),
                "P": P.tolist(),
                "Q": Q.tolist(),
            }
        out.append(ConstraintLevel(
            index=g,
            kind=c.kind,
            name=c.name,
            epsilon=float(c.epsilon),
            delta=delta,
            level=level,
            epsilon_at_delta=float(levels.eps_at_delta[ks].max(initial=0.0)) if approx else None,
            margin=(delta if approx else float(c.epsilon)) - level,
            ok=bool(ok[ks].all()),
            worst=worst,
            witness=witness,
            n_comparisons=int(ks.size),
            n_failed=int((~ok[ks]).sum()),
        ))
    return tuple(out)


def constraint_levels(problem: Problem, table: np.ndarray) -> tuple[ConstraintLevel, ...]:
    """Certified level of every constraint of ``problem`` for ``table``.

    Args:
      problem: the problem.
      table: row-stochastic float64 array of shape ``problem.shape``
        (``[n_profiles, n_in, n_out]``).

    Returns:
      One :class:`ConstraintLevel` per constraint, in ``problem.constraints`` order.
    """
    blocks = problem.blocks()
    return summarize(problem, blocks, comparison_levels(problem, table, blocks))
