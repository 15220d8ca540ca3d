"""The non-linear objectives as JAX functions of the table's rows, for the gradient search
(:mod:`._gradient`): the twins of :mod:`diffpriv.measures._utilities`, which the certifier reads.

:func:`utility_data` gathers a problem's arrays (a pytree, so that problems of one shape share a
compiled search) and :func:`utility_value` gives the objective of the rows ``a [R, Y]`` (rows
``(s, x)`` flattened, as :class:`._linear.LinearData` orders them) by its ``kind`` (static: a
built-in's name, or the :class:`~diffpriv.problems.PythonUtility` itself, :func:`static_kind`):
differentiable wherever the table is positive, and finite (a tiny ridge keeps ``ĀĀᵀ`` invertible
on the way).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from diffpriv.measures._utilities import population_weights
from diffpriv.problems._problem import Problem
from diffpriv.problems._user import UtilityArrays, scalar_value

__all__ = ["KINDS", "RIDGE", "UtilityData", "static_kind", "utility_data", "utility_value"]

KINDS = ("estimation", "information", "python")
"""The objectives :func:`utility_value` computes."""
RIDGE = 1e-12
"""The share of ``tr(ĀĀᵀ)/X`` added to ``ĀĀᵀ``'s diagonal in the search (never in the certified
value): a table the search passes through may be singular there."""


class UtilityData(NamedTuple):
    """A problem's arrays for :func:`utility_value`."""

    lam: jax.Array  # [X] the population's input law
    weights: jax.Array  # [S, X] Ā[x] = Σ_s weights[s, x] A[s, x]
    reports: jax.Array  # [] the reports of the estimation error
    scale: jax.Array  # [] the objective is divided by it (the augmented Lagrangian's one ρ)
    prior: jax.Array  # [S, X] (a user utility's arrays)
    loss: jax.Array  # [X, Y]


def utility_data(problem: Problem, scale: float = 1.0) -> UtilityData:
    """``problem``'s :class:`UtilityData`; a ``ValueError`` for an objective :data:`KINDS` lacks."""
    if problem.objective.kind not in KINDS:
        raise ValueError(f"objective: {problem.objective.kind!r} is not a smooth objective of the "
                         "gradient search")
    lam, weights = population_weights(problem.prior)
    reports = float(getattr(problem.objective, "reports", 1))
    return UtilityData(jnp.asarray(lam), jnp.asarray(weights), jnp.asarray(reports),
                       jnp.asarray(float(scale)), jnp.asarray(problem.prior), jnp.asarray(problem.loss))


def static_kind(objective):
    """What :func:`utility_value` takes as ``kind`` for ``objective``: a built-in's name, a user
    utility itself (hashed by identity: each function its own compiled search)."""
    return objective if objective.kind == "python" else objective.kind


def _xlogx(p: jax.Array) -> jax.Array:
    """``p ln p`` with ``0 ln 0 = 0`` and a zero gradient there."""
    safe = jnp.where(p > 0, p, 1.0)
    return jnp.where(p > 0, p * jnp.log(safe), 0.0)


def utility_value(kind: str, u: UtilityData, a: jax.Array) -> jax.Array:
    """The objective ``kind`` of the rows ``a [S·X, Y]``, divided by ``u.scale``."""
    ns, nx = u.weights.shape
    if not isinstance(kind, str):  # a user utility (diffpriv.problems.PythonUtility)
        table = a.reshape(ns, nx, -1)
        return scalar_value(kind.fn(table, UtilityArrays(u.prior, u.loss, u.lam))) / u.scale
    channel = jnp.einsum("sx,sxy->xy", u.weights, a.reshape(ns, nx, -1))
    if kind == "estimation":  # (Σ_y q_y ‖B_y‖² − ‖λ‖²) / N, B = Āᵀ(ĀĀᵀ)⁻¹
        gram = channel @ channel.T
        gram = gram + RIDGE * jnp.trace(gram) / nx * jnp.eye(nx, dtype=gram.dtype)
        solved = jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(gram), channel)
        q = u.lam @ channel
        value = (jnp.sum(q * jnp.sum(solved * solved, axis=0)) - jnp.sum(u.lam * u.lam)) / u.reports
    elif kind == "information":  # −I(X; Y) = −Σ P ln(P / (λ q)), as numpy writes it (off the simplex too)
        joint = u.lam[:, None] * channel
        log_lam = jnp.log(jnp.where(u.lam > 0, u.lam, 1.0))  # (a row of λ = 0 has no joint mass)
        value = -(jnp.sum(_xlogx(joint)) - jnp.sum(joint.sum(axis=1) * log_lam)
                  - jnp.sum(_xlogx(joint.sum(axis=0))))
    else:
        raise ValueError(f"objective: {kind!r} is not a smooth objective of the gradient search")
    return value / u.scale
