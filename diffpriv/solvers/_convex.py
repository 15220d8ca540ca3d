"""The convex reference solver: a design problem with divergence budgets as a conic program.

The yardstick for problems the LP reference (:mod:`diffpriv.solvers._lp`) refuses: every
divergence of :mod:`diffpriv.measures._divergences` bounds a jointly convex function of the
two output laws, and each law is affine in the table, so the design problem is convex. It is
built with cvxpy (a test and benchmark extra, imported on first use) and solved by an interior
point method, CLARABEL unless the caller names another solver.

Variables: ``A[s, x, y] ≥ 0`` where the support mask allows it (0 elsewhere), with
``Σ_y A[s, x, y] = 1``. Per block of ``problem.blocks()`` and comparison ``k``, the laws
``P_k``, ``Q_k`` are sparse linear maps of ``A`` (:class:`PairBlock`: the rows
``block.rows(n_in)``; :class:`MixtureBlock`: ``Σ_x (wa[k, x] / Σ wa[k]) A[sa_k, x]`` and the
same with ``sb``, ``wb``). An output that neither law can use (support mask) is left out. Where
only ``P`` can use an output and ``D(P‖Q)`` is ``+∞`` there (KL, χ², Rényi ``α > 1``, max), every
feasible table has those entries at 0: they are removed from the variables up front (repeatedly,
as removing them can make more laws 0), so the table is exactly 0 there rather than at the
solver's tolerance, which the certifier would read as an infinite level; a row left with no
output is reported infeasible. With ``ε_k = block.eps[k]`` (``ε·W`` for extended DistP),
``D(P_k‖Q_k) ≤ ε_k`` and, unless ``block.directed``, ``D(Q_k‖P_k) ≤ ε_k`` (one direction for
the symmetric TV, Hellinger and Rényi of order ½):

==============  ========================================================  ==================
divergence      constraint                                                cone
==============  ========================================================  ==================
``max``         ``P[y] − e^ε Q[y] ≤ 0`` (the LP's rows)                   linear
``hockey``      ``P[y] − e^ε Q[y] ≤ z[y]``, ``z ≥ 0``, ``Σ_y z ≤ δ``      linear
``kl``          ``Σ_y rel_entr(P[y], Q[y]) ≤ ε``                          exponential
``reverse_kl``  the same with ``P`` and ``Q`` swapped                     exponential
``tv``          ``½ Σ_y |P[y] − Q[y]| ≤ ε``                               linear
``chi2``        ``Σ_y t[y] ≤ ε``, ``(P − Q)² ≤ t·Q`` per output           second-order
``hellinger``   ``Σ_y r[y] ≥ 1 − ε``, ``r² ≤ P·Q`` per output             second-order
``renyi`` α>1   ``Σ_y t[y] ≤ e^{(α−1)ε}``, ``P ≤ t^{1/α} Q^{1−1/α}``      power (3-D, 1/α)
``renyi`` α<1   ``Σ_y r[y] ≥ e^{(α−1)ε}``, ``|r| ≤ P^α Q^{1−α}``          power (3-D, α)
==============  ========================================================  ==================

(the chi-square cone as ``‖(2(P − Q), t − Q)‖ ≤ t + Q``, the Hellinger one as ``‖(2r, P − Q)‖ ≤
P + Q``). Hellinger uses ``½ Σ (√P − √Q)² = 1 − Σ √(PQ)`` and Rényi ``Σ P = 1``: both hold
because every law here sums to 1 by the row constraints. An output only ``Q`` can use adds
``Q[y]`` to the chi-square sum and nothing elsewhere. Budgets that constrain nothing are left
out (Hellinger with ``ε ≥ 1``, a Rényi bound ``e^{(α−1)ε}`` beyond float64). ``cp.geo_mean``
with ``axis`` is avoided on purpose: in cvxpy 1.9.3 its canonicalisation returned a strictly
suboptimal point reported "optimal" on a 4-output test; the explicit cones above do not.
A Wasserstein budget (``wasserstein``) is linear: per comparison a coupling ``π_k ≥ 0`` of
``P_k`` and ``Q_k`` with ``⟨π_k, d^α⟩ ≤ ε_k^α``.

Objectives as in the LP: ``Σ π L A`` (expected); an epigraph ``t ≥ 0`` over the row losses of
rows with ``π > 0`` (worst) or over their weighted entries ``L[x, y] A[s, x, y]`` with ``L ≠ 0``
(entry); ``Σ_k shares[k] Σ L[x, y] γ_k[x, y]`` over one plan ``γ_k ≥ 0`` per law of
:meth:`~diffpriv.problems._objectives.TransportLoss.transport_laws` (``rows [K, S, X]``,
``inputs [K, X]``, ``shares [K]``; ``γ_k``: the inputs with ``inputs[k, x] > 0`` by outputs)
with ``Σ_y γ_k[x, y] = inputs[k, x]`` and ``Σ_x γ_k[x, y] = Σ_{s,x} rows[k, s, x] A[s, x, y]``
(transport; ``laws = "prior"``: one law, ``rows = π``). Any objective goes with any
constraint.

Tolerances: CLARABEL's defaults (relative and absolute gap and feasibility ``1e-8``), which
the caller can override through ``options``; only an ``"optimal"`` status is accepted. The
returned table is the solver's point clipped at 0 and renormalised per row, so it may violate a
budget by about the solver's tolerance: :func:`~diffpriv.certify` repairs that with a tiny
mixing weight (``repair_t`` at most ``6e-8`` on the test problems; SCS, much less accurate,
needed ``2e-4`` on one of them).
"""

from __future__ import annotations

import time
import warnings
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse

from diffpriv.problems._blocks import Block
from diffpriv.problems._checks import SpecError
from diffpriv.problems._objectives import LINEAR
from diffpriv.problems._problem import Problem
from diffpriv.solvers._lp import _sides

__all__ = ["ConvexResult", "ConvexSolveError", "solve_convex"]

_SYMMETRIC = ("tv", "hellinger")
"""Divergences with ``D(P‖Q) = D(Q‖P)``: one direction settles both (and Rényi of order ½)."""

_HANDLED = "'expected', 'worst', 'entry' and 'transport'"
"""The objectives :func:`solve_convex` handles, as its error message lists them."""


class ConvexSolveError(RuntimeError):
    """The conic solver did not return an optimal solution; the message carries its status."""


class ConvexResult(NamedTuple):
    """The optimum of a convex design problem.

    Attributes:
      table: ``[n_profiles, n_in, n_out]`` float64 row-stochastic table (the solver's point,
        clipped at 0 and renormalised per row; zero outside the support).
      value: the optimal objective value reported by the solver.
      status: cvxpy's status (always ``"optimal"``: anything else raises).
      seconds: wall-clock time of building and solving the program.
      solver: the name of the solver that ran.
      violation: the largest violation of a constraint by the solver's point (cvxpy's
        ``violation()``, in the constraints' own units; 0 when every one holds).
    """

    table: np.ndarray
    value: float
    status: str
    seconds: float
    solver: str
    violation: float = 0.0


def _import_cvxpy():
    try:
        import cvxpy
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("solve_convex needs cvxpy: pip install cvxpy "
                          "(or pip install -e '.[test]')") from None
    return cvxpy


def _law_matrix(side, var: np.ndarray, size: int, n_table: int) -> scipy.sparse.csr_array:
    """``[size · n_out, n_table]``: row ``k · n_out + y`` gives ``P_k[y]`` from the table's
    variables, for one side ``(k, row, weight)`` of a block (``var[r, y]``: the variable of
    ``A[r, y]``, −1 outside the support)."""
    k, r, w = side
    n_out = var.shape[1]
    col = var[r, :]
    row = k[:, None] * n_out + np.arange(n_out)
    val = np.broadcast_to(np.asarray(w, np.float64)[:, None], col.shape)
    keep = col >= 0
    m = scipy.sparse.coo_array((val[keep], (row[keep], col[keep])), shape=(size * n_out, n_table))
    m = m.tocsr()  # sums duplicates
    m.eliminate_zeros()
    return m


def _used(m: scipy.sparse.csr_array) -> np.ndarray:
    """``[rows]`` bool: the row depends on some variable (else it is identically 0)."""
    return np.diff(m.indptr) > 0


def _aggregate(flat: np.ndarray, n_out: int, size: int) -> scipy.sparse.csr_array:
    """``[size, flat.size]`` sums the selected entries ``k · n_out + y`` per comparison ``k``."""
    return scipy.sparse.coo_array(
        (np.ones(flat.size), (flat // n_out, np.arange(flat.size))), shape=(size, flat.size)
    ).tocsr()


def _divergence_rows(cp, divergence: str, alpha: float | None, a, b, v, eps: np.ndarray, n_out: int) -> list:
    """Constraints ``D(P_k‖Q_k) ≤ eps[k]`` for all ``k``, ``P = a @ v``, ``Q = b @ v`` (sparse
    ``[K · n_out, n_table]`` law matrices)."""
    if divergence == "reverse_kl":
        a, b, divergence = b, a, "kl"
    size = eps.size
    pa, pb = _used(a), _used(b)
    both = np.flatnonzero(pa & pb)
    only_b = np.flatnonzero(~pa & pb)
    out: list = []

    def law(m, rows):
        return m[rows] @ v

    def bound(total, rhs, sense: str, keep=None):
        """``total_k ≤ rhs_k`` (or ``≥``) for the comparisons in ``keep`` (default all)."""
        keep = np.arange(size) if keep is None else np.flatnonzero(keep)
        if keep.size == 0:
            return
        lhs = total if keep.size == size else total[keep]
        out.append(lhs <= rhs[keep] if sense == "<=" else lhs >= rhs[keep])

    # Outputs only P can use: for KL, χ² and Rényi α > 1 (where D = +∞) _support has removed
    # them; for TV they count |P|, for χ² (only Q) Q, elsewhere nothing.
    if divergence == "tv":
        rows = np.flatnonzero(pa | pb)
        if rows.size:
            bound(0.5 * (_aggregate(rows, n_out, size) @ cp.abs(law(a, rows) - law(b, rows))), eps, "<=")
        return out
    if divergence == "kl":
        if both.size:
            bound(_aggregate(both, n_out, size) @ cp.rel_entr(law(a, both), law(b, both)), eps, "<=")
        return out
    if divergence == "chi2":
        terms = []
        if both.size:
            P, Q = law(a, both), law(b, both)
            t = cp.Variable(both.size, nonneg=True)
            out.append(cp.SOC(t + Q, cp.vstack([2.0 * (P - Q), t - Q]), axis=0))  # (P − Q)² ≤ t·Q
            terms.append(_aggregate(both, n_out, size) @ t)
        if only_b.size:  # (0 − Q)² / Q = Q
            terms.append(_aggregate(only_b, n_out, size) @ law(b, only_b))
        if terms:
            bound(sum(terms[1:], terms[0]), eps, "<=")
        return out
    if divergence == "hellinger":
        floor = 1.0 - eps
        if both.size:
            P, Q = law(a, both), law(b, both)
            r = cp.Variable(both.size, nonneg=True)
            out.append(cp.SOC(P + Q, cp.vstack([2.0 * r, P - Q]), axis=0))  # r² ≤ P·Q
            bound(_aggregate(both, n_out, size) @ r, floor, ">=", keep=floor > 0)
        elif np.any(floor > 0):
            out.append(cp.Constant(np.zeros(int((floor > 0).sum()))) >= floor[floor > 0])  # infeasible
        return out
    if divergence == "renyi":
        with np.errstate(over="ignore"):
            level = np.exp((alpha - 1.0) * eps)  # Σ P^α Q^{1−α} against this
        agg = _aggregate(both, n_out, size) if both.size else None
        if alpha > 1:
            finite = np.isfinite(level)
            if both.size and finite.any():
                P, Q = law(a, both), law(b, both)
                t = cp.Variable(both.size, nonneg=True)
                out.append(cp.PowCone3D(t, Q, P, 1.0 / alpha))  # t^{1/α} Q^{1−1/α} ≥ |P|
                bound(agg @ t, level, "<=", keep=finite)
            return out
        if both.size:
            P, Q = law(a, both), law(b, both)
            r = cp.Variable(both.size)
            out.append(cp.PowCone3D(P, Q, r, alpha))  # P^α Q^{1−α} ≥ |r|
            bound(agg @ r, level, ">=")
        else:
            out.append(cp.Constant(np.zeros(size)) >= level)  # disjoint supports: +∞
        return out
    raise ValueError(f"solve_convex: unsupported divergence {divergence!r}")


def _infinite_directions(block: Block) -> tuple[int, ...]:
    """The directions ``d`` (``0``: ``D(P‖Q)``, ``1``: ``D(Q‖P)``) bounded in a divergence that is
    ``+∞`` where the first law is positive and the second 0."""
    name, alpha = block.divergence, block.alpha
    if name in ("kl", "chi2", "max") or (name == "renyi" and alpha > 1):
        return (0,) if block.directed else (0, 1)
    if name == "reverse_kl":  # KL(Q‖P): +∞ where Q > 0 = P
        return (1,) if block.directed else (1, 0)
    return ()


def _flat_vars(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """``var[s · n_in + x, y]``: the variable of ``A[s, x, y]`` (−1 outside ``mask``), and their count."""
    var = np.full(mask.shape, -1, dtype=np.int64)
    n_table = int(mask.sum())
    var[mask] = np.arange(n_table)
    return var.reshape(-1, mask.shape[-1]), n_table


def _support(problem: Problem, blocks: tuple[Block, ...]) -> np.ndarray:
    """The support mask less the entries every feasible table leaves at 0: where a law can be
    positive and the law it is compared with cannot, in a divergence that is ``+∞`` there, every
    entry of the first law at that output is 0. Removing them can make more laws 0 at an output,
    so this repeats until nothing changes. An interior point solver would leave those entries at
    about its tolerance instead of 0, which the certifier would read as an infinite level."""
    mask = problem.support_mask().copy()
    n_in = problem.shape[1]
    while True:
        var, n_table = _flat_vars(mask)
        forced = np.zeros(n_table, dtype=bool)
        for block in blocks:
            directions = _infinite_directions(block)
            if not directions:
                continue
            laws = [_law_matrix(side, var, block.size, n_table) for side in _sides(block, n_in)]
            for d in directions:
                a, b = laws[d], laws[1 - d]
                rows = np.flatnonzero(_used(a) & ~_used(b))
                forced[a[rows].indices] = True
        if not forced.any():
            return mask
        s, x, y = np.nonzero(mask)
        mask[s[forced], x[forced], y[forced]] = False
        if not mask.any(axis=-1).all():
            s, x = np.argwhere(~mask.any(axis=-1))[0]
            raise ConvexSolveError(
                f"the problem is infeasible: its budgets leave input {problem.inputs.labels[x]!r} of "
                f"profile {problem.profiles[s]!r} no output (laws with disjoint supports have an "
                f"infinite divergence)")


def _block_constraints(cp, block: Block, v, var: np.ndarray, n_in: int, n_table: int) -> list:
    """The constraints of one block on the table's variables ``v``."""
    n_out, size = var.shape[1], block.size
    mp, mq = (_law_matrix(side, var, size, n_table) for side in _sides(block, n_in))
    eps = np.asarray(block.eps, np.float64)
    name = block.divergence
    if name in ("max", "hockey_stick"):
        with np.errstate(over="ignore"):
            growth = np.exp(eps)
        if not np.all(np.isfinite(growth)):
            raise ConvexSolveError(f"solve_convex: e^epsilon overflows for epsilon = {eps.max():g}")
        scale = scipy.sparse.diags_array(np.repeat(growth, n_out))
        out = []
        for p, q in ((mp, mq),) if block.directed else ((mp, mq), (mq, mp)):
            rows = (p - scale @ q).tocsr()
            rows.eliminate_zeros()
            # Rows with no positive coefficient hold for every non-negative table (as in the LP).
            positive = np.flatnonzero(np.bincount(
                np.repeat(np.arange(rows.shape[0]), np.diff(rows.indptr))[rows.data > 0],
                minlength=rows.shape[0]))
            if positive.size == 0:
                continue
            lhs = rows[positive] @ v
            if name == "max":
                out.append(lhs <= 0)
            else:
                z = cp.Variable(positive.size, nonneg=True)
                out += [lhs <= z, _aggregate(positive, n_out, size) @ z <= block.delta]
        return out
    if name == "wasserstein":
        return _wasserstein_rows(cp, block, mp, mq, v, eps, n_out)
    if name not in ("kl", "reverse_kl", "tv", "chi2", "hellinger", "renyi"):
        raise ValueError(f"solve_convex: unsupported divergence {name!r}")
    symmetric = name in _SYMMETRIC or (name == "renyi" and block.alpha == 0.5)
    out = _divergence_rows(cp, name, block.alpha, mp, mq, v, eps, n_out)
    if not (block.directed or symmetric):
        out += _divergence_rows(cp, name, block.alpha, mq, mp, v, eps, n_out)
    return out


def _wasserstein_rows(cp, block: Block, mp, mq, v, eps: np.ndarray, n_out: int) -> list:
    """``W_μ(P_k, Q_k) ≤ ε_k`` as a coupling per comparison: ``π_k ≥ 0`` with row sums ``P_k``,
    column sums ``Q_k`` and ``⟨π_k, d^μ⟩ ≤ ε_k^μ`` (linear in the table and the couplings)."""
    # In units of the largest distance D where D^μ would overflow or underflow (order 1,000 over
    # distances of 10): ``(d / D)^μ ≤ 1`` and ``(ε / D)^μ``, capped at 2 (above 1 binds nothing).
    from diffpriv.solvers._divergence import _largest

    ground = np.asarray(block.ground, np.float64)
    top = _largest(block)
    size, cost = eps.size, (ground / top) ** block.alpha
    pi = cp.Variable(size * n_out * n_out, nonneg=True)  # π[k, i, j] flattened
    k, i, j = (a.ravel() for a in np.meshgrid(np.arange(size), np.arange(n_out), np.arange(n_out),
                                              indexing="ij"))
    col = np.arange(pi.size)
    rows = scipy.sparse.coo_array((np.ones(pi.size), (k * n_out + i, col)), shape=(size * n_out, pi.size))
    cols = scipy.sparse.coo_array((np.ones(pi.size), (k * n_out + j, col)), shape=(size * n_out, pi.size))
    total = scipy.sparse.coo_array((cost[i, j], (k, col)), shape=(size, pi.size))
    with np.errstate(over="ignore"):
        budget = (eps / top) ** block.alpha
        budget = np.minimum(budget, 2.0) if top != 1.0 else budget
    return [rows.tocsr() @ pi == mp @ v, cols.tocsr() @ pi == mq @ v, total.tocsr() @ pi <= budget]


def _objective(cp, problem: Problem, v, s, x, y) -> tuple[Any, list]:
    """The cvxpy objective expression and its epigraph (or transport plan) constraints."""
    epigraph = problem.objective.epigraph
    weights = problem.loss[x, y]
    if problem.objective.transport:
        return _transport(cp, problem, v, s, x, y)
    if not epigraph:
        return problem.prior[s, x] * weights @ v, []
    n_prof, n_in, n_out = problem.shape
    t = cp.Variable(nonneg=True)  # every row loss and entry is >= 0
    active = (problem.prior[s, x] > 0) & (weights != 0)
    if epigraph == "rows":
        flat = s * n_in + x
        rows, index = np.unique(flat[active], return_inverse=True)
        m = scipy.sparse.coo_array((weights[active], (index, np.flatnonzero(active))),
                                   shape=(rows.size, v.shape[0])).tocsr()
        return t, ([m @ v <= t] if rows.size else [])
    if epigraph == "entries":
        on = np.flatnonzero(active)
        return t, ([cp.multiply(weights[on], v[on]) <= t] if on.size else [])
    raise SpecError(f"objective: the convex reference handles {_HANDLED}, "
                    f"not {problem.objective.kind!r}")


def _transport(cp, problem: Problem, v, s, x, y) -> tuple[Any, list]:
    """``Σ_k shares[k] Σ L[x, y] γ_k[x, y]`` over plans ``γ_k [X_k, Y] ≥ 0`` (``X_k``: the inputs
    with ``inputs[k, x] > 0``) with row sums ``inputs[k]`` and column sums
    ``ν_k(A) = Σ_{s,x} rows[k,s,x] A[s,x,·]``, one per law of ``transport_laws``."""
    n_out = problem.shape[2]
    law_rows, inputs, shares = problem.objective.transport_laws(problem)
    costs, constraints = [], []
    for rows, lam, share in zip(law_rows, inputs, shares, strict=True):
        plan_x = np.flatnonzero(lam > 0)
        gamma = cp.Variable((plan_x.size, n_out), nonneg=True)
        weight = rows[s, x]
        on = np.flatnonzero(weight)
        law = scipy.sparse.coo_array((weight[on], (y[on], on)), shape=(n_out, v.shape[0])).tocsr()
        costs.append(share * cp.sum(cp.multiply(problem.loss[plan_x], gamma)))
        constraints += [cp.sum(gamma, axis=1) == lam[plan_x], cp.sum(gamma, axis=0) == law @ v]
    return cp.sum(cp.hstack(costs)) if len(costs) > 1 else costs[0], constraints


def solve_convex(
    problem: Problem, *, solver: str | None = None, verbose: bool = False, **options: Any
) -> ConvexResult:
    """Solves ``problem`` exactly as a conic program (cvxpy; CLARABEL by default).

    Args:
      problem: the design problem: any constraint (max-divergence, hockey-stick and the
        divergences ``kl``, ``reverse_kl``, ``tv``, ``chi2``, ``hellinger``, ``renyi``, in one
        or both directions), Wasserstein budgets; objective ``"expected"``, ``"worst"``,
        ``"entry"`` or ``"transport"``.
      solver: a cvxpy solver name (default ``"CLARABEL"``; it must handle the cones the
        problem's divergences need, e.g. ``"SCS"``; ``"HIGHS"`` only for linear problems).
      verbose: print the solver's log.
      **options: passed to the solver through ``cvxpy.Problem.solve`` (tolerances, ...).

    Returns:
      A :class:`ConvexResult`: the optimal table and the solver's optimal value.

    Raises:
      ImportError: cvxpy is not installed.
      SpecError: the objective is not one of the four above (one line).
      ValueError: a block names a divergence not handled here.
      ConvexSolveError: the solver stopped without an optimal solution (infeasible,
        inaccurate, ...), or ``e^ε`` overflows float64 for a max-divergence or hockey-stick
        budget.

    Example:
      >>> from diffpriv.problems._known import k_rr_problem
      >>> round(solve_convex(k_rr_problem(2, 0.0)).value, 6)
      0.5
    """
    if not isinstance(problem.objective, LINEAR):
        raise SpecError(f"objective: the convex reference handles {_HANDLED}, "
                        f"not {problem.objective.kind!r}")
    cp = _import_cvxpy()
    start = time.perf_counter()
    n_prof, n_in, n_out = problem.shape
    blocks = problem.blocks()
    mask = _support(problem, blocks)
    s, x, y = np.nonzero(mask)
    var, n_table = _flat_vars(mask)

    v = cp.Variable(n_table, nonneg=True)
    rows = scipy.sparse.coo_array((np.ones(n_table), (s * n_in + x, np.arange(n_table))),
                                  shape=(n_prof * n_in, n_table)).tocsr()
    constraints = [rows @ v == 1]
    for block in blocks:
        constraints += _block_constraints(cp, block, v, var, n_in, n_table)
    objective, epigraph = _objective(cp, problem, v, s, x, y)
    program = cp.Problem(cp.Minimize(objective), constraints + epigraph)
    name = solver or "CLARABEL"
    try:
        with warnings.catch_warnings():  # an inaccurate solution is refused below, by its status
            warnings.filterwarnings("ignore", message="Solution may be inaccurate", category=UserWarning)
            program.solve(solver=name, verbose=verbose, **options)
    except cp.error.SolverError as e:  # e.g. Clarabel failing outright on a 16×16 KL grid
        raise ConvexSolveError(f"{name} failed on the convex program ({e})") from e
    if program.status != cp.OPTIMAL or v.value is None:
        raise ConvexSolveError(f"{name} did not solve the convex program (status {program.status!r})")

    table = np.zeros(problem.shape)
    table[mask] = np.clip(v.value, 0.0, None)
    table /= table.sum(axis=-1, keepdims=True)
    violation = max((float(np.max(c.violation(), initial=0.0)) for c in program.constraints),
                    default=0.0)
    return ConvexResult(table=table, value=float(program.value), status=str(program.status),
                        seconds=time.perf_counter() - start, solver=name, violation=violation)

