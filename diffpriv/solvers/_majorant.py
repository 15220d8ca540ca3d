"""The majorant polish: a table made feasible for pure pair bounds by raising entries.

When every constraint of a problem is a pure pair bound (``ldp``, ``xdp``: ``A[r_a, y] ≤ e^{ε}
A[r_b, y]``), each output column must be ``ε``-Lipschitz in log space along the comparisons, and
the smallest such majorant of a column is a shortest-path computation. First-order tables
violate these bounds most at their smallest entries, far from the true value, where the
certifier's uniform mixing would need a large weight; raising those entries instead costs
little. :mod:`._polish` applies it after its active-set projection.
"""

from __future__ import annotations

import numpy as np

from diffpriv.problems._problem import Problem

__all__ = ["majorant"]


MAJORANT_MARGINS, MAJORANT_ROUNDS, MAJORANT_WORK = (1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2), 8, 5 * 10**7
""":func:`majorant`: the margins it tries in turn (it raises to budgets ``ε_tight (1 − margin)``),
its rounds of raising and renormalising per margin, and the most entry updates (comparisons ×
outputs) of one sweep it takes on. The smallest margin that works is used: raising to
``ε(1 − m)`` costs about ``m·ε`` of the loss per binding chain (a table already within 10^-12 of
its budgets, as PDHG's polished k-ary randomized response, keeps its loss to 10^-7)."""


def majorant(problem: Problem, rows: np.ndarray) -> np.ndarray | None:
    """For a problem whose every constraint is a pure pair bound (``ldp``, ``xdp``: ``A[r_a, y] ≤
    e^{ε} A[r_b, y]``, δ = 0), the table made feasible by raising entries, not by mixing.

    In log space each output column must be ``ε``-Lipschitz along the comparisons; the smallest
    such majorant of ``log A[·, y]`` is ``max_{r'} (log A[r', y] − dist_ε(r', r))`` (Bellman–Ford
    sweeps of ``log A[r_b] ← max(log A[r_b], log A[r_a] − ε')``, and the reverse unless directed),
    at budgets ``ε' = ε_tight (1 − margin)``. Renormalising the rows then changes each ratio by
    the ratio of two row sums, which the margin absorbs once those sums are close; the raise and
    renormalise are repeated up to :data:`MAJORANT_ROUNDS` times, and with the next of
    :data:`MAJORANT_MARGINS` if the table still violates a bound. First-order tables violate the
    ratio bounds most at their smallest entries (far from the true value), where the certifier's
    uniform mixing needs a large weight (geo-indistinguishability on a 12×12 grid:
    ``benchmarks/polish_geo.py``). ``rows``: ``[R, Y]``. Returns
    the raised rows (at the largest margin if none gives a feasible table: the caller compares
    violations), or ``None`` when the problem has other constraints, an entry outside the support
    would have to rise, or the sweeps are too large or do not settle."""
    raised = None
    for margin in MAJORANT_MARGINS:
        raised = _raise(problem, rows, margin)
        if raised is None or raised[1] <= 0:
            break
    return None if raised is None else raised[0]


def _raise(problem: Problem, rows: np.ndarray, margin: float):
    """:func:`majorant` at one margin: ``(rows, largest violation)``, or ``None``."""
    from diffpriv.problems._blocks import PairBlock
    from diffpriv.solvers._rows import tighten_eps

    ns, nx, ny = problem.shape
    if problem.objective.transport:  # the rows carry the transport plans too, tied by equalities
        return None
    parts = []
    for block in problem.blocks():
        if not (isinstance(block, PairBlock) and block.linear and block.delta == 0):
            return None
        ra, rb = block.rows(nx)
        eps = tighten_eps(np.broadcast_to(np.asarray(block.eps, np.float64), ra.shape))
        parts.append((ra, rb, eps, block.directed))
    if not parts or sum(len(p[0]) for p in parts) * (2 * ny) > MAJORANT_WORK:
        return None
    mask = problem.support_mask().reshape(-1, ny)
    with np.errstate(divide="ignore"):
        log_a = np.log(rows)
    for _ in range(MAJORANT_ROUNDS):
        for _sweep in range(rows.shape[0] + 1):
            before = log_a.copy()
            for ra, rb, eps, directed in parts:
                lower = eps[:, None] * (1.0 - margin)
                np.maximum.at(log_a, rb, log_a[ra] - lower)
                if not directed:
                    np.maximum.at(log_a, ra, log_a[rb] - lower)
            if np.array_equal(before, log_a):
                break
        else:
            return None
        a = np.exp(log_a)
        if np.any(a[~mask] > 0):
            return None
        a /= a.sum(axis=1, keepdims=True)
        with np.errstate(divide="ignore"):
            log_a = np.log(a)
        viol = _pair_violation(parts, log_a)
        if viol <= 0:
            break
    return a, viol


def _pair_violation(parts, log_a) -> float:
    """The largest ``log A[r_a] − log A[r_b] − ε`` (and reverse) at the tightened budgets: ``+∞``
    where a positive entry faces a zero, ``−∞`` where the first entry is zero."""
    top = -np.inf
    for ra, rb, eps, directed in parts:
        tight = eps[:, None]
        for x, y in ((ra, rb), (rb, ra))[:1 if directed else 2]:
            lx, ly = log_a[x], log_a[y]
            both = np.isfinite(lx) & np.isfinite(ly)
            gap = np.where(np.isfinite(lx), np.inf, -np.inf)
            np.subtract(lx - tight, ly, out=gap, where=both)
            top = max(top, float(np.max(gap, initial=-np.inf)))
    return top
