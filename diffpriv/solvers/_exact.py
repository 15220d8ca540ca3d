"""A run of the exact reference as an :class:`~diffpriv.solvers._driver.OptimizeResult`:
what ``method = "exact"`` runs, and ``"auto"`` where :func:`._methods.exact_solver` predicts it
is faster than diffpriv's own solver.

* linear constraints: HiGHS (:func:`._lp.solve_lp`); the lower bound is the weak-duality bound
  at its multipliers (:attr:`._lp.ReferenceResult.bound`), valid whatever their accuracy;
* otherwise: Clarabel through cvxpy (:func:`._convex.solve_convex`); the lower bound is the
  conic solver's optimal value (an interior-point method's, at its default tolerance 10⁻⁸: exact
  up to it, not recomputed here, since cvxpy does not hand over the dual objective).
"""

from __future__ import annotations

import time

import numpy as np

from diffpriv.problems._problem import Problem
from diffpriv.solvers._convex import solve_convex
from diffpriv.solvers._driver import OptimizeResult, Status, compile_seconds, make_result
from diffpriv.solvers._lp import solve_lp

__all__ = ["run_exact"]


def run_exact(opt, problem: Problem, seed: int) -> OptimizeResult:
    """Solves ``problem`` with the exact reference under the settings ``opt`` (recorded in the
    result). Raises what the reference raises (``ReferenceSolveError``, ``ConvexSolveError``,
    ``ImportError`` without cvxpy, ``ValueError`` for an ``e^ε`` that overflows)."""
    start, compiled = time.perf_counter(), compile_seconds()
    if problem.linear:
        with np.errstate(over="ignore"):  # e^ε = inf: solve_lp checks it and raises ValueError
            ref = solve_lp(problem)
        bound, name = ref.bound, "highs"
    else:
        ref = solve_convex(problem)
        bound, name = ref.value, "clarabel"
    return make_result(problem, ref.table, bound, status=Status.CONVERGED, steps=0, start=start,
                       compiled=compiled, seed=seed, options=opt, violation=ref.violation,
                       plan="exact", method=name)
