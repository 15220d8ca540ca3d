"""Augmented Lagrangian with Adam on the softmax logits — the baseline the PDHG method is measured
against (``benchmarks/optimality.py``), and the method for constraints that are not linear
(divergence DistP / DP and extended DistP in KL, χ², Hellinger, Rényi …).

For constraints ``c(A, w) = G A − δ ⊙ w ≤ 0`` (see :mod:`diffpriv.solvers._linear`) and the
nonlinear ``g(A) ≤ 0`` (:mod:`diffpriv.solvers._divergence`), multipliers ``μ, λ ≥ 0`` and
penalty ``ρ``, the inner problem minimises over logits (Adam, a cosine-decayed step)::

    f(A) + (1/2ρ) Σ (max(0, μ + ρ c)² − μ²) + (1/2ρ) Σ (max(0, λ + ρ g)² − λ²)

and the outer loop sets ``μ ← max(0, μ + ρ c)``, ``λ ← max(0, λ + ρ g)``
(Powell–Hestenes–Rockafellar). The objective is scaled to unit total so one ``ρ`` serves every
problem. The multipliers give a certified lower bound: the PDHG duals' for linear constraints,
with the nonlinear ones linearised at the final table (:func:`._divergence.linearized`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from diffpriv.solvers._divergence import DivergenceData, residuals
from diffpriv.solvers._linear import (
    LinearData,
    epigraph_norm,
    epigraph_values,
    operator,
)
from diffpriv.solvers._utilities import utility_value

__all__ = ["ALState", "al_init", "al_output", "al_run", "solve_al"]


class ALState(NamedTuple):
    """Where the augmented Lagrangian stands: logits and slacks ``params``, multipliers
    ``mu`` (linear), ``nu`` (epigraph), ``lam`` (nonlinear), all of the scaled problem, and ``rho``."""

    params: tuple
    mu: jax.Array
    nu: jax.Array
    lam: jax.Array
    rho: jax.Array


def solve_al(data: LinearData, key: jax.Array, *, outer: int = 30, inner: int = 500, rho: float = 100.0,
             learning_rate: float = 0.1, init_scale: float = 5.0, worst: bool = False,
             nonlinear: DivergenceData | None = None, kinds: tuple = ()):
    """Runs the augmented Lagrangian with Adam inner steps (the linear baseline).

    Returns ``(table [R, Y], u [2K, Y], nu [R] or [R, Y], lam [Kn, 2])``: the multipliers rescaled
    to the original objective, so ``lower_bound(data', u, nu)`` is valid for any budgets ``data'``
    (``lam``: of the nonlinear comparisons ``nonlinear`` of divergences ``kinds``, static; empty
    without).
    """
    state = al_init(data, key, rho=rho, init_scale=init_scale, nonlinear=nonlinear)
    state = al_run(data, state, outer=outer, inner=inner, learning_rate=learning_rate, worst=worst,
                   nonlinear=nonlinear, kinds=kinds)
    return al_output(data, state, worst)


def al_init(data: LinearData, key: jax.Array, *, rho: float = 100.0, init_scale: float = 5.0,
            nonlinear: DivergenceData | None = None) -> ALState:
    """The starting state: logits ``−init_scale · L / max L`` (jittered), zero multipliers."""
    m, y = operator(data).delta.shape[0], data.cost.shape[1]
    top = jnp.max(jnp.where(data.mask, data.row_loss, 0.0))
    theta0 = -init_scale * data.row_loss / jnp.maximum(top, 1e-300)
    theta0 = theta0 + 1e-3 * jax.random.normal(key, theta0.shape, dtype=theta0.dtype)
    n_nl = 0 if nonlinear is None else nonlinear.size
    return ALState((theta0, jnp.zeros((m, y + 1)), jnp.asarray(0.0)), jnp.zeros((m, y)),
                   jnp.zeros(data.row_active.shape), jnp.zeros((n_nl, 2)), jnp.asarray(rho))


def _parts(data: LinearData, worst: bool, nonlinear, kinds, objective=None):
    """``(log_table_of, residual)`` of the scaled problem (``objective``: ``(kind, data)`` of a
    smooth objective, :func:`._utilities.utility_value`, in place of the linear one: :mod:`._gradient`)."""
    op = operator(data)
    total = jnp.maximum(jnp.sum(data.cost), 1e-300)
    top = jnp.max(jnp.where(data.mask, data.row_loss, 0.0))
    row_norm = epigraph_norm(data)

    def log_table_of(theta):
        return jax.nn.log_softmax(jnp.where(data.mask, theta, -jnp.inf), axis=-1)

    def residual(params):
        theta, phi, tau = params
        log_a = log_table_of(theta)
        a = jnp.exp(log_a)
        w = jax.nn.softmax(phi, axis=-1)[:, :-1]
        c = op.apply(a) - op.delta[:, None] * w
        t = top * jax.nn.sigmoid(tau)
        rows = jnp.where(data.row_active, (epigraph_values(data, a) - t) / row_norm, -1.0)
        if objective is not None:
            f = utility_value(objective[0], objective[1], a)
        else:
            f = t / jnp.maximum(top, 1e-300) if worst else jnp.sum(data.cost / total * a)
        g = residuals(nonlinear, kinds, log_a) if nonlinear is not None and nonlinear.size \
            else jnp.zeros((0, 2))
        return f, c, rows, g

    return log_table_of, residual


def al_run(data: LinearData, state: ALState, *, outer: int, inner: int, learning_rate: float = 0.1,
           worst: bool = False, nonlinear: DivergenceData | None = None, kinds: tuple = (),
           solver: str = "adam", growth: float = 1.0, rho_max: float = 1e5, objective=None) -> ALState:
    """``outer`` rounds of ``inner`` steps (``solver``: ``"adam"``, a cosine-decayed step, or
    ``"lbfgs"``, optax's L-BFGS with a zoom line search) then a multiplier update; ``ρ`` grows
    by ``growth`` per round up to ``rho_max``; ``objective`` as in :func:`_parts`."""
    _, residual = _parts(data, worst, nonlinear, kinds, objective)

    def penalty(mult, value, rho):
        return jnp.sum(jnp.square(jax.nn.relu(mult + rho * value)) - jnp.square(mult))

    def augmented(params, mu, nu, lam, rho):
        f, c, rows, g = residual(params)
        pen = penalty(mu, c, rho) + penalty(lam, g, rho)
        if worst:
            pen = pen + penalty(nu, rows, rho)
        return f + pen / (2.0 * rho)

    if solver == "adam":
        opt = optax.adam(optax.cosine_decay_schedule(learning_rate, inner, 1e-2))
    else:
        opt = optax.lbfgs()

    def outer_step(st: ALState, _):
        def fn(params):
            return augmented(params, st.mu, st.nu, st.lam, st.rho)

        value_and_grad = optax.value_and_grad_from_state(fn) if solver == "lbfgs" else None

        def inner_step(carry, _):
            params, opt_state = carry
            if solver == "lbfgs":
                value, grad = value_and_grad(params, state=opt_state)
                updates, opt_state = opt.update(grad, opt_state, params, value=value, grad=grad,
                                                value_fn=fn)
            else:
                updates, opt_state = opt.update(jax.grad(fn)(params), opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), None

        (params, _), _ = jax.lax.scan(inner_step, (st.params, opt.init(st.params)), None, length=inner)
        if solver == "lbfgs":
            # L-BFGS's line search can fail (no step, or thrown far off): the round also runs
            # Adam from the same start and keeps whichever of the two (or the start) is best.
            adam = optax.adam(optax.cosine_decay_schedule(learning_rate, inner, 1e-2))

            def adam_step(carry, _):
                p, o = carry
                updates, o = adam.update(jax.grad(fn)(p), o, p)
                return (optax.apply_updates(p, updates), o), None

            (other, _), _ = jax.lax.scan(adam_step, (st.params, adam.init(st.params)), None,
                                         length=inner)
            for candidate in (other, st.params):
                better = fn(candidate) < fn(params)
                params = jax.tree_util.tree_map(functools.partial(jnp.where, better), candidate, params)
        _, c, rows, g = residual(params)
        rho = st.rho
        return ALState(params, jax.nn.relu(st.mu + rho * c), jax.nn.relu(st.nu + rho * rows),
                       jax.nn.relu(st.lam + rho * g), jnp.minimum(rho * growth, rho_max)), None

    state, _ = jax.lax.scan(outer_step, state, None, length=outer)
    return state


def al_output(data: LinearData, state: ALState, worst: bool):
    """``(table, u, nu, lam)`` of a state, the multipliers rescaled to the original objective."""
    log_table_of, _ = _parts(data, worst, None, ())
    top = jnp.max(jnp.where(data.mask, data.row_loss, 0.0))
    scale = top if worst else jnp.maximum(jnp.sum(data.cost), 1e-300)
    return (jnp.exp(log_table_of(state.params[0])), state.mu * scale,
            state.nu * scale / epigraph_norm(data), state.lam * scale)
