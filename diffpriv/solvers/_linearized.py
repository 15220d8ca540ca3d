"""A lower bound on a convex design problem from one linear program: its nonlinear constraints
replaced by their tangent planes at a table.

A conic solver's reported optimum is not a bound (Clarabel's is within its tolerance, ~10⁻⁸
relative, on either side: a 6×6 KL-DistP grid's was 7·10⁻⁹ above the certified loss of its own
table). This module turns *any* table into a bound that weak duality certifies:

* every f-divergence term ``Σ_y Q_y f(P_y / Q_y) ≤ b`` (KL, χ², Hellinger, Rényi, TV in their
  f-forms) is jointly convex and positively homogeneous, so at every ratio ``s > 0`` its
  tangent plane ``a·P + c·Q`` with ``(a, c) = (f'(s), f(s) − s f'(s))`` lies below it for every
  pair of laws: the cut LP of column-and-cut generation over every entry, with tangents about
  the table's own ratios per output, is a relaxation (:func:`._cuts.bound_at`);
* every Wasserstein term ``W_μ(P, Q) ≤ ε`` is ``OT(P, Q) ≤ ε^μ`` for the cost ``d^μ``, and every
  pair of potentials ``(f, g)`` feasible for that cost gives ``⟨f, P⟩ + ⟨g, Q⟩ ≤ OT(P, Q)``
  (Kantorovich duality; in units of the largest distance, so no power overflows): one row per
  term beside the problem's linear rows is a relaxation.

The bound stated is each relaxation's weak-duality bound at HiGHS's multipliers, recomputed in
float64 with the LP path's outward margin (:func:`._lp._dual_bound`), valid whatever their
accuracy. At an optimal table the relaxation is tight: the problem's KKT multipliers are
feasible multipliers of the linearised problem, so its optimum equals the problem's; a conic
solver's table is only near-optimal, hence several tangents about each ratio.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse

from diffpriv.problems._problem import Problem

__all__ = ["linearized_bound"]


def _potential_rows(problem: Problem, rows_of_table: np.ndarray, var: np.ndarray):
    """The same for Wasserstein terms: each term's optimal potentials at the table's laws (for
    the cost ``(d / D)^μ``), or None when a nonlinear block is not Wasserstein."""
    from diffpriv.measures._transport import wasserstein
    from diffpriv.solvers._divergence import divergence_data
    from diffpriv.solvers._transport_cuts import _terms

    _, kinds = divergence_data(problem)
    if not kinds or any(k[0] != "wasserstein" for k in kinds):
        return None
    terms = _terms(problem)
    wp, wq = terms.wp.toarray(), terms.wq.toarray()
    p, q = wp @ rows_of_table, wq @ rows_of_table
    n_terms, n_out = p.shape
    f, g = np.zeros((n_terms, n_out)), np.zeros((n_terms, n_out))
    budget = np.zeros(n_terms)
    units = [ground / scale for ground, scale in zip(terms.grounds, terms.scales, strict=True)]
    for k in range(n_terms):
        group = terms.group[k]
        order, scale = terms.orders[group], terms.scales[group]
        with np.errstate(over="ignore"):
            budget[k] = min((terms.eps[k] / scale) ** order, 2.0)  # no cost exceeds 1
        if p[k].sum() > 0 and q[k].sum() > 0:
            res = wasserstein(p[k] / p[k].sum(), q[k] / q[k].sum(), units[group], order)
            if res.dual is not None:
                f[k], g[k] = res.dual
    return _rows(wp, wq, f, g, var), budget


def _rows(wp: np.ndarray, wq: np.ndarray, a: np.ndarray, c: np.ndarray, var: np.ndarray):
    """``[T, n_table]`` sparse: term ``k``'s coefficient on entry ``(r, y)`` is
    ``wp[k, r]·a[k, y] + wq[k, r]·c[k, y]`` (``var [R, Y]``: the entry's variable, −1 off the
    support)."""
    n_table = int(var.max()) + 1 if var.size else 0
    parts = []
    for w, coef in ((wp, a), (wq, c)):
        k, r = np.nonzero(w)
        cols = var[r]  # [nnz, Y]
        vals = w[k, r][:, None] * coef[k]  # [nnz, Y]
        keep = cols >= 0
        parts.append(scipy.sparse.coo_array(
            (vals[keep], (np.broadcast_to(k[:, None], cols.shape)[keep], cols[keep])),
            shape=(a.shape[0], n_table)))
    return (parts[0] + parts[1]).tocsr()


def linearized_bound(problem: Problem, table: np.ndarray, value: float, gap_tol: float,
                     seconds: float = 10.0) -> float | None:
    """A lower bound on ``problem``'s optimum from its tangent planes or potentials at a
    near-optimal ``table`` of objective ``value`` (module docstring); None where there is no such
    relaxation (Wasserstein beside f-divergence blocks, or an f-divergence under the transport
    loss) or HiGHS solves none: nothing is then stated. ``seconds`` bounds the f-divergences'
    Kelley rounds (:func:`._cuts.bound_at`)."""
    from diffpriv.solvers._convex import ConvexSolveError, _support
    from diffpriv.solvers._cuts import applies, bound_at
    from diffpriv.solvers._divergence import divergence_data
    from diffpriv.solvers._lp import _build, _dual_bound, _solve_highspy

    try:
        _, kinds = divergence_data(problem)
    except ValueError:  # a one-way max-divergence: no relaxation here
        return None
    if applies(problem, kinds):
        bound = bound_at(problem, table, value, gap_tol, seconds=seconds)
        return bound if np.isfinite(bound) else None
    blocks = problem.blocks()
    try:
        mask = _support(problem, blocks)  # entries every feasible table leaves at 0 are left out
    except ConvexSolveError:
        return None
    n_prof, n_in, n_out = problem.shape
    var = np.full(mask.shape, -1, np.int64)
    var[mask] = np.arange(int(mask.sum()))
    var = var.reshape(n_prof * n_in, n_out)
    extra = _potential_rows(problem, np.asarray(table, np.float64).reshape(n_prof * n_in, n_out), var)
    if extra is None:
        return None
    lp = _build(problem, tuple(b for b in blocks if b.linear), mask=mask)
    rows, rhs = extra
    rows = scipy.sparse.csr_array((rows.data, rows.indices, rows.indptr), shape=(rows.shape[0], lp.c.size))
    a_ub = rows if lp.a_ub is None else scipy.sparse.vstack([lp.a_ub, rows]).tocsr()
    b_ub = rhs if lp.b_ub is None else np.concatenate([lp.b_ub, rhs])
    lp = lp._replace(a_ub=a_ub, b_ub=b_ub)
    res, _ = _solve_highspy(lp, {}, None)
    if res.status != 0:
        return None
    return _dual_bound(lp, res.ineqlin.marginals, res.eqlin.marginals)
