"""Mechanisms: the softmax-parametrised table the optimizer trains (JAX, loaded on first use),
and the seeds' mechanisms and classic baselines as tables (numpy), registered by name in
:data:`MECHANISMS` and evaluated with the common certifier (:func:`evaluate`, :func:`calibrate`,
:func:`compare`).

Registered: ``krr``, ``planar_laplace``, ``planar_gaussian``, ``restricted_laplace``
(:mod:`._baselines`), ``planar_laplace_continuous``, ``planar_laplace_remap`` (:mod:`._continuous`),
``coupling`` (:mod:`._coupling`), ``one_bit_cluster``,
``smooth_one_bit``, ``smooth_categorical`` (:mod:`._profile_based`). The tupling mechanism
outputs tuples, not a table over the outputs: :func:`evaluate_tupling` (:mod:`._tupling`).
"""

from diffpriv._lazy import lazy_getattr
from diffpriv.mechanisms import _baselines, _continuous, _coupling, _profile_based  # noqa: F401  (register)
from diffpriv.mechanisms._coupling import (
    CouplingError,
    barycenter,
    bottleneck_coupling,
    coupling_mechanism,
    optimal_coupling,
)
from diffpriv.mechanisms._evaluate import Evaluation, calibrate, evaluate
from diffpriv.mechanisms._parameters import check_parameters
from diffpriv.mechanisms._profile_based import (
    CATEGORICAL_CHAIN,
    CATEGORICAL_CHAIN_EDGES,
    ChainRow,
    ProfileLPError,
    categorical_chain_problem,
    categorical_chain_report,
    flip_probability,
    one_bit_cluster,
    smooth_categorical,
    smooth_one_bit,
)
from diffpriv.mechanisms._registry import MECHANISMS, ParameterError, register_mechanism
from diffpriv.mechanisms._tupling import (
    DeltaEstimate,
    Tupling,
    TuplingReport,
    evaluate_tupling,
    theorem3_bound,
    theorem3_delta,
    tuple_delta_exact,
    tuple_delta_monte_carlo,
    tupling_loss_matrix,
)

_LAZY = {"Mechanism": "diffpriv.solvers._mechanism",
         **dict.fromkeys(("ComparisonRow", "compare", "format_comparison"), "diffpriv._compare")}

__getattr__ = lazy_getattr("diffpriv.mechanisms", _LAZY)


__all__ = [
    "check_parameters",
    "CATEGORICAL_CHAIN",
    "CATEGORICAL_CHAIN_EDGES",
    "MECHANISMS",
    "ChainRow",
    "ComparisonRow",
    "CouplingError",
    "DeltaEstimate",
    "Evaluation",
    "Mechanism",
    "ParameterError",
    "ProfileLPError",
    "Tupling",
    "TuplingReport",
    "barycenter",
    "bottleneck_coupling",
    "calibrate",
    "categorical_chain_problem",
    "categorical_chain_report",
    "compare",
    "coupling_mechanism",
    "evaluate",
    "evaluate_tupling",
    "flip_probability",
    "format_comparison",
    "register_mechanism",
    "one_bit_cluster",
    "optimal_coupling",
    "smooth_categorical",
    "smooth_one_bit",
    "theorem3_bound",
    "theorem3_delta",
    "tuple_delta_exact",
    "tuple_delta_monte_carlo",
    "tupling_loss_matrix",
]
