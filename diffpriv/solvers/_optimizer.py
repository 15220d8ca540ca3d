"""The optimizer: configuration, result, and the one-call wrapper.

``Optimizer(...)`` is configuration (static); calling it on a :class:`~diffpriv.Problem`
returns an :class:`OptimizeResult`. ``optimize(problem, **options)`` does both.

The default method, ``"auto"``, runs column-and-cut generation (``"cuts"``,
:mod:`diffpriv.solvers._cuts`) for f-divergence constraints (KL, χ², Hellinger, Rényi, TV), and
otherwise the exact reference (HiGHS, or Clarabel for Wasserstein constraints:
:mod:`diffpriv.solvers._exact`) where :mod:`diffpriv.solvers._methods` predicts it is faster than
diffpriv's own solver and fits in memory, and ``"pdhg"`` beyond.

Method ``"pdhg"`` is restarted mirror PDHG on the softmax logits (:mod:`diffpriv.solvers._pdhg`),
which solves the linear constraints (pure and approximate DistP, local and extended DP, profile
edges) to high accuracy, and whose dual iterates certify a lower bound on the optimum, hence the
result's own optimality gap. A problem with a constraint in another divergence (KL, χ²,
Hellinger, Rényi, … : divergence DistP / DP, extended DistP) runs, unless ``method="al"``, the
smoothed dual maximised by L-BFGS (:mod:`diffpriv.solvers._dual`, result plan ``"dual"``) where
it applies (:func:`._dual.applies`: item laws in extended or divergence DistP, expected or
worst-case objective), whose bound is the exact dual at its multipliers; else the augmented
Lagrangian (:mod:`diffpriv.solvers._al`, driven by :mod:`diffpriv.solvers._nonlinear`), whose
bound linearises the divergences (:mod:`diffpriv.solvers._divergence`). A problem whose only
such constraints are Wasserstein ones (expected or transport objective, linear comparisons
without δ) is an LP once each comparison's coupling is a variable: it runs a restarted mirror
PDHG on the table and the couplings (:mod:`diffpriv.solvers._transport_pdhg`, result plan ``"transport"``).

Which of these runs is :func:`._methods.route`'s choice (with the fallbacks of ``"auto"``); each is
a :class:`._driver.Run`, and :func:`._driver.drive` runs it.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
from collections.abc import Callable

import numpy as np

from diffpriv.problems._problem import Problem
from diffpriv.problems._size import SizeError, solver_plan
from diffpriv.solvers._convex import ConvexSolveError
from diffpriv.solvers._cuts import CutsRun, CutsSolveError
from diffpriv.solvers._driver import OptimizeResult, Status, drive, relative_gap
from diffpriv.solvers._interior import Iterate
from diffpriv.solvers._lp import Basis, ReferenceSolveError
from diffpriv.solvers._methods import auto_cuts, first_order, route, solver_class
from diffpriv.solvers._options import Options
from diffpriv.solvers._presolve import Presolved, presolve
from diffpriv.solvers._progress import progress_bar
from diffpriv.solvers._x64 import float64, float64_on_demand

__all__ = ["Optimizer", "OptimizeResult", "optimize", "solve_batch", "solve_budgets"]

SOLVER_ERRORS = (ReferenceSolveError, ConvexSolveError, CutsSolveError)
"""A solver's own failures: under ``method = "auto"`` the next solver of the route runs."""


@dataclasses.dataclass(frozen=True)
class Optimizer(Options):
    """The optimizer: the route of solvers that ``method`` names (:func:`._methods.route`; for
    ``"auto"``, the default, the row of :data:`._methods.AUTO` that holds), each run by
    :func:`._driver.drive` with what it declares it takes. The settings are those of
    :class:`diffpriv.solvers._options.Options` (one declaration, which the config reads too).

    PDHG stops on the device once the restart iterate's relative gap to its certified lower
    bound is at most ``gap_tol`` and its violation at most ``viol_factor · gap_tol`` (or infeasibility is
    proven, or an iterate is not finite), else after ``steps``.
    """

    @float64_on_demand
    def __call__(self, problem: Problem, *, seed: int = 0, init=None,
                 progress: Callable[[int, int, float], None] | None = None) -> OptimizeResult:
        """Optimizes ``problem``; ``progress(done, total, gap)`` is called between chunks.

        ``init`` warm-starts PDHG: from an :class:`OptimizeResult` of a problem of the same
        shape (its primal and dual state: the run continues, e.g. at a neighbouring budget), or
        from a :class:`~diffpriv.mechanisms.Mechanism` or a table (primal only). The result of an exact
        linear run (``method == "highs"``) warm-starts HiGHS instead, from its basis, where the
        route runs the exact LP again, and that of an interior point run the interior point, from
        its outputs and (at budgets at least as large) its last iterate (else the run starts cold).
        """
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**32:
            raise ValueError(f"seed: must be an integer in [0, 2**32), got {seed!r}")
        if self.period > self.steps:  # whole periods, at most ``steps`` in all
            cut = dataclasses.replace(self, period=self.steps)
            return cut(problem, seed=seed, init=init, progress=progress)
        deadline = time.perf_counter() + self.time_limit if self.time_limit > 0 else None
        pre = presolve(problem, vacuous=self.method == "auto") if self.presolve else None
        if pre is None:
            return self._run(problem, seed, init, progress, deadline)
        result = self._run(pre.problem, seed, _restricted(pre, init), progress, deadline)
        return dataclasses.replace(result, table=pre.restore(result.table), presolve=pre.kept)

    def _run(self, problem: Problem, seed: int, init, progress,
             deadline: float | None = None) -> OptimizeResult:
        """The route's solvers on ``problem`` in turn (:meth:`__call__`); none starts after
        ``deadline`` (``time.perf_counter()``) once one has a table, and a run stopped by it or
        by Ctrl-C ends the route with its table."""
        basis = init.state if isinstance(init, OptimizeResult) and isinstance(init.state, Basis) else None
        iterate = init.state if isinstance(init, OptimizeResult) and isinstance(init.state, Iterate) else None
        if basis is not None or iterate is not None:  # an exact run's basis warm-starts HiGHS, an
            init = None  # interior point's iterate the interior point, and only these
        names = route(problem, self.method, gap_tol=self.gap_tol, warm=init is not None)
        tried = None  # the result of a run that hands over, which did not converge
        relaxed = None  # the linear relaxation's, whose bound holds for the problem too
        for i, name in enumerate(names):
            cls = solver_class(name)
            self._check(cls, problem, init)
            extra: dict = {}
            if cls.takes_init:
                extra["init"] = init
            if cls.takes_basis:
                extra["basis"] = basis
            if cls.takes_iterate:
                extra["iterate"] = iterate
            if cls.takes_start and tried is not None and tried is not relaxed:  # the try before's table
                extra["start"] = tried.table
            if cls.takes_floor and relaxed is not None:  # it stops on the better bound
                extra["floor"] = relaxed.lower_bound
            if cls.takes_progress:  # one chunk: the run reports its own progress
                extra["progress"] = progress
            if cls.takes_deadline and deadline is not None:  # it stops by then within its chunk
                extra["deadline"] = deadline
            last = i == len(names) - 1
            out_of_time = deadline is not None and time.perf_counter() >= deadline
            if out_of_time and tried is not None:
                return _with_relaxation(dataclasses.replace(tried, status=Status.TIME_LIMIT.value),
                                        relaxed if tried is not relaxed else None, self.gap_tol)
            try:
                make = functools.partial(cls, self, problem, seed, **extra)
                result = drive(make, problem, self, seed, progress, deadline)
            except SOLVER_ERRORS:
                if not last:
                    continue
                if tried is not None:
                    return _with_relaxation(tried, relaxed if tried is not relaxed else None, self.gap_tol)
                raise
            if cls.relaxation and result.status == Status.INFEASIBLE:  # so is the problem
                return result
            if result.status in (Status.TIME_LIMIT, Status.INTERRUPTED):
                return _with_relaxation(result, relaxed if result is not relaxed else None, self.gap_tol)
            if cls.hands_over and not last and result.status != Status.CONVERGED:
                tried = result
                relaxed = result if cls.relaxation else relaxed
                continue
            return _with_relaxation(result, relaxed, self.gap_tol)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _check(cls, problem: Problem, init) -> None:
        """Raises the one-line errors of a run (of class ``cls``) that cannot do what is asked: a
        warm start where only PDHG continues a run, a problem too large for its memory plan."""
        if init is not None and not cls.warm_starts:
            raise ValueError("init: warm starts need method 'pdhg'")
        if init is not None and not problem.linear:
            raise ValueError("init: warm starts need linear constraints (method 'pdhg')")
        if not cls.lean and solver_plan(problem) == "lean":
            raise SizeError(cls.too_large)


def _with_relaxation(result: OptimizeResult, relaxed: OptimizeResult | None,
                     gap_tol: float) -> OptimizeResult:
    """``result`` with the linear relaxation's bound where it is higher (it holds for the problem:
    the relaxation's feasible set holds the problem's) and its repaired table where that is
    better; ``"converged"`` where the two together are within ``gap_tol``. The seconds are both
    runs'."""
    if relaxed is None:
        return result
    better = relaxed.max_violation <= 0 and relaxed.objective < result.objective
    base = relaxed if better else result
    bound = max(result.lower_bound, relaxed.lower_bound)
    gap = relative_gap(base.objective, bound)
    status = base.status
    if gap <= gap_tol and result.status in (Status.STALLED, Status.STEP_LIMIT, Status.CONVERGED):
        status = Status.CONVERGED.value
    return dataclasses.replace(base, lower_bound=bound, gap=gap, status=status,
                               seconds=result.seconds + relaxed.seconds)


def _restricted(pre: Presolved, init):
    """A warm start of the whole problem on the reduced one: a table or a mechanism restricted; a
    result's table restricted (its solver state is of the reduced problem already, as presolve
    reduces the same problem the same way)."""
    if init is None:
        return None
    if isinstance(init, OptimizeResult):
        return dataclasses.replace(init, table=pre.restrict(init.table))
    mechanism = sys.modules.get("diffpriv.solvers._mechanism")  # (JAX: loaded where init is one)
    table = init.table() if mechanism is not None and isinstance(init, mechanism.Mechanism) else init
    if np.shape(table) != pre.full.shape:
        raise ValueError(f"init: shape {np.shape(table)}, expected {pre.full.shape}")
    return pre.restrict(np.asarray(table))


def optimize(problem: Problem, *, steps: int | None = None, seed: int = 0,
             progress: bool | Callable[[int, int, float], None] = False, init=None,
             **options) -> OptimizeResult:
    """Finds a near-optimal table for ``problem`` (one call: configure and run).

    Args:
      problem: the problem.
      steps: maximum number of steps (default: :class:`Optimizer`'s).
      seed: PRNG seed of the starting jitter; results are deterministic for a seed.
      progress: show a progress bar (rich, on stderr, when it is a terminal) between chunks; or a
        callable ``progress(done, total, gap)`` called between chunks with the steps done and the
        limit (in the solver's unit: rounds for cutting planes), and the best table's relative gap
        to the bound so far (``inf`` while there is none): a log line per chunk on a long run.
      init: warm start, a :class:`~diffpriv.mechanisms.Mechanism` or a table of the problem's shape.
      **options: other :class:`Optimizer` fields (``period``, ``omega``, ``gap_tol``, ...).
    """
    if steps is not None:
        options["steps"] = steps
    opt = Optimizer(**options)
    with progress_bar(progress, opt.gap_tol) as report:
        return opt(problem, seed=seed, init=init, progress=report)


@float64
def solve_batch(problem: Problem, eps_scales, *, steps: int = 20_000, seed: int = 0,
                **options) -> tuple[np.ndarray, np.ndarray]:
    """Solves ``problem`` with every ε multiplied by each entry of ``eps_scales``, as one
    ``vmap``-ed compiled program (a privacy–utility frontier), then polishes each table.

    Runs PDHG for at most ``ceil(steps / period)`` periods; each budget stops on its own by the
    optimizer's device-side stopping rule (``gap_tol``, ``viol_factor``). A problem with divergence
    constraints (divergence budgets are scaled too) runs, under ``method="auto"``, column-and-cut
    generation at each budget in turn on f-divergences between item laws (:mod:`._cuts`, at
    every size: ``"auto"``'s Clarabel does not batch); else the smoothed dual or mirror-prox
    at each budget in turn, warm-started from the last, where it applies, else the augmented
    Lagrangian's chunks, all budgets in lockstep (:func:`._nonlinear.batch_nonlinear`). Returns
    ``(tables [B, S, X, Y], lower_bounds [B])``. Tables are not certified.
    """
    opt = Optimizer(steps=steps, **options)
    if opt.method not in ("auto", "pdhg"):
        raise ValueError("optimizer.method: solve_batch runs 'pdhg' only ('auto' runs it too)")
    pre = presolve(problem) if opt.presolve else None
    if pre is None:
        return _solve_batch(opt, problem, eps_scales, seed)
    tables, bounds = _solve_batch(opt, pre.problem, eps_scales, seed)
    return np.stack([pre.restore(t) for t in tables]), bounds


def _solve_batch(opt: Optimizer, problem: Problem, eps_scales, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`solve_batch` on a presolved problem."""
    if not problem.linear:
        scales = np.asarray(eps_scales, np.float64)
        if opt.method == "auto" and auto_cuts(problem):
            at = [problem.scaled(float(s)) for s in scales]
            runs = [drive(functools.partial(CutsRun, opt, p, seed), p, opt, seed) for p in at]
            return np.stack([r.table for r in runs]), np.asarray([r.lower_bound for r in runs])
        run_class = solver_class(first_order(problem))
        if run_class.batch is not None:
            return run_class.batch(opt, problem, scales, seed)
        if run_class.budgets:  # one budget after another, warm-started
            tables, bounds, state = [], [], None
            for s in scales:
                r = drive(functools.partial(run_class, opt, problem, seed, budget_scale=float(s), init=state),
                          problem, opt, seed)
                tables.append(r.table)
                bounds.append(r.lower_bound)
                state = r.state
            return np.stack(tables), np.asarray(bounds)
        raise AssertionError(f"{run_class.name} runs no batch")  # pragma: no cover
    from diffpriv.solvers._budgets import batch_linear

    return batch_linear(opt, [problem.scaled(float(s)) for s in eps_scales], seed, shard=True)


@float64
def solve_budgets(problems, *, steps: int = 20_000, seed: int = 0, shard: bool = True,
                  **options) -> tuple[np.ndarray, np.ndarray]:
    """Solves linear problems that differ only in their budgets (``ε``, ``δ`` of any constraint:
    the points of a frontier) as one ``vmap``-ed compiled PDHG program, then polishes each table,
    as :func:`solve_batch` does for a common scale of every budget.

    ``shard``: place the batch over every device (``jax.sharding``: a mesh of ``jax.devices()``
    along the budgets, the batch padded to a multiple of the device count), so that each device
    runs its share; with one device it changes nothing. After ``jax.distributed.initialize``
    (several processes, e.g. hosts, each running the same call) the devices are all processes'
    and every process gets the whole result. Returns
    ``(tables [B, S, X, Y], lower_bounds [B])``, not certified.

    Raises:
      ValueError: no problems, a nonlinear one, problems that differ in more than budgets, or a
        method other than ``"auto"`` / ``"pdhg"``.
    """
    opt = Optimizer(steps=steps, **options)
    if opt.method not in ("auto", "pdhg"):
        raise ValueError("optimizer.method: solve_budgets runs 'pdhg' only ('auto' runs it too)")
    problems = list(problems)
    if not problems or not all(p.linear for p in problems):
        raise ValueError("solve_budgets: needs one or more problems with linear constraints")
    from diffpriv.solvers._budgets import batch_linear

    pre = [presolve(p) for p in problems] if opt.presolve else [None] * len(problems)
    if pre[0] is None or any(p is None for p in pre):
        return batch_linear(opt, problems, seed, shard)
    tables, bounds = batch_linear(opt, [p.problem for p in pre], seed, shard)
    return np.stack([p.restore(t) for p, t in zip(pre, tables, strict=True)]), bounds
