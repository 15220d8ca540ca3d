"""The certifier: exact levels, repair, certificates and their verification (numpy only).

This is the trusted part of diffpriv. It imports nothing from the JAX side: only numpy, the
standard library and the problem specification (:mod:`diffpriv.problems._problem`, its
comparison blocks :mod:`diffpriv.problems._blocks`, and :mod:`diffpriv.problems._json`).

Example:
  >>> import numpy as np, diffpriv as dp
  >>> from diffpriv.certification import certify, verify
  >>> X = dp.Domain(("a", "b", "c"))
  >>> problem = dp.Problem(X, X, 1 - np.eye(3), np.ones(3) / 3,
  ...                      constraints=(dp.LocalDP(epsilon=1.0),))
  >>> e = np.exp(0.9)
  >>> table = (np.full((3, 3), 1.0) + (e - 1) * np.eye(3))[None] / (e + 2)
  >>> cert = certify(problem, table)
  >>> cert.ok, cert.repair_t, round(cert.constraints[0].level, 12)
  (True, 0.0, 0.9)
  >>> verify(cert, exact=True).ok
  True
"""

from diffpriv.certification._certificate import Certificate, certify, versions
from diffpriv.certification._cost import (
    RATES,
    Cost,
    admit_check,
    certify_cost,
    clear_caches,
    rate,
    winf_steps,
)
from diffpriv.certification._cost import stages as cost_stages
from diffpriv.certification._exact import exact_holds, exp_lower
from diffpriv.certification._laws import identical_rows, output_laws, underflow_risk
from diffpriv.certification._levels import (
    ComparisonLevels,
    comparison_levels,
    delta_level,
    divergence_level,
    hockey_stick,
    pure_level,
    tight_epsilon,
)
from diffpriv.certification._quantize import DEFAULT_BITS, MAX_BITS, dyadic_counts, quantize
from diffpriv.certification._repair import Repair, RepairError, mix, repair, repair_holds
from diffpriv.certification._safety import (
    REPAIR_FACTOR,
    TableError,
    delta_margin,
    holds,
    pure_bound,
    pure_margin,
    row_sum_tolerance,
    sanitize_table,
    table_problems,
)
from diffpriv.certification._schema import FORMAT
from diffpriv.certification._summary import ConstraintLevel, constraint_levels
from diffpriv.certification._verify import UNCHECKED, VerifyReport, verify
from diffpriv.measures._divergences import DIVERGENCES, Divergence, divergence, renyi
from diffpriv.measures._transport import (
    Transport,
    TransportError,
    check_coupling,
    check_dual,
    check_hall,
    check_metric,
    w_infinity,
    wasserstein,
    wasserstein_1d,
)

__all__ = [
    "DEFAULT_BITS",
    "MAX_BITS",
    "DIVERGENCES",
    "Divergence",
    "Transport",
    "TransportError",
    "check_coupling",
    "check_dual",
    "check_hall",
    "check_metric",
    "divergence",
    "divergence_level",
    "dyadic_counts",
    "renyi",
    "w_infinity",
    "wasserstein",
    "wasserstein_1d",
    "FORMAT",
    "REPAIR_FACTOR",
    "Certificate",
    "ComparisonLevels",
    "Cost",
    "ConstraintLevel",
    "Repair",
    "RepairError",
    "TableError",
    "UNCHECKED",
    "VerifyReport",
    "admit_check",
    "certify",
    "certify_cost",
    "cost_stages",
    "clear_caches",
    "rate",
    "RATES",
    "winf_steps",
    "comparison_levels",
    "constraint_levels",
    "delta_level",
    "delta_margin",
    "exact_holds",
    "exp_lower",
    "hockey_stick",
    "holds",
    "identical_rows",
    "mix",
    "output_laws",
    "pure_bound",
    "pure_level",
    "pure_margin",
    "quantize",
    "repair",
    "repair_holds",
    "row_sum_tolerance",
    "sanitize_table",
    "table_problems",
    "tight_epsilon",
    "underflow_risk",
    "verify",
    "versions",
]
