"""Divergence and Wasserstein levels of output laws in JAX: the optimizer's differentiable constraints.

The JAX twin of the numpy certifier's :mod:`diffpriv.measures._divergences` (same names,
same zero conventions, same values to rounding), written for ``jit``, ``vmap`` and ``grad``.
Laws come as **log-laws** ``log_p``, ``log_q`` of shape ``[..., n]`` (``-inf`` for a zero
probability, as ``log_softmax`` of masked logits gives) and every level reduces the last axis to
``[...]``. With ``P = exp(log_p)``, ``Q = exp(log_q)`` and ``lr = log_p − log_q`` where both are
positive:

==============  ================================================  ======================
name            level                                             ``P[y] > 0 = Q[y]``
==============  ================================================  ======================
``kl``          ``Σ P·lr``                                        ``+∞``
``reverse_kl``  ``KL(Q‖P)``                                       term 0
``tv``          ``½ Σ |P − Q|``                                   finite
``chi2``        ``Σ Q·expm1(lr)²  (= Σ (P − Q)²/Q)``              ``+∞``
``hellinger``   ``½ Σ (√P − √Q)²``                                finite
``renyi(α)``    ``ln(Σ P^α Q^{1−α} / Σ P) / (α − 1)`` (by lse)    ``+∞`` iff α > 1
``max``         ``max lr``  (Rényi, α = ∞)                        ``+∞``
==============  ================================================  ======================

An output neither law emits is ignored; KL, Rényi and max are clamped at 0 as in the certifier.
**Gradients** are finite wherever the level is finite: every ``-inf`` entry is replaced by 0 with
``jnp.where`` *before* any function whose derivative would be infinite there (the double-where
guard), so no ``inf·0`` reaches the gradient; a ``-inf`` entry gets gradient 0.

Transport between output laws on a ground metric ``d`` of the outputs (Yang, Qi & Zhou 2024,
*Wasserstein differential privacy*): :func:`wasserstein_1d` is exact on ordered points of a line
(quantile functions); :func:`exact_potentials` gives the exact value on any ground metric with
POT's network simplex on the host. (Entropic transport through ott-jax was here and was dropped:
measured on the 32×32 grids where the exact lift does not fit, it was neither fast nor accurate
enough to optimise with; ``benchmarks/entropic_wdp.py``.)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float

from diffpriv.measures._divergences import divergence as numpy_divergence

__all__ = ["DIVERGENCES", "c_transform", "chi2", "divergence", "exact_potentials",
           "hellinger", "kl", "level", "line_potentials", "log_lift", "logsumexp", "max_divergence", "renyi",
           "reverse_kl", "symmetric", "tv", "wasserstein_1d"]

Level = Callable[[ArrayLike, ArrayLike], Float[Array, "*batch"]]
"""A divergence level: log-laws ``[..., n]`` (two of them) to ``[...]``."""


# -- guarded helpers -----------------------------------------------------------------------------


def logsumexp(x: ArrayLike, axis: int = -1) -> jax.Array:
    """``log Σ exp(x)`` over ``axis``; ``-inf`` with gradient 0 where every entry is ``-inf``."""
    x = jnp.asarray(x)
    top = jax.lax.stop_gradient(jnp.max(x, axis=axis, keepdims=True))
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    total = jnp.sum(jnp.exp(x - top), axis=axis)
    some = total > 0
    return jnp.where(some, jnp.log(jnp.where(some, total, 1.0)) + jnp.squeeze(top, axis), -jnp.inf)


def _guard(log_p: ArrayLike) -> tuple[Bool[Array, "*shape"], Float[Array, "*shape"]]:
    """``(P > 0, log_p with its -inf entries replaced by 0)``."""
    log_p = jnp.asarray(log_p)
    has = log_p > -jnp.inf
    return has, jnp.where(has, log_p, 0.0)


def _pair(log_p: ArrayLike, log_q: ArrayLike):
    """``(P > 0, Q > 0, guarded log_p, guarded log_q)``; checks the static shapes."""
    if jnp.ndim(log_p) == 0 or jnp.ndim(log_q) == 0 or jnp.shape(log_p)[-1] != jnp.shape(log_q)[-1]:
        raise ValueError(f"log-laws: shapes {jnp.shape(log_p)} and {jnp.shape(log_q)}, "
                         "expected [..., n] with the same n")
    return *_guard(log_p), *_guard(log_q)


def _positive(x: Float[Array, "*shape"]) -> Float[Array, "*shape"]:
    """``max(x, 0)`` with gradient 0 (not ½) at 0."""
    return jnp.where(x > 0, x, 0.0)


def _only(has_p: Bool[Array, "*shape"], has_q: Bool[Array, "*shape"]) -> Bool[Array, "*shape"]:
    """``[...]``: some output has ``P[y] > 0 = Q[y]``."""
    return jnp.any(has_p & ~has_q, axis=-1)


# -- divergences ---------------------------------------------------------------------------------


def kl(log_p: Float[ArrayLike, "*b n"], log_q: Float[ArrayLike, "*b n"]) -> Float[Array, "*b"]:
    """``KL(P‖Q) = Σ P (log_p − log_q)``; ``+∞`` if ``P[y] > 0 = Q[y]`` for some ``y``."""
    has_p, lp, has_q, lq = _pair(log_p, log_q)
    terms = jnp.where(has_p & has_q, jnp.exp(lp) * (lp - lq), 0.0)
    return jnp.where(_only(has_p, has_q), jnp.inf, _positive(terms.sum(-1)))


def reverse_kl(log_p: Float[ArrayLike, "*b n"], log_q: Float[ArrayLike, "*b n"]) -> Float[Array, "*b"]:
    """``KL(Q‖P)``."""
    return kl(log_q, log_p)


def tv(log_p: Float[ArrayLike, "*b n"], log_q: Float[ArrayLike, "*b n"]) -> Float[Array, "*b"]:
    """Total variation ``½ Σ |P − Q|`` (``exp(-inf) = 0`` with derivative 0: no guard needed)."""
    _pair(log_p, log_q)
    return 0.5 * jnp.abs(jnp.exp(jnp.asarray(log_p)) - jnp.exp(jnp.asarray(log_q))).sum(-1)


def chi2(log_p: Float[ArrayLike, "*b n"], log_q: Float[ArrayLike, "*b n"]) -> Float[Array, "*b"]:
    """``χ²(P‖Q) = Σ_{Q>0} Q·(P/Q − 1)²`` with ``P/Q − 1 = expm1(log_p − log_q)`` (no cancellation)."""
    has_p, lp, has_q, lq = _pair(log_p, log_q)
    ratio = jnp.where(has_p & has_q, jnp.expm1(lp - lq), -1.0)  # −1 where P = 0 < Q
    terms = jnp.where(has_q, jnp.exp(lq) * ratio * ratio, 0.0)
    return jnp.where(_only(has_p, has_q), jnp.inf, terms.sum(-1))


def hellinger(log_p: Float[ArrayLike, "*b n"], log_q: Float[ArrayLike, "*b n"]) -> Float[Array, "*b"]:
    """Squared Hellinger ``½ Σ (√P − √Q)²`` (in ``[0, 1]``), ``√P − √Q = √Q·expm1(lr/2)`` on both supports."""
    has_p, lp, has_q, lq = _pair(log_p, log_q)
    root_q = jnp.exp(0.5 * jnp.asarray(log_q))  # 0 with derivative 0 where Q = 0
    plain = jnp.exp(0.5 * jnp.asarray(log_p)) - root_q
    gap = jnp.where(has_p & has_q, root_q * jnp.expm1(0.5 * (lp - lq)), plain)
    return 0.5 * (gap * gap).sum(-1)


def max_divergence(log_p: Float[ArrayLike, "*b n"], log_q: Float[ArrayLike, "*b n"]) -> Float[Array, "*b"]:
    """``D∞(P‖Q) = max(0, max_{P,Q>0} (log_p − log_q))``; ``+∞`` if ``P[y] > 0 = Q[y]`` for some ``y``.

    Not smoothed: the optimizer may smooth the max with a log-sum-exp inside its loss.
    """
    has_p, lp, has_q, lq = _pair(log_p, log_q)
    top = jnp.max(jnp.where(has_p & has_q, lp - lq, -jnp.inf), axis=-1)
    return jnp.where(_only(has_p, has_q), jnp.inf, _positive(top))


@functools.cache  # one function per order: jit caches keyed on it keep hitting
def renyi(alpha: float) -> Level:
    """The Rényi divergence of order ``α``: ``ln(Σ P^α Q^{1−α} / Σ P) / (α − 1)``.

    ``ln Σ P^α Q^{1−α} = logsumexp(log_p + (α − 1)(log_p − log_q))`` over the common support: a
    term with one side 0 is 0 for ``α < 1`` (disjoint laws give ``+∞``) and makes the level ``+∞``
    for ``α > 1``. ``α = 1`` returns :func:`kl`, ``α = inf`` :func:`max_divergence` (the limits).
    ``α`` is static (a Python float). Computed by log-sum-exp only, so the absolute error is about
    ``2^-53·max|log P|/|α − 1|`` (the certifier switches to ``log1p``/``expm1`` near ``α = 1``).
    Raises ValueError unless ``α ∈ (0, 1e300]`` or ``inf``.
    """
    alpha = float(alpha)
    if not (alpha > 0 and (alpha <= 1e300 or alpha == math.inf)):
        raise ValueError(f"renyi: alpha must be > 0 and at most 1e300 or inf, got {alpha}")
    if alpha == 1.0:
        return kl
    if alpha == math.inf:
        return max_divergence
    beta = alpha - 1.0

    def level(log_p: Float[ArrayLike, "*b n"], log_q: Float[ArrayLike, "*b n"]) -> Float[Array, "*b"]:
        has_p, lp, has_q, lq = _pair(log_p, log_q)
        log_s = logsumexp(jnp.where(has_p & has_q, lp + beta * (lp - lq), -jnp.inf))
        log_mass = logsumexp(log_p)
        value = jnp.where(log_mass > -jnp.inf, _positive((log_s - log_mass) / beta), 0.0)
        return jnp.where(_only(has_p, has_q), jnp.inf, value) if beta > 0 else value

    level.__name__ = level.__qualname__ = f"renyi({alpha!r})"
    level.__doc__ = f"Rényi divergence of order {alpha!r} of log-laws ``[..., n] -> [...]``."
    return level


DIVERGENCES: dict[str, Level] = {"kl": kl, "reverse_kl": reverse_kl, "tv": tv, "chi2": chi2,
                                 "hellinger": hellinger, "max": max_divergence}
"""The parameter-free levels by the certifier's names; Rényi levels come from :func:`renyi`."""


def divergence(name: str, alpha: float | None = None) -> Level:
    """The level of the certifier's divergence ``name`` (``"renyi"`` with ``alpha``), named and
    validated by :func:`diffpriv.measures._divergences.divergence` (the same errors)."""
    measure = numpy_divergence(name, alpha)
    return DIVERGENCES[measure.name] if measure.name in DIVERGENCES else renyi(measure.alpha)


def symmetric(name: str, alpha: float | None = None) -> bool:
    """Whether ``D(P‖Q) = D(Q‖P)`` for the certifier's divergence ``name``: TV, squared Hellinger,
    Rényi ½."""
    return numpy_divergence(name, alpha).symmetric


def level(name: str, log_p: Float[ArrayLike, "*b n"], log_q: Float[ArrayLike, "*b n"],
          alpha: float | None = None) -> Float[Array, "*b"]:
    """``D(P‖Q)`` of log-laws ``[..., n] -> [...]`` for the divergence ``name`` (``alpha``: Rényi order).

    Example:
      >>> import jax.numpy as jnp
      >>> P, Q = jnp.array([[0.5, 0.5], [1.0, 0.0]]), jnp.array([[0.25, 0.75], [0.5, 0.5]])
      >>> level("kl", jnp.log(P), jnp.log(Q)).round(6).tolist()
      [0.143841, 0.693147]
    """
    return divergence(name, alpha)(log_p, log_q)


def log_lift(log_rows: Float[ArrayLike, "r n"], weights: Float[ArrayLike, "k r"]) -> Float[Array, "k n"]:
    """Lifted log-laws ``log Σ_r w[k, r] A[r, y]`` from log-rows ``log A`` ``[R, Y]`` and weights ``[K, R]``.

    The lifting ``A#λ`` of Kawamoto & Murakami 2019 (*Local obfuscation mechanisms for hiding
    probability distributions*) in log space, so ratios of tiny probabilities stay exact. Zero
    weights and ``-inf`` entries are fine: an all-zero column gives ``-inf``, every gradient is
    finite (0 for a zero weight).
    """
    log_rows, weights = jnp.asarray(log_rows), jnp.asarray(weights)
    if log_rows.ndim != 2 or weights.ndim != 2 or weights.shape[1] != log_rows.shape[0]:
        raise ValueError(f"log_lift: log_rows {log_rows.shape} and weights {weights.shape}, "
                         "expected [R, Y] and [K, R]")
    pos = weights > 0
    log_w = jnp.where(pos, jnp.log(jnp.where(pos, weights, 1.0)), -jnp.inf)
    return logsumexp(log_w[:, :, None] + log_rows[None], axis=1)


# -- transport -----------------------------------------------------------------------------------


def _order(order: float) -> float:
    order = float(order)
    if not (1.0 <= order < math.inf):
        raise ValueError(f"order: expected 1 <= order < inf, got {order}")
    return order


def _root(cost: Float[Array, "*b"], order: float) -> Float[Array, "*b"]:
    """``cost^{1/μ}`` with gradient 0 (not ``+∞``) at ``cost = 0``."""
    if order == 1.0:
        return cost
    pos = cost > 0
    return jnp.where(pos, jnp.where(pos, cost, 1.0) ** (1.0 / order), 0.0)


def wasserstein_1d(p: Float[ArrayLike, "*b n"], q: Float[ArrayLike, "*b n"], points: ArrayLike,
                   order: float = 1.0, *, root: bool = True) -> Float[Array, "*b"]:
    """Exact ``W_μ(P, Q)`` of laws ``[..., n]`` on sorted ``points [n]`` of a line (ground ``|x − x'|``).

    ``μ = 1``: ``Σ_k |F_P(x_k) − F_Q(x_k)|·(x_{k+1} − x_k)`` (the CDF formula). ``μ > 1``:
    ``W_μ^μ = ∫_0^1 |x[F_P^{-1}(u)] − x[F_Q^{-1}(u)]|^μ du``; both quantile functions are steps
    between the ``2n − 2`` merged CDF values, sorted (static shapes), so the integral is a sum over
    ``2n − 1`` intervals. Differentiable in ``P``, ``Q`` (the interval lengths move, the quantile
    indices are locally constant). The last entry of each law is taken as ``1 − Σ`` of the others
    (its gradient is 0). ``root=False`` returns ``W_μ^μ`` (smooth at ``P = Q``); ``order`` is static.
    """
    order, x = _order(order), jnp.asarray(points)
    n = x.shape[0]
    if x.ndim != 1 or jnp.shape(p)[-1] != n or jnp.shape(q)[-1] != n:
        raise ValueError(f"wasserstein_1d: p {jnp.shape(p)}, q {jnp.shape(q)}, points {x.shape}, "
                         "expected [..., n], [..., n], [n]")

    def cost(p: jax.Array, q: jax.Array) -> jax.Array:
        cdf_p, cdf_q = jnp.cumsum(p)[:-1], jnp.cumsum(q)[:-1]
        if order == 1.0:
            return jnp.sum(jnp.abs(cdf_p - cdf_q) * jnp.diff(x))
        cuts = jnp.concatenate([cdf_p, cdf_q])
        rank = jnp.argsort(cuts)  # interval k lies above the first k sorted cuts
        du = jnp.diff(jnp.concatenate([jnp.zeros(1), cuts[rank], jnp.ones(1)]))
        from_p = (rank < n - 1).astype(jnp.int32)
        i = jnp.concatenate([jnp.zeros(1, jnp.int32), jnp.cumsum(from_p)])  # quantile indices of P
        j = jnp.concatenate([jnp.zeros(1, jnp.int32), jnp.cumsum(1 - from_p)])
        return jnp.sum(du * jnp.abs(x[i] - x[j]) ** order)

    power = jnp.vectorize(cost, signature="(n),(n)->()")(jnp.asarray(p), jnp.asarray(q))
    return _root(power, order) if root else power


def c_transform(g: Float[ArrayLike, "*b n"], cost: Float[ArrayLike, "n n"],
                support: Bool[ArrayLike, "*b n"] | None = None) -> tuple[Float[Array, "*b n"], ...]:
    """Feasible transport potentials from a candidate ``g``: ``f_i = min_{j ∈ support} (C_ij − g_j)``,
    then ``g_j = min_i (C_ij − f_i)``.

    The pair satisfies ``f_i + g_j ≤ C_ij`` for every ``i, j`` (by construction, whatever ``g`` was),
    so by weak duality ``⟨f, P⟩ + ⟨g, Q⟩ ≤ OT_C(P, Q)`` for *every* pair of probability vectors: a
    linear minorant of the transport cost, exact at ``(P, Q)`` when the candidate is an optimal
    potential there. ``support`` (default: all) restricts the first transform to entries where the
    candidate means something (a Sinkhorn potential is ``-inf`` or arbitrary off ``Q``'s support).
    """
    g, cost = jnp.asarray(g), jnp.asarray(cost)
    keep = jnp.ones(g.shape, bool) if support is None else jnp.asarray(support)
    f = jnp.min(cost - jnp.where(keep, g, -jnp.inf)[..., None, :], axis=-1)
    return f, jnp.min(cost - f[..., :, None], axis=-2)


def exact_potentials(p: Float[ArrayLike, "*b n"], q: Float[ArrayLike, "*b n"],
                     ground: Float[ArrayLike, "n n"], order: float) -> tuple[Float[Array, "*b n"], ...]:
    """Optimal feasible potentials ``(f, g)`` (``f ⊕ g ≤ ground^μ`` on every cell) of ``W_μ^μ(P, Q)``
    on any ground metric: POT's network simplex (``emd_c``, on the cost scaled by a power of 2 to
    a maximum in ``[½, 1)``, as the certifier does) on the host, called from JAX with
    :func:`jax.pure_callback` (so under ``jit`` and ``vmap``), then :func:`c_transform` in JAX.
    ``⟨f, P⟩ + ⟨g, Q⟩`` is exactly ``W_μ^μ(P, Q)``, and a linear minorant of it everywhere; no
    gradient flows through the potentials (they are the subgradient).

    Not ott-jax's Sinkhorn: measured on random 9–12-point laws, its c-transformed potentials after
    2,000 annealed iterations at ``ε = 10^-3 · max C`` were 0.03–10 % below the exact cost, and 30
    of them took 0.47 s (the network simplex: exact, under 10 µs each for 6 points).
    """
    mu = _order(order)
    cost = jnp.asarray(ground) if mu == 1.0 else jnp.asarray(ground) ** mu
    p, q = jax.lax.stop_gradient(jnp.asarray(p)), jax.lax.stop_gradient(jnp.asarray(q))
    shape = jnp.broadcast_shapes(p.shape, q.shape)

    def host(p_host, q_host, cost_host):
        from ot.lp.emd_wrap import emd_c  # POT's network simplex itself: ot.emd adds ~0.1 ms a call

        from diffpriv.solvers._x64 import on_this_thread

        on_this_thread()  # XLA may run this on a thread of its own: the result stays float64

        p_host, q_host = np.broadcast_to(p_host, shape), np.broadcast_to(q_host, shape)
        c = np.asarray(cost_host, np.float64)
        scale = np.ldexp(1.0, -int(np.frexp(c.max())[1])) if c.max() > 0 else 1.0
        c = np.ascontiguousarray(c * scale)
        g = np.zeros(shape)
        for i in np.ndindex(shape[:-1]):  # a non-optimal exit still gives potentials (made feasible)
            a = np.maximum(np.asarray(p_host[i], np.float64), 0.0)  # emd_c takes doubles only
            b = np.maximum(np.asarray(q_host[i], np.float64), 0.0)
            g[i] = emd_c(a / a.sum(), b / b.sum(), c, 100_000, 1)[3] / scale
        return g.astype(out.dtype)

    out = jax.ShapeDtypeStruct(shape, p.dtype)
    g = jax.pure_callback(host, out, p, q, jax.lax.stop_gradient(cost), vmap_method="sequential")
    return c_transform(g, cost, q > 0)


def line_potentials(p: Float[ArrayLike, "*b n"], q: Float[ArrayLike, "*b n"], points: ArrayLike,
                    order: float, cost: Float[ArrayLike, "n n"]):
    """Feasible potentials for ``W_μ^μ`` of laws on sorted ``points`` of a line: the gradient of the
    exact :func:`wasserstein_1d` (an optimal potential up to a constant, where it is
    differentiable), then :func:`c_transform` on ``cost = |x − x'|^μ``."""
    grad_q = jax.grad(lambda q_: jnp.sum(wasserstein_1d(p, q_, points, order, root=False)))
    g = jax.lax.stop_gradient(grad_q(jax.lax.stop_gradient(jnp.asarray(q))))
    return c_transform(g, cost, jnp.ones(jnp.shape(g), bool))
