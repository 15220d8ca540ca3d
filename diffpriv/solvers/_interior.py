"""A structured interior point for pure pair bounds: local and extended DP, geo-indistinguishability.

**The problem.** Under pure pair bounds ``A[r_a, y] ≤ e^{ε} A[r_b, y]`` (δ = 0) and the expected
loss, the LP is ``min Σ_y c_y·a_y`` over the table's output columns ``a_y`` (``c_y[r] = π_r
L[x_r, y]``), each in the cone ``G a_y ≤ 0`` of its pair rows, ``a ≥ 0``, tied together only by
the rows' sums ``Σ_y a_y = 1``. On a grid the pair rows join neighbouring cells, so ``G`` is a
grid's incidence matrix: sparse, and banded in the cells' natural order.

**The method.** Mehrotra's predictor–corrector primal–dual interior point (Mehrotra 1992; Wright,
*Primal-Dual Interior-Point Methods*, 1997) on that LP, with the Newton system solved by its
structure rather than by a general sparse factorisation (which fills in: every row sum couples all
outputs, every column's pair rows all rows). With ``z`` the multipliers of ``a ≥ 0``, ``s`` the
pair rows' slacks and ``λ`` their multipliers, the Newton step's table part for output ``y`` is
``H_y Δa_y = q_y + Δμ`` with ``H_y = Gᵀ diag(λ_y/s_y) G + diag(z_y/a_y)`` — one banded symmetric
positive definite matrix per output, block tridiagonal in blocks of the band's width ``u`` and
factorised so by batched matrix products over the outputs — and the row sums' multipliers ``μ``
solve the dense ``|rows| × |rows|`` system ``(Σ_y H_y⁻¹) Δμ = r``, by conjugate gradients
preconditioned with the band of that matrix near its diagonal (:mod:`._interior_blocks`: about
``2·R·u²·(band + 1)`` operations per output to form, where the whole of it took ``2·R²·u``). It
converges in 15–30 iterations on real location data and on uniform priors: column generation
(:mod:`._columns`) needs few rounds on a uniform prior but stalls where the prior is concentrated
(most cells of real location data are empty, and the master's multipliers of the empty rows
swing), PDHG needs 10⁵ steps there. Where the prior leaves most cells empty it runs on the cells
that hold data as outputs (:func:`outputs`) and prices the others with HiGHS at its multipliers;
those that would lower the loss join.

**Feasible iterates, certified bounds.** The run starts from the exponential mechanism at half
the budgets (:func:`_start`, strictly inside the cone of budgets tightened by a hair,
:func:`._linear.tighten_eps`) and keeps the pair rows'
slacks positive, so every iterate is a table meeting the real budgets up to the rows' sums,
which stay at 1 to rounding (the certifier's repair checks it). Its lower bound is weak duality
at any ``μ`` and ``λ ≥ 0`` with entries at most 1 (the box every table meets):
``Σ_r μ_r + Σ_{r,y} min(0, c_y[r] − μ_r + (M_ε^T λ_y)[r])``, with ``M_ε`` the pair rows at the
*real* budgets, computed in numpy and rounded down; it holds however far the iterate is from
the optimum.
"""

from __future__ import annotations

from typing import NamedTuple

import numexpr
import numpy as np
import scipy.sparse
import scipy.sparse.csgraph

from diffpriv.problems._problem import Problem
from diffpriv.solvers import _interior_blocks as blocks
from diffpriv.solvers._driver import Chunk, Declared, Outcome, Status, relative_gap

__all__ = ["InteriorRun", "Iterate", "Size", "applies", "outputs", "size"]

MAX_ITERATIONS = 200
LARGEST_RATIO = 1e8
"""Pair bounds with ``e^ε`` above this are left to the other solvers: ``H_y`` holds ``e^{2ε}``
beside 1, and its Cholesky factor loses the small entries' digits beyond about ``10¹⁶``."""
STEP = 0.995
"""The fraction of the largest step to the boundary an iteration takes (primal and dual apart)."""
START = 1e-4
"""The first iterate's multipliers of the pair rows, as a share of the largest weighted loss: on
the Sacramento sales' 16×16 grid (ε = 0.5 per km, 4-neighbour cells) 35 iterations to a 1 % gap
against 38 at ``10⁻²`` and 39 at 1."""
UNIFORM = 1e-2
"""The uniform table's share of the first iterate (:func:`_start`)."""
DRIFT = 1e-9
"""A step that would move a row's sum further than this from 1 ends the run at its best iterate
(the dense system has lost its accuracy; the table's rows, scaled back to 1, could break the
budgets' margin): on a 5×5 grid at ``gap_tol = 10⁻⁶`` a step drifted by ``7·10⁻⁴`` once the
least entries were below ``10⁻⁸``."""
RESTRICT = 0.8
"""The run starts on the rows' least-loss outputs (:func:`outputs`) where they are at most this
share of the outputs. On the Sacramento sales (ε = 0.5 per km, 4-neighbour cells) the LP on the
88 cells of 256 (16×16) that hold a sale had its optimum within 0.03 % of the whole LP's (the
59 of 144 on 12×12: 0.03 %), at a third of the iterations' cost."""
EARLY = 0.05
"""Where outputs are left out, they are priced once the gap on the others is below this, and
those that price out join (a run then starts again)."""
PRICED = 0.1
"""Outputs not run join where their priced terms add up to more than ``PRICED · gap_tol`` of the
bound (the most negative of them, :meth:`InteriorRun._short`)."""
ALL = 0.5
"""Where at least this share of the outputs left out should join (:meth:`InteriorRun._short`), all
of them join: each start again costs 25–30 iterations, and the outputs that join first make others
price out next. On the airports' 16×16 grid (8-neighbour cells, ``e^{10.8}`` between neighbours)
106 outputs, then 228, 252 and 255 took 108 iterations; 106 then all 256, 51 (the earthquakes':
78 and 53, 4-neighbour cells 44 and 35; where one start again added them all before, no change)."""
CHECK = 0.8
"""The iterate is repaired and certified (the outputs left out priced first) once the gap on the
outputs run is below this share of ``gap_tol``; where the whole problem's bound is then not
within ``gap_tol`` of the table, again each time that gap halves."""
LAST_CHECK = 0.1
"""Once that gap is below this share of ``gap_tol`` (or the run stalls), the outputs left out
that price out (:data:`PRICED`) join and the run starts again."""
SHORT = 1.0
"""Or before that, where the priced terms of the outputs left out add up to more than this share
of ``gap_tol`` (the whole problem's bound stays that far below the optimum on the outputs run)."""
FEW = 0.25
"""Outputs joining the run at most this share of those it runs resume it (:meth:`InteriorRun._resume`)."""
RESUME = 0.1
"""The gap on the outputs run at which the iterate a run resumes from is kept."""
FRESH = 0.05
"""The cold start's share of the table a run resumes from."""
PATIENCE = 8
"""The run stops ``stalled`` (at its best iterate) after this many iterations without a smaller
gap, once it has been below 20 %: on the Sacramento sales' 16×16 grid at ε = 2 per km
(``e^{10.8}`` between 4-neighbours) the gap fell to 1.3 % by the 18th and rose from there as
rounding took over."""
ITERATIONS = 30
SLOW = 30.0
FLOP_RATE = 3e9
"""What :attr:`Size.seconds` assumes: a run's iterations (:attr:`Size.iterations`: ``ITERATIONS``,
and on outputs left out ``SLOW`` more for each unit of ``ln(1/ε)`` of the least pair budget below
1) and the rate at which the factorisations' operations (:attr:`Size.flops`) go on the 2-core
CPU, the rest of an iteration included (the Sacramento sales' 32×32 grid, 4-neighbour cells, 0.5
per km, 201 outputs of 1,024 rows: 3.6·10⁹ an iteration, 26 iterations in 33 s; 48×48, 8-neighbour
cells, 2 per km: 31 in 189 s at 4.7·10⁹ a second; ``benchmarks/geo_real.py``). On the 49 real-data
grids of ``benchmarks/geo_real.py`` (16×16 to 48×48, 0.18–10.8 per cell side) the iterations so
modelled are right on average, within a factor 1.5 on most (root mean square of the log error
0.40; a constant 28 was 27 % low on average, 0.53, and a factor 3.7 low at 0.18 per side: 104
iterations). Runs whose outputs all join, or whose band of the rows' system widens, take longer."""
FORWARD = 7
"""Operations of an output's forward factorisation per block, in units of ``u³`` (a Cholesky
check, an inverse and two products)."""
WARM = 0.3
"""A warm start's share of the cold first iterate (:func:`_start`) mixed into the last iterate of
the budget before (:class:`Iterate`): that iterate is near the boundary, where the predictor's
steps are short."""
BAND = 4
"""The band of the rows' sums' system a (re)start forms (in blocks of the band's width:
:mod:`._interior_blocks`), doubled for the iterations after one whose conjugate gradients spent
longer in their steps beyond the least (:data:`._interior_blocks.LEAST`) than forming the band
took: wider bands cost more to form and need fewer steps. On the earthquakes' 32×32 grid
(8-neighbour cells, 0.27 per cell side, 188 outputs) a band of 4 blocks needed over 20 steps at
the first iteration and one of 8 blocks 8 steps; at 2 per km on the Sacramento sales' grid
(1,024 outputs) 4 blocks needed 3–5 steps until the gap was below 3 %."""
MARGIN = 1e-12
"""The bound is lowered by this share of the absolute sum of its terms (float64 rounding)."""


def applies(problem: Problem) -> bool:
    """Whether the interior point runs ``problem``: linear, every constraint a pure pair bound
    (local or extended DP with δ = 0: :func:`._columns.applies`' pure pairs), ``0 < ε`` tightened
    and ``e^ε ≤`` :data:`LARGEST_RATIO`, every table entry in the support, and the expected loss
    (not the transport one)."""
    from diffpriv.solvers._columns import _pure_pairs
    from diffpriv.solvers._rows import tighten_eps

    blocks = problem.blocks()
    objective = problem.objective
    if not problem.linear or not blocks or objective.kind != "expected" or objective.transport:
        return False
    if not all(_pure_pairs(b) for b in blocks):
        return False
    eps = np.concatenate([np.ravel(np.asarray(b.eps, np.float64)) for b in blocks])
    if np.any(tighten_eps(eps) <= 0) or np.any(eps > np.log(LARGEST_RATIO)):
        return False
    return bool(problem.support_mask().all())


class Size(NamedTuple):
    """What the size model (:data:`FLOP_RATE`) needs of a problem, computed once (:func:`size`)."""

    rows: int
    """The flattened rows."""
    pairs: int
    """The directed pair bounds."""
    width: int
    """The band's width ``u`` in the rows' own order (reverse Cuthill–McKee can only narrow it)."""
    outputs: int
    """The outputs the run starts on (:func:`outputs`)."""
    every: bool
    """Whether those are all of them."""
    least: float
    """The least pair budget."""

    @property
    def flops(self) -> float:
        """About how many floating-point operations an iteration's factorisations take over the
        outputs it starts on: for each, the forward block factorisation (:data:`FORWARD`
        ``·r·u³``) and the band of :data:`BAND` blocks of ``Σ_y H_y⁻¹`` (``2·r·u³·(BAND + 1)``;
        the whole of it, ``2·(r·u)²·u``, where the band would be most of it:
        :func:`._interior_blocks.band`)."""
        u = self.width
        r = -(-self.rows // u)
        width = blocks.band(r, BAND)
        form = 2.0 * (r * u) ** 2 * u if width >= r - 1 else 2.0 * r * u ** 3 * (width + 1)
        return float(self.outputs) * (FORWARD * r * u ** 3 + form)

    @property
    def memory(self) -> int:
        """About the peak bytes of a run: its iterates and the Newton step's copies of them over
        the outputs it starts on, every output's blocks ``D_k⁻¹`` and ``P_k``, and the dense
        ``|rows|²`` system."""
        n, m, u = self.rows, self.outputs, self.width
        padded = -(-n // u) * u
        return 8 * (12 * (n + self.pairs) * m + 2 * m * padded * u + 3 * padded * padded
                    + 4 * blocks.BATCH * padded * u)

    @property
    def iterations(self) -> int:
        """About how many iterations a run takes: :data:`ITERATIONS`, and where the run leaves
        outputs out :data:`SLOW` more for each unit of ``ln(1/ε)`` of its least pair budget below
        1 — small budgets spread the table over outputs that join later, and the steps are short
        (uniform priors, every output run, took 14 iterations at 0.05 per cell side)."""
        if self.every:
            return ITERATIONS
        return int(round(ITERATIONS + SLOW * max(0.0, -np.log(max(self.least, 1e-300)))))

    @property
    def seconds(self) -> float:
        """A rough duration of a run: :attr:`iterations` at :data:`FLOP_RATE`
        (``benchmarks/geo_real.py`` on the 2-core CPU)."""
        return self.iterations * self.flops / FLOP_RATE


def size(problem: Problem) -> Size:
    """``problem``'s :class:`Size`."""
    from diffpriv.solvers._columns import _edges

    ns, nx, ny = problem.shape
    i, j, eps = _edges(problem, tight=False)
    outs = int(outputs(problem).size)
    return Size(rows=ns * nx, pairs=int(i.size), width=max(int(np.max(np.abs(i - j), initial=0)), 1),
                outputs=outs, every=outs == ny, least=float(np.min(eps)) if eps.size else 1.0)


def _start(pairs: blocks.Pairs, loss: np.ndarray) -> np.ndarray:
    """The first table: a mix (:data:`UNIFORM` of the uniform table) with the exponential
    mechanism at half the budgets along the pair bounds' chains, each row ``r`` sending
    ``∝ e^{−d(r, r')/2}`` to each output whose least loss is at row ``r'`` (``d`` the least sum of
    tightened budgets along a chain from ``r`` to ``r'``; a ratio of two rows' entries is then at
    most ``e^{d}`` by the triangle inequality, strictly inside every bound). Rows of outputs
    beyond the rows' count share them."""
    n, m = loss.shape
    home = np.argmin(loss, axis=0)
    sources, at = np.unique(home, return_inverse=True)
    graph = scipy.sparse.csr_array((np.maximum(pairs.eps, 1e-300), (pairs.i, pairs.j)), shape=(n, n))
    dist = scipy.sparse.csgraph.dijkstra(graph, directed=True, indices=sources)  # [H, n]
    table = np.exp(-0.5 * dist[at].T)  # [n, m]: row r → output y, e^{−d(r, home(y))/2}
    total = table.sum(axis=1, keepdims=True)
    table = np.where(total > 0, table / np.where(total > 0, total, 1.0), 1.0 / m)
    return (1.0 - UNIFORM) * table + UNIFORM / m


def _step(x: np.ndarray, dx: np.ndarray) -> float:
    """The largest ``t ≤ 1`` with ``x + t·dx ≥ 0``."""
    return float(min(1.0, np.min(_ev("where(dx < 0, -x / dx, 1.0)", x=x, dx=dx))))


def _mean_product(a: np.ndarray, z: np.ndarray, s: np.ndarray, lam: np.ndarray) -> float:
    """The mean of the complementarity products ``a·z`` and ``s·λ``."""
    return float(np.vdot(a, z) + np.vdot(s, lam)) / (a.size + s.size)


def _ev(expression: str, **arrays) -> np.ndarray:
    """``expression`` over ``arrays`` by numexpr: in blocks that stay in the CPU's cache, in
    threads, without an array-sized temporary for each operation. The iterates of the pair rows
    are ``|pairs| × |outputs|`` (64 MB each on a 32×32 grid of 8-neighbour cells), and numpy's
    temporaries of that size come fresh from the operating system each time."""
    return numexpr.evaluate(expression, local_dict=arrays)


class Iterate(NamedTuple):
    """A run's last table on its outputs, kept in its result's ``state``: it starts the run of the
    same problem at another budget (a sweep's next). The outputs it ran start that run; the table
    starts it too where every budget is at least as large (a smaller budget's table is strictly
    inside a larger one's cone), mixed with the cold start (:data:`WARM`)."""

    shape: tuple[int, int, int]
    outs: np.ndarray
    """The outputs run, in the problem's order."""
    table: np.ndarray
    """``[rows, outs]``: the iterate on them, rows in the problem's order."""
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray]
    """The pair bounds ``(i, j, ε)`` it met (:func:`._columns._edges`, real budgets)."""


class InteriorRun(Declared):
    """The structured interior point (module docstring) on ``problem`` (:func:`applies`) under
    ``opt``'s ``gap_tol`` and ``steps`` (the most iterations: ``min(steps, 200)``), one iteration a
    chunk. Where the prior leaves most rows empty it runs on the outputs of least loss of the rows
    of positive prior (:func:`outputs`) and prices the others at its multipliers (:meth:`_price`),
    adding those that price out and starting again. The seed takes no part; it is recorded."""

    name, labels = "interior", ("interior point",)
    takes_floor = hands_over = takes_iterate = resumable = True
    warm_starts = False

    @classmethod
    def accepts(cls, problem) -> bool:
        return applies(problem)

    def __init__(self, opt, problem: Problem, seed: int, *, floor: float = -np.inf,
                 iterate: Iterate | None = None):
        from diffpriv.solvers._rows import smallest_objective

        self.opt, self.problem = opt, problem
        self.pairs = pairs = blocks.Pairs(problem)
        ns, nx, ny = problem.shape
        cost = (problem.prior.reshape(ns, nx)[:, :, None] * problem.loss[None]).reshape(ns * nx, ny)
        self.cost = cost[pairs.order]  # [R, Y] in the band's row order
        self.loss = np.tile(problem.loss, (ns, 1))[pairs.order]
        self.floor = smallest_objective(problem)
        self.bound = max(self.floor, floor)
        self.iterations, self.best, self.pricing, self.priced = 0, None, None, False
        self.total = min(opt.steps, MAX_ITERATIONS)
        warm = self._warm(iterate)
        self._begin(outputs(problem) if warm is None else warm[0], None if warm is None else warm[1])

    def _warm(self, iterate: Iterate | None) -> tuple[np.ndarray, np.ndarray | None] | None:
        """A previous budget's outputs and (where every budget is at least its own) its table, in
        the band's row order; ``None`` where ``iterate`` is of another problem."""
        if iterate is None or tuple(iterate.shape) != self.problem.shape:
            return None
        i, j, eps = self.pairs.edges
        pi, pj, peps = iterate.pairs
        if not (np.array_equal(i, pi) and np.array_equal(j, pj)):
            return None
        outs = np.union1d(iterate.outs, outputs(self.problem))
        if outs.size != iterate.outs.size or not np.all(eps >= peps):
            return outs, None
        return outs, iterate.table[self.pairs.order]

    def iterate(self) -> Iterate:
        """The current iterate, to start a run at another budget (:class:`Iterate`)."""
        return Iterate(self.problem.shape, self.outs, self.a[self.pairs.back], self.pairs.edges)

    def _begin(self, outs: np.ndarray, table: np.ndarray | None = None) -> None:
        """(Re)starts the iterates on the outputs ``outs`` (the others held at 0), from ``table``
        (``[rows, outs]``, strictly inside the budgets) mixed with the cold start where given. The
        multipliers start at :data:`START`, then each is raised so that its complementarity
        product is at least their mean (a centred start): the first step's nearly pure affine
        direction otherwise drove the least products to 0 and every later step was short (0.2–0.5
        of the way to the boundary). On the 16×16 grids of ``benchmarks/geo_real.py`` (three data
        sets, 4- and 8-neighbour cells, 0.1, 0.5 and 2 per km) 453 iterations in all against 584;
        the Sacramento sales' 32×32 grid (8-neighbour cells, 2 per km) 53 against 90."""
        pairs = self.pairs
        self.outs = outs
        self.others = np.setdiff1d(np.arange(self.cost.shape[1]), outs)
        self.c = self.cost[:, outs]
        top = float(np.max(self.c))
        self.a = _start(pairs, self.loss[:, outs])
        if table is not None:  # strictly inside the cone, as both tables are (else the cold start)
            mixed = (1.0 - WARM) * table + WARM * self.a
            self.a = mixed if np.all(-(pairs.g @ mixed) > 0) and np.all(mixed > 0) else self.a
        self.s = -(pairs.g @ self.a)
        self.mu = np.zeros(pairs.n)
        self.lam = np.full(self.s.shape, START * top)
        z = np.maximum(self.c + pairs.gt @ self.lam, START * top)
        self._centre(_mean_product(self.a, z, self.s, self.lam))
        self.snapshot, self.checked, self.check = None, False, CHECK
        self.band = BAND
        self.early = None

    def own_bound(self) -> float:
        """Weak duality at the current ``μ`` and ``λ`` (or the multipliers
        :func:`._column_pricing.trimmed` makes of ``λ``, where they prove more) with every entry at
        most 1, over the outputs run (module docstring): the bound of the whole problem where
        every output runs; the other outputs' terms come from :meth:`_price`. At ``e^ε ≫ 1``
        between neighbours the iterates' ``λ`` lose digits as the gap closes: on the earthquakes'
        16×16 grid (4-neighbour cells, ``e^{10.8}``) the bound fell from 1.5 % below the table to
        30 % in five iterations and the run stalled at 1.2 %; trimmed, it converged in 44."""
        from diffpriv.solvers._column_pricing import trimmed

        pairs, g = self.pairs, self.c - self.mu[:, None]
        return max(self._weak(g, lam) for lam in trimmed(g, self.lam, pairs.true_t, pairs.into, pairs.j))

    def _weak(self, g: np.ndarray, lam: np.ndarray) -> float:
        """``Σ μ + Σ min(0, g + Mᵀλ)`` (``g = c − μ``), lowered by its float64 rounding (:data:`MARGIN`)."""
        reduced = g + self.pairs.true_t @ lam
        terms = np.minimum(reduced, 0.0)
        value = float(np.sum(self.mu) + np.sum(terms))
        size = float(np.sum(np.abs(self.mu)) + np.sum(np.abs(terms)) + np.sum(np.abs(reduced)))
        return value - MARGIN * size

    def _price(self) -> np.ndarray:
        """Each output not run: a lower bound on ``min (c_y − μ)·a`` over its cone's columns with
        entries at most 1 (:class:`._column_pricing.Pricing`, HiGHS, its multipliers at the real
        budgets, trimmed; ``λ = 0`` where HiGHS finds no optimum); ``[len(others)]``. The outputs
        are shared among one HiGHS model per CPU (:func:`._interior_blocks.workers`, output ``y``
        always to model ``y mod`` their count, which keeps its last basis), each in its own thread: HiGHS lets
        other threads run while it solves (the earthquakes' 32×32 grid, 8-neighbour cells, 836
        outputs priced: 15–27 s a pricing on the 2-core CPU in one thread)."""
        from diffpriv.solvers._column_pricing import Pricing

        self.priced = True
        if self.pricing is None:
            self.pricing = [Pricing(self.pairs.n, *self.pairs.edges) for _ in range(blocks.workers())]
        back, models = self.pairs.back, len(self.pricing)
        g = self.cost[:, self.others][back] - self.mu[back][:, None]  # the problem's row order
        out = np.empty(self.others.size)
        shares = [np.flatnonzero(self.others % models == k) for k in range(models)]
        terms = blocks.in_threads(lambda k: _priced(self.pricing[k], self.others[shares[k]], g[:, shares[k]]),
                            range(models))
        for share, term in zip(shares, terms, strict=True):
            out[share] = term
        return out

    def _short(self, priced: np.ndarray, own: float) -> np.ndarray:
        """The outputs left out that should join: none while their priced terms add up to less
        than :data:`PRICED` of ``gap_tol`` (relative to ``own``), else the most negative ones
        that make up all but that much of their sum (all of them where those are at least
        :data:`ALL` of them)."""
        room = PRICED * self.opt.gap_tol * max(abs(own), 1e-300)
        if -float(np.sum(priced)) <= room:
            return self.others[:0]
        order = np.argsort(priced)
        tail = np.cumsum(priced[order][::-1])[::-1]  # the sum of each output's term and those after it
        keep = np.flatnonzero(-tail > room)
        if keep.size >= ALL * self.others.size:  # the outputs left out were the wrong guess: all join
            return self.others.copy()
        return np.sort(self.others[order[keep]])

    def table(self) -> np.ndarray:
        """The current iterate as a row-stochastic table ``[S, X, Y]`` in the problem's row order."""
        a = np.zeros(self.cost.shape)
        a[:, self.outs] = np.clip(self.a, 0.0, None)
        a = a[self.pairs.back]
        a /= a.sum(axis=1, keepdims=True)
        return a.reshape(self.problem.shape)

    def _certified(self) -> float:
        from diffpriv.certification._repair import repair

        fixed = repair(self.problem, self.table()).table
        loss = self.problem.objective_value(fixed)
        if self.best is None or loss < self.best[0]:
            self.best = (loss, fixed)
        return self.best[0]

    def _widen(self, short: np.ndarray) -> None:
        """Starts again with the outputs ``short`` run too. Where they are many (more than
        :data:`FEW` of the outputs run), from the current iterate (0 on them) mixed with the cold
        start (:meth:`_begin`): on the Sacramento sales' 16×16 grid at ε = 2 per km (4-neighbour
        cells, 88 outputs then 255) 39 iterations in all against 43 from the cold start. Where
        they are few, from the iterate kept where the gap first fell below :data:`RESUME`
        (:meth:`_resume`)."""
        outs = np.union1d(self.outs, short)
        at = np.searchsorted(outs, self.outs)
        if self.early is not None and short.size <= FEW * self.outs.size:
            self._resume(outs, at)
            return
        table = np.zeros((self.pairs.n, outs.size))
        table[:, at] = self.a
        self._begin(outs, table)

    def _resume(self, outs: np.ndarray, at: np.ndarray) -> None:
        """Goes on with the outputs ``outs`` from the iterate kept at gap :data:`RESUME` (the
        outputs run before at positions ``at``): its table mixed with :data:`FRESH` of the cold
        start, its ``μ``, its ``λ`` (the cold start's on the outputs that join), each raised so
        that every product of the complementarity pairs is at least that iterate's mean; on the
        earthquakes' 32×32 grid (8-neighbour cells, 0.27 per cell side) 8 outputs joining 188 cost
        52 iterations from the last iterate mixed with the cold start, 33 so."""
        a0, s0, lam0, z0, mu0 = self.early
        pairs = self.pairs
        table = np.zeros((pairs.n, outs.size))
        table[:, at] = a0
        self._begin(outs)
        self.a = (1.0 - FRESH) * table + FRESH * self.a
        self.s = -(pairs.g @ self.a)
        self.lam[:, at] = lam0
        self.mu = mu0.copy()
        self._centre(_mean_product(a0, z0, s0, lam0))

    def _centre(self, nu: float) -> None:
        """Raises ``λ`` and ``z`` so that every complementarity product is at least ``nu`` (``z``
        also at least the reduced cost ``c − μ + Gᵀλ`` at the raised ``λ``)."""
        self.lam = np.maximum(self.lam, nu / self.s)
        self.z = np.maximum(self.c - self.mu[:, None] + self.pairs.gt @ self.lam, nu / self.a)

    def _newton(self) -> None:
        """One predictor–corrector step (the arrays' arithmetic by :func:`_ev`)."""
        pairs, a, s, lam, z, mu = self.pairs, self.a, self.s, self.lam, self.z, self.mu
        rd = _ev("c - mu + gl - z", c=self.c, mu=mu[:, None], gl=pairs.gt @ lam, z=z)
        rp1 = 1.0 - a.sum(axis=1)
        rp2 = _ev("-ga - s", ga=pairs.g @ a, s=s)
        w, d = _ev("lam / s", lam=lam, s=s), _ev("z / a", z=z, a=a)
        factors = blocks.Factors(pairs, w, d, blocks.band(pairs.r, self.band))

        def direction(ra, rs):
            inner = _ev("w * rp2 - rs / s", w=w, rp2=rp2, rs=rs, s=s)
            q = _ev("gi - rd + ra / a", gi=pairs.gt @ inner, rd=rd, ra=ra, a=a)
            dmu, da = factors.newton(q, rp1, 0.1 * DRIFT)
            dlam = _ev("w * (gd - rp2) + rs / s", w=w, gd=pairs.g @ da, rp2=rp2, rs=rs, s=s)
            ds = _ev("(rs - s * dlam) / lam", rs=rs, s=s, dlam=dlam, lam=lam)
            return da, ds, dmu, dlam, _ev("(ra - z * da) / a", ra=ra, z=z, da=da, a=a)

        nu = _mean_product(a, z, s, lam)
        gap = nu * (a.size + s.size)
        da, ds, _, dlam, dz = direction(_ev("-a * z", a=a, z=z), _ev("-s * lam", s=s, lam=lam))
        tp, td = min(_step(a, da), _step(s, ds)), min(_step(z, dz), _step(lam, dlam))
        affine = float(_ev("sum((a + tp * da) * (z + td * dz))", a=a, da=da, z=z, dz=dz, tp=tp, td=td)
                       + _ev("sum((s + tp * ds) * (lam + td * dlam))", s=s, ds=ds, lam=lam, dlam=dlam,
                             tp=tp, td=td))
        sigma = (affine / gap) ** 3
        ra = _ev("sn - a * z - da * dz", sn=sigma * nu, a=a, z=z, da=da, dz=dz)
        rs = _ev("sn - s * lam - ds * dlam", sn=sigma * nu, s=s, lam=lam, ds=ds, dlam=dlam)
        da, ds, dmu, dlam, dz = direction(ra, rs)
        tp = STEP * min(_step(a, da), _step(s, ds))
        td = STEP * min(_step(z, dz), _step(lam, dlam))
        ahead = _ev("a + tp * da", a=a, tp=tp, da=da)
        if np.max(np.abs(ahead.sum(axis=1) - 1.0)) > max(DRIFT, np.max(np.abs(rp1))):
            raise np.linalg.LinAlgError("the rows' sums drift: the Newton systems lost their accuracy")
        self.a, self.s = ahead, _ev("s + tp * ds", s=s, tp=tp, ds=ds)
        self.mu = mu + td * dmu
        self.lam = _ev("lam + td * dlam", lam=lam, td=td, dlam=dlam)
        self.z = _ev("z + td * dz", z=z, td=td, dz=dz)
        if factors.widened or factors.beyond > factors.formed:  # the band of S was too narrow
            self.band = min(2 * self.band, pairs.r)

    def chunk(self) -> Chunk:
        self.iterations += 1
        try:
            self._newton()
        except np.linalg.LinAlgError:  # the Newton systems lost definiteness: the best so far
            return self._stop()
        own = self.own_bound()
        if not self.others.size:
            self.bound = max(self.bound, own)
        value = float(np.sum(self.c * self.a))
        gap = relative_gap(value, own)
        if self.early is None and gap <= RESUME:  # where few outputs join, the run resumes here
            self.early = (self.a.copy(), self.s.copy(), self.lam.copy(), self.z.copy(), self.mu.copy())
        if self.snapshot is None or gap < self.snapshot[0]:
            self.snapshot = (gap, self.iterations, self.a, self.mu, self.lam)
        elif self.snapshot[0] < 0.2 and self.iterations - self.snapshot[1] >= PATIENCE:
            return self._stop()  # rounding has taken over (budgets of e^ε ≫ 1 between neighbours)
        if self.others.size and not self.checked and gap <= EARLY:  # are the outputs left out idle?
            self.checked = True
            priced = self._price()
            self.bound = max(self.bound, own + float(np.sum(priced)))
            short = self._short(priced, own)
            if short.size:  # outputs that would lower the loss: run them too, from the start
                self._widen(short)
                return Chunk(self.iterations, self._shown(value, gap))
        shown = self._shown(value, gap)
        if min(gap, shown) > self.check * self.opt.gap_tol:  # (the whole problem's bound may be closer)
            return Chunk(self.iterations, shown)
        if self.others.size:  # the outputs not run, priced at these multipliers
            priced = self._price()
            self.bound = max(self.bound, own + float(np.sum(priced)))
            loss = self._certified()
            if relative_gap(loss, self.bound) <= self.opt.gap_tol:
                return Chunk(self.iterations, relative_gap(loss, self.bound), Status.CONVERGED)
            self.check /= 2  # price again once the gap on the outputs run has halved
            # the outputs run near their optimum, or a bound the others keep beyond gap_tol
            # whatever the outputs run reach: add those that price out
            beyond = -float(np.sum(priced)) > SHORT * self.opt.gap_tol * max(abs(own), 1e-300)
            near = gap <= LAST_CHECK * self.opt.gap_tol
            short = self._short(priced, own) if near or beyond else self.others[:0]
            if short.size:
                self._widen(short)
            return Chunk(self.iterations, relative_gap(loss, self.bound))
        loss = self._certified()
        status = Status.CONVERGED if relative_gap(loss, self.bound) <= self.opt.gap_tol else None
        return Chunk(self.iterations, relative_gap(loss, self.bound), status)

    def _shown(self, value: float, gap: float) -> float:
        """The gap a chunk reports: the iterate's loss ``value`` against the whole problem's bound
        once it has one (every output run, or the others priced), else ``gap`` on the outputs run."""
        return relative_gap(value, self.bound) if self.priced or not self.others.size else gap

    def _stop(self) -> Chunk:
        """Ends the run ``stalled`` at the table of least loss of its last iterate and that of
        the least gap so far (the bound at the latter's multipliers, priced where outputs were
        left out)."""
        if self.snapshot is not None:
            self._certified()  # the last iterate may have the least loss
            _, _, self.a, self.mu, self.lam = self.snapshot
            own = self.own_bound()
            priced = self._price() if self.others.size else np.zeros(0)
            self.bound = max(self.bound, own + float(np.sum(priced)))
            short = self._short(priced, own) if priced.size else priced
            if short.size:  # outputs left out would lower the loss: run them too, from the start
                self._certified()
                self._widen(short)
                return Chunk(self.iterations, relative_gap(self.best[0], self.bound))
        gap = relative_gap(self._certified(), self.bound)
        return Chunk(self.iterations, gap, Status.CONVERGED if gap <= self.opt.gap_tol else Status.STALLED)

    def finish(self, status: Status) -> Outcome:
        from diffpriv.solvers._columns import _pure_pairs
        from diffpriv.solvers._price import pair_prices

        if self.best is None:
            self._certified()
        a = np.zeros(self.cost.shape)  # the last iterate and its pair rows' multipliers, every output
        lam = np.zeros((self.pairs.p, self.cost.shape[1]))
        a[:, self.outs], lam[:, self.outs] = np.clip(self.a, 0.0, None), self.lam
        pure = tuple(b for b in self.problem.blocks() if _pure_pairs(b))
        priced = pair_prices(self.problem, a[self.pairs.back], lam, pure)
        return Outcome(self.best[1], self.bound, status, plan="interior", method=self.labels[0],
                       state=self.iterate(), prices=priced)


def _priced(pricing, outs: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The bounds of :meth:`InteriorRun._price` for the outputs ``outs`` (``g[:, k]`` the reduced
    costs of output ``outs[k]``) on one HiGHS model."""
    from diffpriv.solvers._cut_lp import CutsSolveError

    ones = np.ones(g.shape[0])
    out = np.empty(outs.size)
    for k, y in enumerate(outs):
        try:
            _, lam = pricing.solve(int(y), g[:, k], ones)
        except CutsSolveError:  # HiGHS found no optimum: λ = 0 proves Σ min(0, g)
            lam = np.zeros(pricing.j.size)
        term = pricing.term(g[:, k], lam, ones)  # ≤ 0: the sum of its entries' sizes is −term
        out[k] = term - MARGIN * (float(np.sum(np.abs(g[:, k]))) - term)
    return out


def outputs(problem: Problem) -> np.ndarray:
    """The outputs the run starts on: every output where the rows of positive prior leave at
    most :data:`RESTRICT` of the outputs as their least-loss ones (real location data binned on a
    grid: the cells that hold data), else all of them."""
    ns, nx, ny = problem.shape
    rated = (problem.prior > 0).any(axis=0)
    homes = np.unique(np.argmin(problem.loss[rated], axis=1))
    return homes if homes.size <= RESTRICT * ny else np.arange(ny)
