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

__version__ = "0.1.0"

__all__ = [
    "Comparisons",
    "Constraint",
    "DistP",
    "Domain",
    "ExtendedDP",
    "Item",
    "LocalDP",
    "Problem",
    "SpecError",
    "problem_from_dict",
    "problem_hash",
    "problem_to_dict",
]
