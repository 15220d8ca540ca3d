"""The solvers' flattened table and what holds whatever the constraints, in numpy: the rows
(:func:`table_rows`, :func:`the_table`), the range of the objective (:func:`largest_objective`,
:func:`smallest_objective`) and the budgets the solvers meet (:func:`tighten_eps`). The JAX
solvers' operators are :mod:`._linear`'s; the exact, column-generation and interior-point runs
read these without loading JAX."""

from __future__ import annotations

import sys

import numpy as np

from diffpriv.problems._problem import Problem

__all__ = ["largest_objective", "smallest_objective", "table_rows", "the_table", "tighten_eps"]


def table_rows(problem: Problem) -> int:
    """Rows of the solvers' flattened table: ``S·X``, and ``X`` more per law of the transport
    objective (its plans, module docstring)."""
    ns, nx, _ = problem.shape
    laws = problem.objective.transport_laws(problem)[2].size if problem.objective.transport else 0
    return (ns + laws) * nx


def the_table(problem: Problem, rows: np.ndarray) -> np.ndarray:
    """The table ``[S, X, Y]`` of the solvers' rows ``[R, Y]`` (the first ``S·X``: the transport
    objective's plan rows follow them, module docstring)."""
    ns, nx, ny = problem.shape
    return np.asarray(rows).reshape(-1, ny)[:ns * nx].reshape(problem.shape)


def largest_objective(problem: Problem) -> float:
    """The largest objective any table on the support can have (for the transport objective:
    any plan ``B``, whose rows may use every output)."""
    if problem.objective.transport:
        _, laws, shares = problem.objective.transport_laws(problem)
        return float(shares @ laws @ problem.loss.max(axis=1))
    worst_row = np.max(np.where(problem.support_mask(), problem.loss[None], 0.0), axis=-1)  # [S, X]
    if problem.objective.epigraph:
        return float(worst_row[problem.prior > 0].max())
    return float(np.sum(problem.prior * worst_row))


def smallest_objective(problem: Problem) -> float:
    """A lower bound of every table's objective that holds whatever the constraints: each row at
    its cheapest allowed output (expected loss ``Σ π[s,x] min_y L[x,y]``; worst-case loss the
    largest such row minimum over rows with prior), rounded down by ``1e-12`` relative; ``-∞``
    for the largest-entry and transport objectives. A solver's Lagrangian bound can be looser
    than this early in a run (a KL frontier once printed −11.1); the larger of the two is kept."""
    if problem.objective.transport or problem.objective.epigraph == "entries":
        return -np.inf
    best_row = np.min(np.where(problem.support_mask(), problem.loss[None], np.inf), axis=-1)  # [S, X]
    if problem.objective.epigraph:
        value = float(best_row[problem.prior > 0].max())
    else:
        value = float(np.sum(np.where(problem.prior > 0, problem.prior * best_row, 0.0)))
    return value - 1e-12 * abs(value)

def tighten_eps(eps, rel: float = 1e-7, eps_abs: float = 1e-8):
    """The budgets ``ε`` the optimizer solves for (:func:`tighten`): ``max(ε(1 − rel) − eps_abs, 0)``
    (numpy or JAX arrays)."""
    jax = sys.modules.get("jax")  # (a JAX array: JAX is loaded)
    xp = jax.numpy if jax is not None and isinstance(eps, jax.Array) else np
    return xp.maximum(eps * (1.0 - rel) - eps_abs, 0.0)


