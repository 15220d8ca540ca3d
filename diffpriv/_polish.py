"""Primal polishing: project a near-optimal table onto its active face.

First-order methods leave small violations of the constraints that are active at the optimum
(``1e-6``-ish in the solver's units). Mixing them away in the certifier costs little, except
where a budget is tiny (extended DP between close inputs: ``e^{ε d} − 1 ≈ ε d``), where even a
``1e-6`` violation needs a visible mixing weight. Polishing removes them with linear algebra,
not an LP: guess the active set from the solver's multipliers and residuals, then move the table
by the least-norm correction that makes the guessed active constraints hold with equality and
every row sum exactly 1, keeping entries that are (numerically) zero at zero. It is the
"solution polishing" step of OSQP (Stellato et al. 2020) applied to the table. The result is kept
only if it is better (smaller violation at essentially the same loss); the certifier checks it
like any other table.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ._problem import Problem

__all__ = ["polish"]


def _violation(g: np.ndarray, delta: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Per-direction violation: pure rows per output, approximate rows as one hockey-stick."""
    v = g @ a  # [M, Y]
    pure = delta == 0
    out = np.where(pure[:, None], v, -np.inf)
    hs = np.maximum(v, 0.0).sum(axis=1) - delta
    return np.maximum(out.max(axis=1, initial=-np.inf), np.where(pure, -np.inf, hs))


def polish(problem: Problem, table: np.ndarray, g: np.ndarray, delta: np.ndarray, u: np.ndarray,
           *, zero_tol: float = 1e-10, active_tol: float = 1e-7, rounds: int = 3) -> np.ndarray:
    """Returns a polished copy of ``table`` (or ``table`` itself if polishing does not help).

    Args:
      problem: the problem (for its shape and support).
      table: ``[S, X, Y]`` near-optimal table.
      g, delta: the solver's normalised constraint matrix ``[M, R]`` and slack budgets ``[M]``.
      u: ``[M, Y]`` the solver's multipliers.
      zero_tol: entries below this stay exactly zero.
      active_tol: constraints within this of binding (or with a positive multiplier) are
        treated as active.
      rounds: projection rounds (each clips negatives and re-projects).
    """
    shape = table.shape
    a0 = table.reshape(-1, shape[-1]).astype(np.float64)
    r, y = a0.shape
    umax = float(np.max(u, initial=0.0))
    best, best_v = a0, float(np.max(_violation(g, delta, a0), initial=-np.inf))
    a = a0.copy()
    for _ in range(rounds):
        free = a > zero_tol * a.max(axis=1, keepdims=True)
        v = g @ a
        pure = delta == 0
        act_pure = pure[:, None] & ((v > -active_tol) | (u > 1e-6 * umax))
        rows_eq, rhs = [], []
        idx = -np.ones((r, y), dtype=np.int64)
        idx[free] = np.arange(int(free.sum()))
        n = int(free.sum())
        # guessed-active pure constraints: (G A)[i, y] = 0 on free entries
        ii, yy = np.nonzero(act_pure)
        for i, col in zip(ii, yy, strict=True):
            rr = np.nonzero(free[:, col] & (g[i] != 0))[0]
            row = np.zeros(n)
            row[idx[rr, col]] = g[i, rr]
            rows_eq.append(row)
            rhs.append(-v[i, col])
        # approximate constraints that bind: Σ_{y: positive part} (G A)[i, y] = δ_i
        hs = np.maximum(v, 0).sum(axis=1) - delta
        for i in np.nonzero((~pure) & (hs > -active_tol))[0]:
            cols = np.nonzero(v[i] > 0)[0]
            row = np.zeros(n)
            for col in cols:
                rr = np.nonzero(free[:, col] & (g[i] != 0))[0]
                row[idx[rr, col]] += g[i, rr]
            rows_eq.append(row)
            rhs.append(-hs[i])
        # row sums stay exactly 1
        for rr in range(r):
            row = np.zeros(n)
            row[idx[rr, free[rr]]] = 1.0
            rows_eq.append(row)
            rhs.append(1.0 - a[rr, free[rr]].sum())
        m = np.asarray(rows_eq)
        step, *_ = scipy.linalg.lstsq(m, np.asarray(rhs), lapack_driver="gelsd")
        a = a.copy()
        a[free] += step
        a = np.maximum(a, 0.0)
        a /= a.sum(axis=1, keepdims=True)
        viol = float(np.max(_violation(g, delta, a), initial=-np.inf))
        if viol < best_v:
            best, best_v = a, viol
        if viol <= 0:
            break
    return best.reshape(shape)
