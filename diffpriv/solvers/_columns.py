"""Pure pair bounds by column generation over the table's output columns (Dantzig–Wolfe).

**Structure.** Under local and extended DP and geo-indistinguishability with δ = 0, every
constraint ``A[r_a, y] ≤ e^{ε} A[r_b, y]`` holds within one output column ``y``, and the expected
loss is a sum over columns: only the rows' sums ``Σ_y A[r, y] = 1`` tie the columns together.
Each column lies in the cone ``K_y`` of vectors meeting those bounds (and zero where the support
forbids ``y``), so a table is a choice, per output, of a point of ``K_y`` (a nonnegative
combination of its rays) whose columns add up to ones (Dantzig & Wolfe 1960).

**The master.** A HiGHS LP over the rays found so far: one weight per ray, one row per table row
(``Σ_j w_j r_j[r] = 1``), each ray costing its expected loss. Its solution is a feasible table
whatever rays it holds; its row multipliers ``μ`` price new rays. Under the worst-case loss the
master minimises ``t`` over rows ``Σ_j w_j r_j[r] L[x_r, y_j] ≤ t`` (rows of positive prior), and
their multipliers ``ρ`` (a distribution) weigh the rows' losses in place of the prior: the worst
row loss is at least any ``ρ``-weighted mean, so the bound below holds with ``ρ`` for ``π``.

**Pricing and the bound** (:mod:`._column_pricing`). For each output,
``v_y(μ) = min {(C[:, y] − μ)·a : a ∈ K_y, 0 ≤ a ≤ 1}`` is a small LP (the rows, the pair bounds of
one column) solved by HiGHS, each output warm-started from its own last basis; the vertices of
``K_y ∩ [0, 1]`` are the columns ``e^{−dist_ε(·, S)}`` of the sets ``S`` of rows at 1, so the new
rays are such columns. Because every table entry is at most 1, the Lagrangian of the row sums,

    ``Σ_r μ_r + Σ_y v_y(μ)``,

is a lower bound of the optimum for **every** ``μ`` (weak duality; the box makes it finite).
Each ``v_y`` is bounded below in numpy from the pricing LP's own multipliers ``λ ≥ 0`` of the pair
bounds at the real budgets, ``Σ_r min(0, (C[:, y] − μ + Mᵀλ)_r)``, so the bound does not rest on
HiGHS's tolerances. The master's value falls and the bound rises to the optimum as rays are
added; at most ``|rows|`` rays carry weight at a basic optimum, so few rounds suffice.

**Exactness.** Rays are priced at the real budgets and then raised to the smallest majorant that
meets budgets tightened by a hair (:func:`._linear.tighten_eps`) exactly in log space (a
shortest-path closure, as :mod:`._majorant` does for tables), so the table meets the real
budgets up to the rows' renormalisation, which the margin absorbs; a raised ray joins the master
only if it still prices out. On geo-indistinguishability between 4-neighbour
cells of a 16×16 grid it certifies within 0.03 % in 10 rounds and about 2 s where HiGHS on the
whole LP takes minutes (``benchmarks/scaling.py``).

**Beside f-divergences** (KL, reverse KL, χ², Hellinger, Rényi: divergence DP between rows, or
divergence DistP). Each budget is ``Σ_y φ_t(A[:, y]) ≤ b_t`` with ``φ_t(a) = Q f(P/Q)`` of the
column's laws ``P = wp_t·a``, ``Q = wq_t·a``: a sum over columns again, of a convex, positively
homogeneous ``φ_t`` (Dantzig's generalized linear programming). The master gains a row per budget,
``Σ_j w_j φ_t(r_j) ≤ b_t(1 − 10⁻⁶)``, each ray carrying its own ``φ_t(r_j)``, computed exactly:
as ``φ_t(Σ_j w_j r_j) ≤ Σ_j w_j φ_t(r_j)``, its table meets the budgets whatever rays it holds.
Pricing adds ``Σ_t λ_t φ_t(a)`` (``λ`` the budget rows' multipliers) to each output's cost, over
tangent planes of ``φ_t`` in a pricing LP of the output's own, refined at its optimum's ratios;
the bound becomes ``Σ_r μ_r − Σ_t λ_t b_t + Σ_y v_y(μ, λ)`` at the real budgets, each ``v_y``
bounded from its LP's multipliers with the tangents' weights summing to ``λ_t`` (a tangent lies
below ``φ_t``). Three aids, each measured on the KL-DP and geo-indistinguishability grids of
``benchmarks/divergence_optimality.py --beside geo``: every output also starts from flatter rays
(:data:`FLATTER`); the master's mix of rays at an output joins as one ray (it frees budget);
and the row multipliers are kept in a box around those of the best bound (:data:`BOX`). This
converges where the augmented Lagrangian stalls, but in tens of rounds, not a handful: the
master's value and the bound close in the manner of Kelley's cutting planes. Hockey-stick bounds
(δ > 0) beside are master rows too (:func:`._column_pricing.hockey_sticks`): ``Σ_y max(0, P −
e^ε Q)`` is a sum over columns of total variation's ``φ`` at ``Q' = e^ε Q``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph

from diffpriv.problems._problem import Problem
from diffpriv.solvers._column_pricing import TOLERANCE, DivergencePricing, DivergenceTerms, Pricing
from diffpriv.solvers._cut_lp import CutsSolveError
from diffpriv.solvers._driver import Chunk, Declared, Outcome, Status, relative_gap
from diffpriv.solvers._highs import quiet_highs

__all__ = ["ColumnsRun", "applies", "balanced"]

MAX_ROUNDS = 500
LARGEST_RATIO = 1e6
"""Pair bounds with ``e^ε`` above this are left to the other solvers (HiGHS's pricing rows would
carry coefficients beyond its comfortable range)."""
BALANCE = 0.5
"""``"auto"`` runs column generation on the expected loss only where the prior's perplexity is
at least this share of the rows (``benchmarks/columns.py --only priors``): 4-neighbour 10×10
grids with Dirichlet(α) priors converged in 9 and 13 rounds for α = 10 and 1 (perplexity 0.96
and 0.66 of the rows) and not in 60 for α = 0.1 (0.18); the Sacramento sales' prior on 14×14
cells (75 of 196 cells hold a sale) not in 40."""
AUTO_ROUNDS = 25
"""Under ``method = "auto"`` a run stops ``stalled`` after this many rounds without converging,
and the next solver of the route takes over (HiGHS where it fits, else PDHG). With a uniform
prior, 4-neighbour grids from 8×8 to 48×48 converged in 4–12 rounds at ``gap_tol`` 10⁻² to 10⁻⁴.
Where the prior is far from uniform the master's multipliers swing and the master degenerates:
geo-indistinguishability on a 10×10 grid with a Dirichlet(0.1) prior had no Lagrangian bound
above 0 after 60 rounds (the master's value falling about 1 % a round), and with the Sacramento
sales' prior on 14×14 cells (most rows of prior 0) the master was 13× above the bound after 100
rounds; Wentges' smoothing of the multipliers (pricing at a convex combination with those of the
best bound) made it worse. Small random problems converged after plateaus of up to 90 rounds
(158 rounds in all)."""
BOUNDLESS_ROUNDS = 10
"""… and after this many, where the Lagrangian bound has not yet risen above the trivial one
(:func:`._linear.smallest_objective`). On uniform 4-neighbour 12×12 grids
(``benchmarks/columns.py --only budgets``) the run converged in
1–8 rounds for ε = 2, 1 and 0.5 per cell side, in 37 rounds for 0.3, and had no bound above 0
after 40 rounds for 0.2 and 0.1 (nor on ``configs/geo-grid.toml`` cut to 16×16, ε = 0.2 per
cell side, after 60): small budgets make wide columns and the same swinging multipliers as
skewed priors."""
MASTER_SIMPLEX = 4
"""HiGHS's simplex strategy for the master (4: primal; new rays keep its basis primal feasible)."""
SMALLEST = 1e-9
"""A ray's entries below this (of its largest, 1) are left out of the master's rows, as HiGHS
drops such coefficients itself; the table keeps them and its rows are renormalised."""
DIVERGENCE_MARGIN = 1e-6
"""Divergence budgets are met with ``ε(1 − DIVERGENCE_MARGIN)`` in the master, room for the
rows' renormalisation and the certifier's float64 safety margin."""
INNER = 1
"""Each output's pricing LP is solved up to this many times a round, with tangents added at its
optimum's ratios in between while its estimate of ``φ`` falls short of the truth (and after the
last solve, for the next round). On an 8×8 Rényi-2 DP and geo-indistinguishability grid started
from mirror-prox's table (two runs side by side), 1 solve had the table 9.1 % above its bound
after 180 s and 67 rounds, 3 solves 13.5 % after 188 s and 43 rounds."""
BOX = 0.1
"""Under divergence budgets the master's row multipliers are kept within ``centre ± BOX·c_max``
(``c_max`` the largest weighted loss), the centre moving to the multipliers of each better
bound (0: no box). On the 6×6 KL-DP and Rényi-2-DP grids beside geo-indistinguishability of
``benchmarks/divergence_optimality.py`` at ``gap_tol = 10⁻²`` (seed 0 of each, where the budget
binds; three pricing solves a round) it took 41 and 118 rounds against 42 and 129 without."""
FLATTER = (0.5, 0.25, 0.125)
"""Under divergence budgets every output also starts from its row's ray at these fractions of the
pair budgets (flatter columns, whose divergence terms are small): 1.30 against 1.35 for the
master's value after 3 rounds on the 6×6 KL-DP grid (seed 0, optimum 1.030)."""


def applies(problem: Problem) -> bool:
    """Whether column generation over output columns runs ``problem``: every linear constraint a
    pure pair bound (local or extended DP, δ = 0, ``e^ε ≤`` :data:`LARGEST_RATIO`), at least one of
    them; with f-divergences (:func:`._f_forms.f_divergences`: KL, reverse KL, χ², Hellinger,
    Rényi, TV; divergence DP or DistP) beside, also hockey-stick bounds (δ > 0, between rows or
    item laws, ``e^ε ≤`` :data:`LARGEST_RATIO`: budget rows of the master as the divergences'
    are); and the expected or the worst-case loss as objective. Without a pure pair bound the
    pricing LP may leave one law of a term at 0 where the other is not (an infinite KL or χ²
    term): on a 4×4 KL-DP grid with approximate local DP (δ > 0) beside, rays floored at 10⁻⁶ of
    their largest entry took 70 rounds to a 5 % gap. Hockey-stick bounds alone (TV-DP: no pure
    pair bound, but no infinite term either) are left to mirror-prox: admitted here (a scratch
    patch), TV-DP on the 8×8 grid of ``benchmarks/divergence_optimality.py`` (seed 0) took 140
    rounds and 81 s to a 0.73 % gap, where mirror-prox took 17.5 s, compiling included, to 0.30 %."""
    blocks = problem.blocks()
    if not blocks or problem.objective.kind not in ("expected", "worst") or problem.objective.transport:
        return False
    linear = [b for b in blocks if b.linear]
    if not linear or any(np.any(np.asarray(b.eps) > np.log(LARGEST_RATIO)) for b in linear):
        return False
    pure = [_pure_pairs(b) for b in linear]
    if not any(pure):
        return False
    if problem.linear:
        return all(pure)
    from diffpriv.solvers._f_forms import f_divergences

    if not all(p or b.divergence == "hockey_stick" for p, b in zip(pure, linear, strict=True)):
        return False
    kinds = dict.fromkeys((b.divergence, b.alpha) for b in blocks if not b.linear)
    return f_divergences(kinds) and not any(b.divergence == "wasserstein" for b in blocks)


def _pure_pairs(block) -> bool:
    from diffpriv.problems._blocks import PairBlock

    return isinstance(block, PairBlock) and block.divergence == "max"


def balanced(problem: Problem) -> bool:
    """Whether ``"auto"`` expects column generation to converge on ``problem`` (:data:`BALANCE`):
    under the expected loss, the prior's perplexity ``e^{H(π)}`` is at least :data:`BALANCE` of
    its rows (the worst case weighs rows by its own multipliers: always)."""
    if problem.objective.kind != "expected":
        return True
    prior = problem.prior.reshape(-1)
    p = prior[prior > 0] / prior.sum()
    return float(np.exp(-np.sum(p * np.log(p)))) >= BALANCE * prior.size


def _edges(problem: Problem, tight: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pure pair bound ``a[i] ≤ e^{ε} a[j]`` over the flattened rows: ``(i, j, ε)``, both
    directions unless a block is directed; ``ε`` tightened when ``tight``."""
    from diffpriv.solvers._rows import tighten_eps

    nx = problem.shape[1]
    heads, tails, eps = [], [], []
    for block in problem.blocks():
        if not _pure_pairs(block):
            continue
        ra, rb = block.rows(nx)
        e = np.broadcast_to(np.asarray(block.eps, np.float64), ra.shape)
        e = tighten_eps(e) if tight else e
        pairs = ((ra, rb),) if block.directed else ((ra, rb), (rb, ra))
        for i, j in pairs:
            heads.append(i)
            tails.append(j)
            eps.append(e)
    return np.concatenate(heads), np.concatenate(tails), np.concatenate(eps)


def _forced_zero(problem: Problem, i: np.ndarray, j: np.ndarray) -> np.ndarray | None:
    """``[R, Y]``: the entries every feasible table holds at 0 (outside the support, or bounded
    by such an entry through a chain of pair bounds), or ``None`` when there are none."""
    ns, nx, ny = problem.shape
    outside = ~problem.support_mask().reshape(ns * nx, ny)
    if not outside.any():
        return None
    reach = scipy.sparse.csr_array((np.ones(i.size), (i, j)), shape=(ns * nx,) * 2)
    zero = outside.copy()
    for y in np.flatnonzero(outside.any(axis=0)):  # rows that reach a forbidden row
        seen = outside[:, y].copy()
        frontier = seen.copy()
        while frontier.any():
            frontier = (reach @ frontier.astype(np.float64) > 0) & ~seen
            seen |= frontier
        zero[:, y] = seen
    return zero


class ColumnsRun(Declared):
    """Column generation over output columns on ``problem`` (:func:`applies`) under ``opt``'s
    ``gap_tol`` and ``steps`` (the most rounds: ``min(steps, 500)``; under ``"auto"``
    :data:`AUTO_ROUNDS`), one round (a master LP and a pricing LP per output) a chunk, as a
    :class:`._driver.Run` (module docstring); ``start``: a table whose columns join the first
    rays (under ``"auto"``, mirror-prox's where it stopped short); ``floor``: a lower bound known
    already (the linear relaxation's, :mod:`._relaxed`), which the run's own starts from. The seed
    takes no part; it is recorded."""

    name, labels = "columns", ("columns",)
    takes_start = takes_floor = hands_over = True
    warm_starts = False

    @classmethod
    def accepts(cls, problem) -> bool:
        return applies(problem)

    def __init__(self, opt, problem: Problem, seed: int, *, start: np.ndarray | None = None,
                 floor: float = -np.inf):

        from diffpriv.solvers._rows import smallest_objective, tighten_eps

        self.opt, self.problem = opt, problem
        ns, nx, ny = problem.shape
        self.n_rows, self.n_out = ns * nx, ny
        self.loss = np.tile(problem.loss, (ns, 1))  # [R, Y]: L[x_r, y]
        self.worst = problem.objective.kind == "worst"
        self.weights = problem.prior.reshape(-1).astype(np.float64)  # the rows' weights in the cost
        self.rated = np.flatnonzero(self.weights > 0)  # the worst case's rows
        i, j, eps = _edges(problem, tight=False)
        tight = tighten_eps(eps)
        self.zero = _forced_zero(problem, i, j)
        self.raise_edges = (i, j, np.maximum(tight, 1e-300))
        self.terms = None if problem.linear else DivergenceTerms(problem, DIVERGENCE_MARGIN)
        self.pricing = (Pricing(self.n_rows, i, j, eps) if self.terms is None
                        else DivergencePricing(self.n_rows, i, j, eps, self.terms))
        self.master = h = quiet_highs()
        h.setOptionValue("primal_feasibility_tolerance", TOLERANCE)
        h.setOptionValue("dual_feasibility_tolerance", TOLERANCE)
        h.setOptionValue("presolve", "off")
        h.setOptionValue("simplex_strategy", MASTER_SIMPLEX)
        ones = np.ones(self.n_rows)
        h.addRows(self.n_rows, ones, ones, 0, np.zeros(self.n_rows, np.int32), np.zeros(0, np.int32),
                  np.zeros(0))
        if self.worst:  # t ≥ Σ_y A[r, y] L[x_r, y] for every row of positive prior: minimise t
            m = self.rated.size
            h.addRows(m, np.full(m, -np.inf), np.zeros(m), 0, np.zeros(m, np.int32), np.zeros(0, np.int32),
                      np.zeros(0))
            h.addCol(1.0, -np.inf, np.inf, m, (self.n_rows + np.arange(m)).astype(np.int32), -np.ones(m))
        self.first_term = h.getNumRow()  # the divergence budgets' rows: Σ_j w_j φ_t(r_j) ≤ b_t
        if self.terms is not None:
            t = self.terms.size
            h.addRows(t, np.full(t, -np.inf), self.terms.budget, 0, np.zeros(t, np.int32),
                      np.zeros(0, np.int32), np.zeros(0))
        self.first_ray = int(self.worst)
        self.stable = self.terms is not None and BOX > 0
        if self.stable:  # the box-step slacks u⁺_r, u⁻_r (module docstring)
            r = self.n_rows
            rows = np.r_[np.arange(r), np.arange(r)].astype(np.int32)
            for sign in (1.0, -1.0):
                h.addCols(r, np.zeros(r), np.zeros(r), np.full(r, np.inf), r,
                          np.arange(r, dtype=np.int32), rows[:r], np.full(r, sign))
            self.slacks = np.arange(self.first_ray, self.first_ray + 2 * r, dtype=np.int32)
            self.first_ray += 2 * r
            rated = self.weights if not self.worst else np.isin(np.arange(r), self.rated) / self.rated.size
            cost = rated[:, None] * self.loss
            if self.zero is not None:
                cost = np.where(self.zero, np.inf, cost)
            self.centre = np.min(cost, axis=1)  # the trivial bound's multipliers
            self.centre_bound = -np.inf
            self.delta = BOX * float(np.max(np.where(np.isfinite(cost), cost, 0.0)))
        self.rays: list[tuple[int, np.ndarray]] = []
        self._start()
        if start is not None:  # another solver's table: its columns, raised, as rays
            table = np.asarray(start, np.float64).reshape(self.n_rows, self.n_out)
            for y in np.flatnonzero(table.max(axis=0) > 0):
                ray, upper = self._raised(table[:, y] / table[:, y].max()), self._upper(y)
                if np.all(ray[upper == 0] == 0):
                    self._add(int(y), ray)
        self.floor = smallest_objective(problem)  # the trivial bound
        self.bound = max(self.floor, floor)
        self.rounds, self.best = 0, None
        self.total = min(opt.steps, MAX_ROUNDS)
        # under "auto" pure pair bounds hand over after AUTO_ROUNDS; beside divergences nothing
        # better follows (the augmented Lagrangian stalls higher), so the run goes on
        self.budget = AUTO_ROUNDS if opt.method == "auto" and self.terms is None else self.total

    def _upper(self, y: int) -> np.ndarray:
        return np.ones(self.n_rows) if self.zero is None else (~self.zero[:, y]).astype(np.float64)

    def _start(self) -> None:
        """The rays every run starts from: each output's ``e^{−dist_ε(r, ·)}`` from its row ``r``
        of least loss where the support allows it, and the all-ones column at the output of least
        loss that every row allows (a table sending every row there meets every bound)."""
        allowed = np.ones(self.n_out, bool) if self.zero is None else ~self.zero.any(axis=0)
        if not allowed.any():
            raise CutsSolveError("optimizer: no output is allowed for every row; column "
                                 "generation has no table to start from")
        common = int(np.argmin(np.where(allowed, self.weights @ self.loss, np.inf)))
        self._add(common, np.ones(self.n_rows))
        loss = self.loss
        for y in range(self.n_out):
            upper = self._upper(y)
            if not upper.any():
                continue
            unit = np.zeros(self.n_rows)
            unit[np.argmin(np.where(upper > 0, loss[:, y], np.inf))] = 1.0
            for flatter in (1.0, *(FLATTER if self.terms is not None else ())):
                ray = self._raised(unit, flatter)
                if np.all(ray[upper == 0] == 0):
                    self._add(y, ray)

    def _raised(self, a: np.ndarray, flatter: float = 1.0) -> np.ndarray:
        """The smallest column above ``a`` that meets the tightened bounds exactly: ``a'[j] =
        max_i a[i] e^{−dist(i, j)}`` over chains of bounds ``a[i] ≤ e^{ε'} a[j]`` (Dijkstra from a
        source joined to every row ``i`` at length ``−log a[i]``); ``flatter < 1``: bounds at
        ``flatter·ε'``."""
        n = self.n_rows
        top = a.max()
        if top <= 0:
            return a
        a = a / top
        pos = np.flatnonzero(a > 0)
        i, j, w = self.raise_edges
        heads, tails = np.r_[i, np.full(pos.size, n)], np.r_[j, pos]
        # 1e-300: a length-0 edge is still an edge
        lengths = np.r_[np.maximum(flatter * w, 1e-300), 1e-300 - np.log(a[pos])]
        graph = scipy.sparse.csr_array((lengths, (heads, tails)), shape=(n + 1,) * 2)
        dist = scipy.sparse.csgraph.dijkstra(graph, directed=True, indices=n)[:n]
        return top * np.exp(-dist)

    def _add(self, y: int, ray: np.ndarray) -> bool:
        """Adds ``ray`` at output ``y`` to the master (not where a divergence term is infinite
        there); returns whether it joined."""
        nz = np.flatnonzero(ray >= SMALLEST).astype(np.int32)
        rows, values = nz, ray[nz]
        if self.terms is not None:
            phi = self.terms.values(ray[:, None])[:, 0]
            if not np.all(np.isfinite(phi)):
                return False
            on = np.flatnonzero(phi != 0)
            rows, values = np.r_[rows, self.first_term + on].astype(np.int32), np.r_[values, phi[on]]
        if self.worst:  # no cost; the ray's share of each rated row's loss
            lossy = np.flatnonzero(ray[self.rated] * self.loss[self.rated, y] != 0)
            rows = np.r_[rows, self.n_rows + lossy].astype(np.int32)
            values = np.r_[values, ray[self.rated[lossy]] * self.loss[self.rated[lossy], y]]
            self.master.addCol(0.0, 0.0, np.inf, rows.size, rows, values)
        else:
            cost = float(self.weights * self.loss[:, y] @ ray)
            self.master.addCol(cost, 0.0, np.inf, rows.size, rows, values)
        self.rays.append((y, ray))
        return True

    def _merge(self, w: np.ndarray) -> int:
        """Adds, for every output where the master's ray weights ``w`` mix several rays, their mix
        as one ray (it meets the tightened pair bounds, as each ray does, and its divergence terms
        are at most the mix of theirs, ``φ`` being convex and homogeneous, so it frees budget);
        returns how many."""
        mixed: dict[int, list[int]] = {}
        for k in np.flatnonzero(w > SMALLEST):
            mixed.setdefault(self.rays[k][0], []).append(int(k))
        added = 0
        for y, ks in mixed.items():
            if len(ks) > 1:
                column = sum(w[k] * self.rays[k][1] for k in ks)
                added += self._add(y, column / column.max())
        return added

    def _weights_of_rays(self) -> np.ndarray:
        return np.asarray(self.master.getSolution().col_value)[self.first_ray:]  # after t, slacks

    def _table(self, w: np.ndarray) -> np.ndarray:
        table = np.zeros((self.n_rows, self.n_out))
        for (y, ray), wj in zip(self.rays[:w.size], w, strict=True):  # rays added since weigh 0
            if wj > 0:
                table[:, y] += wj * ray
        table /= table.sum(axis=1, keepdims=True)
        return table.reshape(self.problem.shape)

    def _price(self, mu: np.ndarray, weights: np.ndarray, scale: float) -> tuple[float, int]:
        """Prices every output at the master's multipliers ``mu`` and the rows' ``weights``: the
        bound ``Σ μ + Σ_y v_y`` there, and how many raised rays that price out joined it."""
        bound, added = float(np.sum(mu)), 0
        for y in range(self.n_out):
            g = weights * self.loss[:, y] - mu
            upper = self._upper(y)
            a, lam = self.pricing.solve(y, g, upper)
            bound += self.pricing.term(g, lam, upper)
            if g @ a < -1e-9 * scale:
                ray = self._raised(a)
                if g @ ray < -1e-9 * scale and np.all(ray[upper == 0] == 0) and self._add(y, ray):
                    added += 1
        return bound, added

    def _price_divergences(self, mu: np.ndarray, weights: np.ndarray, lam: np.ndarray,
                           scale: float) -> tuple[float, int]:
        """:meth:`_price` with the divergence budgets' multipliers ``lam``: each output's reduced
        cost is ``(C − μ)·a + Σ_t λ_t φ_t(a)``, its pricing LP (:class:`DivergencePricing`)
        solved again with tangents at its optimum's ratios while it underestimates that by more
        than a hair; the bound is ``Σ μ − Σ_t λ_t b_t + Σ_y v_y`` at the real budgets ``b``."""
        terms, pricing = self.terms, self.pricing
        bound, added = float(np.sum(mu) - lam @ terms.true_budget), 0
        active = np.flatnonzero(lam > 0)
        for y in range(self.n_out):
            g = weights * self.loss[:, y] - mu
            upper = self._upper(y)
            best = -np.inf
            for _ in range(INNER):
                a, s, v = pricing.solve(y, g, lam, upper)
                best = max(best, v)
                if g @ a + lam @ s >= -1e-9 * scale:
                    break
                ray = self._raised(a)
                phi = terms.values(np.stack([a, ray], 1))
                reduced = g @ ray + lam @ phi[:, 1]
                if reduced < -1e-9 * scale and np.all(ray[upper == 0] == 0) and self._add(y, ray):
                    added += 1
                short = lam[active] * (phi[active, 0] - s[active]) > 1e-6 * scale / max(active.size, 1)
                short = active[short]
                p, q = terms.wp[short] @ a, terms.wq[short] @ a
                ratio = np.clip(p / np.where(q > 0, q, 1e-300), 1e-300, 1e300)
                fresh = pricing.add(y, short, ratio) if short.size else 0
                self.refined += fresh
                if not fresh:
                    break
            bound += best
        return bound, added

    def _weights(self, epigraph_duals: np.ndarray) -> np.ndarray:
        """The rows' weights in the cost: the prior (expected loss), or the worst case's
        multipliers on the rated rows, made a distribution (any distribution ``ρ`` gives a
        bound: the worst row loss is at least the ``ρ``-weighted mean)."""
        if not self.worst:
            return self.weights
        rho = np.zeros(self.n_rows)
        rho[self.rated] = np.maximum(-epigraph_duals, 0.0)
        total = rho.sum()
        if total <= 0:
            rho[self.rated] = 1.0
            total = self.rated.size
        return rho / total

    def _solve(self) -> None:
        import highspy

        h = self.master
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:  # the warm start failed
            h.clearSolver()
            h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise CutsSolveError(f"optimizer: HiGHS found no optimum of the master LP "
                                 f"({h.modelStatusToString(h.getModelStatus())})")

    def _stabilised_duals(self) -> np.ndarray:
        """The master's multipliers with ``μ`` kept within ``centre ± Δ`` (the slacks priced at
        the box's edges; box-step stabilisation, Marsten, Hogan & Blankenship 1975)."""
        h, r = self.master, self.n_rows
        h.changeColsCost(2 * r, self.slacks, np.r_[self.centre + self.delta, -(self.centre - self.delta)])
        h.changeColsBounds(2 * r, self.slacks, np.zeros(2 * r), np.full(2 * r, np.inf))
        self._solve()
        duals = np.asarray(h.getSolution().row_dual)
        h.changeColsBounds(2 * r, self.slacks, np.zeros(2 * r), np.zeros(2 * r))  # back to the master
        return duals

    def chunk(self) -> Chunk:
        from diffpriv.certification._repair import repair

        self.rounds += 1
        h, problem = self.master, self.problem
        duals = self._stabilised_duals() if self.stable else None
        self._solve()
        self.value = value = h.getInfo().objective_function_value
        w = self._weights_of_rays()
        duals = np.asarray(h.getSolution().row_dual) if duals is None else duals
        mu, weights = duals[:self.n_rows], self._weights(duals[self.n_rows:self.first_term])
        scale = max(abs(value), 1e-12)
        self.refined = 0
        if self.terms is None:
            bound, added = self._price(mu, weights, scale)
        else:
            lam = np.maximum(-duals[self.first_term:], 0.0)
            merged = self._merge(w)
            bound, added = self._price_divergences(mu, weights, lam, scale)
            added += merged
            if bound > self.centre_bound:  # a serious step: the box moves
                self.centre, self.centre_bound = mu, bound
        self.bound = max(self.bound, bound)
        if relative_gap(value, self.bound) <= self.opt.gap_tol or not added:
            fixed = repair(problem, self._table(w)).table
            loss = problem.objective_value(fixed)
            if self.best is None or loss < self.best[0]:
                self.best = (loss, fixed)
        gap = relative_gap(self.best[0] if self.best is not None else value, self.bound)
        if self.best is not None and gap <= self.opt.gap_tol:
            return Chunk(self.rounds, gap, Status.CONVERGED)
        boundless = self.rounds >= BOUNDLESS_ROUNDS and self.bound <= self.floor
        handover = self.budget < self.total and (self.rounds >= self.budget or boundless)  # "auto" only
        stalled = not (added or self.refined) or handover
        return Chunk(self.rounds, gap, Status.STALLED if stalled else None)

    def finish(self, status: Status) -> Outcome:
        from diffpriv.certification._repair import repair

        if self.best is None:
            self._solve()
            fixed = repair(self.problem, self._table(self._weights_of_rays())).table
            self.best = (self.problem.objective_value(fixed), fixed)
        return Outcome(self.best[1], self.bound, status, plan="cuts", method=self.name)
