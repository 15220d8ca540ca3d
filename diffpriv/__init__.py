"""diffpriv: optimal local obfuscation mechanisms under distribution privacy, certified exactly."""

from ._problem import (
    Comparisons,
    Constraint,
    DistP,
    Domain,
    ExtendedDP,
    Item,
    LocalDP,
    Problem,
    SpecError,
)
from ._problem_io import problem_from_dict, problem_hash, problem_to_dict
from ._reference import ReferenceResult, ReferenceSolveError, solve_lp

# The JAX side loads on first use, so that configs are validated (and the certifier runs)
# without importing JAX.
_LAZY = {
    "Mechanism": "._mechanism",
    "Optimizer": "._optimizer",
    "OptimizeResult": "._optimizer",
    "optimize": "._optimizer",
    "solve_batch": "._optimizer",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'diffpriv' has no attribute {name!r}")

__version__ = "0.1.0"

__all__ = [
    "Comparisons",
    "Constraint",
    "DistP",
    "Domain",
    "ExtendedDP",
    "Item",
    "LocalDP",
    "Mechanism",
    "Optimizer",
    "OptimizeResult",
    "ReferenceResult",
    "ReferenceSolveError",
    "Problem",
    "SpecError",
    "problem_from_dict",
    "problem_hash",
    "problem_to_dict",
    "optimize",
    "solve_batch",
    "solve_lp",
]
