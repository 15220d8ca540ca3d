"""What both cut solvers share (:mod:`._cuts` for f-divergences, :mod:`._transport_cuts` for
Wasserstein constraints): the HiGHS model over a working support of table entries, the support
they start from, and the entries that price in.

**Columns.** Optimal tables are sparse (an LP-like objective puts each row's mass on few
outputs), so the LP holds only the entries of a working support: at first each row's least-loss
output and the best output for every row (a table sending every row there has equal laws, so
meets every budget). Entries whose reduced cost at the LP's multipliers lies below their row's
are added, at most :data:`COLUMNS_PER_ROW` per row and round.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse

from diffpriv.problems._problem import Problem
from diffpriv.solvers._highs import quiet_highs

__all__ = ["COLUMNS_PER_ROW", "CutsSolveError", "HighsModel", "new_columns", "start_support"]

COLUMNS_PER_ROW = 8
"""At most this many entries of one row join the support per round (the least reduced costs). On
KL DistP on a 20×20 grid 2, 4, 8 and 16 took 89, 50, 28 and 20 rounds, 44, 33, 17 and 22 s."""

_TOLERANCE = 1e-9  # HiGHS's primal and dual feasibility tolerances


class CutsSolveError(RuntimeError):
    """HiGHS found no optimum of a cut model (the message carries its status): the problem may be
    infeasible, or the LP numerically hard."""


def start_support(problem: Problem) -> np.ndarray:
    """Each row's least-loss allowed output, and the output of least expected loss over every
    row that allows it (``[S, X, Y]`` mask)."""
    mask = problem.support_mask()
    loss = np.where(mask, problem.loss[None], np.inf)
    support = np.zeros_like(mask)
    s, x = np.indices(mask.shape[:2])
    support[s, x, np.argmin(loss, axis=2)] = True
    weight = problem.prior + 1e-12
    common = np.einsum("sx,sxy->y", weight, np.where(mask, problem.loss[None], 0.0))
    allowed = mask.all(axis=(0, 1))
    if allowed.any():
        support[:, :, int(np.argmin(np.where(allowed, common, np.inf)))] = True
    return support & mask


class HighsModel:
    """What both cut models share: a HiGHS model (quiet, feasibility tolerances
    :data:`_TOLERANCE`) over the full LP ``full``'s table entries (``entry_row``, ``entry_out``
    of the problem's support) and the means to add rows and columns."""

    def __init__(self, problem: Problem, full, terms):
        import highspy

        self.h = h = quiet_highs()
        h.setOptionValue("primal_feasibility_tolerance", _TOLERANCE)
        h.setOptionValue("dual_feasibility_tolerance", _TOLERANCE)
        self.inf = highspy.kHighsInf
        self.terms, self.full = terms, full
        self.n_out = problem.shape[2]
        mask = problem.support_mask()
        self.entry_row, self.entry_out = np.nonzero(mask.reshape(-1, self.n_out))
        self.n_table = self.entry_row.size

    def _add_rows(self, lower, upper, block) -> np.ndarray:
        """Adds rows; returns their indices."""
        block = scipy.sparse.csr_array(block)
        first = self.h.getNumRow()
        starts = block.indptr[:-1].astype(np.int32)
        self._check(self.h.addRows(lower.size, lower, upper, block.nnz, starts,
                                   block.indices.astype(np.int32), block.data.astype(np.float64)))
        return first + np.arange(lower.size)

    def _add_cols(self, cost, lower, upper, block) -> np.ndarray:
        """Adds columns; returns their indices."""
        block = scipy.sparse.csc_array(block)
        first = self.h.getNumCol()
        starts = block.indptr[:-1].astype(np.int32)
        self._check(self.h.addCols(cost.size, cost, lower, upper, block.nnz, starts,
                                   block.indices.astype(np.int32), block.data.astype(np.float64)))
        return first + np.arange(cost.size)

    @staticmethod
    def _check(status) -> None:
        import highspy

        if status == highspy.HighsStatus.kError:
            raise CutsSolveError("optimizer: HiGHS refused a change to the cut model (a coefficient "
                                 "beyond its range, such as e^ε for a large ε)")


def new_columns(support_rows: np.ndarray, reduced: np.ndarray) -> np.ndarray:
    """Flat indices (``row · Y + y``) of up to :data:`COLUMNS_PER_ROW` entries per row whose
    reduced cost lies below the row's least one on the support."""
    inside = np.where(support_rows, reduced, np.inf).min(axis=1, keepdims=True)
    scale = np.maximum(np.abs(inside), 1.0)
    cand = (~support_rows) & np.isfinite(reduced) & (reduced < inside - 1e-9 * scale)
    if not cand.any():
        return np.zeros(0, np.int64)
    score = np.where(cand, reduced, np.inf)
    k = min(COLUMNS_PER_ROW, score.shape[1])
    best = np.argpartition(score, k - 1, axis=1)[:, :k]
    r = np.repeat(np.arange(score.shape[0]), k)
    pick = best.reshape(-1)
    ok = np.isfinite(score[r, pick])
    return r[ok] * score.shape[1] + pick[ok]
