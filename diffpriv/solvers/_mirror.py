"""Mirror-prox on the Lagrangian, for divergence constraints between rows of the table (divergence
DP between adjacent inputs, profile edges) under the expected, worst-case or largest-entry loss.

The problem ``min ⟨C, A⟩`` over row-stochastic ``A`` (on the support) subject to the normalised
residuals ``g_k(A) ≤ 0`` of :mod:`diffpriv.solvers._divergence` is the saddle point of

    ``L(A, λ) = ⟨C, A⟩ + Σ_k λ_k g_k(A)``,  ``λ ≥ 0``,

convex in ``A`` and linear in ``λ``. Mirror-prox (Nemirovski 2004, *Prox-method with rate of
convergence O(1/t)*) takes an extragradient step: entropic on each row (the log-table
``θ ← log softmax(θ − η ∇_A L / w)``, :func:`_move`), projected on the multipliers
(``λ ← max(0, λ + σ_k g_k)``), from the point, then again from the point with the gradient at
the half step. The steps are scaled per entry and per comparison (:func:`_rates`): ``w`` is the
row's mean cost plus the multipliers' weight on it plus a tenth of the entry's own constraint
gradient, ``σ_k = σ · c̄_k / κ_k`` (``c̄_k`` the two rows' mean cost, ``κ_k`` the residual's slope
in the divergence at the budget), so one ``(η, σ)`` serves grids of every size; an entry moves
by at most ``CLIP`` in log space per step.

**Epigraph objectives.** The worst-case loss ``max_j ℓ_j(A)`` (``ℓ_j`` the row losses) and the
largest weighted entry (``ℓ_j`` the entries ``L[x, y] A[r, y]``) over rows of positive prior are
``max_{ν ∈ Δ} Σ_j ν_j ℓ_j(A)``: the weights ``ν`` on the simplex are a third block of the saddle
point, with entropic ascent steps on the losses relative to their weighted mean
(:meth:`Weights.ascend`), and ``Σ_j ν_j ℓ_j`` takes the expected loss's place in ``L``. The
steps' scales use the cost at uniform weights, not the current ones: with the current ones, rows
of small weight got short multiplier steps and the run sat at a point 40 % above its bound
(Rényi-2 DP on a 6×6 grid, largest entry). Each weight stays above ``e^-SPAN / n``.

**Linear constraints beside** (:func:`applies` takes DistP between item laws, pure or (ε, δ),
and approximate local DP between rows) are ``G A ≤ 0`` in the normalised operator of
:mod:`._linear` (the pure bounds), or ``Σ_y max(0, (G A)_y) ≤ δ`` (the hockey-stick, δ > 0);
their multipliers ``u ≥ 0`` add ``⟨u, G A⟩ − Σ δ max_y u_y`` to ``L`` (the hockey-stick's
conjugate form: ``Σ_y max(0, h_y) = max_{0 ≤ v ≤ 1} ⟨v, h⟩``) and take projected steps on the
violation relative to the entries each row compares, or for δ > 0 proximal ones, whose prox of
``δ max_y u_y`` caps the row's multipliers at a water level (:class:`Rows`, :func:`_capped`).
The bound of :func:`._linear.lower_bound` holds with the same term. With no divergence at all
(approximate local DP or TV-DP alone, a linear problem: :func:`._methods.mirror_runs`) the
Lagrangian has no ``λ`` block and the run is the same; HiGHS solves the LP, which lifts each
hockey-stick's positive parts, more slowly from about 10×10 grids.

**Bound.** Every chunk, a few mirror steps on ``A`` at fixed ``(λ, ν, u)`` bring ``A`` towards
the minimiser of ``L(·, λ, ν, u)``, and the Lagrangian linearised there
(:func:`._divergence.linearized`, :func:`._linear.lower_bound`) is a lower bound on the optimum
whatever the iterate: the linearisation of a convex function is below it everywhere, and any
weights on the simplex and multipliers ``u ≥ 0`` keep weak duality. It is computed at the last
iterate and at the running averages of the chunks' averages (since the steps last changed, and
over the whole run) in turn (:data:`BOUND_AT`; the ergodic average is what mirror-prox's rate is
for), each also with ``λ = 0``, at the last iterate also after bolder steps (:data:`BOLD`); the
best bound so far is kept. With linear constraints alone
(approximate local DP or TV-DP, the expected loss) every other chunk (those at the running
average, whose own bound rarely rose on these runs) also runs L-BFGS on their smoothed dual from
the run's multipliers (:mod:`._dual_bound`): the bound at mirror-prox's own multipliers rises only
at the table's pace (on approximate LDP it took 6,000 steps to come within 1 % of a table it had
been near since the 1,400th).

**Table.** The run solves budgets tightened by :data:`TIGHTEN` ``· gap_tol`` (relative), so that
an iterate near its own constraints meets the real ones. A chunk's table (last and average)
within ``gap_tol`` of the bound and within :data:`REPAIRABLE` of its real budgets is repaired by
the certifier's least mixing (:func:`diffpriv.certification._repair.repair`); the best repaired
table is kept, and the run has converged when it is within ``gap_tol``. A chunk that throws the
iterate off (non-finite, or residuals above :data:`BLOWUP`) is undone and the steps halved; the
table's step is halved when the residuals stay above :data:`OFF` for :data:`HIGH` chunks, and
both when chunks move nothing (:data:`STUCK`) with the residuals above the tightening; a run that
would stop ``"stalled"`` within it loosens the tightening instead (:data:`LOOSEN`).

**Precision.** With linear constraints alone (hockey-stick and ratio bounds under the expected
loss: no divergence, no epigraph) the steps run in float32 (:func:`._x64.cast`) and all that is
certified in float64: the bounds are taken at the float32 multipliers cast up (a bound holds at
any multipliers), and each table is renormalised in float64 and repaired by the certifier's
mixing. A chunk of TV-DP steps on a 16×16 grid took 0.82 s against 1.61 s in float64, to a table
whose loss differed by 10⁻⁶ (relative). Divergences stay in float64: their ratios of small
entries need it.

Measured on ``benchmarks/divergence_optimality.py``'s KL-DP and Rényi-2-DP grids (4-neighbour
pairs; ``--objective``, ``--beside``; ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.special
import numpy as np

from diffpriv.problems._blocks import divergence_kinds, row_divergences
from diffpriv.problems._problem import Problem
from diffpriv.solvers._divergence import (
    SCALE_FLOOR,
    Kind,
    divergence_data,
    divergence_violation,
    linearized,
    residuals,
)
from diffpriv.solvers._driver import Chunk, Declared, Outcome, Status, check_finite, relative_gap
from diffpriv.solvers._dual_bound import DualBound
from diffpriv.solvers._linear import (
    Operator,
    linear_data,
    lower_bound,
    operator,
    proves_infeasible,
    smallest_objective,
    the_table,
    tighten,
)
from diffpriv.solvers._local_mix import local_mix
from diffpriv.solvers._x64 import cast

__all__ = ["MirrorRun", "applies"]

ETA, SIGMA, CLIP = 0.2, 0.05, 3.0
"""Entry and multiplier step scales, and the largest change of a log-entry in one step (chosen on
KL-DP grids with per-row steps: on 16×16 ``η = 0.1, σ = 0.1`` left a 0.57 % gap after 10,000
steps, these 0.13 %; on 10×10 ``η = 0.3`` or ``σ = 1`` oscillated)."""

ENTRY = 0.1
"""The weight of an entry's own constraint gradient in its step (:func:`_move`). Rényi-2 DP on a
16×16 grid at ``gap_tol = 10⁻³``: with 0 (per-row steps) seed 4 needed its steps halved twice
(6,400 steps) and seed 1 ran out of 100,000 steps at 0.26 %; with 0.1 they converged in 1,600 and
3,000 steps; with 0.3 or 1, χ² and Rényi-2 DP on a 3×3 grid ran out of steps 0.7–2 % above the
optimum."""

COST_FLOOR = 1e-2
"""A row's cost scale in the steps is at least this fraction of the rows' mean. Rows of almost no
prior (a Gaussian mixture's far cells) otherwise took long steps and their comparisons short
multiplier steps: Rényi-2 DP on a 16×16 grid (seed 4, ``gap_tol = 10⁻³``, the gradient not yet
centred) cycled 43 % above a budget without this floor and 6 % with it. A floor of 0.1 was tried
for real, sparse data and not kept: on the Sacramento sales (10×10 cells, half of them empty,
25 divergence-DP runs, both with the tightening loosened when stuck: :data:`LOOSEN`) it converged
24 against 22 and took 133 s against 240 s, but KL-DP at
ε = 1 on a 5×5 grid with the prior on 5 cells (seed 3) then cycled 18 % over a budget for
100,000 steps and ended 3.6× above Clarabel's optimum, where 10⁻² converges (with 10⁻² for the
multipliers' steps alone it cycled the same)."""

LINEAR_COST_FLOOR = 0.3
"""… and with no divergence (approximate local DP or TV-DP alone), at least 0.3 of the rows' mean: a
divergence's multipliers add their weight to each row they compare (:func:`_rates`), the
hockey-stick's do not, so a row of no prior had nothing to slow its steps. On the Sacramento sales
binned on a 10×10 grid (half the cells hold no sale; ``benchmarks/divergence_optimality.py --grid
10 --real``) the run with a floor of 10⁻² stalled 35–190 % above HiGHS's optimum, its last
table 7× over the budget between an empty cell and its neighbours, its average still 1.1× after
8,000 steps; with a floor of 1, TV-DP and approximate LDP (seeds 0, 1) converged in 1,800–11,200
steps (2.5–14.5 s). Against 1, 0.3 took fewer steps on every set measured (TV-DP / approximate
LDP, 5 seeds each, every run converged at ``gap_tol = 10⁻²`` under each floor; TV-DP at budget 1
on the Sacramento sales goes to HiGHS): 10,600 / 25,600 steps against 13,400 / 38,000 on the
16×16 Gaussian-mixture grids, 10,400 / 22,800 against 15,200 / 38,400 on the Sacramento 10×10
cells; 0.1 took 11,000 / 23,600 and 18,800 / 18,600. On divergence DP a floor of 1 did not help:
of five Sacramento runs (10×10) that stalled with 10⁻² (1.1–2.7 % gaps), four stalled again
(1.1–2.9 %), and Rényi-2 DP with approximate LDP beside on a 16×16 Gaussian-mixture grid (seed 1)
stalled 16 % above its bound, against 3.9 %."""

STEPS, REFINE = 200, 100
"""Mirror-prox steps per compiled chunk; mirror steps at fixed multipliers before each bound."""

BOLD = 4.0
"""At the last iterate the bound is also taken after :data:`REFINE` steps ``BOLD`` times longer
than the run's (the best of both is kept): the refining solves a convex problem at fixed
multipliers, and the run's steps, sized for the saddle point, leave its minimiser far on some
runs. On the 16×16 grids of ``benchmarks/divergence_optimality.py`` (bound after 100 steps at
``η`` and at ``4η``, per chunk of the same runs), the bound came within 1 % of the table at
step 1,200 instead of 2,600 (Rényi-½-DP, seed 1), 400 instead of 1,600 (seed 4), 400 instead of
800–1,400 (KL-DP seeds 1 and 4, squared-Hellinger-DP seeds 1 and 4); on KL-DP seed 0 the bolder
steps gave a lower bound (1.291 against 1.378), and on Rényi-2-DP none at all (its gradient
``−P²/Q²`` is steep near small entries): the run's own steps stay."""

BOUND_AT = ("last", "running")
"""Where the chunks compute the bound, in turn from the first chunk: at the last iterate, at the
running average of the chunks' averages since the steps last changed (each bound costs about a
quarter of a chunk's steps). At both every chunk, on five KL- and Rényi-2-DP runs on 16×16 grids
(expected, worst-case and largest-entry losses), the last iterate raised the bound on 49 chunks,
the chunk's own average on 13, neither on 63; in turn, the same runs took 18 % less time in all
(132 → 108 s). The running average is mirror-prox's ergodic average, whose rate holds for fixed
steps: with approximate local DP beside KL-DP on a 16×16 grid (seed 2), the bound at the last
iterate and the chunk's average stopped at 1.2799 from the 10th chunk and the run stalled 1.9 %
short, while the running average's rose to 1.2961 by the 62nd, 0.59 % below the table. Once the
steps have been halved, the bound is also taken at the whole run's average (a cycle sets the
halvings off, and a cycle's average is what the saddle point is near): the average since the
halving alone left Rényi-2 DP with (ε, δ)-DistP beside ``stalled`` 1.23 % short on a 16×16 grid
(seed 1), where the whole run's converged; the whole run's alone left approximate LDP beside
KL-DP on a 4×4 grid ``stalled`` 1.2 % short, where the other converged."""

TIGHTEN, BLOWUP, OFF, HIGH = 0.3, 10.0, 0.1, 5
"""Budgets solved for at ``ε(1 − 0.3·min(gap_tol, 10⁻²))``. A chunk is undone (and the steps
halved) when its largest normalised residual exceeds 10; the table's step ``η`` alone is halved
when it stays above 0.1 for 5 chunks. Rényi-2 DP on a 24×24 grid (seed 3, ``ε = 0.2``) otherwise
cycled 141 % above a budget from its 11th chunk (the repaired table 78 % above the bound); with
the halving it converged in 1,000 steps. Halving the multipliers' step ``σ`` there too froze them
under the largest entry (Rényi-2 DP on 24×24, seed 0: residuals at 0.11–0.16 halved both every 5
chunks, to 1/64 by chunk 30, and the run stopped ``"stalled"`` at a 52 % gap); with ``η`` alone
it converged. Undoing every chunk whose residual jumped above 0.1 was tried and dropped: a
transient of the first chunks then halved the steps until nothing moved (Rényi-2 DP on a 6×6
grid, seed 0: 1,497 % after 100,000 steps)."""

LOOSEN, LOOSENINGS = 10.0, 2
"""When the run would stop ``"stalled"`` (:data:`STALL`) with the residuals within the tightening,
the tightening is divided by 10 instead, at most twice: at a large budget the optimum moves fast
with it. The best table and the best bound are kept throughout, so a run that would have stalled
ends no further from its bound, and one that converges without it is untouched. KL-DP
between 4-neighbour cells at budget 4 on the Sacramento sales (10×10 cells, half of them empty;
``benchmarks/divergence_optimality.py --real``, seed 4) sat at 0.47809, its residuals at 0, from
the 9,000th step, and stopped ``"stalled"`` after 35,400 with its bound at 0.47168 (1.36 %): at a
tightening 10 times smaller (``gap_tol = 10⁻³``) the table reached 0.47362, below the bound
plus ``gap_tol``: the 0.3 % tightening alone had cost 0.9 %. On 25 Sacramento runs (KL, χ²,
squared Hellinger, Rényi ½ and 2 at five budgets) 20 converged without loosening and 24 with it
(KL and Rényi ½ at budget 4, χ² at 3, Rényi 2 at 2), Rényi 2 at 4 stalling at 1.59 % instead of
2.65 %; on KL-DP at ε = 4 on 4×4 to 8×8 grids with the prior on ``n`` cells, 4 of 5 runs that
stalled converged, a few hundred steps after their stall. Loosening whenever 10 chunks moved
nothing within the tightening (:data:`STUCK`) was tried first: it stalled two χ²-DP runs whose
bound lagged (at 2.6 % and 3.3 %; one had converged)."""

NU_ROWS, NU_ENTRIES, SPAN = 10.0, 3.0, 10.0
"""The epigraph weights' step, relative to the table's, over rows (the worst-case loss) and over
entries (the largest entry); each weight stays above ``e^-SPAN / n`` (``n`` rows or entries), so
that the weights at the floor hold at most ``e^-SPAN`` together and one that becomes a largest
loss again recovers in a few thousand steps. KL- and Rényi-2-DP on 16×16 grids at
``gap_tol = 10⁻²``, five seeds each: under the worst-case loss every run took fewer steps with 10
than with 1 over rows (25,200 in all against about 55,000; 15,200 → 8,400 on the slowest); under
the largest entry 3 took 19,600 steps in all against 27,800 with 1 (one run of ten took more:
4,200 against 3,400), while 10 took 6× more steps on one run and did not converge on another in
40,000 steps."""

LINEAR = 10.0
"""The linear constraints' multiplier step, relative to the divergences' (:class:`Rows`). KL-DP
and geo-indistinguishability between 4-neighbour cells of a 6×6 grid at ``gap_tol = 10⁻³``
(``benchmarks/divergence_optimality.py --beside geo``, seeds 0–4): with 10 every seed converged
in 4,000–24,000 steps; with 1 the table oscillated 25 % about the optimum with the constraints
unmet; with 0.1 the bound stayed 25 % below; with 100 three seeds had no bound after 26,000
steps (:func:`applies` keeps geo-indistinguishability beside off mirror-prox nonetheless: on
16×16 no step held). DistP beside KL-DP or Rényi-2-DP: 10 of 10 converged on 6×6. The linear
rows' violation is left out of the residual the steps are halved on: halving on it starved the
multipliers further."""

STUCK, STALL = 10, 50
"""When the last 10 chunks (2,000 steps) moved the bound and the table's objective by less than a
tenth of ``gap_tol`` (relative) with a residual above the budgets' tightening that did not fall
by a tenth, the steps are halved (:meth:`MirrorRun._still`): an extragradient step too long for the problem
has fixed points that are not saddle points (χ²-DP on a 6×6 grid sat 3 % above a budget with its
multipliers still, and converged once the steps were halved). When the last 50 chunks moved them
by less than a hundredth of ``gap_tol``, the run stops ``"stalled"`` (Rényi-2 DP on a 6×6 grid
under the largest-entry objective, before the steps' scales used uniform weights, sat at one point
for 100,000 steps). Slow progress is not a stall: Rényi-2 DP on a 3×3 grid moved its objective by
10⁻⁷ per chunk for 40 chunks, its residual below the tightening, before its bound rose to
converge; beside geo-indistinguishability on a 6×6 grid (seed 0) its residual fell by a quarter
every 10 chunks, and halving the steps there (when the rule asked for it to halve) stalled the
run at a 0.36 % gap."""

CYCLES = 3
"""When the run would stop ``"stalled"`` while its table's objective still swung over the last
:data:`STALL` chunks by more than a tenth of ``gap_tol`` (relative), the iterates are on a cycle
that came back to where it was, not at a point: the steps are halved instead, at most 3 times.
Approximate local DP beside KL-DP on a 3×3 grid (``gap_tol = 10⁻³``) swung its objective between
0.8449 and 0.8474 (the optimum 0.84638) with its bound flat at 0.83229 from the 5,000th step to
the 20,200th, where it would have stopped; a rounding-level change to the multipliers' prox had
sent the run before it through a steps' halving at the 10,000th step and to ``converged`` at the
24,000th."""

REPAIRABLE = 1.0
"""A chunk's table is repaired (the certifier's least mixing, seconds on large tables) only when it
exceeds its real budgets by at most this times ``gap_tol`` (relative): mixing from further off
costs more than ``gap_tol``. Rényi-2 DP on a 24×24 grid under the largest entry (seed 0) tried 20
repairs from 5.6–33 % over a budget, 3 s each and each 32–97 % above the bound; the one that
converged came from a table within its budgets."""

FLOOR = -600.0
"""Log-entries stay above this (``e^-600`` is far below any budget's resolution)."""


def applies(problem: Problem, kinds: tuple[Kind, ...]) -> bool:
    """Whether mirror-prox runs ``problem``: the expected, worst-case or largest-entry loss,
    divergence or hockey-stick constraints between pairs of rows (not Wasserstein, not between
    item laws; approximate local DP alone is linear: :func:`._methods.mirror_runs` says when
    ``"auto"`` takes it), and beside them linear ones between item laws only (DistP, pure or with
    δ > 0): :func:`diffpriv.problems._blocks.row_divergences`.

    Linear bounds between rows (local DP, geo-indistinguishability) beside keep the augmented
    Lagrangian: with KL-DP between 4-neighbour cells and geo-indistinguishability at ε = 1 per
    cell, mirror-prox converged on all 10 runs of a 6×6 grid at ``gap_tol = 10⁻³`` (the
    augmented Lagrangian: 9–10 % above the optimum with a bound of 0), but on 16×16 its
    multipliers threw the iterate off (no bound after 20,000 steps), and no multiplier step
    tried (scaled by the rows' costs or by their cost differences, ×0.1–×10) held on both."""
    return not problem.objective.transport and row_divergences(problem.blocks())


def _slope(kind: Kind, eps):
    """``dg/dD`` at ``D = ε``: the normalised residual's slope in the divergence."""
    name, alpha = kind
    if name == "renyi" and alpha > 1:
        target = jnp.exp((alpha - 1.0) * eps)
        return (alpha - 1.0) * target / jnp.maximum(target, SCALE_FLOOR)
    return 1.0 / jnp.maximum(eps, SCALE_FLOOR)


def _row_costs(cost, mask, kinds):
    """``[R]``: each row's mean cost on its support, at least :data:`COST_FLOOR` of their mean
    (:data:`LINEAR_COST_FLOOR` with no divergence ``kinds``)."""
    mean_cost = jnp.sum(jnp.where(mask, cost, 0.0), axis=1) / jnp.maximum(jnp.sum(mask, axis=1), 1)
    floor = COST_FLOOR if kinds else LINEAR_COST_FLOOR
    return jnp.maximum(mean_cost, floor * jnp.maximum(jnp.mean(mean_cost), 1e-300))


def _rates(mean_cost, nl, kinds, lam, sigma):
    """``(w_r [R, 1], σ_k [K, 2])``: the rows' weights and the comparisons' steps (module
    docstring), from the rows' cost scales ``mean_cost`` (:func:`_row_costs`)."""
    if not kinds:  # linear constraints alone (:func:`._methods.mirror_runs`)
        return mean_cost[:, None], jnp.zeros((0, 1), mean_cost.dtype)
    slope = jnp.concatenate([jnp.broadcast_to(_slope(kind, e), e.shape) for kind, e in zip(kinds, nl.eps,
                                                                                          strict=True)])
    ia, ib = jnp.concatenate(nl.ia), jnp.concatenate(nl.ib)
    weight = jnp.sum(lam, axis=1) * slope
    n = mean_cost.shape[0]
    w = mean_cost + jax.ops.segment_sum(weight, ia, n) + jax.ops.segment_sum(weight, ib, n)
    pair_cost = 0.5 * (mean_cost[ia] + mean_cost[ib])
    return w[:, None], (sigma * pair_cost / slope)[:, None]


class Weights(NamedTuple):
    """The objective as the Lagrangian's linear cost ``Σ_j ν_j ℓ_j(A)`` (module docstring): the
    per-entry costs ``base`` ``[R, Y]`` (0 off the support), and for an epigraph objective the
    rows or entries ``j`` over which the weights ``ν`` range (``active``: ``[R]`` or ``[R, Y]``;
    ``[0]`` for the expected loss, whose cost is ``base`` itself)."""

    base: jax.Array
    active: jax.Array

    @property
    def epigraph(self) -> bool:
        return self.active.shape[0] > 0  # static

    @property
    def step(self) -> float:
        """The weights' step relative to the table's (:data:`NU_ROWS`, :data:`NU_ENTRIES`)."""
        return NU_ROWS if self.active.ndim == 1 else NU_ENTRIES  # static

    def cost(self, nu):
        """``[R, Y]``: the linear cost at the log-weights ``ν``."""
        if not self.epigraph:
            return self.base
        w = jnp.exp(nu)
        return (w[:, None] if w.ndim == 1 else w) * self.base

    def uniform(self):
        """``[R, Y]``: the cost at uniform weights (the steps' scale, :func:`_rates`)."""
        if not self.epigraph:
            return self.base
        n = jnp.maximum(jnp.sum(self.active), 1).astype(self.base.dtype)
        return (self.active[:, None] if self.active.ndim == 1 else self.active) * self.base / n

    def ascend(self, nu, mask, theta, tau):
        """Entropic ascent of the log-weights on the losses of the table ``exp(θ)``:
        ``ν ← log softmax(ν + τ ℓ / ⟨e^ν, ℓ⟩)`` over the active rows or entries."""
        if not self.epigraph:
            return nu
        weighted = self.base * jnp.where(mask, jnp.exp(theta), 0.0)
        losses = jnp.sum(weighted, axis=1) if nu.ndim == 1 else weighted
        mean = jnp.maximum(jnp.sum(jnp.exp(nu) * losses), 1e-300)
        floor = -jnp.log(jnp.maximum(jnp.sum(self.active), 1).astype(nu.dtype)) - SPAN
        z = jnp.where(self.active, nu + tau * losses / mean, -jnp.inf)
        z = jnp.where(self.active, jnp.maximum(z - jax.scipy.special.logsumexp(z), floor), -jnp.inf)
        return z - jax.scipy.special.logsumexp(z)


class Rows(NamedTuple):
    """The linear constraints beside the divergences, ``G A ≤ 0`` (pure ratio bounds, δ = 0) or
    ``Σ_y max(0, (G A)_y) ≤ δ`` per row of ``G`` (hockey-stick bounds, δ > 0), with multipliers
    ``u ≥ 0`` ``[M, Y]``: ``op`` is ``G``, the normalised operator of :mod:`._linear` at the run's
    tightened budgets, ``size`` the same with every coefficient's magnitude (``|G|``), and
    ``rate`` ``[M, 1]`` each constraint's cost scale ``(|G| c̄) / ‖G_i‖²`` (``c̄`` the rows' mean
    costs: a multiplier of that size moves each row it compares by about its own cost, whether it
    compares two rows or the lifts of item laws over many). A multiplier steps by ``s = σ·LINEAR·
    rate / (|G| A)`` times its constraint's value ``G A`` (the violation relative to the entries
    it compares, at most 1 in size); ``delta`` is ``op.delta`` where some δ > 0, else empty
    (static), and then the step is the prox of the Lagrangian's ``−δ max_y u_y`` (:func:`_capped`)."""

    op: Operator
    size: Operator
    rate: jax.Array
    delta: jax.Array

    @property
    def any(self) -> bool:
        return self.rate.shape[0] > 0  # static

    def pull(self, u, cost):
        """``cost + Gᵀu``."""
        return cost + self.op.transpose(u) if self.any else cost

    def push(self, u, mask, theta, sigma):
        """The projected (or, with hockey-stick rows, proximal) ascent step of the multipliers at
        the table ``exp(θ)``."""
        if not self.any:
            return u
        a = jnp.where(mask, jnp.exp(theta), 0.0)
        size = jnp.maximum(self.size.apply(a), jnp.finfo(a.dtype).tiny)  # 1e-300 is 0 in float32
        scale = sigma * LINEAR * self.rate
        moved = u + scale * _ratios(self.op, mask, theta, a, size)
        if not self.delta.shape[0]:
            return jnp.maximum(moved, 0.0)
        return _capped(moved, size / scale, self.delta, jnp.max(u, axis=1, initial=0.0))


def _ratios(op, mask, theta, a, size):
    """``G a / |G| a`` ``[M, Y]`` (each at most 1 in size) at the table ``a = exp(θ)`` on ``mask``,
    ``size`` being ``|G| a``. A pair row's ``(c_p P − c_q Q) / (c_p P + c_q Q)`` is
    ``tanh((θ_P − θ_Q + ln c_p − ln c_q) / 2)``, taken from the log-table so that it holds where
    both entries are below float32's range (``e^{−104}``, see *Precision*): as a quotient of entries
    that had underflowed to 0 it was 0 there, the multipliers of outputs no row uses stopped
    moving, and TV-DP on a 5×5 grid whose prior sits on 4 cells stalled 1.3 % short in float32
    (``tests/solvers/test_mirror.py``; converged with this). It is ±1 where one entry is off the
    support, 0 where both are; mixture rows are the quotient itself."""
    kp = op.pair_a.shape[0]
    shift = (jnp.log(op.c_p) - jnp.log(op.c_q))[:, None]

    def side(p, q):  # c_p A_p − c_q A_q over its size
        mp, mq = mask[p], mask[q]
        both = mp & mq
        inner = jnp.tanh(jnp.where(both, theta[p] - theta[q] + shift, 0.0) / 2)
        return jnp.where(both, inner, mp.astype(inner.dtype) - mq.astype(inner.dtype))

    return jnp.concatenate([side(op.pair_a, op.pair_b), side(op.pair_b, op.pair_a),
                            (op.mix @ a) / size[2 * kp:]], axis=0)


def _capped(v, w, delta, start):
    """``argmin_{x ≥ 0} Σ_y w_y (x_y − v_y)² / 2 + δ max_y x_y`` per row (the prox of a hockey-stick
    row's ``δ max u`` in the steps' metric, ``w = 1 / s`` the inverse steps): ``min(v, θ)⁺`` with
    ``θ ≥ 0`` the level where ``Σ_y w_y (v_y − θ)⁺ = δ`` (0 where ``Σ_y w_y v_y⁺ ≤ δ``); ``δ = 0``
    gives ``max(v, 0)``. Michelot's iteration finds it exactly: ``θ ← (Σ_{v ≥ θ} w v − δ) /
    Σ_{v ≥ θ} w`` is a Newton step on ``F(θ) = Σ_y w_y (v_y − θ)⁺ − δ``, convex and decreasing, so
    from any ``θ`` it lands at or below the level (the tangent is below ``F``) and from there rises
    to it in a few passes (10× faster than sorting the rows). It starts from ``start``, the rows'
    last level (their largest multiplier), raises each step's landing to 0 (every level at or
    below 0 gives 0, and 0 is below a positive level, so the passes still rise to it), and stops
    once no row rises (in exact arithmetic the passes rise from the first, and a row that stops
    rising is at its level; a row whose level is at most 0 stays at 0). In float32 (*Precision*)
    waiting instead for every level to stand still made a chunk of TV-DP steps on 32×32 take
    37–41 s; stopping once none rises, 17.5 s (float64: 36 s either way). Between the 4-neighbour
    cells of a 24×24 grid the prox then took 2 passes where a start from 0 to the last row took 7
    (TV-DP; approximate local DP, whose rows are mostly at 0: 1 against 8), with the same result.

    Once at most :data:`FEW` rows still rise, a pass takes those rows alone (gathered): on the
    multipliers of TV-DP on a 32×32 grid (3,968 rows of 1,024) after 600 steps, 1,958 rows rose
    in the first pass, 229 in the second, 7 in the third, and each pass over every row read all
    of ``v`` and ``w`` (memory-bound there). A pass writes its masked weights ``[v ≥ θ] w`` out
    once and takes both sums from them (XLA's CPU backend writes a masked operand out before
    summing it; the sums of ``w`` and ``w v`` masked apart wrote two): with the levels raised to 0
    in place of a first sum that told which rows' levels are positive, TV-DP steps took 51.7
    instead of 70.5 ms on 32×32 and 11.5 instead of 17.5 ms on 24×24, to the same multipliers."""
    def level(vs, ws, ds, theta):  # the Newton step, raised to 0 (levels ≤ 0 all give 0)
        above = jnp.where(vs >= theta[:, None], ws, 0.0)  # ≥: at δ = 0 the top entry stays
        total = jnp.sum(above, axis=1)
        return jnp.maximum((jnp.sum(above * vs, axis=1) - ds) / jnp.where(total > 0, total, 1.0), 0.0)

    few = FEW if v.shape[0] >= 4 * FEW else 0  # static: on fewer rows every pass takes them all

    def rising(carry):
        theta, last, i = carry
        return jnp.any(theta > last) & (i < CAP_PASSES)

    def again(carry):
        theta, last, i = carry
        if not few:
            return level(v, w, delta, theta), theta, i + 1
        up = theta > last

        def some(theta):  # the rising rows, padded with others (whose level stays where it is)
            rows = jax.lax.top_k(up.astype(v.dtype), few)[1]
            return theta.at[rows].set(level(v[rows], w[rows], delta[rows], theta[rows]))

        every = lambda theta: level(v, w, delta, theta)  # noqa: E731
        return jax.lax.cond(jnp.sum(up) <= few, some, every, theta), theta, i + 1

    first = level(v, w, delta, start)
    theta, _, _ = jax.lax.while_loop(rising, again, (level(v, w, delta, first), first, 0))
    return jnp.clip(v, 0.0, theta[:, None])


CAP_PASSES, FEW = 100, 256
"""At most this many passes of :func:`_capped`'s iteration (each leaves out at least one entry
until it stops: a row has at most ``Y`` of them); a pass takes only the rows still rising once
there are at most ``FEW``, where there are at least ``4 · FEW`` rows (on 16×16 grids, 960 rows, the
gathering cost more than it saved)."""


def _rows(data, rate_cost, kinds, tight: float) -> tuple[Rows, jax.Array]:
    """``(rows, u = 0)``: :class:`Rows` of ``data``'s linear constraints, budgets tightened by
    ``tight`` (relative); ``kinds``: the run's divergences (:func:`_row_costs`)."""
    op = operator(tighten(data, rel=tight))
    size = op._replace(c_q=-op.c_q, mix=jnp.abs(op.mix))
    square = op._replace(c_p=op.c_p**2, c_q=-op.c_q**2, mix=op.mix**2)
    norm = square.apply(jnp.ones((op.n_rows, 1)))
    rate = size.apply(_row_costs(rate_cost, data.mask, kinds)[:, None]) / jnp.maximum(norm, 1e-300)
    delta = op.delta if bool(jnp.any(op.delta > 0)) else op.delta[:0]
    return Rows(op, size, rate, delta), jnp.zeros((rate.shape[0], data.mask.shape[1]))


def _weights(problem: Problem, data) -> tuple[Weights, jax.Array, float]:
    """``(weights, log-weights ν, scale)``: the objective scaled to a unit total (at uniform
    weights for an epigraph objective), so that one ``(η, σ)`` serves every problem."""
    kind = problem.objective.epigraph
    if not kind:
        scale = float(jnp.maximum(jnp.sum(data.cost), 1e-300))
        return Weights(data.cost / scale, jnp.zeros((0,), bool)), jnp.zeros((0,)), scale
    loss = jnp.where(data.mask, data.row_loss, 0.0)
    active = data.row_active
    per = jnp.sum(loss, axis=1) if kind == "rows" else loss
    n = jnp.maximum(jnp.sum(active), 1)
    scale = float(jnp.maximum(jnp.sum(jnp.where(active, per, 0.0)) / n, 1e-300))
    nu = jnp.where(active, -jnp.log(n.astype(loss.dtype)), -jnp.inf)
    return Weights(loss / scale, active), nu, scale


def _gradient(cost, mask, nl, kinds, theta, lam):
    """``(∇_A L [R, Y], g [K, 2])`` at the table ``exp(θ)``; with no divergence (``kinds`` is
    static) the cost itself: the divergences' term is 0 there, and its ``exp(−θ)`` was a fifth of a
    step's time (TV-DP, 16×16) and overflows in float32."""
    if not kinds:
        return jnp.where(mask, cost, 0.0), jnp.zeros(lam.shape, cost.dtype)
    log_rows = jnp.where(mask, theta, -jnp.inf)

    def weighted(lr):
        g = residuals(nl, kinds, lr)
        return jnp.sum(lam * jnp.maximum(g, -1e300)), g

    (_, g), g_log = jax.value_and_grad(weighted, has_aux=True)(log_rows)
    return jnp.where(mask, cost + g_log * jnp.exp(-theta), 0.0), g


def _move(mask, theta, grad, cost, weight, eta):
    """The entropic step ``θ ← log softmax(θ − η (∇ − ⟨A, ∇⟩) / (w_r + ENTRY·|∇ − C|))``: the
    gradient centred on its mean under the row (an optimum, where ``∇`` is constant on the row,
    stays a fixed point, also under the clip) and each entry's step shortened by its own
    constraint gradient ``|∇ − C|``."""
    a = jnp.where(mask, jnp.exp(theta), 0.0)
    centred = grad - jnp.sum(a * grad, axis=1, keepdims=True)
    step = jnp.clip(eta * centred / (weight + ENTRY * jnp.abs(grad - cost)), -CLIP, CLIP)
    return _normalised(mask, theta - step)


def _normalised(mask, theta):
    """Log-rows normalised on the support, kept above :data:`FLOOR` (0 outside the support)."""
    out = jax.nn.log_softmax(jnp.where(mask, theta, -jnp.inf), axis=1)
    return jnp.where(mask, jnp.maximum(out, FLOOR), 0.0)


@jax.jit(static_argnums=(4,))
def _chunk(weights, rows, mask, nl, kinds, theta, lam, nu, u, eta, sigma):
    """``STEPS`` mirror-prox steps from ``(θ, λ, ν, u)``: the last iterate, and the average of the
    half steps' ``(A, λ, e^ν, u)``, tables and weights as probabilities (:func:`_averaged` gives
    its iterate; the ergodic average is what mirror-prox's rate is for: with it Rényi-2 DP on a
    6×6 grid under the largest entry converged in 600 steps, where the last iterate alone stalled
    200 % above its bound)."""

    row_cost = _row_costs(weights.uniform(), mask, kinds)  # the steps' scales: fixed through the chunk

    def step(_, carry):
        (th, lm, n, v), total = carry
        cost = weights.cost(n)
        weight, dual = _rates(row_cost, nl, kinds, lm, sigma)
        grad, g = _gradient(rows.pull(v, cost), mask, nl, kinds, th, lm)
        half, lam_half = _move(mask, th, grad, cost, weight, eta), jnp.maximum(lm + dual * g, 0.0)
        nu_half, u_half = weights.ascend(n, mask, th, eta * weights.step), rows.push(v, mask, th, sigma)
        cost = weights.cost(nu_half)
        grad, g = _gradient(rows.pull(u_half, cost), mask, nl, kinds, half, lam_half)
        new = (_move(mask, th, grad, cost, weight, eta), jnp.maximum(lm + dual * g, 0.0),
               weights.ascend(n, mask, half, eta * weights.step), rows.push(v, mask, half, sigma))
        halves = (jnp.where(mask, jnp.exp(half), 0.0), lam_half, jnp.exp(nu_half), u_half)
        return new, tuple(t + h for t, h in zip(total, halves, strict=True))

    zero = (jnp.zeros_like(theta), jnp.zeros_like(lam), jnp.zeros_like(nu), jnp.zeros_like(u))
    last, total = jax.lax.fori_loop(0, STEPS, step, ((theta, lam, nu, u), zero))
    return last, tuple(t / STEPS for t in total)


def _averaged(weights, mask, mean):
    """The iterate ``(θ, λ, ν, u)`` of an average ``(A, λ, e^ν, u)`` of iterates (:func:`_chunk`):
    the log-table and the log-weights of the averaged probabilities."""
    a, lam, nu, u = mean
    theta = _normalised(mask, jnp.log(jnp.where(mask, a, 1.0)))
    if weights.epigraph:
        nu = jnp.where(weights.active, jnp.log(jnp.maximum(nu, 1e-300)), -jnp.inf)
    return theta, lam, nu, u


@jax.jit(static_argnums=(5,))
def _bound(data, weights, rows, nl, true_nl, kinds, theta, lam, nu, u, eta, sigma, scale):
    """The certified bound at ``(λ, ν, u)`` (module docstring): ``REFINE`` steps of length ``eta``
    on the run's problem (the objective divided by ``scale``, budgets ``nl`` and ``rows``), then the
    Lagrangian at ``data``'s and ``true_nl``'s budgets with the multipliers ``scale · λ`` and
    ``scale · u`` and the weights ``e^ν``, or with ``λ = 0`` where that is higher: on Rényi-2 DP
    with approximate local DP beside (6×6, seed 4), a slack budget's ``λ`` of 10⁻⁷ times the
    Rényi gradient at near-zero entries made the linearised Lagrangian about −10⁴¹."""
    mask = data.mask
    cost = weights.cost(nu)
    full = rows.pull(u, cost)
    weight, _ = _rates(_row_costs(weights.uniform(), mask, kinds), nl, kinds, lam, sigma)

    def step(_, th):
        return _move(mask, th, _gradient(full, mask, nl, kinds, th, lam)[0], cost, weight, eta)

    theta = jax.lax.fori_loop(0, REFINE, step, theta)
    table = jnp.where(mask, jnp.exp(theta), 0.0)
    table = table / jnp.sum(table, axis=1, keepdims=True)
    nu, op = (jnp.exp(nu) if weights.epigraph else None), operator(data)
    with_lam = lower_bound(data, scale * u, nu, worst=weights.epigraph, op=op,
                           linearized=linearized(true_nl, kinds, table, scale * lam))
    return jnp.maximum(with_lam, lower_bound(data, scale * u, nu, worst=weights.epigraph, op=op))


class MirrorRun(Declared):
    """Mirror-prox (module docstring) on a problem :func:`applies` to, under the settings of
    ``opt``, as a :class:`._driver.Run`. Its steps are mirror-prox steps (two gradients each); it
    stops when the best feasible table is within ``gap_tol`` of the best bound (``"converged"``),
    when :data:`STALL` chunks move nothing (``"stalled"``), or when the steps run out.
    ``budget_scale`` solves ``problem.scaled(budget_scale)``; ``init`` starts from the ``state``
    of an earlier run's result (its iterate ``(θ, λ, ν, u)``: the budgets of a frontier one after
    another); ``floor``: a lower bound known already (the linear relaxation's, :mod:`._relaxed`),
    which the run's own starts from."""

    name, labels = "mirror", ("mirror",)
    takes_floor = hands_over = budgets = True
    warm_starts = False

    @classmethod
    def accepts(cls, problem) -> bool:
        return applies(problem, divergence_kinds(problem.blocks()))

    def __init__(self, opt, problem: Problem, seed: int, *, budget_scale: float = 1.0, init=None,
                 floor: float = -np.inf):
        del seed  # deterministic: the start is the cost-tilted table
        if budget_scale != 1.0:
            problem = problem.scaled(budget_scale)
        self.opt, self.problem = opt, problem
        self.data = linear_data(problem, nonlinear=True)
        self.true_nl, self.kinds = divergence_data(problem, self.data.cost.shape[0])
        self.tight = tight = TIGHTEN * min(opt.gap_tol, 1e-2)
        self.loosened = 0  # times the tightening was loosened (LOOSEN)
        self.cycles = 0  # times the steps were halved for a cycle (CYCLES)
        self.nl = self.true_nl._replace(eps=tuple(e * (1.0 - tight) for e in self.true_nl.eps))
        mask = self.data.mask
        self.weights, self.nu, self.scale = _weights(problem, self.data)
        cost = self.weights.cost(self.nu)
        top = jnp.max(jnp.where(mask, cost, 0.0), axis=1, keepdims=True)
        self.theta = _normalised(mask, -3.0 * cost / jnp.maximum(top, 1e-300))
        self.lam = jnp.zeros((self.nl.size, 2))
        self.rows, self.u = _rows(self.data, self.weights.uniform(), self.kinds, tight)
        if init is not None:
            self.theta, self.lam, self.nu, self.u = init
        self.eta, self.sigma = ETA, SIGMA
        self.high = 0  # chunks in a row with residuals above OFF
        self.trace = []  # (bound, objective, largest residual) of the last STALL + 1 chunks
        self.since = 0  # chunks since the steps were last halved for being stuck
        self.total, self.done = opt.steps, 0
        self.bound, self.best = max(smallest_objective(problem), floor), None
        linear = not self.kinds and self.rows.any and not self.weights.epigraph
        self.dtype = jnp.float32 if linear else jnp.float64  # the steps' (*Precision*)
        self.theta, self.lam, self.nu, self.u = cast((self.theta, self.lam, self.nu, self.u), self.dtype)
        self.stepping = cast((self.weights, self.rows), self.dtype)  # the chunks' weights and rows
        self.table = self._table(self.theta)
        # (sum of the chunks' averages, their count): since the steps last changed, and over the run
        self.running = self.whole = None
        self.dual = DualBound(self.data, operator(self.data)) if linear else None
        # hockey-stick bounds between rows alone, every output allowed: the per-row mixing's
        # arguments after the rows (cost, prior, the pairs' rows, ε and δ; :mod:`._local_mix`)
        d, self.mixing = self.data, None
        hockey_alone = d.mix_a.shape[0] == 0 and np.all(np.asarray(d.pair_delta) > 0)
        if linear and hockey_alone and np.all(np.asarray(mask)):
            pairs = (np.asarray(x) for x in (d.pair_a, d.pair_b, d.pair_eps, d.pair_delta))
            self.mixing = (np.asarray(d.cost), problem.prior.ravel(), *pairs)

    def chunk(self) -> Chunk:
        mask, kinds = self.data.mask, self.kinds
        start = (self.theta, self.lam, self.nu, self.u)
        (theta, lam, nu, u), mean = _chunk(*self.stepping, mask, self.nl, kinds, *start, self.eta, self.sigma)
        self.done += STEPS
        worst = float(jnp.max(residuals(self.nl, kinds, jnp.where(mask, theta, -jnp.inf)), initial=0.0))
        finite = all(bool(jnp.all(jnp.isfinite(v))) for v in (theta, lam, u))
        if not (finite and worst <= BLOWUP):
            self.theta, self.lam, self.nu, self.u = start  # thrown off: undo, smaller steps
            self.eta, self.sigma, self.running = self.eta / 2, self.sigma / 2, None
            return Chunk(self.done, self._gap())
        self._accumulate(mean)
        self.high = self.high + 1 if worst > OFF else 0
        if self.high >= HIGH:  # stuck above the budgets: a cycle the steps are too long for
            self.eta, self.high, self.running = self.eta / 2, 0, None
        self.theta, self.lam, self.nu, self.u = theta, lam, nu, u
        at = BOUND_AT[(self.done // STEPS - 1) % len(BOUND_AT)]
        if at == "last":
            points = [(theta, lam, nu, u)]
        else:  # the two averages differ once the steps have changed
            same = self.running is None or self.running[1] == self.whole[1]
            points = [self._mean(r) for r in ((self.whole,) if same else (self.running, self.whole))]
        etas = (self.eta, BOLD * self.eta) if at == "last" and kinds else (self.eta,)
        for point in points:
            for eta in etas:
                bound = _bound(self.data, self.weights, self.rows, self.nl, self.true_nl, kinds,
                               *cast(point, jnp.float64), eta, self.sigma, self.scale)
                self.bound = max(self.bound, float(bound))
        if self.dual is not None and at != "last":  # linear constraints alone: L-BFGS on their dual
            self.bound = max(self.bound, self.dual.raised(self.scale * u.astype(jnp.float64)))
        self.table = self._table(theta)
        gap_tol, objective = self.opt.gap_tol, self.problem.objective_value(self.table)
        average = _averaged(self.weights, mask, mean)[0]  # the chunk's average table, as log-rows
        for th, table in ((theta, self.table), (average, self._table(average))):
            near = relative_gap(self.problem.objective_value(table), self.bound) <= gap_tol < self._gap()
            if near and self._repairable(th):
                self._keep(table)  # near enough to be worth the certifier's repair
        gap = self._gap()
        if gap <= gap_tol:
            return Chunk(self.done, gap, Status.CONVERGED)
        self.trace, self.since = [*self.trace[-STALL:], (self.bound, objective, worst)], self.since + 1
        if self.since > STUCK and self._still(STUCK, 0.1, 0.9) and worst > self.tight:
            self.eta, self.sigma, self.since, self.running = self.eta / 2, self.sigma / 2, 0, None
        if not self._still(STALL, 0.01, 0.5):
            return Chunk(self.done, gap)
        if worst <= self.tight and self.loosened < LOOSENINGS:  # held back by the tightening
            self._loosen()
            return Chunk(self.done, gap)
        if self._cycling() and self.cycles < CYCLES:
            self.eta, self.sigma, self.cycles = self.eta / 2, self.sigma / 2, self.cycles + 1
            self.since, self.running, self.trace = 0, None, []
            return Chunk(self.done, gap)
        return Chunk(self.done, gap, Status.STALLED)

    def _loosen(self) -> None:
        """Tightens the budgets :data:`LOOSEN` times less (:data:`TIGHTEN`) and starts the stall's
        count afresh."""
        self.tight, self.loosened = self.tight / LOOSEN, self.loosened + 1
        self.nl = self.true_nl._replace(eps=tuple(e * (1.0 - self.tight) for e in self.true_nl.eps))
        self.rows = _rows(self.data, self.weights.uniform(), self.kinds, self.tight)[0]
        self.stepping = cast((self.weights, self.rows), self.dtype)
        self.since, self.running, self.trace = 0, None, []

    def _accumulate(self, mean) -> None:
        """Adds a chunk's average ``(A, λ, e^ν, u)`` (:func:`_chunk`) to the running sums."""
        def add(running):
            if running is None:
                return mean, 1
            total, count = running
            return tuple(t + p for t, p in zip(total, mean, strict=True)), count + 1

        self.running, self.whole = add(self.running), add(self.whole)

    def _mean(self, running):
        """The iterate ``(θ, λ, ν, u)`` of the chunks' averages summed in ``running``
        (:data:`BOUND_AT`)."""
        total, count = running
        return _averaged(self.weights, self.data.mask, tuple(t / count for t in total))

    def _still(self, chunks: int, fraction: float, fall: float) -> bool:
        """Whether the last ``chunks`` chunks moved neither the bound nor the table's objective by
        ``fraction · gap_tol`` of the objective nor brought the largest residual down to ``fall``
        times what it was."""
        if len(self.trace) <= chunks:
            return False
        (bound, before, high), (now, objective, worst) = self.trace[-chunks - 1], self.trace[-1]
        moved = abs(now - bound) + abs(objective - before)  # NaN while the bound is -inf: moving
        return moved <= fraction * self.opt.gap_tol * abs(objective) and not worst < fall * high

    def _cycling(self) -> bool:
        """Whether the table's objective swung by more than a tenth of ``gap_tol`` (relative) over
        the chunks in the trace (:data:`CYCLES`)."""
        objectives = [objective for _, objective, _ in self.trace]
        return max(objectives) - min(objectives) > 0.1 * self.opt.gap_tol * abs(objectives[-1])

    def _repairable(self, theta) -> bool:
        """Whether the table ``exp(θ)`` exceeds its real budgets by at most :data:`REPAIRABLE`
        ``· gap_tol`` (relative)."""
        excess = residuals(self.true_nl, self.kinds, jnp.where(self.data.mask, theta, -jnp.inf))
        return float(jnp.max(excess, initial=-1.0)) <= REPAIRABLE * self.opt.gap_tol

    def _table(self, theta) -> np.ndarray:
        rows = np.array(jnp.where(self.data.mask, jnp.exp(theta), 0.0), np.float64)
        check_finite(rows)
        return the_table(self.problem, rows / rows.sum(axis=1, keepdims=True))

    def _keep(self, table: np.ndarray) -> None:
        """Keeps ``table``, repaired by the certifier's least mixing (after a per-row mixing where
        that is lower: :mod:`._local_mix`), if its objective is the best."""
        from diffpriv.certification._repair import repair

        fixed = repair(self.problem, table).table
        loss = self.problem.objective_value(fixed)
        if self.mixing is not None:
            rows = local_mix(table.reshape(-1, table.shape[-1]), *self.mixing)
            if rows is not None:
                mixed = repair(self.problem, rows.reshape(table.shape)).table
                if (mixed_loss := self.problem.objective_value(mixed)) < loss:
                    fixed, loss = mixed, mixed_loss
        if self.best is None or loss < self.best[0]:
            self.best = (loss, fixed)

    def _gap(self) -> float:
        return float("inf") if self.best is None else relative_gap(self.best[0], self.bound)

    def finish(self, status: Status) -> Outcome:
        self._keep(self.table)
        if bool(proves_infeasible(self.data, self.bound)):
            status = Status.INFEASIBLE
        table = self.best[1]
        rows = table.reshape(-1, table.shape[-1])
        violation = divergence_violation(self.data, self.true_nl, self.kinds, rows)
        return Outcome(table, self.bound, status, violation, state=(self.theta, self.lam, self.nu, self.u),
                       method="mirror")
