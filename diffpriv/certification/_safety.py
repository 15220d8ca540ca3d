"""What float64 may claim: table checks, safety margins and the acceptance rule.

**The certified mechanism.** A stored table ``A`` defines the mechanism whose rows are
``A[s, x] / Σ_y A[s, x, y]`` with the division done *exactly*, and whose protected items are
the stored ``λ`` divided exactly by their sums. This is what the exact mode
(:mod:`._exact`) checks; the float64 mode must never accept a table for which this exact
mechanism violates a budget.

**Row sums.** A valid table has every row sum within :func:`row_sum_tolerance`
``τ = 16 · n_out · u`` of 1, where ``u = 2^-53``. A row divided by its float sum meets this
with room to spare (its exact sum is within ``(n_out + 1)·u`` of 1 and the float sum within
another ``n_out·u``), so certified tables always pass; a hand-edited entry does not.

**Weights are normalised in float64 first.** The specification keeps an item vector whose
float sum is within ``2^-40`` of 1 as stored (so that it reads back bit-identical), but the
certified item is that vector divided by its exact sum. :func:`._laws.output_laws` therefore
lifts ``ŵ = fl(w / fl(Σ w))``, never ``w`` itself: with ``n ≤ n_in`` non-zero weights,
``fl(Σ w)`` is within ``(n − 1)·u`` (relative) of the exact sum and the division adds ``u``, so
each ``ŵ[x]`` is within ``(n_in + 1)·u`` of ``w[x] / Σ w``, however far ``Σ w`` is from 1.
(Lifting ``w`` unnormalised would add an error of up to ``2^-40 ≈ 9·10^-13`` relative, the
size of :func:`delta_margin` itself: a hockey-stick ``1.3·10^-13`` above δ was accepted so.)
A single non-zero weight is a point: its law is the stored row, copied exactly.

**Error budget of a float64 level.** For a comparison with no dense law entry in the
underflow range (:func:`._laws.underflow_risk`) and rows within ``τ``, each computed law
entry ``P[y]`` is within relative error ``e_P = (2 n_in + 2 + 17 n_out)·u`` (plus second-order
terms) of the exact one, because every term is non-negative and each has at most these
relative errors: ``(n_in + 1)·u`` for the weight normalisation above, ``(n_in + 1)·u`` for a
sum of ``n_in`` products (zero products are exact), ``τ + n_out·u`` for the exact row
normalisation (float row sum vs. exact sum). ``np.log`` is accurate to a few ulps of its result
(``|ln p| < 745``, so ``≤ 2^-41`` in all), the subtraction adds one ulp of the level. Hence

    ``|computed pure level − exact level| ≤ 2·e_P + 2^-40 + u·level``,

which is below ``pure_margin(ε) = 1e-9·max(1, ε) + 64·(n_in + n_out)·u`` wherever
``level ≈ ε``: the ``64·(…)·u`` term covers ``2·e_P`` for any sizes, ``1e-9`` covers the
logarithms, ``1e-9·ε`` the level's own ulp and the rounding of the extended-DP exponent
``ε·d(x, x')``. That exponent is a float64 product of ``ε`` and a distance that is itself rounded:
a Euclidean distance in ``dim`` coordinates is within ``3·dim·u`` (relative) of the true one
(:meth:`~diffpriv.problems.Problem.pair_distances` accumulates ``np.hypot``, so a distance whose
square is subnormal or overflows is still accurate), so ``1e-9·ε`` is an outward (downward)
bound of the true budget for any ``dim < 10^6``. The specification rejects an exponent or a
distance beyond float64 (:class:`~diffpriv.problems.ExtendedDP`).

For the hockey-stick only outputs with ``e^ε Q[y] ≲ P[y]`` contribute, so every error is
relative to ``P[y]``: ``e_P`` for ``P``, ``e_P + 6u`` for ``h·(h·Q)`` with ``h = fl(e^{ε/2})``
(``np.exp`` within an ulp, two products; see :func:`._levels.hockey_stick`: this never
overflows where the term counts), ``u`` for the subtraction, at most ``(2·e_P + 7u)·Σ P ≤
(4 n_in + 34 n_out + 11)·u`` in all (``Σ P = 1``), plus ``n_out·u`` for the final sum:
``(4 n_in + 35 n_out + 11)·u < 64·(n_in + n_out)·u``, below
``delta_margin = 1e-12 + 64·(n_in + n_out)·u`` (the ``1e-12`` covers the second-order terms, a
few more ulps of ``np.exp`` and the absolute ``h · 2^-1075 ≤ 2^-538`` of an ``h·Q`` rounded in
the subnormal range).

**Underflow.** A dense law entry in the underflow range (:func:`._laws.underflow_risk`) also
carries an *absolute* error of up to ``n_in · 2^-1075`` (products rounded among subnormals; sums
of subnormals are exact), which the hockey-stick multiplies by ``e^ε``: at ``ε = 743.9`` a law
``0.75·2^-1074`` computed as ``2^-1074`` moves a term by 0.07. Such a comparison must therefore
meet ``δ(ε) ≤ δ − m_δ − e^ε·(n_in + 1)·n_out·2^-1070`` (:func:`underflow_margin`, which bounds
that error on both sides with room): nothing for ``ε ≲ 700``, a rejection where ``e^ε 2^-1074``
is not small. A pure level with such an entry is not certified at all (its ratio can be off by
any factor).

For a **divergence** level (KL, χ², Hellinger, Rényi, …: :mod:`._divergences`) the certified
level is the computed one rounded up by its formula's own float64 error bound
(:meth:`~._divergences.Divergence.upper`) plus how far law errors of ``e_P`` can move it
(:meth:`~._divergences.Divergence.law_error` at :func:`law_error`); it must be at most
``ε − m_pure(ε)``, and a comparison with an underflow risk is not certified (χ² and Rényi
divide by law entries).

A comparison **holds** in float64 iff its two laws are equal exactly
(:func:`._laws.identical_rows`: the same weights on equal rows, e.g. on the same profile, or
only one distinct row involved; every level is then exactly 0), or ``pure ≤ ε − m_pure(ε)`` (pure; finite and
no underflow risk), or ``δ(ε) ≤ δ − m_δ`` (approximate; less the underflow margin where there is
an underflow risk), or the certified divergence level is ``≤ ε − m_pure(ε)`` (a divergence;
finite and no underflow risk).
Repair aims at twice these margins (:data:`REPAIR_FACTOR`) so its output verifies.
"""

from __future__ import annotations

import math

import numpy as np

from diffpriv.certification._laws import law_error
from diffpriv.certification._levels import ComparisonLevels
from diffpriv.problems._blocks import Budgets
from diffpriv.problems._problem import Problem

__all__ = [
    "U64",
    "REPAIR_FACTOR",
    "TableError",
    "pure_margin",
    "pure_bound",
    "delta_margin",
    "underflow_margin",
    "row_sum_tolerance",
    "law_error",
    "table_problems",
    "sanitize_table",
    "holds",
    "slack",
]

U64 = 2.0**-53
"""Unit roundoff of float64."""

REPAIR_FACTOR = 2.0
"""Repair targets the budget minus this many safety margins."""

NEGATIVE_TOL = 1e-12
""":func:`sanitize_table` clips entries in ``[−NEGATIVE_TOL, 0)``; more negative is an error."""


class TableError(ValueError):
    """A mechanism table is malformed (shape, NaN, negative mass, support, row sums)."""


def pure_margin(eps, n_in: int, n_out: int):
    """Safety margin of a pure level at budget ``ε``: ``1e-9·max(1, ε) + 64·(n_in + n_out)·u``."""
    return 1e-9 * np.maximum(1.0, eps) + 64.0 * (n_in + n_out) * U64


def pure_bound(eps, n_in: int, n_out: int, factor: float = 1.0):
    """What a pure level must not exceed: ``ε − factor·pure_margin(ε)``.

    ``+∞`` where ``ε = +∞`` (a budget beyond float64 is met by every finite level; the
    specification rejects such extended-DP exponents, so this is only a guard).
    """
    eps = np.asarray(eps, dtype=np.float64)
    finite = np.isfinite(eps)
    e = np.where(finite, eps, 0.0)
    return np.where(finite, e - factor * pure_margin(e, n_in, n_out), np.inf)


def delta_margin(n_in: int, n_out: int) -> float:
    """Absolute safety margin of a hockey-stick δ: ``1e-12 + 64·(n_in + n_out)·u``."""
    return 1e-12 + 64.0 * (n_in + n_out) * U64


def underflow_margin(eps, n_in: int, n_out: int):
    """Extra δ margin where a dense law is in the underflow range: ``e^ε·(n_in + 1)·n_out·2^-1070``.

    ``ε`` is capped at 1000 (the margin is then ``≈ e^258``, a certain rejection) so that
    nothing overflows.
    """
    exponent = np.minimum(np.asarray(eps, np.float64), 1000.0)
    return np.exp(exponent + math.log((n_in + 1) * n_out) - 1070 * math.log(2.0))


def row_sum_tolerance(n_out: int) -> float:
    """``τ = 16 · n_out · u``: how far a certified table's float row sums may be from 1."""
    return 16.0 * n_out * U64


_SHAPE = "expected {} = (profiles, inputs, outputs)"


def _where(problem: Problem, s: int, x: int, y: int | None = None) -> str:
    out = f"profile {problem.profiles[s]!r}, input {problem.inputs.labels[x]!r}"
    return out if y is None else f"{out}, output {problem.outputs.labels[y]!r}"


def table_problems(problem: Problem, table: np.ndarray) -> list[str]:
    """Everything that keeps ``table`` from being a valid certified table; ``[]`` if none.

    Checks the shape ``problem.shape``, finiteness, non-negativity, zero mass outside
    ``problem.support_mask()`` and row sums within :func:`row_sum_tolerance` of 1.
    """
    table = np.asarray(table, dtype=np.float64)
    if table.shape != problem.shape:
        return [f"table: shape {table.shape}, {_SHAPE.format(problem.shape)}"]
    out = []
    if not np.all(np.isfinite(table)):
        s, x, y = np.argwhere(~np.isfinite(table))[0]
        return [f"table: non-finite entry at {_where(problem, s, x, y)}"]
    if np.any(table < 0):
        s, x, y = np.argwhere(table < 0)[0]
        out.append(f"table: negative entry {table[s, x, y]:.3g} at {_where(problem, s, x, y)}")
    outside = (table != 0) & ~problem.support_mask()
    if outside.any():
        s, x, y = np.argwhere(outside)[0]
        out.append(f"table: mass {table[s, x, y]:.3g} outside the support at "
                   f"{_where(problem, s, x, y)}")
    err = np.abs(table.sum(axis=-1) - 1.0)
    tol = row_sum_tolerance(problem.shape[2])
    if np.any(err > tol):
        s, x = np.unravel_index(np.argmax(err), err.shape)
        out.append(f"table: row sum off by {err[s, x]:.3g} (tolerance {tol:.3g}) at "
                   f"{_where(problem, s, x)}")
    return out


def sanitize_table(problem: Problem, table: np.ndarray, *, sum_tol: float = 1e-6) -> np.ndarray:
    """A clean copy of an optimizer's table: tiny negatives clipped, rows renormalised.

    Args:
      problem: the problem; ``table`` must have shape ``problem.shape``.
      table: array ``[n_profiles, n_in, n_out]``, row-stochastic up to rounding.
      sum_tol: rows must sum to 1 within this before renormalising (a larger error is a bug
        upstream, not rounding).

    Returns:
      A float64 table with entries ``≥ 0``, zero outside the support, each row divided by its
      float sum (so it passes :func:`table_problems`).

    Raises:
      TableError: wrong shape, a NaN/inf, an entry below ``−1e-12``, positive mass outside the
        support, or a row sum off by more than ``sum_tol``.
    """
    A = np.array(table, dtype=np.float64)
    if A.shape != problem.shape:
        raise TableError(f"table: shape {A.shape}, {_SHAPE.format(problem.shape)}")
    if not np.all(np.isfinite(A)):
        s, x, y = np.argwhere(~np.isfinite(A))[0]
        raise TableError(f"table: non-finite entry at {_where(problem, s, x, y)}")
    if np.any(A < -NEGATIVE_TOL):
        s, x, y = np.argwhere(A < -NEGATIVE_TOL)[0]
        raise TableError(f"table: negative entry {A[s, x, y]:.3g} at {_where(problem, s, x, y)}")
    A[~(A > 0)] = 0.0  # in place (also −0.0 → +0.0): the table is large
    outside = (A > 0) & ~problem.support_mask()
    if outside.any():
        s, x, y = np.argwhere(outside)[0]
        raise TableError(f"table: mass {A[s, x, y]:.3g} outside the support at "
                         f"{_where(problem, s, x, y)}")
    sums = A.sum(axis=-1, keepdims=True)
    err = np.abs(sums[..., 0] - 1.0)
    if np.any(err > sum_tol):
        s, x = np.unravel_index(np.argmax(err), err.shape)
        raise TableError(f"table: row sums to {sums[s, x, 0]:.9g}, expected 1, at "
                         f"{_where(problem, s, x)}")
    A /= sums
    return A


def holds(
    levels: ComparisonLevels, budgets: Budgets, shape: tuple[int, int, int], factor: float = 1.0
) -> np.ndarray:
    """``[K]`` bool: comparison ``k`` provably meets its budget (the acceptance rule above).

    Args:
      levels: the comparisons' levels.
      budgets: the comparisons' budgets ``eps``, ``delta``
        (:func:`diffpriv.problems._blocks.budgets` of the same blocks, in the same order).
      shape: ``problem.shape``, for the margins.
      factor: multiplies the safety margins (1 to verify, :data:`REPAIR_FACTOR` to repair).
    """
    _, n_in, n_out = shape
    if budgets.eps.shape != levels.pure.shape:
        raise ValueError(f"holds: {budgets.eps.shape[0]} budgets for {levels.pure.shape[0]} "
                         "comparisons")
    pure = budgets.delta == 0
    ok_pure = np.isfinite(levels.pure) & (levels.pure <= pure_bound(budgets.eps, n_in, n_out, factor))
    ok_pure &= ~levels.underflow
    margin = delta_margin(n_in, n_out) + np.where(
        levels.underflow, underflow_margin(budgets.eps, n_in, n_out), 0.0)
    ok_approx = levels.delta <= budgets.delta - factor * margin
    bound = pure_bound(budgets.eps, n_in, n_out, factor)
    ok_div = np.isfinite(levels.divergence) & (levels.divergence <= bound) & ~levels.underflow
    return levels.identical | np.where(budgets.divergent, ok_div, np.where(pure, ok_pure, ok_approx))


def slack(levels: ComparisonLevels, budgets: Budgets, shape: tuple[int, int, int]) -> np.ndarray:
    """``[K]``: how many safety margins each comparison has to spare, ``(budget − level) /
    margin`` in the units :func:`holds` reads (the pure level, the tight δ or the certified
    divergence level; ``+∞`` for identical laws, ``−∞`` where a level is not certified at all).
    ``holds(…, factor)`` is, up to rounding, ``slack ≥ factor``; this is not the acceptance rule
    (:func:`holds` is), only a measure by which a repair sets its margins (the quantised
    certification's, :func:`._certificate._quantized`)."""
    _, n_in, n_out = shape
    eps = np.asarray(budgets.eps, np.float64)
    finite = np.isfinite(eps)
    e = np.where(finite, eps, 0.0)
    m_pure = pure_margin(e, n_in, n_out)
    m_delta = delta_margin(n_in, n_out) + np.where(levels.underflow, underflow_margin(e, n_in, n_out), 0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        pure = np.where(np.isfinite(levels.pure) & ~levels.underflow, (e - levels.pure) / m_pure, -np.inf)
        approx = (budgets.delta - levels.delta) / m_delta
        div = np.where(np.isfinite(levels.divergence) & ~levels.underflow,
                       (e - levels.divergence) / m_pure, -np.inf)
    out = np.where(budgets.divergent, div, np.where(budgets.delta == 0, pure, approx))
    out = np.where(finite, out, np.inf)
    return np.where(levels.identical, np.inf, np.nan_to_num(out, nan=-np.inf))
