"""Solvers: the first-order optimizer (JAX, loaded on first use) and the exact LP reference.

* :func:`lp` — the exact optimum of a linear design problem (scipy's HiGHS), the yardstick;
  :func:`write_lp` writes that LP to a file (MPS) for other solvers.
* :func:`convex` — the optimum of a problem with divergence constraints (cvxpy with Clarabel's
  exponential and power cones; a test extra: ``pip install -e '.[test]'``), the yardstick there.
* :class:`Optimizer` (what ``diffpriv.optimize`` configures and runs), :func:`solve_batch` —
  restarted mirror PDHG on softmax logits (and the augmented-Lagrangian baseline), with a
  certified lower bound;
  :func:`solve_budgets` — any budgets of one linear problem as one program, sharded over devices.
* :func:`step_bytes` — the bytes one PDHG step moves (XLA's count), for bandwidth comparisons.
* :func:`exact_solver` — the exact solver ``method = "auto"`` runs on a problem (``"highs"``,
  ``"clarabel"``), or ``None`` where diffpriv's own is predicted faster.
"""

from diffpriv._lazy import lazy_getattr

_LAZY = {  # every name loads on first use (scipy's solvers take 0.4 s, JAX seconds)
    "ConvexResult": "diffpriv.solvers._convex",
    "ConvexSolveError": "diffpriv.solvers._convex",
    "convex": "diffpriv.solvers._convex:solve_convex",
    "ReferenceResult": "diffpriv.solvers._lp",
    "ReferenceSolveError": "diffpriv.solvers._lp",
    "write_lp": "diffpriv.solvers._lp",
    "lp": "diffpriv.solvers._lp:solve_lp",
    "exact_solver": "diffpriv.solvers._methods",
    "Optimizer": "diffpriv.solvers._optimizer",
    "OptimizeResult": "diffpriv.solvers._optimizer",
    "solve_batch": "diffpriv.solvers._optimizer",
    "solve_budgets": "diffpriv.solvers._optimizer",
    "step_bytes": "diffpriv.solvers._pdhg_run",
}

__getattr__ = lazy_getattr("diffpriv.solvers", _LAZY)


__all__ = ["ConvexResult", "ConvexSolveError", "OptimizeResult", "Optimizer", "ReferenceResult",
           "ReferenceSolveError", "convex", "exact_solver", "lp", "solve_batch", "solve_budgets",
           "step_bytes", "write_lp"]
