"""f-divergence constraints by column-and-cut generation: small linear programs solved by HiGHS,
a bound on the whole problem from their multipliers.

**Cuts.** Every f-divergence budget here is ``Σ_y Q_y f(P_y / Q_y) ≤ b`` of two lifted laws
``P = wP·A``, ``Q = wQ·A`` (KL, χ², Hellinger, Rényi and total variation through
:func:`._f_forms.family` and :func:`._f_forms.f_budget`). Each term ``Q f(P/Q)`` is jointly convex and
positively homogeneous, so it is the supremum of its tangent planes
``a·P + c·Q`` with ``(a, c) = (f'(s), f(s) − s f'(s))`` at ratios ``s > 0``. With an epigraph
variable ``t_y`` per output, the rows ``a_j P_y + c_j Q_y − t_y ≤ 0`` (a few tangents ``j``)
and ``Σ_y t_y ≤ b`` are a linear outer approximation; the solution's laws tell where it is too
loose, and a tangent there is added (Kelley's cutting planes, one output at a time). Total
variation, ``Σ max(0, P − Q)``, is two tangents exactly.

**Columns.** Optimal tables are sparse (an LP-like objective puts each row's mass on few outputs),
so the LP holds only the entries of a working support: at first each row's least-loss output and
the best output for every row (a table sending every row there has equal laws, so meets every
budget). Entries whose reduced cost at the LP's multipliers lies below their row's are added.

**The bound.** The LP's multipliers give, per budget, ``λ`` (the budget row's) and
``p_y = Σ_j μ_j a_j`` (its tangents'), so ``(p, q = −λ f*(p/λ))`` lies on the conjugate's curve,
where ``λ Q f(P/Q) ≥ p·P + q·Q`` for every table (Fenchel–Young). The Lagrangian of the whole
problem (every entry, every linear row at the LP's multipliers, the simplex rows kept) is then
a lower bound of the optimum at the true budgets whatever the multipliers
(:func:`._lp._dual_bound`): when no column prices out and the tangents are tight, it meets the
LP's value. Every multiplier scaled by one ``θ ≥ 0`` is valid too (the conjugate pairs scale
with them), and the best ``θ ∈ [0, 2]`` is taken (:func:`._lp.scaled_bound`): while columns
still price out, the LP's multipliers overshoot and a smaller ``θ`` bounds higher.
The LP is solved at budgets tightened by ``gap_tol / 4`` relative, so its table meets
the real ones once the tangents are close; the certifier's mixing repairs what is left.

**Linear problems.** With no divergence to cut (DistP and profile edges: linear comparisons of
item laws only) this is column generation on the whole LP's rows: on the 32×32 Sacramento
sales (pure DistP) it converged in 7 LP rounds and 2.0 s where HiGHS on the whole LP took 11 s
(``benchmarks/scaling.py``). Pair blocks (local, extended DP) are not taken here: their rows make
the model the size of the whole LP; pure ones alone go to column generation over whole output
columns (:mod:`._columns`).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import scipy.sparse

from diffpriv.problems._blocks import divergence_kinds
from diffpriv.problems._problem import Problem
from diffpriv.solvers._coarse import coarse_start
from diffpriv.solvers._cut_lp import CutsSolveError, HighsModel, new_columns, start_support
from diffpriv.solvers._driver import Chunk, Declared, Outcome, Status, relative_gap

__all__ = ["CutsRun", "CutsSolveError", "applies"]

START_RATIOS = np.exp(np.linspace(-3.0, 3.0, 7))
"""The tangent ratios ``s = P/Q`` every output starts with."""

LARGEST_COEFFICIENT = 1e6
"""Tangents are taken at ratios ``s = P/Q`` clipped to where their coefficients stay within this
(an output where one law is 0 has ratio 0 or ∞; steeper rows left HiGHS's multipliers inexact)."""


def _ratio_range(fam) -> tuple[float, float]:
    """The ratios whose tangent coefficients ``|a|, |c|`` stay within :data:`LARGEST_COEFFICIENT`."""
    name, alpha = fam
    if name == "kl":
        return 1e-12, LARGEST_COEFFICIENT
    if name == "tv":
        return 0.0, 2.0
    if alpha > 1:
        return 1e-12, LARGEST_COEFFICIENT ** (1.0 / alpha)
    return LARGEST_COEFFICIENT ** (-1.0 / (1.0 - alpha)), LARGEST_COEFFICIENT

MAX_ROUNDS = 500

TIGHTEST = 1e-9
"""The LP is solved at every budget ``ε·(1 − gap_tol/4)``; when its optimum there is not within
``gap_tol`` of the bound (a multiplier large against the objective makes the margin costly),
the margin shrinks 10× at a time down to this."""

class Terms(NamedTuple):
    """The bounded directions of the f-divergence comparisons, one per row of ``wp``."""

    wp: np.ndarray  # [T, R] weights of P over the table's rows
    wq: np.ndarray  # [T, R] weights of Q
    family: np.ndarray  # [T] index into ``families``
    budget: np.ndarray  # [T] the f-budget the LP is solved for (tightened)
    true_budget: np.ndarray  # [T] the real f-budget (the bound)
    families: tuple  # of _f_forms.Family


def applies(problem: Problem, kinds) -> bool:
    """Whether column-and-cut generation runs ``problem`` (divergence groups ``kinds``): every
    nonlinear block is an f-divergence the dual form covers (KL, reverse KL, χ², Hellinger, Rényi,
    TV: divergence DistP, divergence DP, extended DistP, profile edges), and the objective is not
    the transport loss nor a smooth one. ``method = "auto"`` runs it on item laws only
    (:func:`._methods.choose`): on a 6×6 grid with 4-neighbour KL-DP pairs (60 terms, each with
    its tangents at every output) HiGHS's rounds took 30–40 s each, where Clarabel solves the
    whole problem in seconds."""
    from diffpriv.solvers._f_forms import f_divergences

    return not (problem.objective.transport or problem.objective.smooth) and f_divergences(kinds)


def _terms(problem: Problem, tighten_rel: float) -> Terms:
    n_rows = problem.shape[0] * problem.shape[1]
    if all(block.linear for block in problem.blocks()):  # no divergence: no JAX (the data's arrays)
        return Terms(np.zeros((0, n_rows)), np.zeros((0, n_rows)), np.zeros(0, np.int64), np.zeros(0),
                     np.zeros(0), ())
    from diffpriv.solvers._divergence import divergence_data
    from diffpriv.solvers._f_forms import f_budget, family

    nl, kinds = divergence_data(problem)
    wps, wqs, fams, budgets, trues, families = [], [], [], [], [], []
    for kind, wa, wb, eps, both in zip(kinds, nl.wa, nl.wb, nl.eps, nl.both, strict=True):
        fam, swap = family(*kind)
        wa, wb, eps, both = (np.asarray(v, np.float64) for v in (wa, wb, eps, both))
        if swap:
            wa, wb = wb, wa
        if fam[0] == "tv":  # Σ max(0, P − Q) ≤ ε: one direction says it all (both laws sum to 1)
            b_true, on, b = eps, np.ones(eps.shape, bool), eps * (1.0 - tighten_rel)
            both = np.zeros(eps.shape, bool)
        else:
            b_true, on = f_budget(*kind, eps)
            b, _ = f_budget(*kind, eps * (1.0 - tighten_rel))
        families.append(fam)
        for d, keep in ((0, on), (1, on & both.astype(bool))):
            idx = np.flatnonzero(keep)
            p, q = (wa, wb) if d == 0 else (wb, wa)
            wps.append(p[idx])
            wqs.append(q[idx])
            fams.append(np.full(idx.size, len(families) - 1))
            budgets.append(np.asarray(b)[idx])
            trues.append(np.asarray(b_true)[idx])

    def cat(xs, shape):
        return np.concatenate(xs) if xs else np.zeros(shape)

    return Terms(cat(wps, (0, n_rows)), cat(wqs, (0, n_rows)), cat(fams, 0).astype(np.int64),
                 cat(budgets, 0), cat(trues, 0), tuple(families))


def _f(fam, s):
    """``f(s)`` of a family (``s ≥ 0``)."""
    name, alpha = fam
    if name == "kl":
        return s * np.log(np.where(s > 0, s, 1.0))
    if name == "tv":
        return np.maximum(s - 1.0, 0.0)
    with np.errstate(over="ignore"):  # a huge ratio to a high power: +∞, which the cuts read as such
        return s**alpha if alpha > 1 else -(s**alpha)


def _tangent(fam, s):
    """``(a, c) = (f'(s), f(s) − s f'(s))``: the tangent plane of ``Q f(P/Q)`` at ratio ``s``."""
    name, alpha = fam
    if name == "kl":
        return np.log(s) + 1.0, -s
    if name == "tv":  # f = max(0, s − 1): the two pieces
        return (s > 1).astype(np.float64), -(s > 1).astype(np.float64)
    if alpha > 1:
        return alpha * s ** (alpha - 1.0), (1.0 - alpha) * s**alpha
    return -alpha * s ** (alpha - 1.0), (alpha - 1.0) * s**alpha


def _conjugate_q(fam, p, lam):
    """``q = −λ f*(p/λ)`` (the largest ``q`` with ``λ Q f(P/Q) ≥ pP + qQ`` for all laws), with
    ``p`` first moved into ``f*``'s domain; ``(p, q)`` returned. ``λ = 0`` gives ``(0, 0)``."""
    name, alpha = fam
    lam = np.broadcast_to(lam, p.shape)
    pos = lam > 0
    lam_safe = np.where(pos, lam, 1.0)
    s = p / lam_safe
    if name == "kl":  # f*(s) = e^{s − 1}
        q = -lam * np.exp(np.minimum(s - 1.0, 700.0))
    elif name == "tv":  # f*(s) = s on [0, 1]
        s = np.clip(s, 0.0, 1.0)
        p, q = lam * s, -lam * s
    elif alpha > 1:  # f*(s) = (α − 1)(s⁺/α)^{α/(α−1)}
        s = np.maximum(s, 0.0)
        p, q = lam * s, -lam * (alpha - 1.0) * (s / alpha) ** (alpha / (alpha - 1.0))
    else:  # f = −t^α: f*(s) = (1 − α)(α/(−s))^{α/(1−α)} for s < 0
        s = np.minimum(s, -1e-300)
        p, q = lam * s, -lam * (1.0 - alpha) * (alpha / -s) ** (alpha / (1.0 - alpha))
    return np.where(pos, p, 0.0), np.where(pos, q, 0.0)


def tangents(terms: Terms, term: np.ndarray, ratio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(a, c)``: the tangent planes ``a P + c Q`` of each ``term``'s ``Q f(P/Q)`` at ``ratio``
    (clipped to :func:`_ratio_range`, where the coefficients stay within
    :data:`LARGEST_COEFFICIENT`)."""
    a, c = np.zeros(term.size), np.zeros(term.size)
    for i, fam in enumerate(terms.families):
        on = terms.family[term] == i
        a[on], c[on] = _tangent(fam, np.clip(ratio[on], *_ratio_range(fam)))
    return a, c


class _Cuts:
    """The tangent rows, as arrays: term, output, ``a``, ``c``."""

    def __init__(self):
        self.term = np.zeros(0, np.int64)
        self.out = np.zeros(0, np.int64)
        self.a = np.zeros(0)
        self.c = np.zeros(0)

    def add(self, terms: Terms, term, out, ratio) -> int:
        a, c = tangents(terms, term, ratio)
        self.term, self.out = np.concatenate([self.term, term]), np.concatenate([self.out, out])
        self.a, self.c = np.concatenate([self.a, a]), np.concatenate([self.c, c])
        return term.size

    def new(self, terms: Terms, term, out, ratio) -> np.ndarray:
        """Which of these tangents (after clipping) are not among the rows already."""
        probe = _Cuts()
        probe.add(terms, term, out, ratio)
        old = set(zip(self.term.tolist(), self.out.tolist(), self.a.tolist(), self.c.tolist(), strict=True))
        return np.array([k not in old for k in zip(probe.term.tolist(), probe.out.tolist(), probe.a.tolist(),
                                                   probe.c.tolist(), strict=True)], bool)

    def extend(self, other: _Cuts) -> None:
        self.term, self.out = np.concatenate([self.term, other.term]), np.concatenate([self.out, other.out])
        self.a, self.c = np.concatenate([self.a, other.a]), np.concatenate([self.c, other.c])


def _laws(terms: Terms, table_rows: np.ndarray):
    """``(P, Q)`` ``[T, Y]`` of every term at a table ``[R, Y]``."""
    return terms.wp @ table_rows, terms.wq @ table_rows


def _term_values(terms: Terms, p, q):
    """``[T, Y]`` of ``Q f(P/Q)`` (``+inf`` where ``P > 0 = Q`` for an unbounded f)."""
    out = np.zeros(p.shape)
    for i, fam in enumerate(terms.families):
        on = terms.family == i
        pp, qq = p[on], q[on]
        with np.errstate(divide="ignore", invalid="ignore"):
            v = qq * _f(fam, np.where(qq > 0, pp / np.where(qq > 0, qq, 1.0), 1.0))
        if fam[0] == "tv":
            v = np.maximum(pp - qq, 0.0)
        elif fam[0] == "kl" or fam[1] > 1:
            v = np.where((qq <= 0) & (pp > 0), np.inf, np.where(qq > 0, v, 0.0))
        else:  # −P^α Q^{1−α}: 0 where either law is 0
            v = np.where(qq > 0, v, 0.0)
        out[on] = v
    return out


class _Model(HighsModel):
    """The outer-approximation LP on the working support, held by HiGHS between rounds: rows and
    columns are added, and each solve starts from the last basis.

    Rows: the full linear LP's (``full``: its equalities, then its inequalities, every one of
    them even where no column of the support enters yet), one per budget (``Σ_y t ≤ b``), then, in
    the order added, two law rows per opened ``(term, y)`` (``P = Σ_r wp[r] A[r, y]``, the same
    for ``Q``) and the tangents ``a P + c Q − t ≤ 0`` (:attr:`cut_rows`; three coefficients each,
    however many entries the laws hold). Columns: the full LP's variables other than the
    table's (``z``, the epigraph ``t``), then, as the support grows, its table entries
    (:attr:`col_of_entry`) and ``t`` (free), ``P``, ``Q`` (≥ 0) of every output ``y`` where an
    entry of the support enters one of the term's laws (:attr:`tcol`, :attr:`pcol`,
    :attr:`qcol`) — only those: a term whose laws have no mass at ``y`` contributes 0 there,
    so divergence DP's row pairs stay sparse."""

    def __init__(self, problem: Problem, full, terms: Terms):
        super().__init__(problem, full, terms)
        n_eq = full.a_eq.shape[0]
        n_ub = 0 if full.a_ub is None else full.a_ub.shape[0]
        self.n_lin = n_eq + n_ub
        parts = [full.a_eq] + ([] if full.a_ub is None else [full.a_ub])
        self.columns = scipy.sparse.vstack(parts).tocsc()
        self.columns.sort_indices()
        lower = np.concatenate([full.b_eq, np.full(n_ub, -self.inf)])
        upper = np.concatenate([full.b_eq, [] if full.a_ub is None else full.b_ub])
        n_terms = terms.wp.shape[0]
        empty = scipy.sparse.csr_array((self.n_lin + n_terms, 0))
        self._add_rows(np.concatenate([lower, np.full(n_terms, -self.inf)]),
                       np.concatenate([upper, terms.budget]), empty)
        extra = np.arange(self.n_table, full.c.size)
        self._add_cols(full.c[extra], np.zeros(extra.size), np.full(extra.size, self.inf),
                       self._pad(self.columns[:, extra]))
        self.extra_cols = np.arange(extra.size)
        self.col_of_entry = np.full(self.n_table, -1)
        self.tcol, self.pcol, self.qcol, self.prow, self.qrow = (np.full((n_terms, self.n_out), -1)
                                                                 for _ in range(5))
        self.terms_of_row = scipy.sparse.csr_array(((terms.wp != 0) | (terms.wq != 0)).T.astype(np.int8))
        self.entries = np.zeros(0, np.int64)
        self.cuts = _Cuts()
        self.cut_rows = np.zeros(0, np.int64)
        self.in_support = np.zeros(self.n_table, bool)

    def _pad(self, block):
        """``block`` (rows of the full LP) with zero rows below for the other rows."""
        n_rows = self.h.getNumRow()
        zeros = scipy.sparse.csc_array((n_rows - block.shape[0], block.shape[1]))
        return scipy.sparse.vstack([block, zeros]).tocsc()

    def set_budgets(self, budget: np.ndarray) -> None:
        """The budget rows' right-hand sides."""
        n_terms = budget.size
        rows = self.n_lin + np.arange(n_terms, dtype=np.int32)
        self._check(self.h.changeRowsBounds(n_terms, rows, np.full(n_terms, -self.inf), budget))
        self.terms = self.terms._replace(budget=budget)

    def _open(self, pairs: np.ndarray) -> None:
        """The ``t``, ``P``, ``Q`` columns and the two law rows of each ``(term, y)`` of
        ``pairs`` (no support entry enters these laws yet: the rows hold ``P`` or ``Q`` alone)."""
        k, term, out = pairs.shape[0], pairs[:, 0], pairs[:, 1]
        budget = scipy.sparse.csc_array((np.ones(k), (self.n_lin + term, np.arange(k))),
                                        shape=(self.h.getNumRow(), k))
        self.tcol[term, out] = self._add_cols(np.zeros(k), np.full(k, -self.inf), np.full(k, self.inf),
                                              budget)
        none = scipy.sparse.csc_array((self.h.getNumRow(), 2 * k))
        cols = self._add_cols(np.zeros(2 * k), np.zeros(2 * k), np.full(2 * k, self.inf), none)
        self.pcol[term, out], self.qcol[term, out] = cols[:k], cols[k:]
        laws = scipy.sparse.csr_array((np.ones(2 * k), (np.arange(2 * k), cols)),
                                      shape=(2 * k, self.h.getNumCol()))
        rows = self._add_rows(np.zeros(2 * k), np.zeros(2 * k), laws)
        self.prow[term, out], self.qrow[term, out] = rows[:k], rows[k:]

    def add_entries(self, new: np.ndarray, ratios: np.ndarray = START_RATIOS) -> int:
        """The full LP's table columns ``new`` join the support, with the ``t``, ``P``, ``Q``, law
        rows and starting tangents (at ``ratios``) of the outputs they open to a term; returns
        how many entries were new."""
        new = np.unique(new[~self.in_support[new]])
        if not new.size:
            return 0
        self.in_support[new] = True
        # the (term, output) pairs the new entries open
        touch = self.terms_of_row[self.entry_row[new]].tocoo()
        term, out = touch.col, self.entry_out[new][touch.row]
        pairs = np.unique(np.stack([term, out], 1), axis=0).reshape(-1, 2)
        pairs = pairs[self.tcol[pairs[:, 0], pairs[:, 1]] < 0]
        if pairs.size:
            self._open(pairs)
        # each new entry's coefficients −wp, −wq in the law rows of the terms it enters
        r = self.entry_row[new][touch.row]
        wp, wq = self.terms.wp[term, r], self.terms.wq[term, r]
        law = scipy.sparse.csc_array(
            (np.concatenate([-wp, -wq]),
             (np.concatenate([self.prow[term, out], self.qrow[term, out]]), np.tile(touch.row, 2))),
            shape=(self.h.getNumRow(), new.size))
        law.eliminate_zeros()
        block = self._pad(self.columns[:, new]) + law
        self.col_of_entry[new] = self._add_cols(self.full.c[new], np.zeros(new.size),
                                                np.full(new.size, self.inf), block)
        self.entries = np.concatenate([self.entries, new])
        if pairs.size and ratios.size:
            n = ratios.size
            self.add_cuts(np.repeat(pairs[:, 0], n), np.repeat(pairs[:, 1], n),
                          np.tile(ratios, pairs.shape[0]))
        return new.size

    def add_cuts(self, term, out, ratio) -> int:
        """Tangents of ``term`` at output ``out`` (whose ``t`` exists) at the ratios ``P/Q`` given;
        returns how many."""
        new = _Cuts()
        new.add(self.terms, term, out, ratio)
        k = term.size
        rows = scipy.sparse.csr_array(
            (np.concatenate([new.a, new.c, -np.ones(k)]),
             (np.tile(np.arange(k), 3),
              np.concatenate([self.pcol[term, out], self.qcol[term, out], self.tcol[term, out]]))),
            shape=(k, self.h.getNumCol()))
        rows.eliminate_zeros()
        added = self._add_rows(np.full(k, -self.inf), np.zeros(k), rows)
        self.cut_rows = np.concatenate([self.cut_rows, added])
        self.cuts.extend(new)
        return k

    def solve(self, problem: Problem) -> _Round | None:
        """The LP's optimum (``None`` when HiGHS finds none)."""
        import highspy

        self.h.run()
        self.status = self.h.getModelStatus()
        done = (highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kInfeasible,
                highspy.HighsModelStatus.kTimeLimit)
        if self.status not in done:
            self.h.clearSolver()  # a failed hot start (seen on the quick start's city): from scratch
            self.h.run()
            self.status = self.h.getModelStatus()
        if self.status != highspy.HighsModelStatus.kOptimal:
            return None
        sol = self.h.getSolution()
        x, dual = np.asarray(sol.col_value), np.asarray(sol.row_dual)
        table = np.zeros(self.n_table)
        table[self.entries] = np.clip(x[self.col_of_entry[self.entries]], 0.0, None)
        mask = problem.support_mask()
        full_table = np.zeros(mask.shape)
        full_table[mask] = table
        full_table /= full_table.sum(axis=-1, keepdims=True)
        n_terms = self.terms.wp.shape[0]
        n_eq = self.full.a_eq.shape[0]
        return _Round(full_table, float(self.h.getInfo().objective_function_value),
                      np.where(self.tcol >= 0, x[np.maximum(self.tcol, 0)], 0.0),
                      dual[n_eq:self.n_lin] if self.full.a_ub is not None else None,
                      np.maximum(-dual[self.n_lin:self.n_lin + n_terms], 0.0),
                      np.maximum(-dual[self.cut_rows], 0.0))


@dataclasses.dataclass
class _Round:
    """One LP solution: the table, the LP's value, the ``t``, and the multipliers of the full
    LP's inequalities (scipy's sign), the budgets (``λ ≥ 0``) and the tangents (``μ ≥ 0``)."""

    table: np.ndarray  # [S, X, Y]
    value: float
    t: np.ndarray  # [T, Y]
    ineq: np.ndarray | None
    lam: np.ndarray  # [T]
    mu: np.ndarray  # [n_cuts]


def _bound(problem, full, terms: Terms, cuts: _Cuts, rnd: _Round):
    """``(bound, reduced [S·X, Y])``: the Lagrangian bound of the whole problem at ``rnd``'s
    multipliers (module docstring), and every entry's reduced cost in the LP (its tangents'
    ``q = Σ μ c`` as they are: the prices that say which entries would improve it)."""
    from diffpriv.solvers._lp import _reduced_costs, scaled_bound

    n_prof, n_in, n_out = problem.shape
    n_terms = terms.wp.shape[0]
    p, q_lp = np.zeros((n_terms, n_out)), np.zeros((n_terms, n_out))
    np.add.at(p, (cuts.term, cuts.out), rnd.mu * cuts.a)
    np.add.at(q_lp, (cuts.term, cuts.out), rnd.mu * cuts.c)
    # Where a term has no tangent yet (no support entry enters its laws at that output), its
    # LP multipliers are 0; for ``f = −t^α`` (α < 1) ``f*(0)`` is infinite, so the pair there is
    # λ times the tangent at ratio 1 instead (valid, finite), and entries are priced by it too.
    untouched = np.ones((n_terms, n_out), bool)
    untouched[cuts.term, cuts.out] = False
    for i, fam in enumerate(terms.families):
        if fam[0] == "power" and fam[1] < 1:
            on = untouched & (terms.family == i)[:, None]
            a, c = _tangent(fam, 1.0)
            lam = np.broadcast_to(rnd.lam[:, None], on.shape)[on]
            p[on], q_lp[on] = lam * a, lam * c
    price = terms.wp.T @ p + terms.wq.T @ q_lp  # [R, Y]
    q = np.zeros_like(p)
    for i, fam in enumerate(terms.families):
        on = terms.family == i
        p[on], q[on] = _conjugate_q(fam, p[on], rnd.lam[on, None])
    mask = problem.support_mask()
    lag = _reduced_costs(full, rnd.ineq, None)
    reduced, constant = lag.reduced, lag.constant
    n_table = int(mask.sum())
    entries = np.full(mask.shape, np.inf)
    entries[mask] = reduced[:n_table] + price.reshape(mask.shape)[mask]
    del price
    # In place, one table-sized array at a time (a 64×64 grid's table has 1.7·10⁷ entries).
    reduced[:n_table] += (terms.wp.T @ p + terms.wq.T @ q).reshape(mask.shape)[mask]
    size = abs(terms.wp).T @ np.abs(p) + abs(terms.wq).T @ np.abs(q)  # the multipliers' magnitudes
    lag.size[:n_table] += size.reshape(mask.shape)[mask]
    del size
    reduced -= full.c
    true = float(rnd.lam @ terms.true_budget)
    n_terms = terms.wp.shape[0]
    budget_size = float(np.abs(rnd.lam) @ np.abs(terms.true_budget))
    errors = lag._replace(depth=lag.depth + 2 * n_terms + 2, constant_depth=lag.constant_depth + n_terms + 1,
                          constant_size=lag.constant_size + budget_size)
    bound = scaled_bound(full, reduced, constant - true, errors=errors)
    return bound, entries.reshape(n_prof * n_in, n_out)


class CutsRun(Declared):
    """Column-and-cut generation on ``problem`` (:func:`applies`) under ``opt``'s ``gap_tol`` and
    ``steps`` (the most LP rounds: ``min(steps, 500)``), one LP round a chunk, as a
    :class:`._driver.Run` (module docstring). The seed takes no part; it is recorded."""

    name, labels = "cuts", ("cuts",)
    warm_starts = False

    @classmethod
    def accepts(cls, problem) -> bool:
        return applies(problem, divergence_kinds(problem.blocks()))

    def __init__(self, opt, problem: Problem, seed: int):
        from diffpriv.solvers._lp import _build
        from diffpriv.solvers._rows import smallest_objective

        self.opt, self.problem = opt, problem
        blocks = tuple(b for b in problem.blocks() if b.linear)
        self.tighten_rel = min(max(opt.gap_tol / 4.0, TIGHTEST), 1e-2)
        self.terms = _terms(problem, self.tighten_rel)
        self.full = _build(problem, blocks)
        self.model = _Model(problem, self.full, self.terms)
        self.mask = problem.support_mask()
        start, coarse = start_support(problem), coarse_start(problem, opt, type(self))
        self.model.add_entries(np.flatnonzero((start if coarse is None else start | coarse)[self.mask]))
        self.bound, self.best, self.rounds, self.rnd = smallest_objective(problem), None, 0, None
        self.total = min(opt.steps, MAX_ROUNDS)
        self.column_of = np.full(self.mask.size, -1, np.int32 if self.mask.size < 2**31 else np.int64)
        self.column_of[np.flatnonzero(self.mask)] = np.arange(self.model.n_table)

    def chunk(self) -> Chunk:
        from diffpriv.certification._repair import repair

        model, problem, gap_tol = self.model, self.problem, self.opt.gap_tol
        self.rounds += 1
        rnd = model.solve(problem)
        if rnd is None:
            import highspy

            if model.status == highspy.HighsModelStatus.kInfeasible and not model.in_support.all():
                model.add_entries(np.arange(model.n_table))  # the working support admits no table
                return Chunk(self.rounds, np.inf)
            if self.best is not None:  # keep the best table so far
                return Chunk(self.rounds, relative_gap(self.best[0], self.bound), Status.STALLED)
            raise CutsSolveError(f"optimizer: HiGHS found no optimum of the cut model "
                                 f"({model.h.modelStatusToString(model.status)})")
        self.rnd = rnd
        lb, reduced = _bound(problem, self.full, self.terms, model.cuts, rnd)
        self.bound = max(self.bound, lb)
        if relative_gap(rnd.value, self.bound) <= gap_tol:  # the repaired table can be close enough
            fixed = repair(problem, rnd.table).table
            loss = problem.objective_value(fixed)
            if self.best is None or loss < self.best[0]:
                self.best = (loss, fixed)
        gap = relative_gap(self.best[0] if self.best is not None else rnd.value, self.bound)
        if self.best is not None and gap <= gap_tol:
            return Chunk(self.rounds, gap, Status.CONVERGED)
        support = np.zeros(self.mask.size, bool)
        support[np.flatnonzero(self.mask)] = model.in_support
        added = _add_cuts(model, rnd) + model.add_entries(
            self.column_of[new_columns(support.reshape(-1, problem.shape[2]), reduced)])
        if not added:  # the LP's optimum at the tightened budgets: what tightening costs
            if self.tighten_rel <= TIGHTEST:
                return Chunk(self.rounds, gap, Status.STALLED)
            self.tighten_rel = max(self.tighten_rel / 10.0, TIGHTEST)
            model.set_budgets(_terms(problem, self.tighten_rel).budget)
        return Chunk(self.rounds, gap)

    def finish(self, status: Status) -> Outcome:
        from diffpriv.certification._repair import repair

        if self.best is None:
            fixed = repair(self.problem, self.rnd.table).table
            self.best = (self.problem.objective_value(fixed), fixed)
        return Outcome(self.best[1], self.bound, status, plan="cuts", method=self.name, prices=self._prices())

    def _prices(self) -> dict | None:
        """The price of privacy from the last LP's multipliers (:mod:`._price`), where every
        constraint is linear: the LP over the columns found, whose optimum is within the run's
        ``gap_tol`` of the whole problem's, so its rates are as close."""
        from diffpriv.problems._blocks import budgets
        from diffpriv.solvers._lp import privacy_multipliers
        from diffpriv.solvers._price import prices

        blocks = self.problem.blocks()
        if self.rnd is None or self.rnd.ineq is None or not all(b.linear for b in blocks):
            return None
        duals = np.clip(-np.asarray(self.rnd.ineq, np.float64), 0.0, None)
        k, ny = budgets(blocks).size, self.problem.shape[2]
        multipliers, delta = privacy_multipliers(self.full, k, ny, duals)
        return prices(self.problem, self.rnd.table, multipliers, delta)


def _add_cuts(model: _Model, rnd: _Round) -> int:
    """Tangents at the laws of ``rnd``'s table, for every output whose term its ``t`` undershoots,
    in every term whose budget the table exceeds."""
    terms = model.terms
    rows = rnd.table.reshape(-1, rnd.table.shape[-1])
    p, q = _laws(terms, rows)
    values = _term_values(terms, p, q)
    over = values.sum(axis=1) > terms.budget + 1e-12 * np.maximum(np.abs(terms.budget), 1.0)
    under = (values - rnd.t > 1e-12) & over[:, None] & ((p > 0) | (q > 0))
    term, out = np.nonzero(under)
    if not term.size:
        return 0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = p[term, out] / q[term, out]
    ratio = np.where(np.isfinite(ratio), ratio, np.inf)
    new = model.cuts.new(terms, term, out, ratio)
    return model.add_cuts(term[new], out[new], ratio[new])


TINY = 1e-6
""":func:`bound_at`: a term's output where both laws are below this gets the wide tangents of
:data:`START_RATIOS` (an interior point solver leaves an entry that is 0 at the optimum at about
its tolerance, with a ratio that means nothing); the others get :data:`NEAR` tangents about
their own ratio."""

NEAR = np.exp(np.array([-0.02, 0.0, 0.02]))
"""The ratios, relative to the table's own, of :func:`bound_at`'s tangents at each output: a
conic solver's small entries are off by a few per cent relative (Clarabel's on a 6×6 KL-DP grid:
one tangent at the table's ratio bounded 6 % below its optimum, these three 8·10⁻⁶)."""


def bound_at(problem: Problem, table: np.ndarray, value: float, gap_tol: float, rounds: int = 3,
             seconds: float = 10.0) -> float:
    """A lower bound on the optimum of ``problem`` (f-divergence constraints, :func:`applies`) from
    tangents at a near-optimal ``table`` of objective ``value``: the cut LP over every entry with
    the tangents of :data:`NEAR` and :data:`TINY`, then at most ``rounds`` rounds of Kelley's cuts
    while the gap to ``value`` exceeds ``gap_tol / 4``. Each round's bound is the whole problem's
    Lagrangian at the LP's multipliers (:func:`_bound`), valid whatever the table; the best is
    returned (``-inf`` when HiGHS solves no LP). The rounds stop after ``seconds`` (HiGHS gets what
    is left of them): on a 5×5 KL-DP grid whose Clarabel point left zeros where KL needs mass,
    the third and fourth rounds' LPs took 32 and 93 s where the first two took 2.5 s."""
    import time

    from diffpriv.solvers._lp import _build

    deadline = time.perf_counter() + seconds

    terms = _terms(problem, 0.0)
    full = _build(problem, tuple(b for b in problem.blocks() if b.linear))
    model = _Model(problem, full, terms)
    mask = problem.support_mask()
    model.add_entries(np.arange(int(mask.sum())), ratios=np.zeros(0))
    rows = np.asarray(table, np.float64).reshape(-1, mask.shape[-1])
    p, q = _laws(terms, rows)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(q > 0, p / np.where(q > 0, q, 1.0), np.where(p > 0, np.inf, 1.0))
    opened = model.tcol >= 0
    tiny = np.maximum(p, q) < TINY
    term, out = np.nonzero(opened & ~tiny)
    model.add_cuts(np.tile(term, NEAR.size), np.tile(out, NEAR.size),
                   np.outer(NEAR, ratio[term, out]).ravel())
    term, out = np.nonzero(opened & tiny)
    n = START_RATIOS.size
    model.add_cuts(np.repeat(term, n), np.repeat(out, n), np.tile(START_RATIOS, term.size))
    best = -np.inf
    for _ in range(rounds + 1):
        left = deadline - time.perf_counter()
        if left <= 0 and np.isfinite(best):
            break
        model.h.setOptionValue("time_limit", float(max(left, 1.0)))  # the first LP always gets a second
        rnd = model.solve(problem)
        if rnd is None:
            break
        best = max(best, _bound(problem, full, terms, model.cuts, rnd)[0])
        if relative_gap(value, best) <= gap_tol / 4 or not _add_cuts(model, rnd):
            break
    return best
