"""Repair by mixing with a data-independent output distribution.

``A' = (1 − t)·A + t·𝟙νᵀ``: every row is mixed with the same ``ν ∈ Δ(Y)``, so each output law
becomes ``P' = (1 − t)·P + t·ν`` (the lifted weights are normalised). Every level here is jointly
quasi-convex and 0 at ``(ν, ν)``, so it never increases with ``t`` and vanishes at ``t = 1``
(all rows equal ``ν``): bisection on ``t`` is sound, and ``U(A')`` is linear in ``t``.

Choice of ``ν`` (DESIGN.md §3): proportional to the **violation mass** summed over the
violated comparisons, ``v[y] = Σ_k max(0, P_k − e^ε Q_k)[y] + max(0, Q_k − e^ε P_k)[y]``
(at the repair target ``ε − 2·margin`` for pure budgets; ``|P_k − Q_k|`` for a divergence
budget, which has no ratio target). Outputs with no violation get no
mass, so their ratios stay as they were; an output where exactly one side is 0 (an infinite
ratio) has ``v[y] > 0`` and gets mass. This is **repeated**: each round but the last mixes half
of what the current ``ν`` needs, and the violation mass left after it (where that ``ν`` was too
thin) is the next ``ν``; the answer blends all rounds' ``ν`` by their mixing weights. ``ν`` is
restricted to the outputs every row may use (``problem.support_mask()``). The uniform ``ν`` on
those outputs is the fallback and a competitor: of the candidates, each at its least ``t``, the
one with the lowest objective wins.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np

from diffpriv.certification._laws import Laws, law_error
from diffpriv.certification._levels import (
    ComparisonLevels,
    comparison_levels,
    delta_level,
    divergence_level,
    pure_level,
)
from diffpriv.certification._safety import REPAIR_FACTOR, holds, pure_bound, sanitize_table
from diffpriv.problems._blocks import Budgets, budgets
from diffpriv.problems._problem import Problem

__all__ = ["Repair", "RepairError", "mix", "repair", "repair_holds"]


class RepairError(ValueError):
    """No data-independent mixing can repair the table (no output allowed in every row)."""


@dataclasses.dataclass(frozen=True, eq=False)
class Repair:
    """A repaired table.

    Attributes:
      table: ``[n_profiles, n_in, n_out]`` the repaired table ``(1 − t)·A + t·𝟙νᵀ``.
      t: mixing weight in ``[0, 1]`` (0: the table already held).
      nu: ``[n_out]`` the mixing distribution (``None`` when ``t = 0``).
      strategy: ``"none"``, ``"violation"`` or ``"uniform"``.
    """

    table: np.ndarray
    t: float
    nu: np.ndarray | None
    strategy: str


def mix(table: np.ndarray, t: float, nu: np.ndarray) -> np.ndarray:
    """``(1 − t)·A + t·𝟙νᵀ`` for a ``[n_profiles, n_in, n_out]`` table and ``ν`` of ``[n_out]``."""
    out = (1.0 - t) * np.asarray(table, dtype=np.float64)
    out += t * np.asarray(nu, dtype=np.float64)  # in place: one table-sized array, not two
    return out


def repair_holds(problem: Problem, table: np.ndarray, factor=REPAIR_FACTOR) -> np.ndarray:
    """``[K]`` bool: each comparison holds with the repair target (``factor`` safety margins:
    twice by default; a ``[K]`` array sets it per comparison)."""
    blocks = problem.blocks()
    return holds(comparison_levels(problem, table, blocks), budgets(blocks), problem.shape, factor)


_CHECKED = 256
"""A pass of the repair's bisection checks its comparisons this many at a time (at least), and
stops at the first that fails: a failing ``t`` costs a fraction of a pass."""


class _Mixer:
    """Repair checks of the laws ``P' = (1 − t)P + t·ν`` of :class:`Laws`, without rebuilding
    tables; a pass over the comparisons goes a chunk at a time (:meth:`Laws.chunks`)."""

    def __init__(self, budgets: Budgets, shape: tuple[int, int, int], laws: Laws, factor=REPAIR_FACTOR):
        self.budgets, self.shape, self.laws = budgets, shape, laws
        self.factor = factor  # safety margins to aim at: a number, or one per comparison

    def _factor(self, k: slice):
        return self.factor[k] if np.ndim(self.factor) else self.factor

    def shifted(self, t: float, nu: np.ndarray) -> _Mixer:
        """The mixer of the laws after mixing with ``ν`` at weight ``t``."""
        return _Mixer(self.budgets, self.shape, self.laws.mixed(t, nu), self.factor)

    def _ok(self, t: float, nu: np.ndarray) -> Iterator[np.ndarray]:
        """``[K]`` bool in consecutive pieces of at least :data:`_CHECKED` comparisons (and whole
        chunks): each comparison holds at the repair target after mixing ``(t, ν)``."""
        c = self.budgets
        level, start = np.empty(c.size), 0
        for lo, hi, P, Q in self.laws.mixed(t, nu).chunks():
            # A chunk lies in one block, so all its budgets are of one kind; only the level that
            # :func:`holds` reads for them is computed (``pure`` for δ = 0, ``delta`` for δ > 0,
            # ``divergence`` for a divergence).
            k = slice(lo, hi)
            if c.divergent[lo]:
                block = self.laws.blocks[int(c.block[lo])]
                level[k] = divergence_level(block, P, Q, law_error(*self.shape[1:]))
            else:
                level[k] = delta_level(P, Q, c.eps[k]) if c.delta[lo] > 0 else pure_level(P, Q)
            if hi - start >= _CHECKED or hi == c.size:
                k, none = slice(start, hi), np.zeros(hi - start, dtype=bool)
                lv = ComparisonLevels(self.laws, level[k], level[k], level[k],
                                      self.laws.identical[k], none, level[k])
                yield holds(lv, Budgets(*(b[k] for b in c)), self.shape, self._factor(k))
                start = hi

    def ok(self, t: float, nu: np.ndarray) -> np.ndarray:
        """``[K]`` bool: each comparison holds at the repair target after mixing ``(t, ν)``."""
        if t >= 1.0:  # every row is ν: identical rows
            return np.ones(self.budgets.size, dtype=bool)
        return np.concatenate([np.zeros(0, dtype=bool), *self._ok(t, nu)])

    def all_ok(self, t: float, nu: np.ndarray) -> bool:
        """Every comparison holds after mixing ``(t, ν)``; stops at the first piece that fails."""
        return t >= 1.0 or all(ok.all() for ok in self._ok(t, nu))

    def pure_floor(self, nu: np.ndarray) -> float:
        """A ``t`` below which some pure comparison (δ = 0) still fails, in closed form: mixing
        moves ``P[y] − e·Q[y]`` (``e = e^ε`` at the repair target) linearly, to
        ``(1 − t)(P − eQ)[y] − t(e − 1)ν[y]``, so where it is positive the ratio needs
        ``t ≥ (P − eQ) / (P − eQ + (e − 1)ν)`` at ``y`` (and ``t = 1`` where ``ν[y] = 0``); both
        directions, the largest over all. Only a starting point for :meth:`least_t`, which
        checks every ``t`` it returns; δ budgets and divergences give no floor (0)."""
        c = self.budgets
        target = pure_bound(c.eps, *self.shape[1:], self.factor)
        floor = 0.0
        for lo, hi, P, Q in self.laws.chunks():
            if c.divergent[lo] or c.delta[lo] > 0:
                continue
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                e = np.exp(target[lo:hi])[:, None]
                for d in (P - np.where(Q > 0, e * Q, 0.0), Q - np.where(P > 0, e * P, 0.0)):
                    need = np.where(d > 0, d / (d + (e - 1.0) * nu), 0.0)
                    floor = max(floor, float(np.nanmax(need, initial=0.0)))
        return min(floor, 1.0)

    def least_t(self, nu: np.ndarray, rtol: float) -> float:
        """Least ``t`` (to relative ``rtol``) with every comparison holding; ``hi`` always holds.
        Starts from :meth:`pure_floor`: where only pure budgets fail, the floor just above it
        holds and one check settles ``t`` (each bisection step is a pass over the comparisons)."""
        if self.all_ok(0.0, nu):
            return 0.0
        lo, hi = self.pure_floor(nu), 1.0
        if lo >= 1.0:  # an output with ν = 0 at a (perhaps borderline) ratio: the checks decide
            lo = 0.0
        elif lo > 0.0:
            first = min(1.0, lo * (1.0 + 0.5 * rtol))
            if self.all_ok(first, nu):
                hi = first
            else:
                lo = first
        for _ in range(200):  # t below 2^-200 is not worth resolving
            if hi - lo <= rtol * hi:
                break
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if self.all_ok(mid, nu) else (mid, hi)
        return hi

    def violation(self) -> np.ndarray:
        """``[n_out]`` violation mass of the comparisons that fail, at the repair target."""
        c = self.budgets
        target = np.where(c.delta == 0, pure_bound(c.eps, *self.shape[1:], self.factor), c.eps)
        failed = ~self.ok(0.0, np.zeros(self.shape[2]))
        total = None
        for lo, hi, P, Q in self.laws.chunks():
            bad = failed[lo:hi]
            if not bad.any():
                continue
            P, Q = P[bad], Q[bad]
            if c.divergent[lo]:  # where the laws differ (a divergence has no ratio target)
                v = np.abs(P - Q)
            else:
                with np.errstate(over="ignore", invalid="ignore"):  # inf · 0 is masked
                    e = np.exp(target[lo:hi][bad])[:, None]
                    v = (np.maximum(P - np.where(Q > 0, e * Q, 0.0), 0.0)
                         + np.maximum(Q - np.where(P > 0, e * P, 0.0), 0.0))
            # Row by row on from the running total, as one sum over every failing row would go.
            total = np.concatenate([v] if total is None else [total[None], v]).sum(axis=0)
        return np.zeros(self.shape[2]) if total is None else total


def _normalise(v: np.ndarray) -> np.ndarray | None:
    total = v.sum()
    return v / total if total > 0 else None


def _violation_nu(mixer: _Mixer, common: np.ndarray, rtol: float, rounds: int) -> np.ndarray | None:
    """``ν ∝`` violation mass, refined over ``rounds`` (see the module docstring).

    Each round but the last mixes half of what the current ``ν`` would need, then takes the
    violation mass left over as the next ``ν``; the last round mixes fully. The answer is the
    blend of all rounds' ``ν`` with their mixing weights.
    """
    nu = _normalise(mixer.violation() * common)
    mass = np.zeros(common.size)
    for r in range(rounds):
        if nu is None:
            break
        t = mixer.least_t(nu, rtol)
        t = t if r == rounds - 1 else 0.5 * t
        mass = (1.0 - t) * mass + t * nu
        mixer = mixer.shifted(t, nu)
        nu = _normalise(mixer.violation() * common)
    return _normalise(mass)


def repair(
    problem: Problem,
    table: np.ndarray,
    *,
    strategy: str = "best",
    rtol: float = 1e-6,
    rounds: int = 4,
    factor=REPAIR_FACTOR,
) -> Repair:
    """Least mixing ``A' = (1 − t)·A + t·𝟙νᵀ`` that makes every constraint hold.

    Args:
      problem: the problem.
      table: ``[n_profiles, n_in, n_out]`` row-stochastic table (sanitised first: tiny negatives
        clipped, rows renormalised; see :func:`sanitize_table`).
      strategy: ``"violation"`` (ν ∝ violation mass, the uniform ν if there is none on the
        common support), ``"uniform"``, or ``"best"``: both, keeping the lower objective.
      rtol: relative tolerance of the bisection on ``t``: ``t·(1 − rtol)`` fails.
      rounds: refinement rounds of the violation-mass ``ν``.
      factor: the safety margins to aim at (:func:`._safety.holds`): a number, or ``[K]`` one
        per comparison (the quantised certification raises it where rounding broke a budget).

    Returns:
      A :class:`Repair`; ``t = 0`` if the table already holds with the repair margin.

    Raises:
      TableError: the table is malformed.
      RepairError: a repair is needed but no output is allowed in every row.
    """
    if strategy not in ("best", "violation", "uniform"):
        raise ValueError(f"strategy: expected 'best', 'violation' or 'uniform', got {strategy!r}")
    A = sanitize_table(problem, table)
    blocks = problem.blocks()
    bud = budgets(blocks)
    levels = comparison_levels(problem, A, blocks)
    if holds(levels, bud, problem.shape, factor).all():
        return Repair(A, 0.0, None, "none")
    common = problem.support_mask().all(axis=(0, 1))
    if not common.any():
        raise RepairError("repair: the table violates a budget and no output is allowed in every "
                          "row (support mask), so no data-independent mixing exists")
    mixer = _Mixer(bud, problem.shape, levels.laws, factor)
    candidates = {}
    if strategy != "uniform":
        nu = _violation_nu(mixer, common, rtol, rounds)
        if nu is not None:
            candidates["violation"] = nu
    if strategy != "violation" or not candidates:
        candidates["uniform"] = common / common.sum()
    best = None
    for name, nu in candidates.items():
        out = _confirm(problem, A, mixer.least_t(nu, rtol), nu, rtol, factor)
        key = (problem.objective_value(out.table), out.t)
        if best is None or key < best[0]:
            best = (key, dataclasses.replace(out, strategy=name))
    return best[1]


def _confirm(problem: Problem, A: np.ndarray, t: float, nu: np.ndarray, rtol: float,
             factor=REPAIR_FACTOR) -> Repair:
    """Rebuilds the mixed table and re-checks it in full; raises ``t`` until it holds."""
    step = max(t * rtol, 1e-15)
    while True:
        out = mix(A, t, nu)
        if t >= 1.0 or repair_holds(problem, out, factor).all():
            return Repair(out, t, nu, "")
        t, step = min(1.0, t + step), 2.0 * step
