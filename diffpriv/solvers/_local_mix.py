"""A repair for hockey-stick bounds between rows that mixes each row by its own weight.

The certifier's repair (:func:`diffpriv.certification._repair.repair`) mixes every row with one
law ``c`` at one weight ``t``: ``A' = (1 − t) A + t 𝟙cᵀ`` scales every hockey-stick level by
``1 − t``, so the worst violated comparison sets the weight of all rows. Mirror-prox's last
iterates on TV-DP violate some comparisons by 1–2 % of their budget, and that one weight then
costs about 1.5 % of loss (``benchmarks/RESULTS.md``). With a weight ``t_r`` per row,
``A'_r = (1 − t_r) A_r + t_r c``, a comparison of rows ``a`` and ``b`` (``P = A_a``, ``Q = A_b``)
moves by, for ``t_a ≥ t_b``,

    ``P' − e^ε Q' = (1 − t_a)(P − e^ε Q) + (t_a − t_b)(c − e^ε Q) + t_b (1 − e^ε) c``,

and for ``t_b ≥ t_a`` by ``(1 − t_b)(P − e^ε Q) + (t_b − t_a)(P − e^ε c) + t_a (1 − e^ε) c``; the
last terms are at most 0, so with ``H = Σ_y (P − e^ε Q)⁺`` and
``K = max(Σ_y (c − e^ε Q)⁺, Σ_y (P − e^ε c)⁺)``,

    ``H(P'‖Q') ≤ (1 − max(t_a, t_b)) H + |t_a − t_b| K ≤ (1 − (t_a + t_b)/2) H + s K``

for any ``s ≥ |t_a − t_b|``. Keeping that below the budget ``δ`` for each comparison and
direction is linear in ``(t, s)``: a small LP (one variable per row and per comparison; HiGHS,
a tenth of a second on a 16×16 grid) minimising the expected loss the mixing adds,
``Σ_r ⟨C_r, c − A_r⟩ t_r``. Weights fall off between rows as far as the comparisons' slack lets
them, so rows far from a violation stay as they are. ``c`` is the prior's mean row of the table.
The result is only a candidate: the certifier's repair still checks it (and mixes further if a
comparison fails by rounding), so nothing here is trusted, and mirror-prox keeps whichever of
the two repairs costs less (:meth:`._mirror.MirrorRun._keep`).

Measured (``benchmarks/divergence_optimality.py --grid 16 --seeds 5 --kinds tv-dp4,ldp-delta4``,
before and after side by side): TV-DP seed 0 converged at the 3,200th step instead of the
3,400th, seed 3 with a table 0.25 % lower (3.5932 against 3.6021), the other seeds as before;
approximate LDP unchanged (there the single weight gains from the ``e^ε`` side, which the
inequality above drops: on a 6×6 grid 1.88 against the per-row 2.07). TV-DP on 24×24 (seed 0):
3,600 steps instead of 3,800, table 3.7288 against 3.7355.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize
import scipy.sparse

__all__ = ["local_mix"]

MARGIN = 1e-6
"""The LP keeps each level below ``δ (1 − MARGIN)``, well above the certifier's margins."""


def _hockey(p: np.ndarray, q: np.ndarray, growth: np.ndarray) -> np.ndarray:
    """``Σ_y max(0, p − e^ε q)`` per row of ``p`` and ``q`` (``growth`` ``e^ε``, one per row)."""
    return np.maximum(p - growth[:, None] * q, 0.0).sum(axis=1)


def local_mix(rows: np.ndarray, cost: np.ndarray, prior: np.ndarray, pair_a: np.ndarray, pair_b: np.ndarray,
              eps: np.ndarray, delta: np.ndarray) -> np.ndarray | None:
    """Rows mixed row by row towards the prior's mean row so that every hockey-stick bound
    ``Σ_y max(0, A_a − e^ε A_b) ≤ δ`` (both directions) holds (module docstring), or ``None``
    where the LP finds no weights (a budget of 0, or HiGHS failing).

    Args:
      rows: ``[R, Y]`` row-stochastic table rows.
      cost: ``[R, Y]`` the expected loss's weights (``π_r L[x_r, y]``).
      prior: ``[R]`` the rows' prior weights (the mean row's weights).
      pair_a, pair_b, eps, delta: ``[K]`` the comparisons: rows, ``ε`` and ``δ``.
    """
    if pair_a.size == 0 or np.any(delta <= 0):
        return None
    n_rows, n_pairs = rows.shape[0], pair_a.size
    target = prior @ rows / prior.sum()
    growth = np.exp(eps)
    p, q = rows[pair_a], rows[pair_b]
    c = np.broadcast_to(target, p.shape)
    levels = [_hockey(p, q, growth), _hockey(q, p, growth)]
    spreads = [np.maximum(_hockey(c, q, growth), _hockey(p, c, growth)),
               np.maximum(_hockey(c, p, growth), _hockey(q, c, growth))]
    k = np.arange(n_pairs)
    s_col = n_rows + k
    rows_i, cols_i, vals_i, rhs = [], [], [], []
    for block, sign in enumerate((1.0, -1.0)):  # s ≥ ±(t_a − t_b)
        rows_i += [block * n_pairs + k] * 3
        cols_i += [pair_a, pair_b, s_col]
        vals_i += [np.full(n_pairs, sign), np.full(n_pairs, -sign), -np.ones(n_pairs)]
        rhs.append(np.zeros(n_pairs))
    for d, (h, spread) in enumerate(zip(levels, spreads, strict=True)):  # the levels, each direction
        rows_i += [(2 + d) * n_pairs + k] * 3
        cols_i += [pair_a, pair_b, s_col]
        vals_i += [-h / 2, -h / 2, spread]
        rhs.append(delta * (1.0 - MARGIN) - h)
    entries = (np.concatenate(vals_i), (np.concatenate(rows_i), np.concatenate(cols_i)))
    matrix = scipy.sparse.csr_array(entries, shape=(4 * n_pairs, n_rows + n_pairs))
    added = np.sum(cost * (target[None, :] - rows), axis=1)
    objective = np.concatenate([added, np.zeros(n_pairs)])
    bounds = [(0.0, 1.0)] * n_rows + [(0.0, None)] * n_pairs
    res = scipy.optimize.linprog(objective, A_ub=matrix, b_ub=np.concatenate(rhs), bounds=bounds,
                                 method="highs")
    if res.status != 0 or res.x is None:
        return None
    t = np.clip(res.x[:n_rows], 0.0, 1.0)
    return (1.0 - t)[:, None] * rows + t[:, None] * target[None, :]
