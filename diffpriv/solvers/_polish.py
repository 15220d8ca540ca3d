"""Primal polishing: project a near-optimal table onto its active face.

First-order methods leave small violations of the constraints that are active at the optimum
(``1e-6``-ish in the solver's units). Mixing them away in the certifier costs little, except
where a budget is tiny (extended DP between close inputs: ``e^{ε d} − 1 ≈ ε d``), where even a
``1e-6`` violation needs a visible mixing weight. Polishing removes them with linear algebra,
not an LP: guess the active set from the solver's multipliers and residuals, then move the table
by the least-norm correction that makes the guessed active constraints hold with equality and
every row sum exactly 1, with entries that are numerically zero set to exactly zero. It is the
"solution polishing" step of OSQP (Stellato et al. 2020) applied to the table. The result is kept
only if it lowers the largest violation (the correction is least-norm, so the loss moves by the
order of the violations; the optimality benchmark measures the end result); the certifier checks
it like any other table. :func:`polish_couplings` does the same for the table and the couplings
of Wasserstein comparisons.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.sparse.linalg

from diffpriv.problems._problem import Problem
from diffpriv.solvers._majorant import majorant

__all__ = ["polish", "polish_couplings", "violation"]


def violation(g, delta: np.ndarray, a: np.ndarray, *, entries: int = 2**24) -> np.ndarray:
    """Per-direction violation: pure rows per output, approximate rows as one hockey-stick
    (``g``: the normalised ``[M, R]`` constraint matrix, scipy CSR). Computed over slices of
    output columns with at most ``entries`` entries of ``g @ a`` each."""
    pure = delta == 0
    top = np.full(delta.shape, -np.inf)
    hs = -delta.astype(np.float64)
    step = max(1, entries // max(g.shape[0], 1))
    for lo in range(0, a.shape[1], step):
        v = np.asarray(g @ a[:, lo:lo + step])  # [M, columns]
        top = np.maximum(top, v.max(axis=1, initial=-np.inf))
        hs += np.maximum(v, 0.0).sum(axis=1)
    return np.where(pure, top, hs)


def polish(problem: Problem, table: np.ndarray, g: np.ndarray, delta: np.ndarray, u: np.ndarray,
           *, zero_tol: float = 1e-10, active_tol: float = 1e-7, rounds: int = 3) -> np.ndarray:
    """Returns a polished copy of ``table`` (or ``table`` itself if polishing does not help).

    Args:
      problem: the problem (for its shape and support).
      table: ``[S, X, Y]`` near-optimal table.
      g, delta: the solver's normalised constraint matrix ``[M, R]`` (scipy CSR) and slack
        budgets ``[M]``.
      u: ``[M, Y]`` the solver's multipliers.
      zero_tol: entries below this times their row's largest become exactly zero (100 times
        more in each further round, up to 1e-6: a round that still violates a budget may have
        left dust).
      active_tol: constraints within this of binding (or with a positive multiplier) are
        treated as active.
      rounds: projection rounds (each clips negatives and re-projects).
    """
    shape = table.shape
    a0 = table.reshape(-1, shape[-1]).astype(np.float64)
    umax = float(np.max(u, initial=0.0))
    best, best_v = a0, float(np.max(violation(g, delta, a0), initial=-np.inf))
    a = a0.copy()
    for i in range(rounds):
        free = a > max(zero_tol, min(zero_tol * 100.0**i, 1e-6)) * a.max(axis=1, keepdims=True)
        a = np.where(free, a, 0.0)  # numerical dust becomes exact zeros (0/0 ratios are ignored)
        m, rhs = _active_system(g, delta, u, umax, a, free, active_tol)
        a[free] += _least_norm(m, rhs)
        a = np.maximum(a, 0.0)
        a /= a.sum(axis=1, keepdims=True)
        viol = float(np.max(violation(g, delta, a), initial=-np.inf))
        if viol < best_v:
            best, best_v = a, viol
        if viol <= 0:
            break
    if best_v > 0:
        raised = majorant(problem, best)
        if raised is not None:
            viol = float(np.max(violation(g, delta, raised), initial=-np.inf))
            if viol < best_v:
                best = raised
    return best.reshape(shape)


def _active_system(g, delta, u, umax, a, free, active_tol):
    """The sparse system ``M · step = rhs`` on the free entries (see module docstring)."""
    r, y = a.shape
    idx = -np.ones((r, y), dtype=np.int64)
    idx[free] = np.arange(int(free.sum()))
    v = np.asarray(g @ a)
    pure = delta == 0
    rows, cols, vals, rhs = [], [], [], []
    n_eq = 0
    # guessed-active pure constraints: (G A)[i, y] = 0
    ii, yy = np.nonzero(pure[:, None] & ((v > -active_tol) | (u > 1e-6 * umax)))
    hit = g[ii].tocoo()  # entry (k, r): G[ii[k], r]
    k, rr, val = hit.row, hit.col, hit.data
    keep = free[rr, yy[k]] & (val != 0)
    k, rr, val = k[keep], rr[keep], val[keep]
    rows.append(n_eq + k)
    cols.append(idx[rr, yy[k]])
    vals.append(val)
    rhs.append(-v[ii, yy])
    n_eq += len(ii)
    # binding approximate constraints: Σ_{y: (G A)[i,y] > 0} (G A)[i, y] = δ_i
    hs = np.maximum(v, 0).sum(axis=1) - delta
    binding = np.nonzero((~pure) & (hs > -active_tol))[0]
    for j, i in enumerate(binding):
        lo, hi = g.indptr[i], g.indptr[i + 1]
        g_cols, g_vals = g.indices[lo:hi], g.data[lo:hi]
        kk, cc = np.nonzero(free[g_cols] & (v[i] > 0)[None, :] & (g_vals != 0)[:, None])
        rows.append(np.full(len(kk), n_eq + j))
        cols.append(idx[g_cols[kk], cc])
        vals.append(g_vals[kk])
        rhs.append([-hs[i]])
    n_eq += binding.size
    # every row sums to exactly 1
    rr, cc = np.nonzero(free)
    rows.append(n_eq + rr)
    cols.append(idx[rr, cc])
    vals.append(np.ones(len(rr)))
    rhs.append(1.0 - a.sum(axis=1))
    n_eq += r
    m = scipy.sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                shape=(n_eq, int(free.sum())))
    return m, np.concatenate([np.asarray(x, dtype=np.float64) for x in rhs])


def _least_norm(m, rhs):
    """The least-norm least-squares solution of ``m · step = rhs``.

    Small systems: dense SVD (``gelsd``). Systems with few rows (the usual case: a few thousand
    active constraints, far more free entries): the row-space form ``step = mᵀ (m mᵀ)⁺ rhs``
    with the ``[rows, rows]`` Gram matrix solved densely (pivoted QR), plus one step of iterative
    refinement: the same solution with a smaller residual, about 3x faster than LSQR on the
    ill-conditioned systems of a 32 × 32 grid. Otherwise LSQR.
    """
    rows, cols = m.shape
    if rows * cols <= 4_000_000:
        step, *_ = scipy.linalg.lstsq(m.toarray(), rhs, lapack_driver="gelsd")
        return step
    if rows <= _GRAM_ROWS:
        gram = (m @ m.T).toarray()
        step = np.zeros(cols)
        for _ in range(2):  # solve, then refine once on the residual
            y, *_ = scipy.linalg.lstsq(gram, rhs - m @ step, lapack_driver="gelsy")
            step = step + m.T @ y
        return step
    iterations = min(20 * cols, max(_LSQR_MIN, _LSQR_WORK // max(m.nnz, 1)))
    return scipy.sparse.linalg.lsqr(m, rhs, atol=1e-15, btol=1e-15, iter_lim=iterations)[0]


_GRAM_ROWS = 6000
"""Up to this many rows the dense ``[rows, rows]`` Gram matrix (≤ 288 MB) is solved directly."""

_LSQR_WORK, _LSQR_MIN = 10**10, 100
"""LSQR's iterations are capped at ``max(_LSQR_MIN, _LSQR_WORK / nnz)`` (and ``20·cols``): about
``2·10^10`` multiply-adds (two products per iteration), a minute or two on a laptop core. An
inexact correction is safe (a round is kept only if it lowers the violation); an unbounded one was
not: pure DistP on a 64 × 64 grid (up to 12,300 active rows, 16.7 million free entries, up to
50 million non-zeros) ran LSQR for over 30 minutes in one polish (``20·cols`` is 3·10^8
iterations), where the cap allows about 200 (a capped 3,000-step run then took 12.7 minutes in
all, benchmarks/RESULTS.md)."""


POLISH_SUPPORT = 1e-9
"""Entries of the table and couplings below this are set to exactly 0 by :func:`polish_couplings`."""

POLISH_ROUNDS = 20
"""Rounds of :func:`polish_couplings`: each drops the entries its correction would make negative."""


def polish_couplings(td, mask: np.ndarray, table: np.ndarray, coupling: np.ndarray):
    """The polish of the lifted transport PDHG (:mod:`._transport_pdhg`): ``td`` holds its comparisons
    ``(wa [K, R], wb [K, R], cost [K, Y, Y], budget [K])``, ``coupling`` their couplings ``[K, Y,
    Y]``. The least-norm correction of ``(A, γ)`` (entries above :data:`POLISH_SUPPORT`; the rest
    set to 0) after which every row of ``A`` sums to 1, every coupling has exactly the marginals of
    its laws, and every coupling's cost is at most its (tightened) budget: the binding ones (cost
    above ``ê(1 − 10^-3)``) are set to their cost clipped to the budget. Then ``W_μ^μ(P_k, Q_k) ≤
    ⟨Ĉ_k, γ_k⟩`` holds up to rounding, with no repair needed. Entries the correction would make
    negative leave the support and the correction is recomputed (:data:`POLISH_ROUNDS` rounds);
    returns the corrected table, or ``None`` if no round kept every entry non-negative. As
    :func:`polish` does for linear constraints (OSQP's solution polishing), with the couplings as
    extra variables; LSQR from 0 gives the least-norm solution of the (consistent, redundant)
    equations."""
    wa, wb, cost, budget = (np.asarray(v, np.float64) for v in td)
    (r, y), k = table.shape, cost.shape[0]
    x = np.concatenate([np.where(mask, table, 0.0).ravel(), coupling.ravel()])
    x = np.where(x > POLISH_SUPPORT, x, 0.0)
    na = r * y
    rows, cols, vals, rhs = [], [], [], []

    def equation(idx, coef, target):
        rows.append(np.full(len(idx), len(rhs)))
        cols.append(np.asarray(idx))
        vals.append(np.asarray(coef, np.float64))
        rhs.append(target)

    for i in range(r):
        equation(np.arange(i * y, (i + 1) * y), np.ones(y), 1.0)
    grid = np.arange(y * y).reshape(y, y)
    for j in range(k):
        base = na + j * y * y
        for side, weights in ((0, wa[j]), (1, wb[j])):
            for o in range(y):
                cells = base + (grid[o] if side == 0 else grid[:, o])
                equation(np.r_[cells, np.arange(r) * y + o], np.r_[np.ones(y), -weights], 0.0)
        value = float(cost[j].ravel() @ x[base:base + y * y])
        if value > budget[j] * (1.0 - 1e-3):
            equation(base + np.arange(y * y), cost[j].ravel(), min(value, budget[j]))
    m = scipy.sparse.csc_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                               shape=(len(rhs), x.size))
    target = np.asarray(rhs)
    for _ in range(POLISH_ROUNDS):
        free = np.flatnonzero(x)
        step = scipy.sparse.linalg.lsqr(m[:, free], target - m @ x, atol=1e-15, btol=1e-15,
                                        iter_lim=20 * x.size)[0]
        new = x.copy()
        new[free] += step
        if np.all(new >= 0.0):
            return new[:na].reshape(r, y)
        x = np.where(new > 0.0, x, 0.0)  # entries the correction drives below 0 leave the support
    return None
