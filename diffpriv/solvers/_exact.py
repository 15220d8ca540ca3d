"""A run of the exact reference as an :class:`~diffpriv.solvers._driver.OptimizeResult`:
what ``method = "exact"`` runs, and ``"auto"`` where :func:`._methods.exact_solver` predicts it
is faster than diffpriv's own solver.

* linear constraints: HiGHS (:func:`._lp.solve_lp`); the lower bound is the weak-duality bound
  at its multipliers (:attr:`._lp.ReferenceResult.bound`), valid whatever their accuracy. The
  result's ``state`` is HiGHS's final basis: a run given it (``init``, the result of the same
  problem at a neighbouring budget: a sweep) starts the dual simplex from it;
* otherwise: Clarabel through cvxpy (:func:`._convex.solve_convex`). The conic solver's optimal
  value is not a bound (it is within its tolerance, ~10⁻⁸, on either side); the lower bound is
  the weak-duality bound of the linear relaxation at Clarabel's table
  (:func:`._linearized.linearized_bound`: each divergence's tangent planes, or each Wasserstein
  term's Kantorovich potentials, at the table's laws), recomputed in float64 from HiGHS's
  multipliers; where no such relaxation exists, the objective's least value over all tables.
"""

from __future__ import annotations

import importlib.util
import time

import numpy as np

from diffpriv.problems._problem import Problem
from diffpriv.solvers._convex import solve_convex
from diffpriv.solvers._driver import Chunk, Declared, Outcome, Status, relative_gap
from diffpriv.solvers._lp import Basis, solve_lp

__all__ = ["ExactRun"]


class ExactRun(Declared):
    """The exact reference on ``problem`` under the settings ``opt`` (recorded in the result), as a
    :class:`._driver.Run` of one chunk (no steps). Raises what the reference raises
    (``ReferenceSolveError``, also for an ``e^ε`` that overflows; ``ConvexSolveError``,
    ``ImportError`` without cvxpy)."""

    name, labels = "exact", ("highs", "clarabel")
    takes_basis = takes_deadline = resumable = True
    warm_starts = False

    @classmethod
    def accepts(cls, problem) -> bool:
        from diffpriv.problems._objectives import LINEAR

        return isinstance(problem.objective, LINEAR) and (
            problem.linear or importlib.util.find_spec("cvxpy") is not None)

    total = 1

    def __init__(self, opt, problem: Problem, seed: int, *, basis: Basis | None = None,
                 deadline: float | None = None):
        self.problem, self.basis, self.gap_tol, self.deadline = problem, basis, opt.gap_tol, deadline

    def chunk(self) -> Chunk:
        if self.problem.linear:
            limit = None if self.deadline is None else max(self.deadline - time.perf_counter(), 0.05)
            with np.errstate(over="ignore"):  # e^ε = inf: solve_lp checks it and raises ReferenceSolveError
                ref = solve_lp(self.problem, basis=self.basis, keep_basis=True, time_limit=limit)
            self.bound, self.label = ref.bound, "highs"
        else:
            from diffpriv.solvers._linearized import linearized_bound
            from diffpriv.solvers._rows import smallest_objective

            ref = solve_convex(self.problem)
            # the bound's rounds get a few times Clarabel's own time (at least 5 s)
            bound = linearized_bound(self.problem, ref.table, self.problem.objective_value(ref.table),
                                     self.gap_tol, seconds=max(5.0, 4.0 * ref.seconds))
            self.bound = smallest_objective(self.problem) if bound is None else bound
            self.label = "clarabel"
        self.ref = ref
        return Chunk(0, relative_gap(self.problem.objective_value(ref.table), self.bound), Status.CONVERGED)

    def finish(self, status: Status) -> Outcome:
        from diffpriv.solvers._price import prices

        basis = getattr(self.ref, "basis", None)  # a ConvexResult has none
        priced = None if self.label != "highs" else prices(self.problem, self.ref.table, self.ref.multipliers,
                                                           self.ref.delta_multipliers)
        return Outcome(self.ref.table, self.bound, status, self.ref.violation, state=basis, plan="exact",
                       method=self.label, prices=priced)
