"""diffpriv: optimal local obfuscation mechanisms under distribution privacy, certified exactly.

The public API (everything else lives in private modules)::

    import diffpriv as dp

    problem, options = dp.load_config("configs/quickstart.toml")  # or dp.Problem(...)
    design = dp.design(problem, **options.kwargs())   # optimize, then certify
    design.certificate.save("certificate.json")
    assert dp.verify("certificate.json").ok           # re-check from scratch
    lp = dp.solvers.lp(problem)                        # the exact optimum (HiGHS)

Specification (numpy): :class:`Problem`, :class:`Domain`, :class:`Item`, the constraint
families :class:`DistP`, :class:`LocalDP`, :class:`ExtendedDP`, :class:`DivergenceDistP`,
:class:`DivergenceDP`, :class:`ExtendedDistP`, :class:`WassersteinDP`, :class:`WassersteinDistP`
and their typed comparison blocks
(:class:`PairBlock`, :class:`MixtureBlock`), the objectives :class:`ExpectedLoss`,
:class:`WorstCaseLoss`, :class:`LargestEntry` and :class:`TransportLoss` (registries :data:`FAMILIES`,
:data:`OBJECTIVES`). Certification (numpy only, the trusted core): :func:`certify`,
:func:`verify`, :class:`Certificate`. Solvers: :func:`optimize` (JAX, loaded on first use) and
:mod:`diffpriv.solvers` (``lp``, ``Optimizer``, ``solve_batch``); :func:`sweep`, a
privacy–utility frontier over one constraint's budget, certified at every point.
"""

from diffpriv import mechanisms, solvers
from diffpriv._lazy import lazy_getattr
from diffpriv.certification import Certificate, VerifyReport, certify, verify
from diffpriv.config import ConfigError, OptimizerOptions, load_config
from diffpriv.deploy import Sampler, SamplerError
from diffpriv.mechanisms import MECHANISMS, Evaluation, calibrate, compare, evaluate
from diffpriv.problems import (
    OBJECTIVES,
    Constraint,
    DistP,
    DivergenceDistP,
    DivergenceDP,
    Domain,
    ExpectedLoss,
    ExtendedDistP,
    ExtendedDP,
    Item,
    LargestEntry,
    LocalDP,
    Objective,
    Problem,
    SpecError,
    TransportLoss,
    WassersteinDistP,
    WassersteinDP,
    WorstCaseLoss,
    count_pairs_within,
    pairs_within,
    problem_from_dict,
    problem_hash,
    problem_to_dict,
    register_objective,
)
from diffpriv.problems._blocks import MixtureBlock, PairBlock
from diffpriv.problems._constraints import FAMILIES, register
from diffpriv.solvers import ReferenceResult, ReferenceSolveError

# The JAX side loads on first use, so that configs are validated (and the certifier runs)
# without importing JAX.
_LAZY = {
    "Design": "diffpriv._design",
    "design": "diffpriv._design",
    "Mechanism": "diffpriv.solvers._mechanism",
    "Optimizer": "diffpriv.solvers._optimizer",
    "OptimizeResult": "diffpriv.solvers._optimizer",
    "optimize": "diffpriv.solvers._optimizer",
    "solve_batch": "diffpriv.solvers._optimizer",
}

from diffpriv._sweep import Frontier, sweep  # noqa: E402  (numpy; JAX loads on the first solve)

__getattr__ = lazy_getattr("diffpriv", _LAZY)


__version__ = "0.1.0"

__all__ = [
    "FAMILIES",
    "MECHANISMS",
    "Evaluation",
    "calibrate",
    "compare",
    "evaluate",
    "mechanisms",
    "OBJECTIVES",
    "ExpectedLoss",
    "LargestEntry",
    "TransportLoss",
    "Objective",
    "WassersteinDP",
    "WassersteinDistP",
    "WorstCaseLoss",
    "register_objective",
    "Certificate",
    "ConfigError",
    "Constraint",
    "Design",
    "DistP",
    "DivergenceDistP",
    "DivergenceDP",
    "Domain",
    "pairs_within",
    "count_pairs_within",
    "ExtendedDistP",
    "ExtendedDP",
    "Item",
    "LocalDP",
    "Mechanism",
    "MixtureBlock",
    "OptimizeResult",
    "Optimizer",
    "OptimizerOptions",
    "PairBlock",
    "Problem",
    "ReferenceResult",
    "ReferenceSolveError",
    "Sampler",
    "SamplerError",
    "SpecError",
    "VerifyReport",
    "certify",
    "design",
    "load_config",
    "optimize",
    "problem_from_dict",
    "problem_hash",
    "problem_to_dict",
    "register",
    "solve_batch",
    "solvers",
    "sweep",
    "Frontier",
    "verify",
]
