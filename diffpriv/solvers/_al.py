"""Augmented Lagrangian with Adam on the softmax logits — the baseline the PDHG method is measured
against (``benchmarks/optimality.py``), and the generic scheme for constraints that are not linear.

For constraints ``c(A, w) = G A − δ ⊙ w ≤ 0`` (see :mod:`diffpriv.solvers._linear`), multipliers ``μ ≥ 0``
and penalty ``ρ``, the inner problem minimises over logits (Adam, a cosine-decayed step)::

    f(A) + (1/2ρ) Σ (max(0, μ + ρ c)² − μ²)

and the outer loop sets ``μ ← max(0, μ + ρ c)`` (Powell–Hestenes–Rockafellar). The objective is
scaled to unit total so one ``ρ`` serves every problem. The multipliers give the same certified
lower bound as the PDHG duals.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from diffpriv.solvers import _x64  # noqa: F401  (float64 before any array is made)
from diffpriv.solvers._linear import (
    LinearData,
    epigraph_norm,
    epigraph_values,
    operator,
)

__all__ = ["solve_al"]


def solve_al(data: LinearData, key: jax.Array, *, outer: int = 30, inner: int = 500, rho: float = 100.0,
             learning_rate: float = 0.1, init_scale: float = 5.0, worst: bool = False):
    """Runs the augmented Lagrangian.

    Returns ``(table [R, Y], u [2K, Y], nu [R] or [R, Y])``: the multipliers rescaled to the original
    objective, so ``lower_bound(data', u, nu)`` is valid for any budgets ``data'``.
    """
    op = operator(data)
    delta = op.delta
    total = jnp.maximum(jnp.sum(data.cost), 1e-300)
    cost = data.cost / total
    top = jnp.max(jnp.where(data.mask, data.row_loss, 0.0))
    row_norm = epigraph_norm(data)
    m, y = delta.shape[0], data.cost.shape[1]

    def table_of(theta):
        return jax.nn.softmax(jnp.where(data.mask, theta, -jnp.inf), axis=-1)

    def residuals(params):
        theta, phi, tau = params
        a = table_of(theta)
        w = jax.nn.softmax(phi, axis=-1)[:, :-1]
        c = op.apply(a) - delta[:, None] * w
        t = top * jax.nn.sigmoid(tau)
        rows = jnp.where(data.row_active, (epigraph_values(data, a) - t) / row_norm, -1.0)
        f = t / jnp.maximum(top, 1e-300) if worst else jnp.sum(cost * a)
        return f, c, rows

    def augmented(params, mu, nu):
        f, c, rows = residuals(params)
        pen = jnp.sum(jnp.square(jax.nn.relu(mu + rho * c)) - jnp.square(mu))
        if worst:
            pen = pen + jnp.sum(jnp.square(jax.nn.relu(nu + rho * rows)) - jnp.square(nu))
        return f + pen / (2.0 * rho)

    opt = optax.adam(optax.cosine_decay_schedule(learning_rate, inner, 1e-2))
    grad = jax.grad(augmented)
    theta0 = -init_scale * data.row_loss / jnp.maximum(top, 1e-300)
    theta0 = theta0 + 1e-3 * jax.random.normal(key, theta0.shape, dtype=theta0.dtype)
    params = (theta0, jnp.zeros((m, y + 1)), jnp.asarray(0.0))
    mu, nu = jnp.zeros((m, y)), jnp.zeros(data.row_active.shape)

    def outer_step(carry, _):
        params, mu, nu = carry

        def inner_step(state, _):
            params, opt_state = state
            updates, opt_state = opt.update(grad(params, mu, nu), opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), None

        (params, _), _ = jax.lax.scan(inner_step, (params, opt.init(params)), None, length=inner)
        _, c, rows = residuals(params)
        return (params, jax.nn.relu(mu + rho * c), jax.nn.relu(nu + rho * rows)), None

    (params, mu, nu), _ = jax.lax.scan(outer_step, (params, mu, nu), None, length=outer)
    # Multipliers of the scaled problem, rescaled to the original objective.
    scale = top if worst else total
    u, nu = mu * scale, nu * scale / row_norm
    return table_of(params[0]), u, nu
