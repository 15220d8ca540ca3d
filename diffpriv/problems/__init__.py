"""The problem specification (numpy only): domains, items, constraint families, and the
expansion of every constraint into typed comparison blocks that solvers and the certifier read."""

from diffpriv.problems._blocks import Block, MixtureBlock, PairBlock, budgets
from diffpriv.problems._checks import SpecError
from diffpriv.problems._constraints import FAMILIES, register_constraint
from diffpriv.problems._divergence_families import DivergenceDistP, DivergenceDP, ExtendedDistP
from diffpriv.problems._json import problem_from_dict, problem_hash, problem_to_dict
from diffpriv.problems._known import (
    bernoulli_flip_alpha,
    bernoulli_two_profile_problem,
    k_rr_loss,
    k_rr_problem,
    random_problem,
    randomized_response,
)
from diffpriv.problems._neighbours import count_pairs_within, pairs_within
from diffpriv.problems._objectives import (
    OBJECTIVES,
    EstimationError,
    ExpectedLoss,
    InformationLoss,
    LargestEntry,
    Objective,
    SinkhornLoss,
    TransportLoss,
    WorstCaseLoss,
    register_objective,
)
from diffpriv.problems._problem import Constraint, DistP, Domain, ExtendedDP, Item, LocalDP, Problem
from diffpriv.problems._size import SizeError, admit, estimate, memory_limit, solver_plan
from diffpriv.problems._transport_families import WassersteinDistP, WassersteinDP
from diffpriv.problems._user import PythonUtility, UtilityArrays

__all__ = [
    "DivergenceDP",
    "DivergenceDistP",
    "ExtendedDistP",
    "WassersteinDP",
    "WassersteinDistP",
    "FAMILIES",
    "OBJECTIVES",
    "EstimationError",
    "ExpectedLoss",
    "InformationLoss",
    "LargestEntry",
    "SinkhornLoss",
    "TransportLoss",
    "Objective",
    "PythonUtility",
    "UtilityArrays",
    "WorstCaseLoss",
    "register_objective",
    "Block",
    "MixtureBlock",
    "PairBlock",
    "SizeError",
    "admit",
    "bernoulli_flip_alpha",
    "bernoulli_two_profile_problem",
    "budgets",
    "estimate",
    "k_rr_loss",
    "k_rr_problem",
    "memory_limit",
    "random_problem",
    "randomized_response",
    "solver_plan",
    "register_constraint",
    "Constraint",
    "DistP",
    "Domain",
    "count_pairs_within",
    "pairs_within",
    "ExtendedDP",
    "Item",
    "LocalDP",
    "Problem",
    "SpecError",
    "problem_from_dict",
    "problem_hash",
    "problem_to_dict",
]
