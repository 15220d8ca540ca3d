"""The non-linear objectives as JAX functions of the table's rows, for the gradient search
(:mod:`._gradient`): the twins of :mod:`diffpriv.measures._utilities`, which the certifier reads.

:func:`utility_data` gathers a problem's arrays (a pytree, so that problems of one shape share a
compiled search) and :func:`utility_value` gives the objective of the rows ``a [R, Y]`` (rows
``(s, x)`` flattened, as :class:`._linear.LinearData` orders them) by its ``kind`` (static: a
built-in's name, or the :class:`~diffpriv.problems.PythonUtility` itself, :func:`static_kind`):
differentiable wherever the table is positive, and finite (a tiny ridge keeps ``ĀĀᵀ`` invertible
on the way). The entropic transport cost runs ott-jax's Sinkhorn (imported as a search needs it).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from diffpriv.measures._utilities import population_weights
from diffpriv.problems._problem import Problem
from diffpriv.problems._user import UtilityArrays, scalar_value

__all__ = ["KINDS", "RIDGE", "UtilityData", "sinkhorn_terms", "static_kind", "utility_data", "utility_value"]

KINDS = ("estimation", "information", "sinkhorn", "python")
"""The objectives :func:`utility_value` computes."""
SINKHORN_THRESHOLD, SINKHORN_ITERATIONS = 1e-6, 5000
"""Sinkhorn's stop in the search (the marginal error ott measures) and its iteration cap: the
search needs the potentials, not the last digits (the certified value is recomputed to
``10⁻¹¹``)."""
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
    laws: jax.Array  # [K, S, X] the entropic transport's laws lifted to the rows (K = 0 for the others)
    inputs: jax.Array  # [K, X'] those laws on X', the inputs some law holds
    cost: jax.Array  # [X', Y] the loss on those inputs
    shares: jax.Array  # [K] the laws' weights
    epsilon: jax.Array  # [] the entropic regularisation


def utility_data(problem: Problem, scale: float = 1.0) -> UtilityData:
    """``problem``'s :class:`UtilityData`; a ``ValueError`` for an objective :data:`KINDS` lacks."""
    if problem.objective.kind not in KINDS:
        raise ValueError(f"objective: {problem.objective.kind!r} is not a smooth objective of the "
                         "gradient search")
    lam, weights = population_weights(problem.prior)
    reports = float(getattr(problem.objective, "reports", 1))
    ns, nx, ny = problem.shape
    laws, inputs, shares = np.zeros((0, ns, nx)), np.zeros((0, 0)), np.zeros(0)
    cost, epsilon = np.zeros((0, ny)), 1.0
    if problem.objective.kind == "sinkhorn":
        laws, inputs, shares = problem.objective.transport_laws(problem)
        held = np.flatnonzero(inputs.sum(axis=0) > 0)  # (static: the search's shapes)
        inputs, cost = inputs[:, held] / inputs.sum(axis=1, keepdims=True), problem.loss[held]
        epsilon = problem.objective.regularisation(problem)
    return UtilityData(jnp.asarray(lam), jnp.asarray(weights), jnp.asarray(reports),
                       jnp.asarray(float(scale)), jnp.asarray(problem.prior), jnp.asarray(problem.loss),
                       *map(jnp.asarray, (laws, inputs, cost, shares, float(epsilon))))


def static_kind(objective):
    """What :func:`utility_value` takes as ``kind`` for ``objective``: a built-in's name, a user
    utility itself (hashed by identity: each function its own compiled search)."""
    return objective if objective.kind == "python" else objective.kind


def _xlogx(p: jax.Array) -> jax.Array:
    """``p ln p`` with ``0 ln 0 = 0`` and a zero gradient there."""
    safe = jnp.where(p > 0, p, 1.0)
    return jnp.where(p > 0, p * jnp.log(safe), 0.0)


@jax.custom_vjp
def _sinkhorn(cost: jax.Array, epsilon: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
    """``S_ε(a, b)``, ``⟨γ, cost⟩ + ε·KL(γ ‖ a⊗b)`` (the value
    :func:`diffpriv.measures._utilities.entropic_transport` computes), by ott-jax's Sinkhorn with
    its adaptive momentum (Lehmann et al. 2021: 40–50 iterations where the plain one took 130–140
    on the quick start's grid). Differentiated in ``b`` only, by the envelope theorem (below)."""
    return _sinkhorn_forward(cost, epsilon, a, b)[0]


def sinkhorn_terms(u: UtilityData, outputs: jax.Array, threshold: float,
                   start: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array, tuple]:
    """``(S_ε(λ_k, ν_k) [K], ∂S_ε/∂ν_k [K, Y], (f [K, X'], g [K, Y]))`` of the output laws
    ``outputs [K, Y]`` (each summing to 1; the derivative up to a constant per law; ``f, g`` ott's
    potentials), Sinkhorn run to ``threshold`` from the potentials ``start`` (zeros, or those of
    a nearby call)."""
    return jax.vmap(lambda a, b, f, g: _sinkhorn_forward(u.cost, u.epsilon, a, b, threshold, (f, g)))(
        u.inputs, outputs, *start)


def _ott():
    """ott-jax's modules the objective uses, imported without the deprecation warning of jaxopt
    (which ott-jax 0.6 imports; nothing here calls it)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="JAXopt is no longer maintained",
                                category=DeprecationWarning)
        from ott.geometry import geometry
        from ott.problems.linear import linear_problem
        from ott.solvers.linear import acceleration, sinkhorn
    return geometry, linear_problem, acceleration, sinkhorn


def _sinkhorn_forward(cost, epsilon, a, b, threshold=SINKHORN_THRESHOLD, start=None):
    geometry, linear_problem, acceleration, sinkhorn = _ott()
    geom = geometry.Geometry(cost_matrix=cost, epsilon=epsilon)
    solver = sinkhorn.Sinkhorn(threshold=threshold, max_iterations=SINKHORN_ITERATIONS,
                               momentum=acceleration.Momentum(start=20), implicit_diff=None)
    out = solver(linear_problem.LinearProblem(geom, a, b), **({} if start is None else {"init": start}))
    # ∂S_ε/∂b_j is the potential of output j relative to a⊗b, g_j − ε ln b_j (ott's plan is
    # exp((f_i + g_j − C_ij)/ε)), up to a constant that a table's rows, summing to 1, do not
    # see; written without ln b_j, so finite where b_j underflows:
    grad = -epsilon * jax.nn.logsumexp((out.f[:, None] - cost) / epsilon, axis=0)
    return (out.reg_ot_cost, grad) if start is None else (out.reg_ot_cost, grad, (out.f, out.g))


def _sinkhorn_fwd(cost, epsilon, a, b):
    value, grad = _sinkhorn_forward(cost, epsilon, a, b)
    return value, (grad, cost, epsilon, a)


def _sinkhorn_bwd(residual, cotangent):
    grad, cost, epsilon, a = residual
    return jnp.zeros_like(cost), jnp.zeros_like(epsilon), jnp.zeros_like(a), cotangent * grad


_sinkhorn.defvjp(_sinkhorn_fwd, _sinkhorn_bwd)


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
    elif kind == "sinkhorn":  # Σ_k c_k S_ε(λ_k, A#λ_k)
        outputs = jnp.einsum("ksx,sxy->ky", u.laws, a.reshape(ns, nx, -1))
        one = lambda lam, nu: _sinkhorn(u.cost, u.epsilon, lam, nu / jnp.sum(nu))  # noqa: E731
        terms = jax.vmap(one)(u.inputs, outputs)
        value = jnp.sum(u.shares * terms)
    elif kind == "information":  # −I(X; Y) = −Σ P ln(P / (λ q)), as numpy writes it (off the simplex too)
        joint = u.lam[:, None] * channel
        log_lam = jnp.log(jnp.where(u.lam > 0, u.lam, 1.0))  # (a row of λ = 0 has no joint mass)
        value = -(jnp.sum(_xlogx(joint)) - jnp.sum(joint.sum(axis=1) * log_lam)
                  - jnp.sum(_xlogx(joint.sum(axis=0))))
    else:
        raise ValueError(f"objective: {kind!r} is not a smooth objective of the gradient search")
    return value / u.scale
