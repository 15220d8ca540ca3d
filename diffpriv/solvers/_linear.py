"""A problem's linear structure as operators the JAX solvers trace — never as dense matrices.

Every comparison of :meth:`~diffpriv.Problem.blocks` bounds, in both directions, the
hockey-stick divergence of two output laws built from rows ``r = (s, x)`` of the table
flattened to ``[R, Y]`` (``R = n_profiles · n_in``)::

    Σ_y max(0, P_k[y] − e^{ε_k} Q_k[y]) ≤ δ_k.

With one slack simplex ``w_i ∈ {w ≥ 0, Σ_y w_y ≤ 1}`` per direction ``i`` this is linear::

    (G A)[i, y] ≤ δ_i · w_i[y]   for every y,    G: [M, R] with M = 2 K

(for δ = 0 it is the pure ratio bound). Each row of ``G`` is divided by ``e^ε`` (so a huge ε
stays finite) and scaled to unit ℓ1 norm, ``δ`` with it: this changes nothing about
feasibility and balances the dual step sizes. ``G`` is never built:

* **pair blocks** (``P = A[r_a]``, ``Q = A[r_b]``: local and extended DP) are applied by gathering
  rows, ``(c_p A[r_a] − c_q A[r_b])`` with ``c_p = e^{−ε}/(1 + e^{−ε})``, ``c_q = 1/(1 + e^{−ε})``,
  and transposed by a scatter-add (``segment_sum``): memory ``O(K_pairs · Y)``;
* **mixture blocks** (lifted item laws: distribution privacy) are dense rows ``[2 K_mix, R]``.

Multiplier rows are ordered: pairs direction 0, pairs direction 1, mixtures direction 0,
mixtures direction 1.

Weak duality: for any ``u ≥ 0`` of shape ``[M, Y]`` (and, for the worst-case objective,
``ν ≥ 0`` of shape ``[R]``)::

    OPT ≥ Σ_r min_{y allowed} (C + Gᵀu)[r, y] − Σ_i δ_i max(0, max_y u[i, y])

with ``C = π ⊙ L`` for the expected loss, and for the worst-case loss (``t ∈ [0, T]``)::

    OPT ≥ min(0, T (1 − Σ_r ν_r)) + Σ_r min_y (ν_r L[x_r] + Gᵀu)[r, y] − Σ_i δ_i max_y u[i, y]_+.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse

from diffpriv.problems._blocks import MixtureBlock, PairBlock
from diffpriv.problems._problem import Problem
from diffpriv.solvers import _x64  # noqa: F401  (float64 before any array is made)

__all__ = ["LinearData", "Operator", "linear_data", "tighten", "operator", "lower_bound",
           "sparse_matrix", "largest_objective", "proves_infeasible"]


class LinearData(NamedTuple):
    """Arrays (a pytree) describing a problem to the solvers. Budgets ``pair_eps``, ``mix_eps``
    (and the δ) are leaves, so a batch of budgets can be ``vmap``-ed with the rest broadcast."""

    pair_a: jax.Array  # [Kp] int32 row r_a of each pair comparison
    pair_b: jax.Array  # [Kp] int32 row r_b
    pair_eps: jax.Array  # [Kp]
    pair_delta: jax.Array  # [Kp]
    mix_a: jax.Array  # [Km, R] normalised weights of the P side
    mix_b: jax.Array  # [Km, R] normalised weights of the Q side
    mix_eps: jax.Array  # [Km]
    mix_delta: jax.Array  # [Km]
    cost: jax.Array  # [R, Y]  π[s,x]·L[x,y] (expected objective)
    row_loss: jax.Array  # [R, Y]  L[x_r, y]
    row_active: jax.Array  # [R] bool, π[s,x] > 0
    mask: jax.Array  # [R, Y] bool, allowed outputs
    largest: jax.Array  # [] the largest objective any table on the support can have

    @property
    def batch_axes(self) -> LinearData:
        """``in_axes`` for ``vmap`` over a leading batch axis of the budgets only."""
        budget = {"pair_eps", "pair_delta", "mix_eps", "mix_delta"}
        return LinearData(*(0 if f in budget else None for f in self._fields))


class Operator(NamedTuple):
    """The normalised constraint matrix ``G`` ``[M, R]`` as an operator (module docstring), and
    the normalised slack budgets ``delta`` ``[M]``. Derived once per solve."""

    pair_a: jax.Array  # [Kp]
    pair_b: jax.Array  # [Kp]
    c_p: jax.Array  # [Kp] e^{-ε}/(1 + e^{-ε})
    c_q: jax.Array  # [Kp] 1/(1 + e^{-ε})
    mix: jax.Array  # [2 Km, R] normalised dense rows
    delta: jax.Array  # [M]

    @property
    def n_rows(self) -> int:
        """``R``, the number of table rows (static)."""
        return self.mix.shape[1]

    def apply(self, a: jax.Array) -> jax.Array:
        """``G a``: ``[R, Y] -> [M, Y]``."""
        pa, pb = a[self.pair_a], a[self.pair_b]
        cp, cq = self.c_p[:, None], self.c_q[:, None]
        return jnp.concatenate([cp * pa - cq * pb, cp * pb - cq * pa, self.mix @ a], axis=0)

    def transpose(self, u: jax.Array) -> jax.Array:
        """``Gᵀ u``: ``[M, Y] -> [R, Y]`` (scatter-adds for the pair rows)."""
        kp = self.pair_a.shape[0]
        u0, u1, um = u[:kp], u[kp:2 * kp], u[2 * kp:]
        cp, cq = self.c_p[:, None], self.c_q[:, None]
        r = self.n_rows
        out = jax.ops.segment_sum(cp * u0 - cq * u1, self.pair_a, num_segments=r)
        out = out + jax.ops.segment_sum(cp * u1 - cq * u0, self.pair_b, num_segments=r)
        return out + self.mix.T @ um

    def abs_column_sums(self) -> jax.Array:
        """``Σ_i |G[i, r]|``, ``[R]``: every pair touching row ``r`` adds exactly 1."""
        ones = jnp.ones_like(self.c_p)
        r = self.n_rows
        pairs = (jax.ops.segment_sum(ones, self.pair_a, num_segments=r)
                 + jax.ops.segment_sum(ones, self.pair_b, num_segments=r))
        return pairs + jnp.abs(self.mix).sum(axis=0)

    def abs_row_sums(self) -> jax.Array:
        """``Σ_r |G[i, r]|``, ``[M]``: 1 for every row (they are normalised), 0 for empty ones."""
        kp = self.pair_a.shape[0]
        return jnp.concatenate([jnp.ones(2 * kp, dtype=self.c_p.dtype), jnp.abs(self.mix).sum(axis=1)])


def linear_data(problem: Problem, dtype=jnp.float64) -> LinearData:
    """Flattens ``problem`` into :class:`LinearData` (from its blocks; nothing of size
    ``K · R`` for pair blocks)."""
    ns, nx, ny = problem.shape
    blocks = problem.blocks()
    pairs = [b for b in blocks if isinstance(b, PairBlock)]
    mixes = [b for b in blocks if isinstance(b, MixtureBlock)]
    unknown = [b for b in blocks if not isinstance(b, (PairBlock, MixtureBlock))]
    if unknown:
        raise ValueError(f"optimizer: no operator for {type(unknown[0]).__name__}")

    def cat(parts, empty_shape=(0,), dtype=np.float64):
        return np.concatenate(parts) if parts else np.zeros(empty_shape, dtype=dtype)

    rows = [b.rows(nx) for b in pairs]
    pair_a = cat([r[0] for r in rows], dtype=np.int64)
    pair_b = cat([r[1] for r in rows], dtype=np.int64)

    def dense(s, w):
        out = np.zeros((w.shape[0], ns, nx))
        out[np.arange(w.shape[0]), s] = w / w.sum(axis=1, keepdims=True)
        return out.reshape(w.shape[0], ns * nx)

    mix_a = cat([dense(b.sa, b.wa) for b in mixes], (0, ns * nx))
    mix_b = cat([dense(b.sb, b.wb) for b in mixes], (0, ns * nx))
    row_loss = np.broadcast_to(problem.loss, (ns, nx, ny)).reshape(ns * nx, ny)
    cost = (problem.prior[:, :, None] * problem.loss[None]).reshape(ns * nx, ny)
    as_ = lambda a: jnp.asarray(a, dtype=dtype)  # noqa: E731
    index = jnp.int32 if ns * nx < 2**31 else jnp.int64
    return LinearData(
        pair_a=jnp.asarray(pair_a, dtype=index),
        pair_b=jnp.asarray(pair_b, dtype=index),
        pair_eps=as_(cat([b.eps for b in pairs])),
        pair_delta=as_(cat([np.full(b.size, b.delta) for b in pairs])),
        mix_a=as_(mix_a),
        mix_b=as_(mix_b),
        mix_eps=as_(cat([b.eps for b in mixes])),
        mix_delta=as_(cat([np.full(b.size, b.delta) for b in mixes])),
        cost=as_(cost),
        row_loss=as_(row_loss),
        row_active=jnp.asarray(problem.prior.reshape(-1) > 0),
        mask=jnp.asarray(problem.support_mask().reshape(ns * nx, ny)),
        largest=as_(largest_objective(problem)),
    )


def largest_objective(problem: Problem) -> float:
    """The largest objective any table on the support can have."""
    worst_row = np.max(np.where(problem.support_mask(), problem.loss[None], 0.0), axis=-1)  # [S, X]
    if problem.objective == "worst":
        return float(worst_row[problem.prior > 0].max())
    return float(np.sum(problem.prior * worst_row))


def proves_infeasible(data: LinearData, bound):
    """Whether a certified lower bound exceeds every objective a table can have (with a relative
    1e-9 and absolute 1e-12 allowance for rounding): then no table meets the constraints."""
    return bound > data.largest * (1 + 1e-9) + 1e-12


def tighten(data: LinearData, rel: float = 1e-7, eps_abs: float = 1e-8,
            delta_abs: float = 1e-10) -> LinearData:
    """Budgets shrunk by a hair (``ε(1 − rel) − eps_abs``, likewise δ), clipped at 0.

    The optimizer solves the tightened problem, so that a table meeting it to solver accuracy
    meets the real budgets with room to spare for the certifier's float64 safety margin
    (about ``1e-9`` in ε, ``1e-12`` in δ): no repair is needed. The cost in loss is of order
    ``rel``. Lower bounds are always computed against the real budgets.
    """
    def eps(e):
        return jnp.maximum(e * (1.0 - rel) - eps_abs, 0.0)

    def delta(d):
        return jnp.maximum(d * (1.0 - rel) - delta_abs, 0.0)

    return data._replace(pair_eps=eps(data.pair_eps), mix_eps=eps(data.mix_eps),
                         pair_delta=delta(data.pair_delta), mix_delta=delta(data.mix_delta))


def operator(data: LinearData) -> Operator:
    """The normalised constraint operator of ``data`` (module docstring)."""
    r = jnp.exp(-data.pair_eps)
    c_q = 1.0 / (1.0 + r)
    c_p = r * c_q
    rm = jnp.exp(-data.mix_eps)[:, None]
    g = jnp.concatenate([rm * data.mix_a - data.mix_b, rm * data.mix_b - data.mix_a], axis=0)
    norm = jnp.maximum(jnp.abs(g).sum(axis=1), jnp.finfo(g.dtype).tiny)
    mix_delta = jnp.concatenate([data.mix_delta, data.mix_delta]) * jnp.concatenate([rm[:, 0], rm[:, 0]])
    delta = jnp.concatenate([data.pair_delta * c_p, data.pair_delta * c_p, mix_delta / norm])
    return Operator(data.pair_a, data.pair_b, c_p, c_q, g / norm[:, None], delta)


def sparse_matrix(op: Operator) -> tuple[scipy.sparse.csr_array, np.ndarray]:
    """``(G, δ)`` on the host: ``G`` as a scipy CSR matrix ``[M, R]`` (for polishing)."""
    pa, pb = np.asarray(op.pair_a, np.int64), np.asarray(op.pair_b, np.int64)
    cp, cq = np.asarray(op.c_p), np.asarray(op.c_q)
    kp = pa.size
    mix = scipy.sparse.csr_array(np.asarray(op.mix))
    k = np.arange(kp)
    rows = np.concatenate([k, k, kp + k, kp + k])
    cols = np.concatenate([pa, pb, pb, pa])
    vals = np.concatenate([cp, -cq, cp, -cq])
    pairs = scipy.sparse.csr_array((vals, (rows, cols)), shape=(2 * kp, op.n_rows))
    return scipy.sparse.vstack([pairs, mix], format="csr"), np.asarray(op.delta)


def lower_bound(data: LinearData, u, nu=None, *, worst: bool = False, op: Operator | None = None
                ) -> jax.Array:
    """The weak-duality lower bound on the optimal objective (module docstring), at ``data``'s
    budgets.

    ``u``: ``[M, Y]`` multipliers (negative entries are clipped to 0); ``nu``: ``[R]`` row
    multipliers of the worst-case objective; ``op``: ``operator(data)`` if already built.
    """
    op = operator(data) if op is None else op
    u = jnp.maximum(u, 0.0)
    slack = jnp.sum(op.delta * jnp.maximum(jnp.max(u, axis=1, initial=0.0), 0.0))
    if worst:
        nu = jnp.where(data.row_active, jnp.maximum(nu, 0.0), 0.0)
        top = jnp.max(jnp.where(data.mask, data.row_loss, 0.0))
        base = nu[:, None] * data.row_loss
        offset = jnp.minimum(0.0, top * (1.0 - nu.sum()))
    else:
        base = data.cost
        offset = 0.0
    reduced = jnp.where(data.mask, base + op.transpose(u), jnp.inf)
    return offset + jnp.sum(jnp.min(reduced, axis=1)) - slack
