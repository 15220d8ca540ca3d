"""The exact reference solver: a design problem as a linear program, solved by HiGHS.

Every constraint diffpriv expands into comparisons (pure and approximate DistP, local DP,
extended DP, profile edges) is linear in the table once the hockey-stick divergence gets one
auxiliary variable per output, and every objective is linear (the worst case and the largest
entry with one epigraph variable, the transport loss with a transport plan). So the exact
optimum is the LP below, solved by HiGHS (highspy) on sparse matrices. It
is the yardstick for the optimizer. numpy, scipy and highspy only.

Variables: ``A[s, x, y]`` where the support mask allows it; ``z[k, d, y] ≥ 0`` for comparisons
with ``δ_k > 0``; ``t`` for the worst-case and largest-entry objectives; for the transport
objective, per law ``k`` of :meth:`~diffpriv.problems._objectives.TransportLoss.transport_laws`
(``rows [K, S, X]``, ``inputs [K, X]``, ``shares [K]``), a conditional plan ``B_k[x, y] ≥ 0`` for
every input with ``inputs[k, x] > 0`` and every output (the plan is ``γ_k = inputs[k] ⊙ B_k``;
below in terms of ``γ_k``, which is how the rows read, each row over ``x`` scaled by
``inputs[k, x]``). Rows, with ``P_k = wa[k] @ A[sa[k]]``,
``Q_k = wb[k] @ A[sb[k]]`` and direction ``d = 0`` comparing ``(P, Q)``, ``d = 1`` ``(Q, P)``:

* ``Σ_y A[s, x, y] = 1`` for every ``(s, x)``;
* ``P[y] − e^{ε_k} Q[y] ≤ 0`` (``δ_k = 0``) or ``P[y] − e^{ε_k} Q[y] − z[k, d, y] ≤ 0`` and
  ``Σ_y z[k, d, y] ≤ δ_k`` (``δ_k > 0``), for both directions; rows with no positive coefficient
  hold for every non-negative table and are left out;
* ``Σ_y A[s, x, y] L[x, y] − t ≤ 0`` for every ``(s, x)`` with ``π[s, x] > 0`` (worst case), or
  ``L[x, y] A[s, x, y] − t ≤ 0`` for every such row and every allowed ``y`` with ``L[x, y] > 0``
  (largest entry);
* transport (objective ``Σ_k shares[k] Σ_{x,y} L[x, y] γ_k[x, y]``): ``Σ_y γ_k[x, y] =
  inputs[k, x]`` for every input of positive weight and ``Σ_x γ_k[x, y] − Σ_{s,x} rows[k, s, x]
  A[s, x, y] = 0`` for every output (plan ``k``'s second marginal is law ``k``'s output law
  ``ν_k(A)``; per law one of these equalities is implied by the others, which HiGHS's presolve
  handles). With ``laws = "prior"``: one law, ``rows = π``, ``inputs = λ = Σ_s π[s, ·]``.
"""

from __future__ import annotations

import dataclasses
import time
from types import SimpleNamespace
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse

from diffpriv.problems._blocks import Block, PairBlock, budgets
from diffpriv.problems._objectives import require_linear
from diffpriv.problems._problem import Problem
from diffpriv.problems._size import admit
from diffpriv.solvers._highs import quiet_highs

__all__ = ["ReferenceResult", "ReferenceSolveError", "solve_lp"]

_TOLERANCE = 1e-10  # HiGHS primal and dual feasibility tolerances


class ReferenceSolveError(RuntimeError):
    """HiGHS did not return an optimal solution; the message carries its status."""


class Basis(NamedTuple):
    """A HiGHS basis of a solved LP, to warm-start the LP of a neighbouring problem (the same
    problem at another budget: the same variables and rows, other coefficients)."""

    basis: Any  # highspy.HighsBasis
    shape: tuple[int, int]  # (columns, rows) of the LP it belongs to


@dataclasses.dataclass(frozen=True, eq=False)
class ReferenceResult:
    """The LP optimum of a problem and the multipliers that prove it.

    Attributes:
      table: ``[n_profiles, n_in, n_out]`` float64 row-stochastic optimal table (HiGHS's solution,
        clipped at 0 and renormalised per row; zero outside the support).
      value: the optimal objective value reported by HiGHS (the problem's objective: expected or
        worst-case loss, largest entry, transport loss).
      status: HiGHS's status message.
      seconds: wall-clock time of building and solving the LP.
      multipliers: ``[K, 2, n_out]`` Lagrange multipliers ``μ ≥ 0`` of the privacy rows
        ``P[y] − e^ε Q[y] (− z) ≤ 0`` of comparison ``k`` (numbered over ``problem.blocks()`` in order) in
        direction ``d`` (``d = 0``: ``P = P_k``, ``Q = Q_k``; ``d = 1`` swapped); 0 for rows left
        out. These are HiGHS's marginals with the sign flipped (and clipped at 0).
      delta_multipliers: ``[K, 2]`` multipliers ``ν ≥ 0`` of the rows ``Σ_y z ≤ δ_k``
        (0 where ``δ_k = 0``).
      row_weights: ``[n_profiles, n_in]`` weights ``ρ`` of the row losses in the Lagrangian: the
        prior for the expected objective, the multipliers of the epigraph rows for the worst case;
        for the largest entry ``[n_profiles, n_in, n_out]``, the multipliers of the entries'
        epigraph rows (the Lagrangian's cost is then ``ρ ⊙ L``); the prior for the transport
        loss, which the bound below does not use (its Lagrangian's cost is
        ``Σ_l rows[l,s,x] φ[l,y]``, see ``potential``).
      bound: a lower bound on the optimum by weak duality, from HiGHS's multipliers
        (:func:`_dual_bound`): valid whatever their accuracy, and equal to ``value``
        up to the solver's tolerance.
      violation: the largest violation of an LP row by HiGHS's point (0 when every row holds;
        in the rows' own units, before the table is clipped and renormalised).
      potential: transport objective only (else ``None``): ``[L, n_out]``, one row per law ``l``
        of ``problem.objective.transport_laws(problem)`` (``rows [L, S, X]``, ``inputs [L, X]``,
        ``shares [L]``; ``L = 1`` for ``laws = "prior"``): the multipliers ``φ[l]`` of the
        marginal rows ``Σ_x γ_l[x,y] = ν_l[y](A)``, HiGHS's marginals as they are (so scaled by
        the law's share: ``φ[l] / shares[l]`` is a Kantorovich potential on the outputs).
      basis: the final HiGHS basis (``solve_lp(..., keep_basis=True)`` or a warm start), to
        warm-start the same problem at another budget; else ``None``.

    Weak duality: for every table in the support,
    ``value ≥ Σ_{s,x} min_y (ρ[s,x] L[x,y] + Σ_{k,d} μ[k,d,y] c_{k,d}[s,x,y]) − Σ_{k,d} ν[k,d] δ_k``
    where ``c_{k,d}[s,x,y]`` is the coefficient of ``A[s,x,y]`` in row ``(k, d, y)``; for the
    transport loss, for every ``φ [L, n_out]``,
    ``value ≥ Σ_l Σ_x inputs[l,x] min_y (shares[l] L[x,y] − φ[l,y])
    + Σ_{s,x} min_y (Σ_l rows[l,s,x] φ[l,y] + Σ_{k,d} μ[k,d,y] c_{k,d}[s,x,y]) − Σ_{k,d} ν[k,d] δ_k``
    (one law: ``Σ_x λ[x] min_y (L[x,y] − φ[y]) + Σ_{s,x} min_y (π[s,x] φ[y] + …)``). With the
    multipliers returned here the bound is tight up to the solver's tolerance.
    """

    table: np.ndarray
    value: float
    status: str
    seconds: float
    multipliers: np.ndarray
    delta_multipliers: np.ndarray
    row_weights: np.ndarray
    bound: float = -np.inf
    violation: float = 0.0
    potential: np.ndarray | None = None
    basis: Basis | None = None


class _LinearProgram(NamedTuple):
    c: np.ndarray
    a_ub: scipy.sparse.csr_array | None
    b_ub: np.ndarray | None
    a_eq: scipy.sparse.csr_array
    b_eq: np.ndarray
    privacy_rows: np.ndarray  # [m1] flat index k * 2 * n_out + d * n_out + y of each privacy row
    delta_rows: np.ndarray  # [m2] flat index k * 2 + d of each Σ z ≤ δ row
    loss_rows: np.ndarray  # [m3] flat index s * n_in + x (entries: (s * n_in + x) * n_out + y)
    n_marginal: int  # the last n_marginal equality rows: transport marginal rows (0 or L · n_out)
    upper: np.ndarray  # [n_vars] a bound every optimal point meets (the rows of z and t imply it)


def _sides(block: Block, n_in: int):
    """Per side of ``block``: ``(k, row, weight)`` entries, ``row = s · n_in + x`` — the rows of the
    table each comparison's law is made of, with their normalised weights."""
    if isinstance(block, PairBlock):
        ra, rb = block.rows(n_in)
        k = np.arange(block.size)
        one = np.ones(block.size)
        return (k, ra, one), (k, rb, one)
    out = []
    for s, w in ((block.sa, block.wa), (block.sb, block.wb)):
        w = w / w.sum(axis=1, keepdims=True)
        k, x = np.nonzero(w)
        out.append((k, s[k] * n_in + x, w[k, x]))
    return tuple(out)


def _privacy_block(
    blocks: tuple[Block, ...], var: np.ndarray, n_in: int, n_table: int
) -> tuple[scipy.sparse.csr_array, np.ndarray]:
    """Rows ``P[y] − e^ε Q[y]`` for every (comparison, direction, output) with a positive entry.

    ``var[r, y]`` is the column of ``A[r, y]`` (rows ``r = s · n_in + x``; −1 outside the
    support). Comparisons are numbered across blocks in order. Returns the CSR block
    ``[m1, n_table]`` and the flat ``(k, d, y)`` index of its rows, in increasing order. Built
    from the blocks' index and weight entries, never a dense ``[K, n_rows]`` matrix: a mixture
    block's rows straight in CSR form from each comparison's combined weights (a 64×64 DistP grid:
    3·10⁷ entries in 1.4 GB where triplets took 5.9 GB), a pair block's from triplets.
    """
    eps = budgets(blocks).eps
    with np.errstate(over="ignore"):  # checked just below
        growth = np.exp(eps)
    if not np.all(np.isfinite(growth)):
        raise ReferenceSolveError(f"solve_lp: e^epsilon overflows for epsilon = {eps.max():g} (a "
                                  "coefficient no LP solver takes; the other solvers of the route run)")
    parts, kept, offset = [], [], 0
    for block in blocks:
        build = _pair_rows if isinstance(block, PairBlock) else _mixture_rows
        part, rows = build(block, var, n_in, growth[offset:offset + block.size], offset, n_table)
        parts.append(part)
        kept.append(rows)
        offset += block.size
    if not parts:
        return scipy.sparse.csr_array((0, n_table)), np.zeros(0, dtype=np.int64)
    return scipy.sparse.vstack(parts, format="csr"), np.concatenate(kept)


def _pair_rows(block: Block, var: np.ndarray, n_in: int, growth: np.ndarray, offset: int, n_table: int):
    """A pair block's rows of :func:`_privacy_block` (from triplets)."""
    n_out = var.shape[1]
    n_rows = block.size * 2 * n_out
    sides = _sides(block, n_in)
    rows, cols, vals = [], [], []
    for d in (0, 1):
        (kp, rp, wp), (kq, rq, wq) = sides[d], sides[1 - d]
        for k, r, w, factor in ((kp, rp, wp, 1.0), (kq, rq, wq, -growth[kq])):
            col = var[r, :]  # [n, n_out]
            row = ((k * 2 + d) * n_out)[:, None] + np.arange(n_out)
            val = np.broadcast_to((w * factor)[:, None], col.shape)
            keep = col >= 0
            rows.append(row[keep])
            cols.append(col[keep])
            vals.append(val[keep])
    entries = np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))
    # tocsr sums duplicates: an entry of both P and Q when both sides share a row.
    part = scipy.sparse.coo_array(entries, shape=(n_rows, n_table)).tocsr()
    part.eliminate_zeros()
    row_of_entry = np.repeat(np.arange(n_rows), np.diff(part.indptr))
    kept = np.flatnonzero(np.bincount(row_of_entry[part.data > 0], minlength=n_rows))
    return part[kept], kept + offset * 2 * n_out


def _mixture_rows(block: Block, var: np.ndarray, n_in: int, growth: np.ndarray, offset: int, n_table: int):
    """A mixture block's rows of :func:`_privacy_block`: per comparison and direction, the
    weights of ``P − e^ε Q`` over the table's rows (both sides summed where they share one), and
    each output's row the entries of those rows in its column, in CSR form directly."""
    n_out = var.shape[1]
    sides = _sides(block, n_in)
    counts, indices, data, kept = [], [], [], []
    for k in range(block.size):
        for d in (0, 1):
            (kp, rp, wp), (kq, rq, wq) = sides[d], sides[1 - d]
            coef = np.zeros(var.shape[0])
            np.add.at(coef, rp[kp == k], wp[kp == k])
            np.add.at(coef, rq[kq == k], -growth[k] * wq[kq == k])
            r = np.flatnonzero(coef)
            cols = var[r].T  # [n_out, |r|]: output y's row, the rows r in order (columns increase)
            inside = cols >= 0
            y = np.flatnonzero(inside[:, coef[r] > 0].any(axis=1))  # the rows with a positive entry
            inside = inside[y]
            counts.append(inside.sum(axis=1))
            indices.append(cols[y][inside])
            data.append(np.broadcast_to(coef[r], inside.shape)[inside])
            kept.append(((offset + k) * 2 + d) * n_out + y)
    indptr = np.concatenate([[0], np.cumsum(np.concatenate(counts))])
    index = np.int32 if max(indptr[-1], n_table) < 2**31 else np.int64
    part = scipy.sparse.csr_array((np.concatenate(data), np.concatenate(indices).astype(index),
                                   indptr.astype(index)), shape=(indptr.size - 1, n_table))
    return part, np.concatenate(kept)


def _build(problem: Problem, blocks: tuple[Block, ...], mask: np.ndarray | None = None) -> _LinearProgram:
    """The LP of ``problem``'s objective and the linear ``blocks``, over the table entries of
    ``mask`` (default: the problem's support)."""
    n_prof, n_in, n_out = problem.shape
    mask = problem.support_mask() if mask is None else mask
    s, x, y = np.nonzero(mask)
    n_table = s.size
    var = np.full(mask.shape, -1, dtype=np.int64)
    var[s, x, y] = np.arange(n_table)

    priv, privacy_rows = _privacy_block(blocks, var.reshape(n_prof * n_in, n_out), n_in, n_table)
    delta = budgets(blocks).delta
    k_of_row = privacy_rows // (2 * n_out)
    with_z = np.flatnonzero(delta[k_of_row] > 0)
    n_z = with_z.size
    delta_rows, z_group = np.unique(privacy_rows[with_z] // n_out, return_inverse=True)
    worst = problem.objective.epigraph
    if problem.objective.transport:
        law_rows, inputs, shares = problem.objective.transport_laws(problem)
    else:
        law_rows, inputs, shares = np.zeros((0, n_prof, n_in)), np.zeros((0, n_in)), np.zeros(0)
    plan_k, plan_x = np.nonzero(inputs > 0)  # the plans' rows (law, input), law by law
    n_plan = plan_x.size * n_out
    t_col = n_table + n_z  # the epigraph variable t, if any
    n_vars = t_col + int(bool(worst)) + n_plan

    m1, m2 = priv.shape[0], delta_rows.size
    z_cols = n_table + np.arange(n_z)
    rows = [with_z, m1 + z_group]  # the privacy rows' own entries join below, where needed
    cols = [z_cols, z_cols]
    vals = [-np.ones(n_z), np.ones(n_z)]
    b_ub = [np.zeros(m1), delta[delta_rows // 2]]

    loss_rows = np.zeros(0, dtype=np.int64)
    c = np.zeros(n_vars)
    if worst:
        active = problem.prior.ravel() > 0
        flat = s * n_in + x
        if worst == "entries":  # one row per weighted entry L[x,y] A[s,x,y] of a positive row
            weighted = mask & (problem.loss[None] != 0)
            active = (active[:, None] & weighted.reshape(n_prof * n_in, n_out)).ravel()
            flat = flat * n_out + y
        loss_rows = np.flatnonzero(active)
        row_index = np.full(active.size, -1)
        row_index[loss_rows] = np.arange(loss_rows.size)
        entry_row = row_index[flat]
        on = (entry_row >= 0) & (problem.loss[x, y] != 0)
        rows += [m1 + m2 + entry_row[on], m1 + m2 + np.arange(loss_rows.size)]
        cols += [np.flatnonzero(on), np.full(loss_rows.size, t_col)]
        vals += [problem.loss[x, y][on], -np.ones(loss_rows.size)]
        b_ub.append(np.zeros(loss_rows.size))
        c[t_col] = 1.0
    elif not n_plan:
        c[:n_table] = problem.prior[s, x] * problem.loss[x, y]

    b_ub_all = np.concatenate(b_ub)
    a_ub = None
    if b_ub_all.size == m1 and n_vars == n_table:  # the privacy rows alone (no δ, no epigraph)
        a_ub = priv
    elif b_ub_all.size:
        priv = priv.tocoo()
        rows, cols, vals = [priv.row, *rows], [priv.col, *cols], [priv.data, *vals]
        a_ub = scipy.sparse.coo_array(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
            shape=(b_ub_all.size, n_vars),
        ).tocsr()
    eq_rows, eq_cols, eq_vals = [s * n_in + x], [np.arange(n_table)], [np.ones(n_table)]
    b_eq = [np.ones(n_prof * n_in)]
    n_marginal = 0
    # The plans enter as conditional tables B_k = γ_k / λ_k (rows summing to 1): with γ_k itself,
    # an item law with entries ~1e-10 (the Gaussian items of configs/quickstart.toml) made HiGHS
    # report the LP infeasible.
    if n_plan:  # B_k[x, y] ((k, x) = (plan_k[i], plan_x[i])) in column n_vars − n_plan + i * n_out + y
        n_laws = inputs.shape[0]
        i, yy = np.divmod(np.arange(n_plan), n_out)
        plan_cols = n_vars - n_plan + np.arange(n_plan)
        first, n_marginal = n_prof * n_in, n_laws * n_out
        marginal = first + plan_x.size  # row of (law k, output y): marginal + k * n_out + y
        weight = inputs[plan_k[i], plan_x[i]]  # λ_k[x] of each plan entry
        c[plan_cols] = shares[plan_k[i]] * weight * problem.loss[plan_x[i], yy]
        # − Σ_{s,x} rows[k,s,x] A[s,x,y]: every table variable of every row a law weighs.
        law_k, law_r = np.nonzero(law_rows.reshape(n_laws, n_prof * n_in))
        a_cols = var.reshape(n_prof * n_in, n_out)[law_r]  # [n, n_out]
        a_rows = marginal + (law_k * n_out)[:, None] + np.arange(n_out)
        a_vals = np.broadcast_to(-law_rows.reshape(n_laws, -1)[law_k, law_r][:, None], a_cols.shape)
        keep = a_cols >= 0
        eq_rows += [first + i, marginal + plan_k[i] * n_out + yy, a_rows[keep]]
        eq_cols += [plan_cols, plan_cols, a_cols[keep]]
        eq_vals += [np.ones(n_plan), weight, a_vals[keep]]
        b_eq += [np.ones(plan_x.size), np.zeros(n_marginal)]
    b_eq_all = np.concatenate(b_eq)
    # Bounds every optimal point meets: table and plan entries lie in [0, 1]; z[k, d, y] ≤ δ_k
    # (Σ_y z ≤ δ_k); t at an optimum is the largest row loss or weighted entry, at most max L.
    upper = np.ones(n_vars)
    upper[z_cols] = delta[delta_rows[z_group] // 2]
    if worst:
        upper[t_col] = max(0.0, float(problem.loss.max()))
    if n_plan:
        a_eq = scipy.sparse.coo_array(
            (np.concatenate(eq_vals), (np.concatenate(eq_rows), np.concatenate(eq_cols))),
            shape=(b_eq_all.size, n_vars),
        ).tocsr()
    else:  # each table row's entries, in order: CSR directly
        indptr = np.concatenate([[0], np.cumsum(np.bincount(eq_rows[0], minlength=n_prof * n_in))])
        a_eq = scipy.sparse.csr_array((np.ones(n_table), np.arange(n_table), indptr),
                                      shape=(b_eq_all.size, n_vars))
    return _LinearProgram(
        c, a_ub, b_ub_all if a_ub is not None else None, a_eq, b_eq_all,
        privacy_rows, delta_rows, loss_rows, n_marginal, upper,
    )


U = 2.0**-53
"""float64's unit roundoff."""


def _gamma(n: int) -> float:
    """``γ_n = n·u / (1 − n·u)``: the relative error bound of a float64 sum or dot product of
    ``n`` terms, relative to the sum of their absolute values (Higham 2002, *Accuracy and
    stability of numerical algorithms*, §3.1)."""
    return n * U / (1.0 - n * U)


class Lagrangian(NamedTuple):
    """The Lagrangian's cost per variable ``reduced = c − A_ubᵀ y_ub − A_margᵀ φ`` and its
    constant ``b_ubᵀ y_ub``, with the magnitudes that bound their float64 errors: ``size =
    |c| + |A_ub|ᵀ|y_ub| + |A_marg|ᵀ|φ|`` (entry by entry) and ``constant_size = |b_ub|ᵀ|y_ub|``;
    each computed entry is within ``γ_depth · size`` of the exact one (``depth``: the most terms
    an entry's dot product sums), the constant within ``γ_constant_depth · constant_size``."""

    reduced: np.ndarray
    constant: float
    size: np.ndarray
    constant_size: float
    depth: int
    constant_depth: int = 1


def _reduced_costs(lp: _LinearProgram, ineq_marginals, eq_marginals) -> Lagrangian:
    """The :class:`Lagrangian` with every row but the simplex rows dualised (``y_ub`` clipped
    to ≤ 0, scipy's sign)."""
    reduced = lp.c.copy()
    size = np.abs(lp.c)
    constant = constant_size = 0.0
    depth = constant_depth = 2
    if lp.a_ub is not None:
        y_ub = np.minimum(np.asarray(ineq_marginals, dtype=np.float64), 0.0)
        reduced -= lp.a_ub.T @ y_ub
        size += abs(lp.a_ub).T @ np.abs(y_ub)
        constant += float(y_ub @ lp.b_ub)
        constant_size += float(np.abs(y_ub) @ np.abs(lp.b_ub))
        depth = max(depth, int(np.diff(lp.a_ub.tocsc().indptr).max(initial=0)) + 2)
        constant_depth = lp.b_ub.size + 1
    if lp.n_marginal:  # their right-hand sides are 0
        n_simplex = lp.a_eq.shape[0] - lp.n_marginal
        phi = np.asarray(eq_marginals, dtype=np.float64)[n_simplex:]
        marginal = lp.a_eq[n_simplex:]
        reduced -= marginal.T @ phi
        size += abs(marginal).T @ np.abs(phi)
        depth += int(np.diff(marginal.tocsc().indptr).max(initial=0))
    return Lagrangian(reduced, constant, size, constant_size, depth, constant_depth)


def _dual_bound(lp: _LinearProgram, ineq_marginals, eq_marginals) -> float:
    """A lower bound on the LP's optimum from any multipliers ``y_ub`` (clipped to ≤ 0, scipy's
    sign) and ``φ`` of the transport marginal rows, by weak duality with the simplex rows
    (``Σ_y A[s, x, y] = 1``, ``Σ_y B_k[x, y] = 1``) kept and every other row dualised:

        ``min_v (c − A_ubᵀ y_ub − A_margᵀ φ)ᵀ v + b_ubᵀ y_ub``

    over the simplex rows and ``0 ≤ v ≤ upper`` for the variables in none (``z``, ``t``; bounds
    every optimal point meets). A linear function's minimum over a simplex is its least
    coefficient, over a box its negative parts times the upper bounds. Valid for every
    multiplier: HiGHS's only make it tight. Rounded down by a bound of its own float64 error
    (:func:`_bound_at`)."""
    lag = _reduced_costs(lp, ineq_marginals, eq_marginals)
    return _bound_at(lp, lag.reduced, lag.constant, lag)


def _bound_at(lp: _LinearProgram, reduced: np.ndarray, constant: float,
              errors: Lagrangian | None = None) -> float:
    """The Lagrangian's minimum over the simplex rows and the boxes of the other variables, at
    reduced costs ``reduced`` (one per variable) and constant ``constant``, less a bound of its
    float64 error: each row's least coefficient is within ``γ_depth · max size`` of the exact
    one (``errors``: the magnitudes of :class:`Lagrangian`; None: ``reduced`` and ``constant``
    are exact), and their sum within ``γ_n`` of the sum of the absolute values."""
    return scaled_bound(lp, reduced - lp.c, constant, top=1.0, errors=errors, only_top=True)


def scaled_bound(lp: _LinearProgram, direction: np.ndarray, constant: float, top: float = 2.0,
                 errors: Lagrangian | None = None, only_top: bool = False) -> float:
    """The best Lagrangian bound along a ray of multipliers: the largest
    ``_bound_at(lp, c + θ·direction, θ·constant)`` over ``θ ∈ [0, top]``, where ``direction`` and
    ``constant`` are what some multipliers add to the cost and the constant (θ = 1: those
    multipliers themselves; θ = 0: none, the objective's own least value). Each θ ≥ 0 scales
    valid multipliers into valid ones, so every value is a lower bound; the function is concave
    in θ (a sum of minima of affine functions), so a grid of 1/4 steps (θ = 1 among them) and a
    golden-section search on the best bracket find its maximum. Column generation's multipliers
    price entries not yet in the LP, and until they all are, scaling them down can lift the
    bound far above theirs (a cutting-plane LP's early rounds give 0 otherwise). Each value is
    :func:`_bound_at`'s, its gathers done once (41 values; on a 32×32 DistP grid the former 75,
    each gathering afresh, took 1 s a round of column generation).

    Every value is rounded down by a bound of its float64 error: ``errors`` gives the magnitudes
    behind ``c + direction`` (:class:`Lagrangian`: ``size`` bounds ``|c| + |direction|``'s
    terms entry by entry, ``constant_size`` the constant's; None: ``|c| + |direction|`` itself,
    the rounding of the last additions only). At ``θ`` an entry's error is at most
    ``γ_depth·(|c| + θ·(size − |c|)) + u·|c + θ·direction|``, a row's least coefficient at most
    the row's largest such error off, and the sum of ``n`` row minima, boxes and the constant
    ``γ_{n+1}`` of their absolute sum off. ``only_top``: the value at ``θ = top`` alone."""
    n_simplex = lp.a_eq.shape[0] - lp.n_marginal
    simplex = lp.a_eq[:n_simplex]
    if np.any(np.diff(simplex.indptr) == 0):
        return -np.inf  # a row with no variable: the LP is infeasible
    c_abs = np.abs(lp.c)
    if errors is None:
        size, constant_size, depth, constant_depth = c_abs + np.abs(direction), abs(constant), 1, 1
    else:
        size, constant_size = errors.size, errors.constant_size
        depth, constant_depth = errors.depth, errors.constant_depth
    extra = np.maximum(size - c_abs, 0.0)  # what the multipliers add to each entry's magnitude
    g, g_constant = _gamma(depth), _gamma(constant_depth)
    c_rows, d_rows, starts = lp.c[simplex.indices], direction[simplex.indices], simplex.indptr[:-1]
    a_rows, e_rows = c_abs[simplex.indices], extra[simplex.indices]
    free = np.ones(lp.c.size, dtype=bool)
    free[simplex.indices] = False
    c_free, d_free, upper = lp.c[free], direction[free], lp.upper[free]
    a_free, e_free = c_abs[free], extra[free]
    g_sum = _gamma(n_simplex + int(free.sum()) + 2)

    def at(theta: float) -> float:
        entries = c_rows + theta * d_rows
        mins = np.minimum.reduceat(entries, starts)
        err = np.maximum.reduceat(g * (a_rows + theta * e_rows) + U * np.abs(entries), starts)
        free_entries = c_free + theta * d_free
        boxes = np.minimum(free_entries, 0.0) * upper
        box_err = (g * (a_free + theta * e_free) + U * np.abs(free_entries)) * upper
        total = float(mins.sum() + boxes.sum() + theta * constant)
        margin = float(err.sum() + box_err.sum()) + theta * g_constant * constant_size + g_sum * float(
            np.abs(mins).sum() + np.abs(boxes).sum() + abs(theta * constant))
        return total - 2.0 * margin  # twice: the margin's own rounding, and room to spare

    if only_top:
        return at(top)
    grid = np.linspace(0.0, top, int(round(4 * top)) + 1)
    values = np.array([at(t) for t in grid])
    i = int(np.argmax(values))
    best = float(values[i])
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    ratio = (np.sqrt(5.0) - 1.0) / 2.0
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = at(a), at(b)
    for _ in range(30):
        if fa >= fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = at(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = at(b)
    return max(best, fa, fb)


_COLD_SOLVERS = {"highs-ipm": "ipm", "highs-ds": "simplex", "highs": "choose"}
"""``solve_lp``'s ``method`` (``scipy.optimize.linprog``'s names) → HiGHS's ``solver`` option."""


def _highs_model(lp: _LinearProgram):
    """``(highspy.HighsLp, inequality rows, their right-hand sides, the equalities')`` of ``lp``."""
    import highspy

    parts = [a for a in (lp.a_ub, lp.a_eq) if a is not None]
    matrix = scipy.sparse.vstack(parts).tocsc() if parts else scipy.sparse.csc_matrix((0, lp.c.size))
    m_ub = 0 if lp.a_ub is None else lp.a_ub.shape[0]
    b_eq = np.zeros(0) if lp.b_eq is None else np.asarray(lp.b_eq, np.float64)
    b_ub = np.zeros(0) if lp.b_ub is None else np.asarray(lp.b_ub, np.float64)
    model = highspy.HighsLp()
    model.num_col_, model.num_row_ = int(lp.c.size), int(matrix.shape[0])
    model.col_cost_ = np.asarray(lp.c, np.float64)
    model.col_lower_, model.col_upper_ = np.zeros(lp.c.size), np.full(lp.c.size, highspy.kHighsInf)
    model.row_lower_ = np.concatenate([np.full(m_ub, -highspy.kHighsInf), b_eq])
    model.row_upper_ = np.concatenate([b_ub, b_eq])
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_, model.a_matrix_.index_ = matrix.indptr, matrix.indices
    model.a_matrix_.value_ = matrix.data
    return model, m_ub, b_ub, b_eq


def write_lp(problem: Problem, path) -> dict:
    """Writes the LP :func:`solve_lp` solves for ``problem`` to ``path`` (HiGHS picks the format
    from the suffix: ``.mps``, ``.lp``), so that other solvers, or HiGHS at other settings, run
    the same program; returns its ``{"variables", "rows", "nonzeros"}``. The variables are the
    support's table entries (then any auxiliary ones), in ``problem.support_mask()`` order."""
    require_linear(problem, "LP reference")
    admit(problem, "lp")
    model, _, _, _ = _highs_model(_build(problem, problem.blocks()))
    h = quiet_highs()
    h.passModel(model)
    h.writeModel(str(path))
    return {"variables": int(model.num_col_), "rows": int(model.num_row_),
            "nonzeros": int(len(model.a_matrix_.value_))}


def _solve_highspy(lp: _LinearProgram, options: dict, basis: Basis | None, cold: str = "ipm"):
    """The LP by highspy (what ``scipy.optimize.linprog`` wraps), warm-started from ``basis`` by
    the dual simplex where it fits, else cold by HiGHS's ``solver`` ``cold`` (the interior point
    method ends with a crossover); returns ``(linprog-like result, Basis)``."""
    import highspy

    model, m_ub, b_ub, b_eq = _highs_model(lp)
    h = quiet_highs()
    for key, value in options.items():
        h.setOptionValue(key, value)
    h.passModel(model)
    shape = (model.num_col_, model.num_row_)
    warm = basis is not None and basis.shape == shape and \
        h.setBasis(basis.basis) == highspy.HighsStatus.kOk
    h.setOptionValue("solver", "simplex" if warm else cold)
    h.run()
    if h.getModelStatus() == highspy.HighsModelStatus.kUnknown:
        # the interior point method's crossover can stop without a verdict (approximate local DP
        # between the 4-neighbour cells of a 10×10 grid: "Unknown" after 11 s); the simplex
        # finishes from the basis it left, in 0.2 s there
        h.setOptionValue("solver", "simplex")
        h.run()
    status = h.getModelStatus()
    sol = h.getSolution()
    ok = status == highspy.HighsModelStatus.kOptimal
    if not (ok and sol.value_valid and sol.dual_valid):  # no point to read (its arrays may be empty)
        ok = False
        sol.row_value = sol.row_dual = np.zeros(model.num_row_)
    row_value, row_dual = np.asarray(sol.row_value), np.asarray(sol.row_dual)
    res = SimpleNamespace(  # linprog's fields (scipy.optimize alone takes 0.6 s to import)
        status=0 if ok else 1, message=h.modelStatusToString(status),
        x=np.asarray(sol.col_value) if ok else None, fun=h.getInfo().objective_function_value,
        ineqlin=SimpleNamespace(residual=b_ub - row_value[:m_ub], marginals=row_dual[:m_ub]),
        eqlin=SimpleNamespace(residual=b_eq - row_value[m_ub:], marginals=row_dual[m_ub:]))
    return res, Basis(h.getBasis(), shape) if ok else None


def privacy_multipliers(lp: _LinearProgram, k_size: int, n_out: int, duals: np.ndarray | None
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The multipliers ``[K, 2, Y]`` of the privacy rows and ``[K, 2]`` of the δ rows (0 for rows
    the LP leaves out) from ``duals``, those of the LP's inequalities in order (``≥ 0``)."""
    multipliers, delta_multipliers = np.zeros(k_size * 2 * n_out), np.zeros(k_size * 2)
    if duals is not None:
        m1, m2 = lp.privacy_rows.size, lp.delta_rows.size
        multipliers[lp.privacy_rows] = duals[:m1]
        delta_multipliers[lp.delta_rows] = duals[m1 : m1 + m2]
    return multipliers.reshape(k_size, 2, n_out), delta_multipliers.reshape(k_size, 2)


def solve_lp(
    problem: Problem, *, time_limit: float | None = None, method: str = "highs-ipm",
    basis: Basis | None = None, keep_basis: bool = False,
) -> ReferenceResult:
    """Solves ``problem`` exactly as a linear program with HiGHS.

    Args:
      problem: the design problem (objective ``"expected"``, ``"worst"``, ``"entry"`` or
        ``"transport"``; every constraint must be linear: max-divergence or hockey-stick).
      time_limit: optional HiGHS time limit in seconds (HiGHS may finish a solve that takes
        less than about 0.05 s regardless).
      method: the HiGHS method, by ``scipy.optimize.linprog``'s names: ``"highs-ipm"``,
        ``"highs-ds"`` (the dual simplex) or ``"highs"`` (HiGHS chooses). The default interior
        point method ends with a crossover to a basic (vertex) solution, so it is as exact as the
        simplex; these LPs have many more rows than columns, and on 80 random problems of the
        benchmark's sizes it was about 3x faster in total than ``"highs-ds"`` (up to 14x on
        worst-case objectives; measured on 2 CPU cores). Where it stops without a verdict
        (HiGHS's model status "Unknown"), the simplex finishes from where it stopped.
      basis, keep_basis: return the final basis as the result's ``basis`` (``keep_basis``),
        and warm-start from ``basis`` (the ``basis`` of the same problem at a neighbouring
        budget) by the dual simplex where it fits (``method`` is then not used): a frontier's
        LPs after the first take a few pivots each (32 budgets of the 10×10 quick start: 1.3 s
        against 7.7 s cold, build included).

    Returns:
      The optimal table, its objective value and the Lagrange multipliers of the privacy rows
      (and, for the transport loss, the potentials of the marginal rows, one per law).

    Raises:
      ReferenceSolveError: if HiGHS stops without an optimal solution (infeasible, time limit, ...).
      ReferenceSolveError: also if some ``e^ε`` overflows float64.
      ValueError: ``method`` is not one of the three.
      SizeError: the LP would need more memory than is available (a one-line message).
      SpecError: the objective or a constraint is not linear (a one-line message).

    Example:
      >>> from diffpriv.problems._known import k_rr_problem
      >>> round(solve_lp(k_rr_problem(2, 0.0)).value, 6)
      0.5
    """
    if method not in _COLD_SOLVERS:
        raise ValueError(f"method: expected one of {', '.join(_COLD_SOLVERS)}, got {method!r}")
    require_linear(problem, "LP reference")
    admit(problem, "lp")
    start = time.perf_counter()
    blocks = problem.blocks()
    lp = _build(problem, blocks)
    options = {
        "primal_feasibility_tolerance": _TOLERANCE,
        "dual_feasibility_tolerance": _TOLERANCE,
    }
    if time_limit is not None:
        options["time_limit"] = float(time_limit)
    if method == "highs-ds":
        options["simplex_strategy"] = 1  # the dual simplex, as linprog's "highs-ds"
    res, final = _solve_highspy(lp, options, basis, cold=_COLD_SOLVERS[method])
    if res.status != 0 or res.x is None:
        raise ReferenceSolveError(
            f"HiGHS did not solve the LP (status {res.status}): {res.message}"
        )

    n_prof, n_in, n_out = problem.shape
    mask = problem.support_mask()
    table = np.zeros(problem.shape)
    table[mask] = res.x[: int(mask.sum())]
    table = np.clip(table, 0.0, None)
    table /= table.sum(axis=-1, keepdims=True)

    k_size = budgets(blocks).size
    duals = np.clip(-np.asarray(res.ineqlin.marginals), 0.0, None) if lp.a_ub is not None else None
    m1, m2 = lp.privacy_rows.size, lp.delta_rows.size
    multipliers, delta_multipliers = privacy_multipliers(lp, k_size, n_out, duals)
    row_weights = problem.prior.copy()
    if duals is not None:
        if problem.objective.epigraph:
            shape = problem.shape if problem.objective.epigraph == "entries" else (n_prof, n_in)
            row_weights = np.zeros(int(np.prod(shape)))
            row_weights[lp.loss_rows] = duals[m1 + m2 :]
            row_weights = row_weights.reshape(shape)
    potential = None
    if lp.n_marginal:
        potential = np.asarray(res.eqlin.marginals, dtype=np.float64)[-lp.n_marginal :]
        potential = potential.reshape(-1, n_out).copy()
    slack = [np.asarray(res.ineqlin.residual)] if lp.a_ub is not None else []
    violation = max(0.0, float(-np.min(np.concatenate([*slack, [0.0]]))),
                    float(np.max(np.abs(res.eqlin.residual), initial=0.0)))
    return ReferenceResult(
        table=table,
        value=float(res.fun),
        bound=_dual_bound(lp, res.ineqlin.marginals if lp.a_ub is not None else None,
                          res.eqlin.marginals),
        violation=violation,
        status=str(res.message),
        seconds=time.perf_counter() - start,
        multipliers=multipliers,
        delta_multipliers=delta_multipliers,
        row_weights=row_weights,
        potential=potential,
        basis=final if basis is not None or keep_basis else None,
    )
