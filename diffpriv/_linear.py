"""A problem's linear structure, as arrays the JAX solvers trace.

Every constraint of :class:`~diffpriv.Problem` compares two lifted output laws
``P_k = Σ_r Wa[k, r] A[r]`` and ``Q_k = Σ_r Wb[k, r] A[r]`` (rows ``r = (s, x)`` of the table
flattened to ``[R, Y]`` with ``R = n_profiles · n_in``). In both directions the hockey-stick
divergence is bounded::

    Σ_y max(0, P_k[y] − e^{ε_k} Q_k[y]) ≤ δ_k.

With one slack simplex ``w_i ∈ {w ≥ 0, Σ_y w_y ≤ 1}`` per direction ``i`` this is linear::

    (G A)[i, y] ≤ δ_i · w_i[y]      for every y,   G = [Wa − e^ε Wb; Wb − e^ε Wa]   ([2K, R])

(for δ = 0 it is the pure ratio bound). Rows of ``G`` are scaled to unit ℓ1 norm, ``δ`` with
them, which changes nothing about feasibility and balances the dual step sizes.

Weak duality (DESIGN.md §3): for any ``u ≥ 0`` of shape ``[2K, Y]`` (and, for the worst-case
objective, ``ν ≥ 0`` of shape ``[R]``)::

    OPT ≥ Σ_r min_{y allowed} (C + Gᵀu)[r, y] − Σ_i δ_i max(0, max_y u[i, y])

with ``C = π ⊙ L`` for the expected loss, and for the worst-case loss (``t ∈ [0, T]``)::

    OPT ≥ min(0, T (1 − Σ_r ν_r)) + Σ_r min_y (ν_r L[x_r] + Gᵀu)[r, y] − Σ_i δ_i max_y u[i, y]_+.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _x64  # noqa: F401  (float64 before any array is made)
from ._problem import Problem

__all__ = ["LinearData", "linear_data", "tighten", "constraint_matrix", "lower_bound"]


class LinearData(NamedTuple):
    """Arrays (a pytree) describing a problem to the solvers. Budgets ``eps``/``delta`` are
    leaves, so a batch of budgets can be ``vmap``-ed with the rest broadcast."""

    wa: jax.Array  # [K, R]
    wb: jax.Array  # [K, R]
    eps: jax.Array  # [K]
    delta: jax.Array  # [K]
    cost: jax.Array  # [R, Y]  π[s,x]·L[x,y] (expected objective)
    row_loss: jax.Array  # [R, Y]  L[x_r, y]
    row_active: jax.Array  # [R] bool, π[s,x] > 0
    mask: jax.Array  # [R, Y] bool, allowed outputs


def linear_data(problem: Problem, dtype=jnp.float64) -> LinearData:
    """Flattens ``problem`` into :class:`LinearData`."""
    ns, nx, ny = problem.shape
    comp = problem.comparisons()
    k = comp.size
    wa = np.zeros((k, ns, nx))
    wb = np.zeros((k, ns, nx))
    wa[np.arange(k), comp.sa] = comp.wa
    wb[np.arange(k), comp.sb] = comp.wb
    row_loss = np.broadcast_to(problem.loss, (ns, nx, ny)).reshape(ns * nx, ny)
    cost = (problem.prior[:, :, None] * problem.loss[None]).reshape(ns * nx, ny)
    as_ = lambda a: jnp.asarray(a, dtype=dtype)  # noqa: E731
    return LinearData(
        wa=as_(wa.reshape(k, ns * nx)),
        wb=as_(wb.reshape(k, ns * nx)),
        eps=as_(comp.eps),
        delta=as_(comp.delta),
        cost=as_(cost),
        row_loss=as_(row_loss),
        row_active=jnp.asarray(problem.prior.reshape(-1) > 0),
        mask=jnp.asarray(problem.support_mask().reshape(ns * nx, ny)),
    )


def tighten(data: LinearData, rel: float = 1e-7, eps_abs: float = 1e-8,
            delta_abs: float = 1e-10) -> LinearData:
    """Budgets shrunk by a hair (``ε(1 − rel) − eps_abs``, likewise δ), clipped at 0.

    The optimizer solves the tightened problem, so that a table meeting it to solver accuracy
    meets the real budgets with room to spare for the certifier's float64 safety margin
    (about ``1e-9`` in ε, ``1e-12`` in δ): no repair is needed. The cost in loss is of order
    ``rel``. Lower bounds are always computed against the real budgets.
    """
    eps = jnp.maximum(data.eps * (1.0 - rel) - eps_abs, 0.0)
    delta = jnp.maximum(data.delta * (1.0 - rel) - delta_abs, 0.0)
    return data._replace(eps=eps, delta=delta)


def constraint_matrix(data: LinearData) -> tuple[jax.Array, jax.Array]:
    """``(G, δ)``: the row-normalised ``[2K, R]`` matrix and ``[2K]`` slack budgets."""
    # Each row is divided by e^ε before normalising (the same constraint), so that a huge ε
    # (e^ε overflows) stays finite: then the row tends to −Q, i.e. no constraint at all.
    r = jnp.exp(-data.eps)[:, None]
    g = jnp.concatenate([r * data.wa - data.wb, r * data.wb - data.wa], axis=0)
    delta = jnp.concatenate([data.delta, data.delta]) * jnp.concatenate([r[:, 0], r[:, 0]])
    norm = jnp.maximum(jnp.abs(g).sum(axis=1), jnp.finfo(g.dtype).tiny)
    return g / norm[:, None], delta / norm


def lower_bound(data: LinearData, u, nu=None, *, worst: bool = False) -> jax.Array:
    """The weak-duality lower bound on the optimal objective (module docstring).

    ``u``: ``[2K, Y]`` multipliers (negative entries are clipped to 0); ``nu``: ``[R]`` row
    multipliers of the worst-case objective.
    """
    g, delta = constraint_matrix(data)
    u = jnp.maximum(u, 0.0)
    slack = jnp.sum(delta * jnp.maximum(jnp.max(u, axis=1, initial=0.0), 0.0))
    if worst:
        nu = jnp.where(data.row_active, jnp.maximum(nu, 0.0), 0.0)
        top = jnp.max(jnp.where(data.mask, data.row_loss, 0.0))
        base = nu[:, None] * data.row_loss
        offset = jnp.minimum(0.0, top * (1.0 - nu.sum()))
    else:
        base = data.cost
        offset = 0.0
    reduced = jnp.where(data.mask, base + g.T @ u, jnp.inf)
    return offset + jnp.sum(jnp.min(reduced, axis=1)) - slack
