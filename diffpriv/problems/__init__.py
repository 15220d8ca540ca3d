"""The problem specification (numpy only): domains, items, constraint families, and the
expansion of every constraint into typed comparison blocks that solvers and the certifier read."""

from diffpriv.problems._checks import SpecError
from diffpriv.problems._json import problem_from_dict, problem_hash, problem_to_dict
from diffpriv.problems._problem import Constraint, DistP, Domain, ExtendedDP, Item, LocalDP, Problem

__all__ = [
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
