"""The pricing LPs of column generation over output columns (:mod:`._columns`): for each output,
the least reduced cost ``v_y`` of a column in the cone of the pair bounds, with entries at most 1,
and a lower bound on it from the LP's own multipliers. :class:`Pricing` holds one HiGHS model for
every output (pure pair bounds); :class:`DivergencePricing` one per output, with tangent rows of
the f-divergence terms (:class:`DivergenceTerms`) beside the pair rows."""

from __future__ import annotations

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph

from diffpriv.problems._problem import Problem
from diffpriv.solvers._cut_lp import CutsSolveError
from diffpriv.solvers._cuts import START_RATIOS, Terms, _term_values, _terms, tangents
from diffpriv.solvers._highs import quiet_highs

__all__ = ["DivergencePricing", "DivergenceTerms", "Pricing", "hockey_sticks", "into_rows", "pair_rows",
           "trimmed"]

TOLERANCE = 1e-9
"""HiGHS's primal and dual feasibility tolerances (the master's too)."""
TRIMS = 3
"""Rounds of :func:`trimmed` (on the pricing LP of its docstring the first gave −5.4·10⁻⁷, the
third −5.3·10⁻⁷, later ones no more)."""


def pair_rows(n_rows: int, i, j, eps) -> scipy.sparse.csr_array:
    """``M``: one row ``a[i] − e^{ε} a[j]`` per pair bound, over the flattened rows."""
    m = i.size
    k = np.arange(m)
    rows = scipy.sparse.csr_array((np.r_[np.ones(m), -np.exp(eps)], (np.r_[k, k], np.r_[i, j])),
                                  shape=(m, n_rows))
    rows.sort_indices()
    return rows


def into_rows(n_rows: int, j, eps) -> scipy.sparse.csr_array:
    """``[rows, pairs]``: each pair bound ``a[i] ≤ e^{ε} a[j]``'s ``e^{ε}`` at its row ``j``."""
    j = np.asarray(j)
    return scipy.sparse.csr_array((np.exp(np.asarray(eps, np.float64)), (j, np.arange(j.size))),
                                  shape=(n_rows, j.size))


def trimmed(g: np.ndarray, lam: np.ndarray, true_op, into, j: np.ndarray, upper: np.ndarray | None = None):
    """``λ``, then :data:`TRIMS` rounds of multipliers ``λ ≥ 0`` of pair bounds ``a[i] ≤ e^ε a[j]``
    (``[pairs]``, or ``[pairs, columns]`` beside ``g`` ``[rows, columns]``), each bound's multiplier
    scaled down where row ``j``'s reduced cost ``g + Mᵀλ`` (``true_op = Mᵀ``) is negative, by as much as
    cancels it (to 0 at most; ``into`` from :func:`into_rows`; rows where ``upper`` is 0 left
    alone). A solver's multipliers are exact only to its tolerances, and a bound's multiplier
    enters row ``j`` times ``e^ε``: at ``e^{10.8}`` between neighbours (the Sacramento sales' 16×16
    grid, 8-neighbour cells, 2 per km) HiGHS's proved −3·10⁻³ of a pricing LP where ``λ = 0``
    proves −5.6·10⁻⁶ and these −5.3·10⁻⁷. Row ``i`` loses at most ``e^{−ε}`` of what row ``j``
    gains. Any ``λ ≥ 0`` proves a bound by weak duality, so none of this needs to be exact: the
    caller keeps the best."""
    yield lam
    for _ in range(TRIMS):
        reduced = g + true_op @ lam
        inflow = into @ lam
        short = (reduced < 0) & (inflow > 0)
        if upper is not None:
            short &= (upper > 0).reshape((-1,) + (1,) * (reduced.ndim - 1))
        if not short.any():
            return
        keep = np.ones(reduced.shape)
        keep[short] = np.clip(1.0 + reduced[short] / inflow[short], 0.0, 1.0)
        lam = lam * keep[j]
        yield lam


class Pricing:
    """The pricing LP of one output column: ``min g·a`` over ``a[i] − e^{ε} a[j] ≤ 0`` (the real
    bounds, so that its multipliers bound ``v_y`` closely), ``0 ≤ a ≤ upper``; one HiGHS model
    for every output, each warm-started from its own last basis."""

    def __init__(self, n_rows: int, i, j, eps):
        import highspy

        self.h = h = quiet_highs()
        h.setOptionValue("primal_feasibility_tolerance", TOLERANCE)
        h.setOptionValue("dual_feasibility_tolerance", TOLERANCE)
        m = i.size
        block = pair_rows(n_rows, i, j, eps)
        self.true_op = block.T.tocsr()  # Mᵀλ at the real budgets
        self.j, self.into = np.asarray(j), into_rows(n_rows, j, eps)
        h.addVars(n_rows, np.zeros(n_rows), np.ones(n_rows))
        h.addRows(m, np.full(m, -highspy.kHighsInf), np.zeros(m), block.nnz,
                  block.indptr[:-1].astype(np.int32), block.indices.astype(np.int32), block.data)
        self.n, self.index = n_rows, np.arange(n_rows, dtype=np.int32)
        self.bases: dict[int, object] = {}
        self.upper = np.ones(n_rows)

    def term(self, g: np.ndarray, lam: np.ndarray, upper: np.ndarray) -> float:
        """The bound on ``min g·a`` over the column's cone, ``0 ≤ a ≤ upper``, that multipliers
        ``λ ≥ 0`` of its pair rows prove: ``Σ min(0, (g + Mᵀλ)·upper)`` (weak duality), at ``λ``
        or at the multipliers :func:`trimmed` makes of them, whichever proves more."""
        cuts = trimmed(g, lam, self.true_op, self.into, self.j, upper)
        return max(self._value(g, cut, upper) for cut in cuts)

    def _value(self, g: np.ndarray, lam: np.ndarray, upper: np.ndarray) -> float:
        return float(np.sum(np.minimum(0.0, (g + self.true_op @ lam) * upper)))

    def solve(self, y: int, g: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The optimal ``a`` and the multipliers ``λ ≥ 0`` of the bounds for cost ``g``."""
        import highspy

        h = self.h
        h.changeColsCost(self.n, self.index, g)
        if not np.array_equal(upper, self.upper):
            h.changeColsBounds(self.n, self.index, np.zeros(self.n), upper)
            self.upper = upper
        if y in self.bases:
            h.setBasis(self.bases[y])
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            h.clearSolver()  # a failed warm start (e^{10.8} between neighbours): from scratch
            h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise CutsSolveError(f"optimizer: HiGHS found no optimum of a pricing LP "
                                 f"({h.modelStatusToString(h.getModelStatus())})")
        self.bases[y] = h.getBasis()
        sol = h.getSolution()
        return np.clip(np.asarray(sol.col_value), 0.0, upper), np.maximum(-np.asarray(sol.row_dual), 0.0)


class DivergenceTerms:
    """The f-divergence budgets, each a sum over outputs of ``φ(a) = Q f(P/Q)`` of the column's
    laws ``P = wp·a``, ``Q = wq·a`` (:func:`._cuts._terms`, one per bounded direction), and the
    hockey-stick budgets among them (:func:`hockey_sticks`): ``φ`` is convex and positively
    homogeneous, so a table mixing rays meets ``Σ_j w_j φ(r_j) ≤ b``'s budget whenever the master
    does."""

    def __init__(self, problem: Problem, margin: float):
        self.raw = raw = hockey_sticks(problem, _terms(problem, margin), margin)
        self.wp, self.wq = scipy.sparse.csr_array(raw.wp), scipy.sparse.csr_array(raw.wq)
        self.budget, self.true_budget, self.size = raw.budget, raw.true_budget, raw.wp.shape[0]

    def values(self, rays: np.ndarray) -> np.ndarray:
        """``[T, n]``: every term's ``φ`` at the columns ``rays`` ``[R, n]`` (``inf`` where ``P > 0 = Q``
        for an unbounded f)."""
        return _term_values(self.raw, self.wp @ rays, self.wq @ rays)


def hockey_sticks(problem: Problem, terms: Terms, margin: float) -> Terms:
    """``terms`` with one more per direction of every hockey-stick comparison (δ > 0):
    ``Σ_y max(0, P − e^ε Q) ≤ δ`` is ``Σ_y Q' f(P/Q')`` for total variation's ``f(s) = max(0, s − 1)``
    and ``Q' = e^ε Q``; budget ``δ(1 − margin)``, ``δ`` for the bound."""
    from diffpriv.solvers._divergence import block_weights

    blocks = [b for b in problem.blocks() if b.divergence == "hockey_stick"]
    if not blocks:
        return terms
    ns, nx, _ = problem.shape
    family = len(terms.families)
    wp, wq, delta = [terms.wp], [terms.wq], []
    for block in blocks:
        wa, wb = block_weights(block, ns, nx)
        ratio = np.exp(np.broadcast_to(np.asarray(block.eps, np.float64), (block.size,)))[:, None]
        wp += [wa, wb]
        wq += [ratio * wb, ratio * wa]
        delta.append(np.full(2 * block.size, block.delta))
    delta = np.concatenate(delta)
    return Terms(np.concatenate(wp), np.concatenate(wq), np.r_[terms.family, np.full(delta.size, family)],
                 np.r_[terms.budget, delta * (1.0 - margin)], np.r_[terms.true_budget, delta],
                 (*terms.families, ("tv", 1.0)))


class DivergencePricing:
    """The pricing LPs of output columns under divergence budgets, one HiGHS model per output
    (its tangents are its own): ``min g·a + Σ_t λ_t s_t`` over ``a`` (the column, ``0 ≤ a ≤ upper``)
    and ``s`` (free), the pair bounds at the real budgets and the tangent rows
    ``a_j P_t + c_j Q_t − s_t ≤ 0`` of every term, a few to start (:meth:`_start_ratios`),
    more where the optimum's ratios fall between them. Its value is at most ``v_y``'s (each
    tangent is below ``φ``), and so is the bound from its multipliers (:meth:`bound`)."""

    def __init__(self, n_rows: int, i, j, eps, terms: DivergenceTerms):
        self.pairs = pair_rows(n_rows, i, j, eps)
        self.terms, self.n, self.models = terms, n_rows, {}
        self.edges, self.start = (i, j, eps), None

    def _start_ratios(self, default: np.ndarray) -> np.ndarray:
        """``[T, k]``: each term's first tangent ratios: where both laws are single rows joined by
        chains of pair bounds, ``k`` ratios spread over the only ratios a column can have,
        ``[e^{−d(x'→x)}, e^{d(x→x')}]`` (``d`` the least sum of budgets along a chain), else
        ``default``."""
        w = self.terms
        k = default.size
        out = np.tile(default, (w.size, 1))
        single = (np.diff(w.wp.indptr) == 1) & (np.diff(w.wq.indptr) == 1)
        if not single.any():
            return out
        i, j, eps = self.edges
        graph = scipy.sparse.csr_array((np.maximum(eps, 1e-300), (i, j)), shape=(self.n, self.n))
        x = w.wp.indices[w.wp.indptr[:-1][single]]
        z = w.wq.indices[w.wq.indptr[:-1][single]]
        rows = np.unique(np.r_[x, z])
        dist = scipy.sparse.csgraph.dijkstra(graph, directed=True, indices=rows)
        at = np.searchsorted(rows, np.r_[x, z])
        hi, lo = dist[at[:x.size], z], -dist[at[x.size:], x]  # log P/Q ≤ d(x→z), ≥ −d(z→x)
        ok = np.isfinite(hi) & np.isfinite(lo)
        spread = np.exp(lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, k))
        out[np.flatnonzero(single)[ok]] = spread[ok]
        return out

    def _model(self, y: int):
        import highspy

        if y in self.models:
            return self.models[y]
        h = quiet_highs()
        h.setOptionValue("primal_feasibility_tolerance", TOLERANCE)
        h.setOptionValue("dual_feasibility_tolerance", TOLERANCE)
        n, t = self.n, self.terms.size
        h.addVars(n, np.zeros(n), np.ones(n))
        h.addVars(t, np.full(t, -highspy.kHighsInf), np.full(t, highspy.kHighsInf))
        block = scipy.sparse.hstack([self.pairs, scipy.sparse.csr_array((self.pairs.shape[0], t))]).tocsr()
        self._rows(h, block)
        model = {"h": h, "term": np.zeros(0, np.int64), "a": np.zeros(0), "c": np.zeros(0), "logs": {},
                 "upper": np.ones(n)}
        self.models[y] = model
        if self.start is None:
            self.start = self._start_ratios(START_RATIOS)
        self.add(y, np.repeat(np.arange(t), self.start.shape[1]), self.start.reshape(-1))
        return model

    @staticmethod
    def _rows(h, block) -> None:
        import highspy

        block = scipy.sparse.csr_array(block)
        block.sort_indices()
        k = block.shape[0]
        h.addRows(k, np.full(k, -highspy.kHighsInf), np.zeros(k), block.nnz,
                  block.indptr[:-1].astype(np.int32), block.indices.astype(np.int32), block.data)

    def add(self, y: int, term: np.ndarray, ratio: np.ndarray) -> int:
        """Adds the tangents of ``term`` at ``ratio`` to output ``y``'s model (those not there
        yet, to 10⁻⁴ in log ratio); returns how many."""
        model = self._model(y)
        logs = np.log(np.maximum(ratio, 1e-300))
        fresh = ~_near(term, logs, model["logs"])
        if not fresh.any():
            return 0
        term, logs = term[fresh], logs[fresh]
        a, c = tangents(self.terms.raw, term, ratio[fresh])
        for k, r in zip(term.tolist(), logs.tolist(), strict=True):
            model["logs"].setdefault(k, []).append(r)
        w = self.terms
        rows = (scipy.sparse.diags_array(a) @ w.wp[term] + scipy.sparse.diags_array(c) @ w.wq[term])
        s = scipy.sparse.csr_array((-np.ones(term.size), (np.arange(term.size), term)),
                                   shape=(term.size, w.size))
        self._rows(model["h"], scipy.sparse.hstack([rows, s]))
        model["term"] = np.r_[model["term"], term]
        model["a"], model["c"] = np.r_[model["a"], a], np.r_[model["c"], c]
        return int(term.size)

    def solve(self, y: int, g: np.ndarray, lam: np.ndarray, upper: np.ndarray):
        """The optimal column ``a``, the LP's estimate ``s`` of each ``φ_t(a)``, and the bound on
        ``v_y`` from the LP's multipliers (:meth:`bound`)."""
        import highspy

        model = self._model(y)
        h, n, t = model["h"], self.n, self.terms.size
        h.changeColsCost(n + t, np.arange(n + t, dtype=np.int32), np.r_[g, lam])
        if not np.array_equal(upper, model["upper"]):
            h.changeColsBounds(n, np.arange(n, dtype=np.int32), np.zeros(n), upper)
            model["upper"] = upper
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise CutsSolveError(f"optimizer: HiGHS found no optimum of a pricing LP "
                                 f"({h.modelStatusToString(h.getModelStatus())})")
        sol = h.getSolution()
        x, duals = np.asarray(sol.col_value), np.maximum(-np.asarray(sol.row_dual), 0.0)
        m = self.pairs.shape[0]
        return np.clip(x[:n], 0.0, upper), x[n:], self.bound(model, g, lam, upper, duals[:m], duals[m:])

    def bound(self, model, g, lam, upper, nu, rho) -> float:
        """``v_y ≥ Σ_r min(0, h_r)·upper_r``, ``h = g + Mᵀν + Σ_t (α_t wp_t + γ_t wq_t)``, where
        each term's tangent multipliers ``ρ ≥ 0`` are rescaled to sum to ``λ_t`` (``λ_t φ_t ≥ Σ_j
        ρ_j (a_j P + c_j Q)`` then holds for every column), ``α, γ`` their weighted
        coefficients: valid for any ``ν, ρ ≥ 0``, so it does not rest on HiGHS's tolerances."""
        term = model["term"]
        t = self.terms.size
        total = np.bincount(term, weights=rho, minlength=t)
        first = np.full(t, -1)
        first[term[::-1]] = np.arange(term.size)[::-1]  # the first tangent of each term
        idle = (total <= 0) & (lam > 0)
        rho = rho.copy()
        rho[first[idle]] = 1.0
        total = np.where(idle, 1.0, total)
        rho *= (lam / np.where(total > 0, total, 1.0))[term]
        alpha = np.bincount(term, weights=rho * model["a"], minlength=t)
        gamma = np.bincount(term, weights=rho * model["c"], minlength=t)
        w = self.terms
        h = g + self.pairs.T @ nu + w.wp.T @ alpha + w.wq.T @ gamma
        return float(np.sum(np.minimum(0.0, h) * upper))


def _near(term: np.ndarray, log_ratio: np.ndarray, logs: dict) -> np.ndarray:
    """Which tangents lie within 10⁻⁴ in log ratio of one of the same term already there."""
    out = np.zeros(term.size, bool)
    for k, (t, r) in enumerate(zip(term, log_ratio, strict=True)):
        old = logs.get(int(t))
        out[k] = old is not None and min(abs(r - v) for v in old) < 1e-4
    return out
