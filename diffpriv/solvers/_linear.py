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

The epigraph objectives minimise ``t`` subject to ``ℓ(A) ≤ t`` with ``ℓ`` one of
(:func:`epigraph_values`): the row losses ``ℓ_r = Σ_y L[x_r, y] A[r, y]`` (worst case, ``ν ≥ 0``
of shape ``[R]``) or the weighted entries ``ℓ_{r,y} = L[x_r, y] A[r, y]`` (largest entry, ``ν``
of shape ``[R, Y]``), over rows of positive prior. Which one is static: the shape of
``row_active``, ``[R]`` or ``[R, Y]``.

**Transport objective** (:class:`~diffpriv.TransportLoss`, laws ``λ_k`` with shares ``c_k``):
the table gets ``X`` more rows per law, a row-stochastic plan table ``B_k`` ``[X, Y]`` (after
the ``R`` rows of ``A``, every output allowed) with cost ``c_k λ_k[x] L[x, y]`` (the rows of
``A`` cost 0), and one more mixture comparison per law at ``ε = δ = 0`` between the output law
``A#λ_k`` and ``Σ_x λ_k[x] B_k[x,·]``: both ratio bounds at ``e^0`` make the two laws equal, so
``γ_k = λ_k ⊙ B_k`` is a coupling of ``λ_k`` and its output law, and the minimum over the plans
of the cost is the transport cost. The problem stays an LP and every bound below holds for it
unchanged. :func:`table_rows` gives the number of rows.

Weak duality: for any ``u ≥ 0`` of shape ``[M, Y]`` (and ``ν ≥ 0`` for an epigraph objective)::

    OPT ≥ Σ_r min_{y allowed} (C + Gᵀu)[r, y] − Σ_i δ_i max(0, max_y u[i, y])

with ``C = π ⊙ L`` for the expected loss, and for an epigraph objective (``t ∈ [0, T]``)::

    OPT ≥ min(0, T (1 − Σ ν)) + Σ_r min_y (ℓ'ᵀν + Gᵀu)[r, y] − Σ_i δ_i max_y u[i, y]_+

where ``(ℓ'ᵀν)[r, y]`` is ``ν_r L[x_r, y]`` or ``ν_{r,y} L[x_r, y]`` (:func:`epigraph_weights`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse

from diffpriv.problems._blocks import MixtureBlock, PairBlock
from diffpriv.problems._objectives import require_linear
from diffpriv.problems._problem import Problem
from diffpriv.solvers._rows import largest_objective, smallest_objective, table_rows, the_table, tighten_eps

__all__ = ["LinearData", "Operator", "linear_data", "tighten", "operator", "lower_bound",
           "sparse_matrix", "largest_objective", "proves_infeasible", "lower_bound_by_columns",
           "incidence", "epigraph_values", "epigraph_weights", "epigraph_norm", "table_rows", "the_table",
           "tighten_eps", "smallest_objective", "soft_min"]


class LinearData(NamedTuple):
    """Arrays (a pytree) describing a problem to the solvers. Budgets ``pair_eps``, ``mix_eps``
    (and the δ) are leaves, so a batch of budgets can be ``vmap``-ed with the rest broadcast."""

    pair_a: jax.Array  # [Kp] int32 row r_a of each pair comparison
    pair_b: jax.Array  # [Kp] int32 row r_b
    pair_inc: jax.Array  # [R, D] int32 the pairs touching each row (padding: 0); [R, 0]: none kept
    pair_side: jax.Array  # [R, D] int8 +1: the row is r_a of that pair, -1: r_b, 0: padding
    pair_eps: jax.Array  # [Kp]
    pair_delta: jax.Array  # [Kp]
    mix_a: jax.Array  # [Km, R] normalised weights of the P side
    mix_b: jax.Array  # [Km, R] normalised weights of the Q side
    mix_eps: jax.Array  # [Km]
    mix_delta: jax.Array  # [Km]
    cost: jax.Array  # [R, Y]  π[s,x]·L[x,y] (expected objective)
    row_loss: jax.Array  # [R, Y]  L[x_r, y]
    row_active: jax.Array  # [R] bool, π[s,x] > 0 ([R, Y] for the largest-entry objective)
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
    pair_inc: jax.Array  # [R, D]
    pair_side: jax.Array  # [R, D]
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
        return jnp.concatenate(self.apply_parts(a), axis=0)

    def apply_parts(self, a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``G a`` in its three row groups (pairs direction 0, direction 1, mixtures), for
        reductions that need not hold ``G a`` whole."""
        pa, pb = a[self.pair_a], a[self.pair_b]
        cp, cq = self.c_p[:, None], self.c_q[:, None]
        return cp * pa - cq * pb, cp * pb - cq * pa, self.mix @ a

    def transpose(self, u: jax.Array, positive: bool = False) -> jax.Array:
        """``Gᵀ u``: ``[M, Y] -> [R, Y]`` (``Gᵀ max(u, 0)`` with ``positive``). Pair rows are
        summed by gathering each row's pairs (:func:`incidence`: no temporary of the
        multipliers' size), or by scatter-adds when the incidence lists were too uneven to
        keep."""
        kp = self.pair_a.shape[0]
        r = self.n_rows
        clip = (lambda x: jnp.maximum(x, 0.0)) if positive else (lambda x: x)  # noqa: E731
        um = clip(u[2 * kp:])
        if self.pair_inc.shape[1]:  # static
            side = self.pair_side.astype(self.c_p.dtype)
            cp_r, cq_r = self.c_p[self.pair_inc], self.c_q[self.pair_inc]
            # row a of pair k gets cp·u0 − cq·u1, row b gets cp·u1 − cq·u0; padding gets 0
            c0 = jnp.where(side > 0, cp_r, -cq_r) * jnp.abs(side)
            c1 = jnp.where(side > 0, -cq_r, cp_r) * jnp.abs(side)

            def slot(j, acc):  # one incidence slot at a time: a fused gather, no [R, D, Y]
                k = self.pair_inc[:, j]  # rows of u itself: slices of u would be copied
                return acc + c0[:, j, None] * clip(u[k]) + c1[:, j, None] * clip(u[k + kp])

            out = jax.lax.fori_loop(0, self.pair_inc.shape[1], slot,
                                    jnp.zeros((r, u.shape[1]), dtype=jnp.result_type(u, c0)))
        else:
            u0, u1 = clip(u[:kp]), clip(u[kp:2 * kp])
            cp, cq = self.c_p[:, None], self.c_q[:, None]
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


def linear_data(problem: Problem, dtype=jnp.float64, *, outputs: slice | None = None,
                compact: bool = False, nonlinear: bool = False) -> LinearData:
    """Flattens ``problem`` into :class:`LinearData` (from its blocks; nothing of size
    ``K · R`` for pair blocks).

    ``outputs``: only these output columns (the budgets and comparisons are unchanged: a column
    slice of the constraint system, for bounds computed column by column). ``compact``: for the
    expected objective, ``row_loss`` is left out (``[R, 1]`` zeros) and an all-true support mask
    is stored as ``[R, 1]``: two ``[R, Y]`` arrays fewer on very large problems. A column slice
    has ``largest = NaN`` (it is a property of the whole table). ``nonlinear``: leave the blocks
    measured in other divergences out (their own solver handles them) instead of refusing them.
    """
    require_linear(problem, "optimizer", blocks=not nonlinear)
    ns, nx, ny = problem.shape
    plan = problem.objective.transport  # X rows of a transport plan after the table's (docstring)
    if plan and (outputs is not None or compact):
        raise ValueError("optimizer: the transport objective needs the whole table (no column "
                         "slices, no compact plan)")
    n_rows = table_rows(problem)
    cols = slice(None) if outputs is None else outputs
    blocks = tuple(b for b in problem.blocks() if b.linear)
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
        out = np.zeros((w.shape[0], n_rows // nx, nx))
        out[np.arange(w.shape[0]), s] = w / w.sum(axis=1, keepdims=True)
        return out.reshape(w.shape[0], n_rows)

    mix_a = cat([dense(b.sa, b.wa) for b in mixes], (0, n_rows))
    mix_b = cat([dense(b.sb, b.wb) for b in mixes], (0, n_rows))
    mix_eps = cat([b.eps for b in mixes])
    mix_delta = cat([np.full(b.size, b.delta) for b in mixes])
    loss = problem.loss[:, cols]
    if problem.support is None:
        mask = np.ones((ns * nx, 1 if compact else loss.shape[1]), dtype=bool)
    else:
        mask = problem.support[..., cols].reshape(ns * nx, -1)
    as_ = lambda a: jnp.asarray(a, dtype=dtype)  # noqa: E731
    cost = (problem.prior[:, :, None] * loss[None]).reshape(ns * nx, -1)
    active = problem.prior.reshape(-1) > 0
    if plan:  # the plans' rows B_k [X, Y], and the marginal comparisons A#λ_k = λ_kᵀ B_k
        lifts, laws, shares = problem.objective.transport_laws(problem)
        k = shares.size
        cost = np.concatenate([np.zeros_like(cost), *(c * lam[:, None] * loss
                                                      for lam, c in zip(laws, shares, strict=True))])
        mask = np.concatenate([np.broadcast_to(mask, (ns * nx, loss.shape[1])),
                               np.ones((k * nx, loss.shape[1]), dtype=bool)])
        active = np.concatenate([active, laws.ravel() > 0])
        plans = np.zeros((k, k, nx))
        plans[np.arange(k), np.arange(k)] = laws
        table_side = np.concatenate([lifts.reshape(k, -1), np.zeros((k, k * nx))], axis=1)
        plan_side = np.concatenate([np.zeros((k, ns * nx)), plans.reshape(k, -1)], axis=1)
        mix_a, mix_b = np.concatenate([mix_a, table_side]), np.concatenate([mix_b, plan_side])
        mix_eps, mix_delta = np.append(mix_eps, np.zeros(k)), np.append(mix_delta, np.zeros(k))
    cost = as_(cost)
    if compact and not problem.objective.epigraph:
        row_loss = jnp.zeros((n_rows, 1), dtype=dtype)
    else:
        row_loss = as_(np.broadcast_to(loss, (n_rows // nx, *loss.shape)).reshape(n_rows, -1))
    if compact and mask.all():
        mask = np.ones((n_rows, 1), dtype=bool)
    if problem.objective.epigraph == "entries":
        active = active[:, None] & np.broadcast_to(mask, (n_rows, loss.shape[1]))
    index = jnp.int32 if n_rows < 2**31 and pair_a.size < 2**31 else jnp.int64
    inc, side = incidence(pair_a, pair_b, n_rows)
    return LinearData(
        pair_a=jnp.asarray(pair_a, dtype=index),
        pair_b=jnp.asarray(pair_b, dtype=index),
        pair_inc=jnp.asarray(inc, dtype=index),
        pair_side=jnp.asarray(side, dtype=jnp.int8),
        pair_eps=as_(cat([b.eps for b in pairs])),
        pair_delta=as_(cat([np.full(b.size, b.delta) for b in pairs])),
        mix_a=as_(mix_a),
        mix_b=as_(mix_b),
        mix_eps=as_(mix_eps),
        mix_delta=as_(mix_delta),
        cost=cost,
        row_loss=row_loss,
        row_active=jnp.asarray(active),
        mask=jnp.asarray(mask),
        largest=as_(largest_objective(problem) if outputs is None else np.nan),
    )


def incidence(pair_a: np.ndarray, pair_b: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """``(inc, side)``, ``[R, D]`` each: the pairs touching each row, padded to the largest
    degree ``D`` (index 0, side 0), and ``side`` +1 where the row is the pair's ``r_a``, −1
    where it is ``r_b``. Both ``[R, 0]`` when padding would hold more than twice the
    entries (very uneven degrees): the transpose then scatter-adds."""
    kp = pair_a.size
    rows = np.concatenate([pair_a, pair_b])
    degree = np.bincount(rows, minlength=n_rows)
    d = int(degree.max(initial=0))
    if kp == 0 or n_rows * d > 2 * rows.size + n_rows:
        return np.zeros((n_rows, 0), np.int64), np.zeros((n_rows, 0), np.int8)
    order = np.argsort(rows, kind="stable")
    rows = rows[order]
    pos = np.arange(rows.size) - (np.cumsum(degree) - degree)[rows]
    inc = np.zeros((n_rows, d), np.int64)
    side = np.zeros((n_rows, d), np.int8)
    inc[rows, pos] = np.concatenate([np.arange(kp), np.arange(kp)])[order]
    side[rows, pos] = np.where(order < kp, 1, -1)
    return inc, side


def epigraph_values(data: LinearData, table: jax.Array) -> jax.Array:
    """``ℓ(A)``: the row losses ``[R]``, or the weighted entries ``[R, Y]`` (module docstring)."""
    weighted = data.row_loss * table
    return jnp.sum(weighted, axis=1) if data.row_active.ndim == 1 else weighted


def epigraph_weights(data: LinearData, nu: jax.Array) -> jax.Array:
    """``ℓ'ᵀν`` ``[R, Y]``: the multipliers ``ν`` of the epigraph constraints, as a cost."""
    return (nu[:, None] if nu.ndim == 1 else nu) * data.row_loss


def epigraph_norm(data: LinearData) -> jax.Array:
    """The ℓ1 norm of each epigraph constraint's row, ``ℓ`` and ``−t`` (``[R]`` or ``[R, Y]``):
    the solvers scale the constraints by it."""
    loss = jnp.where(data.mask, data.row_loss, 0.0)
    return (jnp.sum(loss, axis=1) if data.row_active.ndim == 1 else loss) + 1.0


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
        return tighten_eps(e, rel, eps_abs)

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
    return Operator(data.pair_a, data.pair_b, data.pair_inc, data.pair_side, c_p, c_q,
                    g / norm[:, None], delta)


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


def soft_min(z: jax.Array, mask: jax.Array, tau: jax.Array) -> jax.Array:
    """``−τ_r ln Σ_y e^{−z[r, y]/τ_r}`` over each row's allowed outputs (``τ`` ``[R]``): the
    smoothed ``min_y z[r, y]`` of the linear duals (:mod:`._dual`, :mod:`._dual_bound`), at most
    the minimum and at least it minus ``τ_r ln Y``."""
    return -tau * jax.nn.logsumexp(jnp.where(mask, -z / tau[:, None], -jnp.inf), axis=1)


def _reduced_min(data: LinearData, op: Operator, u, nu, worst: bool, extra=None):
    """``Σ_r min_y (base + Gᵀu)[r, y]`` over allowed outputs, and ``max_y u⁺`` per row of
    ``G`` (the parts of :func:`lower_bound` that combine over column slices)."""
    base = epigraph_weights(data, nu) if worst else data.cost
    if extra is not None:
        base = base + extra
    reduced = jnp.where(data.mask, base + op.transpose(u, positive=True), jnp.inf)
    return jnp.min(reduced, axis=1), jnp.maximum(jnp.max(u, axis=1, initial=0.0), 0.0)


def _combine(data: LinearData, op: Operator, mins, umax, nu, worst: bool):
    slack = jnp.sum(op.delta * umax)
    if worst:
        top = jnp.max(jnp.where(data.mask, data.row_loss, 0.0))
        return jnp.minimum(0.0, top * (1.0 - nu.sum())) + jnp.sum(mins) - slack
    return jnp.sum(mins) - slack


def lower_bound(data: LinearData, u, nu=None, *, worst: bool = False, op: Operator | None = None,
                linearized=None) -> jax.Array:
    """The weak-duality lower bound on the optimal objective (module docstring), at ``data``'s
    budgets.

    ``u``: ``[M, Y]`` multipliers (negative entries are clipped to 0); ``nu``: ``[R]`` or
    ``[R, Y]`` multipliers of an epigraph objective's constraints; ``op``: ``operator(data)`` if
    already built; ``linearized``: ``(∇ [R, Y], c)``, a lower bound ``⟨∇, A⟩ + c`` of the
    nonlinear constraints' weighted residuals (:func:`._divergence.linearized`), added to the
    Lagrangian.
    """
    op = operator(data) if op is None else op
    if worst:
        nu = jnp.where(data.row_active, jnp.maximum(nu, 0.0), 0.0)
    extra, constant = (None, 0.0) if linearized is None else linearized
    mins, umax = _reduced_min(data, op, u, nu, worst, extra)
    value = _combine(data, op, mins, umax, nu, worst) + constant
    return value - _rounding(data, op, u, nu, worst, extra, mins, umax, constant)


_U = 2.0**-53


def _rounding(data: LinearData, op: Operator, u, nu, worst: bool, extra, mins, umax, constant) -> jax.Array:
    """A bound of :func:`lower_bound`'s float64 rounding error, subtracted from it (outward, as
    the LP path's :func:`._lp.scaled_bound`): each entry ``(base + Gᵀu⁺)[r, y]`` sums at most
    ``d`` terms (``d`` = the pair incidences and mixture rows of a row, and 2), of magnitude at
    most ``|base| + Σ_i |G[i, r]| · max u⁺`` (``G``'s rows are normalised), so it is within
    ``γ_d`` of that; a row's least entry within the row's largest such error; the sum of the
    row minima, the δ terms and the constant within ``γ_{R+2}`` of their absolute sum (Higham
    2002, §3.1). Twice that, for the rounding of this very estimate."""
    base = epigraph_weights(data, nu) if worst else data.cost
    size = jnp.abs(jnp.where(data.mask, base, 0.0))
    if extra is not None:
        size = size + jnp.abs(jnp.where(data.mask, extra, 0.0))
    top = jnp.maximum(jnp.max(u, initial=0.0), 0.0)  # no copy of u (a lean run has no room)
    d = 2 * int(data.mask.shape[0]) + int(op.mix.shape[0]) + 2 if op.pair_inc.shape[1] == 0 else \
        int(op.pair_inc.shape[1]) * 2 + int(op.mix.shape[0]) + 2
    rows = mins.shape[0]

    def gamma(n):
        return n * _U / (1.0 - n * _U)

    entries = jnp.sum(jnp.max(size, axis=1) + op.abs_column_sums() * top)
    total = jnp.sum(jnp.where(jnp.isfinite(mins), jnp.abs(mins), 0.0)) + jnp.sum(op.delta * umax) \
        + jnp.abs(constant)
    return 2.0 * (gamma(d) * entries + gamma(rows + 2) * total)


_reduced_min_jit = jax.jit(_reduced_min, static_argnames="worst")


def lower_bound_by_columns(problem: Problem, u, *, columns: int = 256) -> float:
    """:func:`lower_bound` of the expected objective at ``problem``'s real budgets, in float64,
    one slice of ``columns`` outputs at a time (``u`` may be float32 and on the device): the
    certified bound of a run made in lower precision, without a float64 copy of ``u``."""
    if problem.objective.epigraph:
        raise ValueError("lower_bound_by_columns: the expected objective only")
    ny = problem.shape[2]
    mins, umax = 0.0, None
    for lo in range(0, ny, columns):
        cols = slice(lo, min(lo + columns, ny))
        data = linear_data(problem, outputs=cols)
        op = operator(data)
        m, x = _reduced_min_jit(data, op, jnp.asarray(u[:, cols], dtype=jnp.float64), None,
                                worst=False)
        mins = jnp.minimum(mins, m) if lo else m
        umax = x if umax is None else jnp.maximum(umax, x)
    data = linear_data(problem, outputs=slice(0, 1))
    op = operator(data)
    value = float(_combine(data, op, mins, umax, None, False))
    # the rounding bound of lower_bound at the largest multiplier of every slice (a row's cost
    # magnitudes: its prior times the loss, at most the loss's largest entry)
    top = float(jnp.max(jnp.maximum(jnp.asarray(u), 0.0), initial=0.0))
    d = 2 * problem.shape[0] * problem.shape[1] + int(op.mix.shape[0]) + 2
    costs = np.where(problem.support_mask(), problem.prior[..., None] * problem.loss[None], 0.0).max(axis=-1)
    entries = float(np.sum(costs)) + float(jnp.sum(op.abs_column_sums())) * top
    total = float(jnp.sum(jnp.abs(mins))) + float(jnp.sum(op.delta * umax))
    rows = int(np.size(mins))
    return value - 2.0 * (d * _U * entries + (rows + 2) * _U * total) * (1.0 + 1e-6)
