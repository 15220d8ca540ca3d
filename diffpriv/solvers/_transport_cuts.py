"""Wasserstein constraints by column-and-cut generation: Kantorovich potentials as cuts, small
linear programs solved by HiGHS, a bound on the whole problem from their multipliers.

**Cuts.** A Wasserstein budget ``W_μ(P, Q) ≤ ε`` of two output laws ``P = wP·A``, ``Q = wQ·A``
(Wasserstein DP between the rows of adjacent inputs, ``wdistp`` between lifted item laws) is
``OT(P, Q) ≤ ε^μ`` for the transport cost ``c = d^μ``, and by Kantorovich duality

    ``OT(P, Q) = max {⟨f, P⟩ + ⟨g, Q⟩ : f_y + g_y' ≤ c_yy'}``,

a supremum of linear functions of the table. Every dual-feasible pair ``(f, g)`` therefore
gives a row ``⟨f, wP·A⟩ + ⟨g, wQ·A⟩ ≤ ε^μ`` that every feasible table meets, and the optimal pair
at a table's laws (the exact solver's, :func:`diffpriv.measures._transport.wasserstein`,
made feasible on every cell by c-transforms) is tight there: Kelley's cutting planes, with the
exact transport problem as the separation oracle. No coupling is ever a variable, so a 32×32
grid's 1,984 four-neighbour pairs need no ``Y²`` lift per pair (~190 GB for the lifted PDHG).

**Columns.** As in :mod:`._cuts`: the LP holds the entries of a working support (each row's
least-loss output and the best common output to start), and entries whose reduced cost at the
LP's multipliers lies below their row's join it.

**The bound.** Every row of the LP is valid for the whole problem, so its Lagrangian over every
entry (the simplex rows kept, every other row at the LP's multipliers; :func:`._lp._bound_at`)
is a lower bound of the optimum at the true budgets whatever the multipliers; the best
multiple ``θ ∈ [0, 2]`` of them is taken (:func:`._lp.scaled_bound`). Where the outputs have
coordinates and the ground metric is at least Euclidean, the relaxation of
:mod:`._moment_bound` (the rows' means, ``R·D`` variables) bounds the optimum from the start:
column generation's Lagrangian bound lags while columns still price out (on a 32×32 grid it
was 0 after 8 rounds), the means' bound was 3.969 against the one-output table's 4.007.

**The table.** The LP is solved at budgets tightened by ``gap_tol / 4`` relative; its table is
then mixed with the best output common to every row, ``A' = (1 − t)·A + t·𝟙δ_ν``, at the least
``t`` the exact levels allow: ``OT`` is jointly convex and 0 between equal laws, so
``OT(P', Q') ≤ (1 − t)·OT(P, Q)``, and no level needs computing again.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import scipy.sparse

from diffpriv.problems._blocks import divergence_kinds
from diffpriv.problems._problem import Problem
from diffpriv.solvers._cut_lp import CutsSolveError, HighsModel, new_columns, start_support
from diffpriv.solvers._divergence import block_weights
from diffpriv.solvers._driver import Chunk, Declared, Outcome, Status, relative_gap
from diffpriv.solvers._moment_bound import moment_bound

__all__ = ["TransportCutsRun", "applies"]

MAX_ROUNDS = 500

REPAIR_MARGIN = 1e-8
"""The mixed table meets every budget ``ε·(1 − REPAIR_MARGIN)`` by the computed levels, so that
the certifier's outward-rounded ones stay within ``ε``."""

LP_SOLVER = "ipm"
CROSSOVER = "on"



def applies(problem: Problem, kinds) -> bool:
    """Whether Kantorovich cuts run ``problem`` (divergence groups ``kinds``): every nonlinear
    block is Wasserstein (finite order), no linear comparison has a δ, and the objective is not
    the transport loss."""
    linear_delta = any(b.linear and np.any(np.asarray(b.delta) > 0) for b in problem.blocks())
    return (bool(kinds) and all(k[0] == "wasserstein" for k in kinds) and not linear_delta
            and not problem.objective.transport)


class Terms(NamedTuple):
    """The Wasserstein comparisons, one per row of ``wp``: ``W_μ(wp·A, wq·A) ≤ eps``."""

    wp: scipy.sparse.csr_array  # [T, R] weights of P over the table's rows
    wq: scipy.sparse.csr_array  # [T, R]
    group: np.ndarray  # [T] index into ``grounds`` and ``orders``
    eps: np.ndarray  # [T] the budget (a Wasserstein distance)
    grounds: tuple  # of [Y, Y] ground metrics
    orders: tuple  # of μ
    scales: tuple  # of the largest distance of each ground metric (1 where all are 0)


def _terms(problem: Problem) -> Terms:
    ns, nx, _ = problem.shape
    wps, wqs, groups, eps, grounds, orders, keys = [], [], [], [], [], [], {}
    for block in problem.blocks():
        if block.linear:
            continue
        wa, wb = block_weights(block, ns, nx)
        key = (float(block.alpha), np.asarray(block.ground, np.float64).tobytes())
        if key not in keys:
            keys[key] = len(grounds)
            grounds.append(np.asarray(block.ground, np.float64))
            orders.append(float(block.alpha))
        wps.append(wa)
        wqs.append(wb)
        groups.append(np.full(block.size, keys[key]))
        eps.append(np.asarray(block.eps, np.float64))
    scales = tuple(float(g.max()) if g.size and g.max() > 0 else 1.0 for g in grounds)
    return Terms(scipy.sparse.csr_array(np.concatenate(wps)), scipy.sparse.csr_array(np.concatenate(wqs)),
                 np.concatenate(groups), np.concatenate(eps), tuple(grounds), tuple(orders), scales)


DIRECTIONS = 4
"""Half the number of starting directions (:meth:`TransportCutsRun._direction_cuts`)."""

CUT_AGE = 3
"""A cut whose multiplier has been 0 for this many LP rounds in a row leaves the LP (its rows
are dense over the support of two rows, and Kelley's method adds one per violated pair and
round); 0 keeps every cut."""


@dataclasses.dataclass
class _Inner:
    """The best table known to meet every budget, upper bounds ``[T]`` of its transport costs,
    and its objective."""

    table: np.ndarray
    cost: np.ndarray
    value: float


class _Model(HighsModel):
    """The cut LP on the working support, held by HiGHS between rounds.

    Rows: the full linear LP's (its equalities, then its inequalities), then the cuts in the
    order added (:attr:`cut_rows`), each ``Σ_r Σ_y (wp[k, r] f_y + wq[k, r] g_y) A[r, y] ≤ ε_k^μ``
    over the support's entries. Columns: the full LP's other variables, then the support's table
    entries (:attr:`col_of_entry`)."""

    def __init__(self, problem: Problem, full, terms: Terms):
        super().__init__(problem, full, terms)
        n_ub = 0 if full.a_ub is None else full.a_ub.shape[0]
        parts = [full.a_eq] + ([] if full.a_ub is None else [full.a_ub])
        self.columns = scipy.sparse.vstack(parts).tocsc()
        self.n_lin = self.columns.shape[0]
        lower = np.concatenate([full.b_eq, np.full(n_ub, -self.inf)])
        upper = np.concatenate([full.b_eq, [] if full.a_ub is None else full.b_ub])
        self._add_rows(lower, upper, scipy.sparse.csr_array((self.n_lin, 0)))
        extra = np.arange(self.n_table, full.c.size)
        self._add_cols(full.c[extra], np.zeros(extra.size), np.full(extra.size, self.inf),
                       self.columns[:, extra])
        self.col_of_entry = np.full(self.n_table, -1)
        self.in_support = np.zeros(self.n_table, bool)
        self.entries = np.zeros(0, np.int64)
        self.cut_term = np.zeros(0, np.int64)
        self.cut_f = np.zeros((0, self.n_out))
        self.cut_g = np.zeros((0, self.n_out))
        self.cut_rows = np.zeros(0, np.int64)
        self.idle = np.zeros(0, np.int64)

    def _cut_coefficients(self, term, f, g, entries) -> scipy.sparse.csr_array:
        """``[len(term), len(entries)]``: each cut's coefficient on each table entry."""
        rows = self.entry_row[entries]
        out = self.entry_out[entries]
        coef = None
        for w, pot in ((self.terms.wp, f), (self.terms.wq, g)):
            block = w[term][:, rows].tocoo()  # w[k, r_e]
            block.data = block.data * pot[block.row, out[block.col]]
            coef = block if coef is None else coef + block
        coef = scipy.sparse.csr_array(coef)
        coef.eliminate_zeros()
        return coef

    def add_entries(self, new: np.ndarray) -> int:
        """The table entries ``new`` join the support (with their coefficients in every cut);
        returns how many were new."""
        new = np.unique(new[~self.in_support[new]])
        if not new.size:
            return 0
        self.in_support[new] = True
        n_rows = self.h.getNumRow()
        lin = self.columns[:, new]
        block = scipy.sparse.vstack([lin, scipy.sparse.csc_array((n_rows - self.n_lin, new.size))]).tocsc()
        if self.cut_term.size:
            cuts = self._cut_coefficients(self.cut_term, self.cut_f, self.cut_g, new).tocoo()
            block = block + scipy.sparse.csc_array(
                (cuts.data, (self.cut_rows[cuts.row], cuts.col)), shape=block.shape)
        self.col_of_entry[new] = self._add_cols(self.full.c[new], np.zeros(new.size),
                                                np.full(new.size, self.inf), block)
        self.entries = np.concatenate([self.entries, new])
        return new.size

    def add_cuts(self, term, f, g, budget) -> int:
        """The cuts ``⟨f, P_k⟩ + ⟨g, Q_k⟩ ≤ budget`` (one per ``term``); returns how many."""
        coef = self._cut_coefficients(term, f, g, self.entries)
        block = scipy.sparse.csr_array((coef.data, coef.indices, coef.indptr), shape=coef.shape)
        block = scipy.sparse.csr_array((block.data, self.col_of_entry[self.entries][block.indices],
                                        block.indptr), shape=(term.size, self.h.getNumCol()))
        rows = self._add_rows(np.full(term.size, -self.inf), budget, block)
        self.cut_rows = np.concatenate([self.cut_rows, rows])
        self.cut_term = np.concatenate([self.cut_term, term])
        self.cut_f = np.concatenate([self.cut_f, f])
        self.cut_g = np.concatenate([self.cut_g, g])
        self.idle = np.concatenate([self.idle, np.zeros(term.size, np.int64)])
        return term.size

    def age(self, mu: np.ndarray) -> None:
        """Counts the rounds each cut has been idle (``μ = 0``) and deletes those idle for
        :data:`CUT_AGE` rounds (the rows after the linear LP's are the cuts, in order)."""
        if not CUT_AGE:
            return
        n_old = mu.size
        idle = np.concatenate([np.where(mu > 0, 0, self.idle[:n_old] + 1), self.idle[n_old:]])
        drop = np.flatnonzero(idle[:n_old] >= CUT_AGE)
        if drop.size:
            self._check(self.h.deleteRows(drop.size, (self.n_lin + drop).astype(np.int32)))
            keep = np.ones(self.cut_term.size, bool)
            keep[drop] = False
            self.cut_term, self.cut_f, self.cut_g = self.cut_term[keep], self.cut_f[keep], self.cut_g[keep]
            idle = idle[keep]
        self.idle = idle
        self.cut_rows = self.n_lin + np.arange(self.cut_term.size)

    def set_cut_budgets(self, budget_of_term: np.ndarray) -> None:
        k = self.cut_rows.size
        self._check(self.h.changeRowsBounds(k, self.cut_rows.astype(np.int32), np.full(k, -self.inf),
                                            budget_of_term[self.cut_term]))

    def solve(self, mask: np.ndarray):
        """``(table [S, X, Y], value, ineq multipliers, cut multipliers μ ≥ 0)``, or None."""
        import highspy

        self.h.setOptionValue("solver", LP_SOLVER)
        self.h.setOptionValue("run_crossover", CROSSOVER)
        self.h.run()
        status = self.h.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            self.h.clearSolver()
            self.h.run()
            status = self.h.getModelStatus()
        self.status = status
        if status != highspy.HighsModelStatus.kOptimal:
            return None
        sol = self.h.getSolution()
        x, dual = np.asarray(sol.col_value), np.asarray(sol.row_dual)
        values = np.zeros(self.n_table)
        values[self.entries] = np.clip(x[self.col_of_entry[self.entries]], 0.0, None)
        table = np.zeros(mask.shape)
        table[mask] = values
        table /= table.sum(axis=-1, keepdims=True)
        n_eq = self.full.a_eq.shape[0]
        ineq = dual[n_eq:self.n_lin] if self.full.a_ub is not None else None
        return (table, float(self.h.getInfo().objective_function_value), ineq,
                np.maximum(-dual[self.cut_rows], 0.0))


class TransportCutsRun(Declared):
    """Kantorovich cuts on ``problem`` (:func:`applies`) under ``opt``'s ``gap_tol`` and
    ``steps`` (the most LP rounds: ``min(steps, 500)``), one LP round a chunk, as a
    :class:`._driver.Run` (module docstring). The seed takes no part; it is recorded."""

    name, labels = "transport cuts", ("transport cuts",)
    warm_starts = False

    @classmethod
    def accepts(cls, problem) -> bool:
        return applies(problem, divergence_kinds(problem.blocks()))

    def __init__(self, opt, problem: Problem, seed: int):
        from diffpriv.solvers._lp import _build
        from diffpriv.solvers._rows import smallest_objective

        self.opt, self.problem = opt, problem
        self.tighten_rel = min(max(opt.gap_tol / 4.0, 1e-9), 1e-2)
        self.terms = _terms(problem)
        self.unit_grounds = [g / d for g, d in zip(self.terms.grounds, self.terms.scales, strict=True)]
        self.full = _build(problem, tuple(b for b in problem.blocks() if b.linear))
        self.model = _Model(problem, self.full, self.terms)
        self.mask = problem.support_mask()
        self.model.add_entries(np.flatnonzero(start_support(problem)[self.mask]))
        self.inner = self.common = self._common_output()
        if self.common is not None:  # the LP can reach the common output's table
            self.model.add_entries(np.flatnonzero(self.common.table[self.mask] > 0))
        self._direction_cuts(problem)
        self.column_of = np.full(self.mask.size, -1)
        self.column_of[np.flatnonzero(self.mask)] = np.arange(self.model.n_table)
        self.bound, self.rounds, self.last = smallest_objective(problem), 0, None
        means = moment_bound(problem, self.terms, self.full)
        if means is not None:
            self.bound = max(self.bound, means)
        self.total = min(opt.steps, MAX_ROUNDS)

    def _direction_cuts(self, problem: Problem) -> None:
        """Starting cuts where the order is 1 and the ground metric is the Euclidean distance of
        the outputs' coordinates: ``f = u·y``, ``g = −f`` for :data:`DIRECTIONS` unit vectors
        ``u`` (``u·(y − y') ≤ |y − y'|``, so dual-feasible): each bounds the shift of the laws'
        means along ``u`` by the budget."""
        coords = problem.outputs.coords
        if coords is None or not DIRECTIONS:
            return
        dist = problem.outputs.distances(problem.outputs)
        if coords.shape[1] == 1:
            units = np.array([[1.0], [-1.0]])
        elif coords.shape[1] == 2:
            angle = np.pi * np.arange(2 * DIRECTIONS) / DIRECTIONS
            units = np.stack([np.cos(angle), np.sin(angle)], 1)
        else:
            units = np.concatenate([np.eye(coords.shape[1]), -np.eye(coords.shape[1])])
        budget = self._budget(self.tighten_rel)
        for grp, (ground, order) in enumerate(zip(self.terms.grounds, self.terms.orders, strict=True)):
            if order != 1.0 or not np.allclose(ground, dist, rtol=1e-12, atol=0.0):
                continue
            terms = np.flatnonzero(self.terms.group == grp)
            # [U, Y] in units of the largest distance, shrunk against round-off
            f = (coords @ units.T).T * ((1.0 - 1e-12) / self.terms.scales[grp])
            term = np.repeat(terms, f.shape[0])
            self.model.add_cuts(term, np.tile(f, (terms.size, 1)), np.tile(-f, (terms.size, 1)), budget[term])

    def _common_output(self) -> _Inner | None:
        """The table sending every row to the output (allowed in every row) of least objective:
        every comparison's laws are equal there, so every cost is 0."""
        allowed = np.flatnonzero(self.mask.all(axis=(0, 1)))
        expected = np.einsum("sx,xy->y", self.problem.prior, self.problem.loss)[allowed]
        best = None
        for y in allowed[np.argsort(expected)[:8]]:
            table = np.zeros(self.mask.shape)
            table[..., y] = 1.0
            value = self.problem.objective_value(table)
            if best is None or value < best.value:
                best = _Inner(table, np.zeros(self.terms.eps.size), value)
        return best

    def _budget(self, rel: float) -> np.ndarray:
        """Each term's budget in transport cost, ``(ε (1 − rel) / D)^μ`` with ``D`` the ground
        metric's largest distance: every cost here is in units of ``D^μ`` (each at most 1), so
        no ``d^μ`` overflows (order 100 over distances of 2,000 is 10³³⁰). A budget above 1
        constrains nothing and is capped at 2 (every cut stays valid: no cost exceeds 1)."""
        order = np.asarray(self.terms.orders)[self.terms.group]
        scale = np.asarray(self.terms.scales)[self.terms.group]
        with np.errstate(over="ignore"):
            return np.minimum((self.terms.eps * (1.0 - rel) / scale) ** order, 2.0)

    def _bound(self, ineq, mu) -> tuple[float, np.ndarray]:
        """``(bound, reduced [R, Y])``: the Lagrangian bound at these multipliers (module
        docstring) and every entry's reduced cost (``+inf`` off the problem's support)."""
        from diffpriv.solvers._lp import _reduced_costs, scaled_bound

        terms, model = self.terms, self.model
        per_term = scipy.sparse.csr_array((mu, (model.cut_term, np.arange(mu.size))),
                                          shape=(terms.eps.size, mu.size))
        f_sum, g_sum = per_term @ model.cut_f, per_term @ model.cut_g  # [T, Y]
        shift = terms.wp.T @ f_sum + terms.wq.T @ g_sum  # [R, Y]
        lag = _reduced_costs(self.full, ineq, None)
        reduced, constant = lag.reduced, lag.constant
        n = model.n_table
        reduced[:n] += shift.reshape(self.mask.shape)[self.mask]
        per_abs = abs(per_term)
        shift_size = (abs(terms.wp).T @ (per_abs @ np.abs(model.cut_f))
                      + abs(terms.wq).T @ (per_abs @ np.abs(model.cut_g)))
        lag.size[:n] += shift_size.reshape(self.mask.shape)[self.mask]
        budget = self._budget(0.0)[model.cut_term]
        errors = lag._replace(depth=lag.depth + 2 * mu.size + 2,
                              constant_size=lag.constant_size + float(np.abs(mu) @ np.abs(budget)),
                              constant_depth=lag.constant_depth + mu.size + 1)
        bound = scaled_bound(self.full, reduced - self.full.c, constant - float(mu @ budget), errors=errors)
        entries = np.full(self.mask.shape, np.inf)
        entries[self.mask] = reduced[:n]
        return bound, entries.reshape(-1, self.mask.shape[2])

    def chunk(self) -> Chunk:
        model, problem, gap_tol = self.model, self.problem, self.opt.gap_tol
        self.rounds += 1
        solved = model.solve(self.mask)
        if solved is None:
            import highspy

            if model.status == highspy.HighsModelStatus.kInfeasible and not model.in_support.all():
                model.add_entries(np.arange(model.n_table))
                return Chunk(self.rounds, np.inf)
            if self.inner is not None:
                return Chunk(self.rounds, relative_gap(self.inner.value, self.bound), Status.STALLED)
            raise CutsSolveError(f"optimizer: HiGHS found no optimum of the cut model "
                                 f"({model.h.modelStatusToString(model.status)})")
        table, value, ineq, mu = solved
        self.last = table
        bound, reduced = self._bound(ineq, mu)
        self.bound = max(self.bound, bound)
        lp_cost = self._budget(self.tighten_rel)
        cost, duals = self._transport(table)
        self._improve(table, cost)
        over = np.flatnonzero(cost > lp_cost * (1.0 + 1e-9))
        cuts = 0
        if over.size:
            f, g = (np.stack([duals[k][i] for k in over]) for i in (0, 1))
            cuts = model.add_cuts(over, f, g, lp_cost[over])
        model.age(mu)
        gap = relative_gap(self.inner.value if self.inner is not None else value, self.bound)
        if self.inner is not None and gap <= gap_tol:
            return Chunk(self.rounds, gap, Status.CONVERGED)
        support = np.zeros(self.mask.size, bool)
        support[np.flatnonzero(self.mask)] = model.in_support
        added = cuts + model.add_entries(
            self.column_of[new_columns(support.reshape(-1, problem.shape[2]), reduced)])
        if not added:
            if self.tighten_rel <= 1e-9:
                return Chunk(self.rounds, gap, Status.STALLED)
            self.tighten_rel = max(self.tighten_rel / 10.0, 1e-9)
            model.set_cut_budgets(self._budget(self.tighten_rel))
        return Chunk(self.rounds, gap)

    def _transport(self, table: np.ndarray) -> tuple[np.ndarray, list]:
        """``([T], [T])``: every term's exact transport cost ``(W_μ / D)^μ`` at ``table`` and its
        optimal potentials ``(f, g)``, feasible for ``(d / D)^μ`` on every cell (zeros where the
        solver's scale gave none; :meth:`_budget`'s units)."""
        from diffpriv.measures._transport import wasserstein

        terms = self.terms
        rows = table.reshape(-1, table.shape[-1])
        p, q = terms.wp @ rows, terms.wq @ rows
        p, q = p / p.sum(axis=1, keepdims=True), q / q.sum(axis=1, keepdims=True)
        cost, duals = np.zeros(p.shape[0]), []
        zero = (np.zeros(p.shape[1]), np.zeros(p.shape[1]))
        for k in range(p.shape[0]):
            order = terms.orders[terms.group[k]]
            res = wasserstein(p[k], q[k], self.unit_grounds[terms.group[k]], order)
            cost[k] = res.value**order
            duals.append(res.dual if res.dual is not None else zero)
        return cost, duals

    def _improve(self, point: np.ndarray, cost: np.ndarray) -> None:
        """Mixes ``point`` (transport costs ``cost``) with the inner table and with the common
        output's, each as little as every budget allows, and keeps the best table:
        ``(1 − t)·point + t·B`` has costs at most ``(1 − t)·cost + t·B``'s (joint convexity), so
        the least ``t`` is known without solving again."""
        target = self._budget(REPAIR_MARGIN)
        for partner in (self.inner, self.common):
            if partner is None:
                if np.all(cost <= target):
                    self.inner = _Inner(point, cost, self.problem.objective_value(point))
                continue
            with np.errstate(divide="ignore", invalid="ignore"):
                need = np.where(cost > target, (cost - target) / (cost - partner.cost), 0.0)
            t = float(np.clip(need.max(initial=0.0), 0.0, 1.0))
            if t >= 1.0:
                continue
            table = (1.0 - t) * point + t * partner.table
            value = self.problem.objective_value(table)
            if self.inner is None or value < self.inner.value:
                self.inner = _Inner(table, (1.0 - t) * cost + t * partner.cost, value)

    def finish(self, status: Status) -> Outcome:
        if self.inner is None:  # no output allowed in every row, and no LP table within budget
            from diffpriv.certification._repair import repair

            if self.last is None:
                raise CutsSolveError("optimizer: Kantorovich cuts ended before an LP round")
            return Outcome(repair(self.problem, self.last).table, self.bound, status, plan="cuts",
                           method=self.name)
        return Outcome(self.inner.table, self.bound, status, plan="cuts", method=self.name)
