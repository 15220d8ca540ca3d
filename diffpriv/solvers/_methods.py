"""The optimizer's methods, its solvers, and the choice ``method = "auto"`` makes: one table.

:data:`METHODS` names every value of ``optimizer.method`` with its meaning; the options' check and
the config's schema read it. :data:`SOLVERS` names every run (:class:`._driver.Declared`: a run
declares its name, labels and capabilities). :data:`AUTO` is ``"auto"``'s choice, an ordered table
of :class:`Rule` rows (what the row is for, when it holds, the route it gives, what set its
threshold); :func:`route` reads it, ``METHODS["auto"]`` (the CLI's help) and docs/algorithms.md
are written from it. Its tests on a problem (:class:`Facts`) import the solver modules they ask
(column generation's and the f-divergences' own tests), and with them JAX.

In short: Kantorovich cuts (``"transport cuts"``) on Wasserstein constraints wherever they apply
(on a 6×6 grid with Wasserstein DP between 4-neighbour cells they converged in 1.9 s where
Clarabel took 26 s and the lifted PDHG stopped at its step limit 22 % above the optimum after
138 s, ``benchmarks/wdp_grid.py``); cut generation (``"cuts"``, :func:`auto_cuts`) on
f-divergences between item laws from :data:`CUTS_FROM` table entries (the smoothed dual first at
a loose ``gap_tol``, :data:`DUAL_GAP_TOL`, from :data:`DUAL_FROM` entries); column generation on
DistP from :data:`LINEAR_CUTS_FROM` entries, over output columns on pure pair bounds (local /
extended DP) from :data:`COLUMNS_FROM` to :data:`COLUMNS_TO`, and beside f-divergences from
Clarabel's limit up to :data:`COLUMNS_BESIDE_TO`; elsewhere the exact reference
(:func:`exact_solver`: HiGHS for a linear problem, Clarabel through cvxpy otherwise) where the
size model predicts it is faster and it fits in memory, and diffpriv's own solver otherwise, so
that the default is never silently worse than the reference. Where divergence or Wasserstein
constraints sit beside linear ones it first solves the linear relaxation (:func:`relaxes`,
:mod:`._relaxed`), whose bound holds for the whole problem and whose repaired table is optimal
where the divergences are slack.

The prediction is a size threshold per problem class, calibrated on both run side by side at
the default settings (``python benchmarks/auto_method.py``, 2 CPU cores, ``benchmarks/RESULTS.md``):

* linear constraints: HiGHS's cost grows with its constraint matrix. Mixture blocks (DistP)
  count ``2·Y·(Σ mixture weights)`` entries: HiGHS took 1.6 s on a 16×16 grid against PDHG's
  18 s, and 53 s on 32×32 (4.2·10⁶ entries) against 730 s. Pair blocks (local / extended DP,
  geo-indistinguishability) count ``4·Y·Kp``: on 4-neighbour grids HiGHS took 5.2 s on 10×10
  against 51 s, and 107 s on 14×14 (2.9·10⁵ entries) against 263 s (PDHG at its step limit).
  The exact solver runs while ``mixture entries / MIXTURE_ENTRIES + pair entries /
  PAIR_ENTRIES ≤ 1``: up to about 48×48 for one DistP comparison (whose LP needs ~2.5 GB) and
  18×18 with 4-neighbour pairs, a little beyond the largest sizes measured. Hockey-stick bounds
  between rows (approximate local DP, TV-DP) at ``gap_tol ≥`` :data:`MIRROR_GAP_TOL` count
  against :data:`HOCKEY_PAIR_ENTRIES` (about 9×9; 12×12 below ``gap_tol = 10⁻²``), and
  mirror-prox runs them beyond (:func:`mirror_runs`): HiGHS took 110 s on a 12×12 TV-DP grid
  against 12.8 s.
* divergence and Wasserstein constraints: Clarabel's cost grows with the conic program's
  variables (table entries, and ``Y²`` per Wasserstein comparison for its coupling). At the
  default ``gap_tol`` (10⁻⁴), where the smoothed dual stalls at 3·10⁻⁴–9·10⁻⁴, Clarabel took
  1.6 s on an 8×8 grid with KL DistP against 14 s, 2.4 s on 12×12 against 37 s and 28 s on
  16×16 (6.6·10⁴ variables) against 99 s; it did not finish 24×24 in 14 minutes. At
  ``gap_tol = 10⁻³`` the dual converges and wins from 16×16 (8.3 s against 25.8 s on KL), while
  Clarabel still wins on 10×10 (0.3–2.2 s against 0.6–12.7 s). It runs up to
  :data:`CONVEX_VARIABLES` (about 17×17; :data:`CONVEX_VARIABLES_LOOSE`, about 12×12, when
  ``gap_tol ≥ 10⁻³``), or up to :data:`CONVEX_VARIABLES_AL` (about 20×20)
  where diffpriv's solver would be the augmented Lagrangian (linear bounds between rows beside
  divergences with no pure pair bound among them, the largest-entry objective on item laws),
  which stalls 1–37 % above the optimum, or :data:`CONVEX_VARIABLES_MIRROR` (about 8×8) where it
  would be mirror-prox or column generation beside pure pair bounds, hockey-stick ones too
  (Clarabel stops at
  ``optimal_inaccurate`` on KL-DP with geo-indistinguishability on a 10×10 grid after 66 s).
  cvxpy is an optional
  dependency: without it ``"auto"`` runs diffpriv's solver.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import math
from collections.abc import Callable

from diffpriv.problems._checks import SpecError

__all__ = ["AUTO", "METHODS", "SOLVERS", "Rule", "auto_table", "auto_cuts", "choose", "cuts_apply",
           "cuts_solver", "declares", "exact_solver", "first_order", "relaxes", "route", "run_of",
           "solver_class"]

METHODS = {
    "auto": "",  # from its table, :data:`AUTO` (below)
    "pdhg": "diffpriv's first-order solvers: restarted mirror PDHG (linear constraints; lifted "
            "to couplings for Wasserstein ones), the smoothed dual with L-BFGS (divergence "
            "DistP), mirror-prox (divergence DP between rows; DistP or approximate LDP beside), "
            "else the augmented Lagrangian",
    "cuts": "column-and-cut generation for f-divergence constraints (KL, chi2, Hellinger, Renyi, TV) "
            "and Wasserstein ones (column generation alone for linear ones between item laws, DistP, "
            "and over whole output columns for pure local / extended DP, also beside f-divergences): "
            "linear programs on a working support with tangent cuts of each "
            "divergence (Kantorovich potentials for Wasserstein budgets), solved by HiGHS, and a "
            "bound on the whole problem from their multipliers",
    "mirror": "mirror-prox on the Lagrangian alone: divergence or hockey-stick bounds between rows "
              "(divergence DP, TV-DP, approximate local DP), beside DistP between item laws only",
    "al": "the augmented-Lagrangian baseline",
    "interior": "a primal-dual interior point over the table's output columns for pure local / extended DP "
                "(geo-indistinguishability, delta = 0) under the expected loss: each output's banded "
                "Newton system, the rows' sums by a dense system of one row per input; every iterate a "
                "table within the budgets, its bound from weak duality",
    "exact": "the exact reference: HiGHS for linear constraints, Clarabel (cvxpy) otherwise",
    "gradient": "the gradient search for the smooth objectives ('estimation', 'information'): the augmented "
                "Lagrangian with L-BFGS on softmax logits from several starts at once (the calibrated "
                "baselines, random ones), the best certified table kept; no optimality bound "
                "(the objectives are not convex); what 'auto' runs for them",
}
"""Every ``optimizer.method`` and what it runs (:class:`._options.Options` derives its allowed values
from these keys)."""

SOLVERS = {
    "pdhg": "diffpriv.solvers._pdhg_run:PDHGRun",
    "linear al": "diffpriv.solvers._pdhg_run:LinearALRun",
    "transport pdhg": "diffpriv.solvers._transport_pdhg:TransportRun",
    "dual": "diffpriv.solvers._dual:DualRun",
    "mirror": "diffpriv.solvers._mirror:MirrorRun",
    "al": "diffpriv.solvers._nonlinear:ALRun",
    "cuts": "diffpriv.solvers._cuts:CutsRun",
    "columns": "diffpriv.solvers._columns:ColumnsRun",
    "transport cuts": "diffpriv.solvers._transport_cuts:TransportCutsRun",
    "exact": "diffpriv.solvers._exact:ExactRun",
    "relaxed": "diffpriv.solvers._relaxed:RelaxedRun",
    "interior": "diffpriv.solvers._interior:InteriorRun",
    "gradient": "diffpriv.solvers._gradient:GradientRun",
    "simplicial": "diffpriv.solvers._simplicial:SimplicialRun",
}
"""Every solver: its :class:`._driver.Run` (``module:class``, imported on use, so that this table
loads no JAX). A new solver is its run class, a line here, and its row (or place in a row) of
:data:`AUTO`."""

MIXTURE_ENTRIES = 25_000_000
PAIR_ENTRIES = 800_000
HOCKEY_PAIR_ENTRIES = 50_000
HOCKEY_PAIR_ENTRIES_TIGHT = 160_000
"""HiGHS's limit on hockey-stick bounds between rows (approximate local DP, TV-DP) where mirror-prox
runs them (:func:`mirror_runs`), in place of :data:`PAIR_ENTRIES`: about 9×9 on 4-neighbour grids
at ``gap_tol ≥ 10⁻²``, about 12×12 below (their LP lifts each comparison's positive parts).
``benchmarks/divergence_optimality.py --grid`` kinds ``tv-dp4`` and ``ldp-delta4`` (seed 0), each
alone on the 2-core CPU: HiGHS took 4.8 and 3.3 s on 8×8, 26 and 16 s on 10×10, 110 and 73 s on
12×12, and had not finished TV-DP on 16×16 in 45 minutes; mirror-prox at ``gap_tol = 10⁻²`` took
5.2 and 5.4 s, 8.0 and 10.4 s, 12.8 and 17.6 s (16×16: about a minute), and at ``10⁻³`` 16 and
54 s on 10×10, 30 and 76 s on 12×12 (seed 1: 13 and 18 s, 22 and 28 s)."""
HOCKEY_LOOSE_GAP_TOL = 1e-2
"""The ``gap_tol`` from which :data:`HOCKEY_PAIR_ENTRIES` holds (below it,
:data:`HOCKEY_PAIR_ENTRIES_TIGHT`)."""
MIRROR_GAP_TOL = 1e-3
"""… from this ``gap_tol`` up: at 10⁻⁴ mirror-prox stopped ``stalled`` on 8×8 (2 % and 0.02 %
above the optimum after 29,400 and 35,400 steps), took 38 s on 10×10 TV-DP against HiGHS's 26 s
and ran out of 200,000 steps (317 s) on 10×10 approximate LDP."""
CONVEX_VARIABLES = 85_000
CONVEX_VARIABLES_LOOSE = 20_000
CONVEX_VARIABLES_AL = 160_000
CONVEX_VARIABLES_MIRROR = 5_000
"""Clarabel's limit on divergence DP between rows (mirror-prox's problems, about 8×8): on the
KL-DP grids of ``benchmarks/divergence_optimality.py --grid`` Clarabel took 1.3–3 s on 6×6 and
8 s on 8×8, and 28–50 s on 10×10 only to stop at ``optimal_inaccurate``, where mirror-prox
converged at ``gap_tol = 10⁻³`` in 0.7–9 s."""
CUTS_FROM = 20_000
"""``"auto"`` runs Clarabel rather than ``"cuts"`` on f-divergences between item laws up to this
many table entries (about 12×12): on the Gaussian-mixture grids of
``benchmarks/divergence_optimality.py --grid`` Clarabel was 8–15× faster (medians) on 6×6 and
1.1–2.3× on 10×10, and ``"cuts"`` took 0.08–0.78× Clarabel's time on 16×16. Under the
largest-entry objective Clarabel runs wherever it fits (up to :data:`CONVEX_VARIABLES_AL`):
``"cuts"`` took 89–371 s on 10×10 grids where Clarabel took 0.7–2.3 s."""
LINEAR_CUTS_FROM = 50_000
"""``"auto"`` runs column generation (``"cuts"`` without cuts) rather than HiGHS on the whole LP
from this many table entries (after presolve; about 16×16) where every comparison is between
item laws (DistP): with certification, on the Gaussian-mixture grids of
``benchmarks/scaling.py`` it took 1.4 s / 0.25 s / 0.71 s on 6×6 / 10×10 / 16×16 where HiGHS
took 0.02 s / 0.17 s / 1.08 s, and on the Sacramento sales 0.19 / 0.24 / 0.61 s against
0.03 / 0.11 / 0.67 s (``benchmarks/RESULTS.md``)."""
COLUMNS_FROM = 10_000
"""``"auto"`` runs column generation over output columns (:mod:`._columns`) rather than HiGHS on
the whole LP from this many table entries where every constraint is a pure pair bound. Side by
side at ``gap_tol = 10⁻⁴`` (best of 3 in one process, the 2-core CPU, ``benchmarks/columns.py``):
geo-indistinguishability on 4-neighbour grids 6×6 / 8×8 / 10×10 / 12×12 took 0.21 / 0.36 / 0.78 /
1.26 s against HiGHS's 0.08 / 0.49 / 2.6 / 11.2 s; k-ary randomized response (ε-LDP) with
k = 20 / 64 took 0.020 / 0.27 s against 0.025 / 1.1 s. In a fresh process each
(``benchmarks/scaling.py``, with certification, ``gap_tol = 10⁻²``) 8×8 took 0.89 s against
HiGHS's 0.51 s."""
COLUMNS_TO = 6_000_000
"""… and up to this many (about 49×49): geo-indistinguishability on a 48×48 grid took 273 s at
``gap_tol = 10⁻²`` (4 rounds of about 70 s: 2,304 pricing LPs and a master of 2,304 rows over
dense rays), and a round grows about as ``n⁵`` on ``n × n`` grids. Beyond, PDHG runs."""
COLUMNS_BESIDE_TO = 10_000
"""``"auto"`` runs mirror-prox and then, where it stops short, column generation over output
columns started from its table (:mod:`._columns`) on pure pair bounds beside f-divergences above
Clarabel's limit (:data:`CONVEX_VARIABLES_MIRROR`, about 8×8) up to this many table entries (10×10,
the largest size measured: ``benchmarks/divergence_optimality.py --grid 10 --beside geo``);
beyond, the augmented Lagrangian (after the linear relaxation, :func:`relaxes`: on 16×16 grids it
converged where the divergence was slack, on 4 of 10 runs in 17–22 s, and gave the augmented
Lagrangian's runs a bound above 0). Column generation from the relaxation's columns on a 16×16
grid took over 2 minutes for its second round."""
INTERIOR_FALLBACK_SECONDS = 1800.0
"""Where column generation stops short on a balanced prior, the interior point takes over when its
size model (:attr:`._interior.Size.seconds`) expects at most this many seconds (a uniform
16×16 grid at ε = 0.05 per cell side: column generation took 42 rounds and 48 s, the interior point
14 iterations and 8.9 s; all 2,304 outputs of a uniform 48×48 grid: about 20 minutes an
iteration)."""
DUAL_GAP_TOL = 1e-2
"""From this ``gap_tol`` up, ``"auto"`` runs the smoothed dual before ``"cuts"`` where both apply
and Clarabel does not run (:func:`route`), with ``"cuts"`` taking over when the dual does not
converge (:attr:`._driver.Declared.hands_over`). DistP on 32×32 Gaussian-mixture grids at the
tightest budgets, at
``gap_tol = 10⁻²``: the dual converged in 14–35 s where ``"cuts"`` took 408–589 s (χ²,
Hellinger, Rényi 2; ``benchmarks/divergence_optimality.py --grid 32 --gap-tol 1e-2``). At
``10⁻⁴`` the dual stalls (16×16 KL: 6.6·10⁻⁴ after 16,000 steps) and ``"cuts"`` runs alone."""
DUAL_FROM = 300_000
"""… and from this many table entries (about 24×24): measured there and at 32×32 (where the dual
took 2–35 s and ``"cuts"`` 3.5–589 s), not between 12×12 and 24×24, which keep ``"cuts"``."""


def _kinds(problem) -> tuple[tuple[str, float], ...]:
    """The problem's nonlinear divergences ``(name, α)``, each once, in order."""
    from diffpriv.problems._blocks import divergence_kinds

    return divergence_kinds(problem.blocks())


def first_order(problem, method: str = "pdhg") -> str:
    """diffpriv's first-order solver for ``problem`` (a key of :data:`SOLVERS`): ``"pdhg"`` on
    linear constraints; with Wasserstein ones only, the lifted ``"transport pdhg"``
    (:func:`._transport_pdhg.applies`); with divergences between item laws the smoothed
    ``"dual"`` (:func:`._dual.applies`); with divergences between rows mirror-prox
    (``"mirror"``, :func:`._mirror.applies`); else the augmented Lagrangian (``"al"``, and for
    ``method = "al"`` except where the lifted PDHG applies). The tests load JAX, so only a
    nonlinear problem's choice does."""
    if problem.linear:
        return "linear al" if method == "al" else "pdhg"
    from diffpriv.solvers import _dual, _mirror, _transport_pdhg

    kinds = _kinds(problem)
    if _transport_pdhg.applies(problem, kinds):
        return "transport pdhg"
    if method == "al":
        return "al"
    return "dual" if _dual.applies(problem, kinds) else "mirror" if _mirror.applies(problem, kinds) else "al"


def exact_solver(problem, gap_tol: float = 1e-4) -> str | None:
    """``"highs"`` or ``"clarabel"`` when ``method = "auto"`` should run the exact reference on
    ``problem`` at the optimizer's ``gap_tol`` (module docstring), else ``None``."""
    from diffpriv.problems._objectives import LINEAR
    from diffpriv.problems._size import _counts, estimate, memory_limit

    if not isinstance(problem.objective, LINEAR) or estimate(problem, "lp") > memory_limit():
        return None  # an objective of its own (the references take these four only), or too large
    ny = problem.shape[2]
    kp, _, mix_nnz = _counts(problem)
    if problem.linear:
        pair_entries = PAIR_ENTRIES
        if mirror_runs(problem, gap_tol):
            loose = gap_tol >= HOCKEY_LOOSE_GAP_TOL
            pair_entries = HOCKEY_PAIR_ENTRIES if loose else HOCKEY_PAIR_ENTRIES_TIGHT
        load = 2 * ny * mix_nnz / MIXTURE_ENTRIES + 4 * ny * kp / pair_entries
        return "highs" if load <= 1 else None
    if importlib.util.find_spec("cvxpy") is None:
        return None
    ns, nx, _ = problem.shape
    couplings = sum(b.size for b in problem.blocks() if b.divergence == "wasserstein") * ny * ny
    own = first_order(problem)
    if own == "mirror" or _pairs_beside(problem):  # divergence DP between rows; pair bounds beside
        limit = CONVEX_VARIABLES_MIRROR
    elif own == "al":
        limit = CONVEX_VARIABLES_AL
    else:
        limit = CONVEX_VARIABLES_LOOSE if gap_tol >= 1e-3 else CONVEX_VARIABLES
    return "clarabel" if ns * nx * ny + couplings <= limit else None


def mirror_runs(problem, gap_tol: float) -> bool:
    """Whether ``"auto"`` takes mirror-prox (:mod:`._mirror`) as diffpriv's solver for the linear
    ``problem``: hockey-stick bounds between rows (approximate local DP, TV-DP), beside DistP
    between item laws only, not the transport objective, at ``gap_tol ≥`` :data:`MIRROR_GAP_TOL`,
    where the optimizer's standard plan fits in memory (PDHG's lean plan takes larger ones);
    HiGHS runs it up to :data:`HOCKEY_PAIR_ENTRIES` (:func:`exact_solver`)."""
    from diffpriv.problems._blocks import row_divergences
    from diffpriv.problems._size import SizeError, solver_plan

    if not problem.linear or problem.objective.transport or gap_tol < MIRROR_GAP_TOL:
        return False
    if not row_divergences(problem.blocks()):  # mirror-prox's blocks (the test loads no JAX)
        return False
    try:
        return solver_plan(problem) != "lean"
    except SizeError:  # too large for any plan: the run's admission says so
        return False


def _own(problem, method: str, gap_tol: float) -> str:
    """diffpriv's own solver for ``problem`` under ``method``: mirror-prox where
    :func:`mirror_runs` under ``"auto"``, else :func:`first_order`."""
    if method == "auto" and mirror_runs(problem, gap_tol):
        return "mirror"
    return first_order(problem, "al" if method == "al" else "pdhg")


def cuts_apply(problem) -> bool:
    """Whether column-and-cut generation runs ``problem`` (:func:`._cuts.applies`: f-divergence
    constraints; :func:`._transport_cuts.applies`: Wasserstein ones; no transport objective
    either way); loads JAX only for a nonlinear problem."""
    return cuts_solver(problem) is not None


def cuts_solver(problem) -> str | None:
    """``"cuts"`` (f-divergences) or ``"transport cuts"`` (Wasserstein constraints) where
    column-and-cut generation runs ``problem``, else None."""
    if problem.linear:  # column generation alone: of table entries on comparisons of item laws
        # only; of whole output columns on pure pair bounds (local / extended DP)
        from diffpriv.problems._blocks import MixtureBlock
        from diffpriv.problems._objectives import LINEAR
        from diffpriv.solvers import _columns

        if _columns.applies(problem):
            return "columns"
        mixtures = all(isinstance(b, MixtureBlock) for b in problem.blocks())
        lp_objective = isinstance(problem.objective, LINEAR) and not problem.objective.transport
        return "cuts" if mixtures and lp_objective else None
    from diffpriv.solvers import _columns, _cuts, _transport_cuts

    kinds = _kinds(problem)
    if _columns.applies(problem):  # pure pair bounds beside f-divergences
        return "columns"
    if _cuts.applies(problem, kinds):
        return "cuts"
    return "transport cuts" if _transport_cuts.applies(problem, kinds) else None


def _pairs_beside(problem) -> bool:
    """Whether ``problem`` holds pure pair bounds beside f-divergences (and perhaps hockey-stick
    bounds), which column generation over output columns runs (:func:`._columns.applies`):
    ``"auto"`` routes them on their own."""
    return not problem.linear and cuts_solver(problem) == "columns"


def _row_pairs(problem) -> bool:
    """Whether a divergence bounds pairs of table rows (divergence DP, profile edges): there
    ``"auto"`` keeps the other solvers (:func:`._cuts.applies` says why)."""
    from diffpriv.problems._blocks import MixtureBlock

    return any(not b.linear and not isinstance(b, MixtureBlock) for b in problem.blocks())


def auto_cuts(problem) -> bool:
    """Whether ``"auto"`` takes column-and-cut generation as diffpriv's solver for ``problem``:
    f-divergences between item laws (not row pairs)."""
    return cuts_apply(problem) and not _row_pairs(problem)


def _dual_first(problem, own: str, gap_tol: float) -> bool:
    """Whether ``"auto"`` tries the smoothed dual before ``"cuts"`` (:data:`DUAL_GAP_TOL`)."""
    from diffpriv.problems._size import solver_plan

    ns, nx, ny = problem.shape
    return (own == "dual" and gap_tol >= DUAL_GAP_TOL and ns * nx * ny >= DUAL_FROM
            and solver_plan(problem) != "lean")


def relaxes(problem, gap_tol: float = 1e-4) -> bool:
    """Whether ``"auto"`` solves ``problem``'s linear relaxation first (:mod:`._relaxed`): it has
    linear constraints beside nonlinear ones, and the relaxation is cheap: pure pair bounds only
    (column generation over output columns, :data:`._relaxed.ROUNDS` rounds at most), or what
    ``"auto"`` runs by column generation (:func:`choose` gives ``"cuts"``: DistP), or by HiGHS
    where the whole problem is small enough for Clarabel (:func:`exact_solver`). HiGHS on a
    larger relaxation can take long: geo-indistinguishability between 4-neighbour cells of a
    16×16 grid took 282 s, approximate local DP there (δ = 0.01) had not finished in 12 minutes."""
    from diffpriv.solvers import _columns
    from diffpriv.solvers._relaxed import relaxation

    relaxed = None if problem.linear else relaxation(problem)
    if relaxed is None:
        return False
    if _columns.applies(relaxed):  # pure pair bounds only
        return True
    chosen = choose(relaxed, "auto", gap_tol=gap_tol)
    return chosen == "cuts" or (chosen == "exact" and exact_solver(problem, gap_tol) is not None)


class Facts:
    """What ``"auto"``'s table asks of one problem at one ``gap_tol``, each computed once, when a
    row first asks (some load JAX: the f-divergence tests of a nonlinear problem)."""

    def __init__(self, problem, gap_tol: float, warm: bool):
        self.problem, self.gap_tol, self.warm = problem, gap_tol, warm
        self.linear = problem.linear
        self.size = math.prod(problem.shape)

    @functools.cached_property
    def solver(self) -> str | None:
        """:func:`cuts_solver`: ``"cuts"``, ``"columns"``, ``"transport cuts"`` or ``None``."""
        return cuts_solver(self.problem)

    @functools.cached_property
    def exact(self) -> str | None:
        """:func:`exact_solver`: the exact reference that fits and is predicted faster, or None."""
        return exact_solver(self.problem, self.gap_tol)

    @property
    def pairs_beside(self) -> bool:
        """Pure pair bounds beside f-divergences (:func:`_pairs_beside`)."""
        return not self.linear and self.solver == "columns"

    @property
    def columns_alone(self) -> bool:
        """Beside them an f-divergence between item laws (which mirror-prox does not run) or a
        hockey-stick bound (δ > 0): column generation runs alone, cold."""
        from diffpriv.problems._blocks import MixtureBlock

        return any(b.divergence == "hockey_stick" or (isinstance(b, MixtureBlock) and not b.linear)
                   for b in self.problem.blocks())

    @functools.cached_property
    def interior(self) -> bool:
        """The interior point applies (:func:`._interior.applies`) and fits in memory."""
        from diffpriv.problems._size import memory_limit
        from diffpriv.solvers import _interior

        return _interior.applies(self.problem) and self.interior_size.memory <= memory_limit()

    @functools.cached_property
    def interior_size(self):  # -> _interior.Size (imported lazily)
        """The interior point's size model of the problem (:func:`._interior.size`)."""
        from diffpriv.solvers import _interior

        return _interior.size(self.problem)

    @property
    def interior_fallback(self) -> bool:
        """… and its size model expects at most :data:`INTERIOR_FALLBACK_SECONDS` (after column
        generation stops short on a balanced prior)."""
        return self.interior and self.interior_size.seconds <= INTERIOR_FALLBACK_SECONDS

    @property
    def balanced(self) -> bool:
        from diffpriv.solvers._columns import balanced

        return balanced(self.problem)

    @property
    def item_cuts(self) -> bool:
        """f-divergences between item laws, no divergence between rows (:func:`auto_cuts`)."""
        return self.solver is not None and not _row_pairs(self.problem)

    @property
    def clarabel_first(self) -> bool:
        """Clarabel fits, and the problem is small (:data:`CUTS_FROM`) or under the largest-entry
        objective (cut generation took 89–371 s on 10×10 grids where Clarabel took 0.7–2.3 s)."""
        entries = self.problem.objective.epigraph == "entries"
        return self.exact == "clarabel" and (entries or self.size <= CUTS_FROM)

    @property
    def dual_first(self) -> bool:
        return _dual_first(self.problem, first_order(self.problem), self.gap_tol)


@dataclasses.dataclass(frozen=True)
class Rule:
    """One row of ``"auto"``'s table (:data:`AUTO`): the first row whose ``when`` holds gives the
    route ``runs`` (keys of :data:`SOLVERS`, and three words resolved per problem: ``"own"``,
    diffpriv's own solver under ``"auto"`` (:func:`_own`: mirror-prox where :func:`mirror_runs`,
    else :func:`first_order`); ``"first order"``, :func:`first_order`; ``"exact?"``, the exact
    reference where it fits (:func:`exact_solver`), else nothing; ``"interior?"``, the interior
    point where it applies and fits (:attr:`Facts.interior`), else nothing). ``method`` is the
    method the row stands for (:func:`choose`: ``"exact"``, ``"cuts"``, ``"interior"`` or
    ``"pdhg"``); ``case`` says what the
    row is for, ``measured`` what set its threshold (the constants' own docstrings hold the
    figures)."""

    case: str
    when: Callable[[Facts], bool]
    runs: tuple[str, ...]
    method: str
    measured: str = ""

    def resolve(self, facts: Facts) -> tuple[str, ...]:
        words = {"own": (_own(facts.problem, "auto", facts.gap_tol),),
                 "first order": (first_order(facts.problem),),
                 "exact?": ("exact",) if facts.exact else (),
                 "interior?": ("interior",) if facts.interior_fallback else ()}
        return tuple(name for word in self.runs for name in words.get(word, (word,)))


AUTO = (
    Rule("a warm start continues a first-order run", lambda f: f.warm, ("own",), "pdhg"),
    Rule("Wasserstein constraints where Kantorovich cuts apply", lambda f: f.solver == "transport cuts",
         ("transport cuts", "first order"), "cuts",
         "6×6 WDP grid: 1.9 s, Clarabel 26 s, the lifted PDHG 138 s (benchmarks/wdp_grid.py)"),
    Rule("DistP (linear bounds between item laws) below LINEAR_CUTS_FROM entries: HiGHS",
         lambda f: f.linear and f.solver == "cuts" and f.size < LINEAR_CUTS_FROM and f.exact is not None,
         ("exact", "cuts", "own"), "exact", "LINEAR_CUTS_FROM: benchmarks/scaling.py"),
    Rule("DistP: column generation", lambda f: f.linear and f.solver == "cuts",
         ("cuts", "first order"), "cuts", "LINEAR_CUTS_FROM: benchmarks/scaling.py"),
    Rule("pure pair bounds beside f-divergences with (ε, δ) or item-law divergences, where Clarabel fits",
         lambda f: f.pairs_beside and f.exact is not None and f.columns_alone, ("exact", "columns"), "exact",
         "CONVEX_VARIABLES_MIRROR"),
    Rule("pure pair bounds beside f-divergences, where Clarabel fits",
         lambda f: f.pairs_beside and f.exact is not None, ("exact", "mirror", "columns"), "exact",
         "CONVEX_VARIABLES_MIRROR"),
    Rule("pure pair bounds beside f-divergences with (ε, δ) or item-law divergences, up to COLUMNS_BESIDE_TO",
         lambda f: f.pairs_beside and f.size <= COLUMNS_BESIDE_TO and f.columns_alone, ("columns",), "cuts",
         "10×10 KL-DP grid with geo-indistinguishability and (ε, δ)-DistP, seed 1: 91 rounds and 377 s "
         "from mirror-prox's table, 121 rounds and 234 s cold (benchmarks/divergence_optimality.py --grid 10 "
         "--beside geo)"),
    Rule("pure pair bounds beside f-divergences, up to COLUMNS_BESIDE_TO: mirror-prox, then column "
         "generation from its table", lambda f: f.pairs_beside and f.size <= COLUMNS_BESIDE_TO,
         ("mirror", "columns"), "cuts", "COLUMNS_BESIDE_TO"),
    Rule("pure pair bounds beside f-divergences, larger", lambda f: f.pairs_beside, ("own",), "pdhg",
         "COLUMNS_BESIDE_TO"),
    Rule("pure local / extended DP under the expected loss, rows not balanced (most cells of real "
         "location data empty): the interior point", lambda f: f.interior and not f.balanced,
         ("interior", "exact?"), "interior",
         "three real data sets, 16×16: 27–47× faster than HiGHS's best algorithm (benchmarks/geo_real.py)"),
    Rule("pure local / extended DP under the expected loss beyond column generation's ratios "
         "(e^ε above its LARGEST_RATIO between two rows): the interior point",
         lambda f: f.solver is None and f.interior, ("interior", "exact?", "own"), "interior",
         "Sacramento 16×16, 8-neighbour cells, 2 per km, uniform prior: 2.4 s, PDHG not done in 180 s"),
    Rule("pure local / extended DP below COLUMNS_FROM entries: HiGHS",
         lambda f: f.solver == "columns" and f.size < COLUMNS_FROM and f.exact is not None,
         ("exact", "columns", "own"), "exact", "COLUMNS_FROM: benchmarks/columns.py"),
    Rule("pure local / extended DP up to COLUMNS_TO entries, rows balanced: column generation",
         lambda f: f.solver == "columns" and f.size <= COLUMNS_TO and f.balanced,
         ("columns", "interior?", "exact?", "first order"), "cuts",
         "COLUMNS_TO: benchmarks/scaling.py --geo"),
    Rule("pure local / extended DP, where HiGHS fits",
         lambda f: f.solver == "columns" and f.exact is not None,
         ("exact", "columns", "own"), "exact", "PAIR_ENTRIES"),
    Rule("pure local / extended DP, larger", lambda f: f.solver == "columns", ("own",), "pdhg"),
    Rule("f-divergences between item laws where Clarabel fits, below CUTS_FROM (any size under the "
         "largest-entry objective)", lambda f: f.item_cuts and f.clarabel_first, ("exact", "cuts", "own"),
         "exact", "CUTS_FROM: benchmarks/divergence_optimality.py --grid"),
    Rule("f-divergences between item laws at gap_tol >= DUAL_GAP_TOL from DUAL_FROM entries: the "
         "smoothed dual, then cut generation", lambda f: f.item_cuts and f.dual_first, ("dual", "cuts"),
         "cuts", "DUAL_GAP_TOL, DUAL_FROM: benchmarks/divergence_optimality.py --grid 32 --gap-tol 1e-2"),
    Rule("f-divergences between item laws: cut generation", lambda f: f.item_cuts, ("cuts", "first order"),
         "cuts", "CUTS_FROM"),
    Rule("elsewhere, where the exact reference fits and is predicted faster",
         lambda f: f.exact is not None, ("exact", "own"), "exact",
         "MIXTURE_ENTRIES, PAIR_ENTRIES, HOCKEY_PAIR_ENTRIES, CONVEX_VARIABLES*: benchmarks/auto_method.py"),
    Rule("elsewhere: diffpriv's own solver", lambda f: True, ("own",), "pdhg"),
)
"""``"auto"``'s choice, in order: the first row that holds gives the route (:func:`route` puts
the linear relaxation first where :func:`relaxes`). Each threshold is a constant of this module
whose docstring holds the figures that set it."""


def auto_table() -> str:
    """:data:`AUTO` as a Markdown table (docs/algorithms.md holds it, and a test keeps the two the
    same)."""
    lines = ["| # | where | runs, in order | method | threshold set by |", "|---:|---|---|---|---|"]
    lines += [f"| {i} | {r.case} | {' → '.join(f'`{n}`' for n in r.runs)} | `{r.method}` | {r.measured} |"
              for i, r in enumerate(AUTO, 1)]
    return "\n".join(lines)


METHODS["auto"] = ("the gradient search alone for the smooth objectives ('estimation', 'information', a "
                   "user's utility), simplicial decomposition for the entropic transport cost ('sinkhorn'); "
                   "otherwise the linear relaxation first where divergence or Wasserstein constraints sit "
                   "beside linear ones and it is cheap; then the first of these that holds: "
                   + "; ".join(r.case for r in AUTO) + " ('own': mirror-prox or the first-order solver; "
                   "'exact?': the exact reference where it fits; 'interior?': the interior point where "
                   "it applies, fits and is expected to be quick)")


def _rule(problem, gap_tol: float, warm: bool) -> tuple[Rule, Facts]:
    facts = Facts(problem, gap_tol, warm)
    return next(rule for rule in AUTO if rule.when(facts)), facts


def choose(problem, method: str, *, gap_tol: float = 1e-4, warm: bool = False) -> str:
    """The method that runs: ``method`` itself, or for ``"auto"`` the method of its row of
    :data:`AUTO` (``"exact"``, ``"cuts"`` or ``"pdhg"``)."""
    return method if method != "auto" else _rule(problem, gap_tol, warm)[0].method


def route(problem, method: str, *, gap_tol: float = 1e-4, warm: bool = False) -> tuple[str, ...]:
    """The solvers (keys of :data:`SOLVERS`) to run ``problem`` with under ``optimizer.method``,
    in order: the first that does not fail (nor, for a run that
    :attr:`~._driver.Declared.hands_over`, stop short of converging) runs it. An explicit method
    names one solver (a one-line ``SpecError`` where ``"cuts"`` or ``"mirror"`` does not apply);
    ``"auto"`` takes the route of its row of :data:`AUTO`, after the linear relaxation
    (``"relaxed"``) where :func:`relaxes`. A smooth objective (``"estimation"``,
    ``"information"``) runs the gradient search alone, under ``"auto"`` or ``"gradient"``
    (:func:`_smooth`)."""
    if problem.objective.smooth or method == "gradient":
        return _smooth(problem, method)
    names = _route(problem, method, gap_tol=gap_tol, warm=warm)
    if method == "auto" and not warm and relaxes(problem, gap_tol):
        return ("relaxed", *names)
    return names


def _smooth(problem, method: str) -> tuple[str, ...]:
    """``("gradient",)`` for a smooth objective under ``"auto"`` or ``"gradient"`` and linear
    constraints; a one-line ``SpecError`` otherwise."""
    kind = problem.objective.kind
    if not problem.objective.smooth:
        raise SpecError(f"optimizer.method: 'gradient' runs the smooth objectives ('estimation', "
                        f"'information'), not {kind!r}")
    if method not in ("auto", "gradient"):
        raise SpecError(f"optimizer.method: {method!r} minimises linear and convex objectives; objective "
                        f"{kind!r} runs with 'auto' or 'gradient'")
    from diffpriv.problems._objectives import require_linear_blocks

    require_linear_blocks(problem, "gradient search")
    return ("simplicial",) if kind == "sinkhorn" and method == "auto" else ("gradient",)


def _route(problem, method: str, *, gap_tol: float, warm: bool) -> tuple[str, ...]:
    """:func:`route` before the relaxation: ``"auto"``'s row of :data:`AUTO`, or the one solver
    of an explicit method."""
    if method == "auto":
        rule, facts = _rule(problem, gap_tol, warm)
        return rule.resolve(facts)
    if method == "cuts":
        solver = cuts_solver(problem)
        if solver is None:
            raise SpecError("optimizer.method: 'cuts' needs f-divergence constraints (KL, "
                             "reverse KL, chi2, Hellinger, Renyi, TV), Wasserstein ones, linear "
                             "ones between item laws only (DistP), or pure local / extended DP only "
                             "under the expected or worst-case loss, and an objective other than "
                             "the transport loss")
        return (solver,)
    if method in ("pdhg", "al"):
        return (_own(problem, method, gap_tol),)
    if method == "mirror":
        from diffpriv.solvers import _mirror

        if not _mirror.applies(problem, _kinds(problem)):
            raise SpecError("optimizer.method: 'mirror' needs divergence or hockey-stick bounds "
                             "between rows (divergence DP, TV-DP, approximate local DP), linear "
                             "ones between item laws only beside them (DistP), and an objective "
                             "other than the transport loss")
        return ("mirror",)
    if method == "interior":
        from diffpriv.solvers import _interior

        if not _interior.applies(problem):
            raise SpecError("optimizer.method: 'interior' needs pure local / extended DP only (delta = 0, "
                             "0 < epsilon, e^epsilon <= 1e8 between any two rows it bounds), every table "
                             "entry allowed, and the expected loss")
        return ("interior",)
    return (method,)


def solver_class(name: str):
    """The :class:`._driver.Run` class of solver ``name`` (:data:`SOLVERS`)."""
    import importlib

    module, cls = SOLVERS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def declares(label: str, capability: str) -> bool:
    """Whether the run whose results carry ``label`` declares ``capability`` (a
    :class:`._driver.Declared` class variable); False for a label no run gives."""
    run = run_of(label)
    return run is not None and bool(getattr(run, capability))


def run_of(label: str):
    """The :class:`._driver.Run` class whose results carry ``label`` as their ``method``
    (:attr:`._driver.Declared.labels`), or ``None`` for a label no run gives (a result built
    elsewhere: a baseline's, a batch's). The runs whose modules are loaded are asked first (a
    result's run has been), so that asking loads no other (JAX's among them)."""
    import sys

    loaded = [name for name, path in SOLVERS.items() if path.split(":")[0] in sys.modules]
    order = loaded + [name for name in SOLVERS if name not in loaded]
    return next((c for c in map(solver_class, order) if label in c.labels), None)
