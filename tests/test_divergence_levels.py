"""The JAX divergence and transport levels against the numpy certifier and exact OT (POT)."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffpriv.certification._divergences import divergence as np_divergence
from diffpriv.certification._transport import wasserstein, wasserstein_1d
from diffpriv.solvers import _divergence_levels as dl

NAMES = [("kl", None), ("reverse_kl", None), ("tv", None), ("chi2", None), ("hellinger", None),
         ("max", None), ("renyi", 0.5), ("renyi", 2.0), ("renyi", 5.0)]


def _log(P: np.ndarray) -> np.ndarray:
    return np.where(P > 0, np.log(np.where(P > 0, P, 1.0)), -np.inf)


def _laws(rng: np.random.Generator, k: int, n: int, zeros: bool):
    """``[k, n]`` pairs of laws; with ``zeros``, rows cycle through five zero patterns:
    none, common zeros, zeros of P only (and a common one), zeros of Q only, disjoint supports."""
    P, Q = rng.dirichlet(np.full(n, 0.8), k), rng.dirichlet(np.full(n, 0.8), k)
    if zeros:
        for r in range(k):
            cut = rng.permutation(n)
            common, only_p, only_q = cut[:1], cut[1:3], cut[3:5]
            kind = r % 5
            if kind == 1:
                P[r, common] = Q[r, common] = 0
            elif kind == 2:
                P[r, only_p] = 0
                Q[r, common] = P[r, common] = 0
            elif kind == 3:
                Q[r, only_q] = 0
            elif kind == 4:
                P[r, cut[: n // 2]] = 0
                Q[r, cut[n // 2:]] = 0
        P, Q = P / P.sum(1, keepdims=True), Q / Q.sum(1, keepdims=True)
    return P, Q


@functools.cache
def _compiled():
    """Every level of :data:`NAMES` at once, jitted, vmapped and differentiated: one compile each."""
    fns = [dl.divergence(name, alpha) for name, alpha in NAMES]

    def levels(lp, lq):  # [..., n] -> [len(NAMES), ...]
        return jnp.stack([fn(lp, lq) for fn in fns])

    def finite_sums(lp, lq):  # [len(NAMES)]: the sum of each level over the rows where it is finite
        v = levels(lp, lq)
        return jnp.sum(jnp.where(jnp.isfinite(v), v, 0.0), axis=-1)

    return (jax.jit(levels), jax.jit(jax.vmap(levels, out_axes=1)), jax.jit(finite_sums),
            jax.jit(jax.jacrev(finite_sums, argnums=(0, 1))))


def test_levels_match_certifier():
    """Every level equals the numpy certifier's on laws with and without zeros, under jit and vmap."""
    P, Q = np.concatenate([_laws(np.random.default_rng(z), 200, 7, zeros=z) for z in (False, True)], axis=1)
    levels, batched, _, _ = _compiled()
    got = np.asarray(levels(_log(P), _log(Q)))
    by_vmap = np.asarray(batched(_log(P).reshape(8, 50, 7), _log(Q).reshape(8, 50, 7))).reshape(got.shape)
    for (name, alpha), g, v in zip(NAMES, got, by_vmap, strict=True):
        ref = np_divergence(name, alpha).level(P, Q)
        # measured: relative error at most 1.5e-14 (Rényi ½; the others 2e-15), +inf exactly where numpy's
        np.testing.assert_allclose(g, ref, rtol=1e-12, atol=1e-15, err_msg=f"{name} {alpha}")
        np.testing.assert_allclose(v, g, rtol=1e-14, atol=1e-16, err_msg=f"{name} {alpha} under vmap")
        assert np.isfinite(ref[200:]).sum() >= 40 and (name in ("tv", "hellinger") or np.isinf(ref).any())


def test_registry_and_validation():
    assert dl.renyi(1) is dl.kl and dl.renyi(math.inf) is dl.max_divergence
    assert dl.divergence("max") is dl.max_divergence and set(dl.DIVERGENCES) == {
        "kl", "reverse_kl", "tv", "chi2", "hellinger", "max"}
    lp, lq = np.log([0.5, 0.5]), np.log([0.25, 0.75])
    assert float(dl.level("renyi", lp, lq, alpha=2.0)) == float(dl.renyi(2.0)(lp, lq))
    for bad in [lambda: dl.divergence("renyi"), lambda: dl.divergence("kl", 2.0), lambda: dl.divergence("js"),
                lambda: dl.renyi(0.0), lambda: dl.kl(lp, lq[:1]), lambda: dl.wasserstein_1d(lp, lq, lp, 0.5),
                lambda: dl.log_lift(np.zeros((3, 2)), np.ones((1, 2))),
                lambda: dl.sinkhorn_wasserstein(lp, lq, np.ones((3, 3)), 0.1),
                lambda: dl.sinkhorn_wasserstein(lp, lq, np.ones((2, 2)), 0.0)]:
        with pytest.raises(ValueError):
            bad()


def test_gradients_finite_at_zeros():
    """The gradient of each level's sum over its finite rows has no NaN or inf, with zeros on either side."""
    P, Q = _laws(np.random.default_rng(2), 200, 7, zeros=True)
    levels, _, _, jacobian = _compiled()
    values = np.asarray(levels(_log(P), _log(Q)))
    with_zeros = ((P == 0) | (Q == 0)).any(1)
    assert (np.isfinite(values) & with_zeros).sum(1).min() >= 40  # every level has finite rows with zeros
    for (name, alpha), gp, gq in zip(NAMES, *jacobian(_log(P), _log(Q)), strict=True):
        assert bool(jnp.isfinite(gp).all() & jnp.isfinite(gq).all()), f"{name} {alpha}"


def test_gradients_match_finite_differences():
    """Directional derivatives at an interior point: autodiff against central differences (h = 1e-6)."""
    rng = np.random.default_rng(3)
    P, Q = _laws(rng, 200, 7, zeros=False)
    lp, lq = np.log(P), np.log(Q)
    dp, dq = rng.normal(size=lp.shape), rng.normal(size=lq.shape)
    _, _, finite_sums, jacobian = _compiled()
    gp, gq = jacobian(lp, lq)
    ad = np.sum(gp * dp, axis=(1, 2)) + np.sum(gq * dq, axis=(1, 2))
    h = 1e-6
    up, down = finite_sums(lp + h * dp, lq + h * dq), finite_sums(lp - h * dp, lq - h * dq)
    fd = (np.asarray(up) - np.asarray(down)) / (2 * h)
    # measured: within 2e-8 relative (h = 1e-6 in float64); max has no ties here
    np.testing.assert_allclose(ad, fd, rtol=1e-6)


def test_new_data_does_not_retrace():
    traces = []

    @jax.jit
    def kl(lp, lq):
        traces.append(1)
        return dl.kl(lp, lq)

    rng = np.random.default_rng(4)
    for zeros in (False, True, True):
        P, Q = _laws(rng, 10, 4, zeros)
        kl(_log(P), _log(Q))
    assert len(traces) == 1


def test_log_lift_matches_numpy():
    rng = np.random.default_rng(4)
    A = rng.dirichlet(np.ones(6), 5)
    A[A < 0.1] = 0.0
    A[:, 2] = 0.0  # an output no row emits
    A /= A.sum(1, keepdims=True)
    w = rng.dirichlet(np.ones(5), 3)
    w[0, :2] = 0.0
    w[1, :] = [0, 0, 0, 1, 0]
    got = jax.jit(dl.log_lift)(_log(A), w)
    ref = w @ A
    np.testing.assert_array_equal(np.isinf(got), ref == 0)
    np.testing.assert_allclose(np.exp(got), ref, rtol=1e-14, atol=0)  # measured: 2e-16 relative

    def kl_of_lifts(log_rows, weights):  # the first lifted law against the third: zeros on both sides
        lifted = dl.log_lift(log_rows, weights)
        return dl.kl(lifted[0], lifted[2])

    grads = jax.jit(jax.grad(kl_of_lifts, argnums=(0, 1)))(_log(A), w)
    assert all(bool(jnp.isfinite(g).all()) for g in grads)


# -- transport -----------------------------------------------------------------------------------


@pytest.mark.parametrize("order", [1.0, 2.0, 3.0])
def test_wasserstein_1d_matches_exact(order):
    rng = np.random.default_rng(5)
    n = 9
    x = np.sort(rng.normal(size=n))
    P, Q = _laws(rng, 20, n, zeros=True)
    got = np.asarray(jax.jit(lambda p, q: dl.wasserstein_1d(p, q, x, order))(P, Q))
    by_quantiles = [wasserstein_1d(p, q, x, order).value for p, q in zip(P, Q, strict=True)]
    by_pot = [wasserstein(p, q, np.abs(x[:, None] - x[None]), order).value for p, q in zip(P, Q, strict=True)]
    # measured: 2e-15 relative to both
    np.testing.assert_allclose(got, by_quantiles, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(got, by_pot, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("order", [1.0, 2.0])
def test_wasserstein_1d_shift(order):
    """A histogram and its copy moved by k steps of a uniform grid are ``k·step`` apart, every order."""
    step, n = 0.25, 12
    x = step * np.arange(n) - 1.0
    base = np.zeros(n)
    base[:7] = np.random.default_rng(6).dirichlet(np.ones(7))
    shifted = np.stack([np.roll(base, k) for k in range(n - 7 + 1)])
    got = jax.jit(lambda p, q: dl.wasserstein_1d(p, q, x, order))(base, shifted)
    np.testing.assert_allclose(got, step * np.arange(n - 7 + 1), rtol=0, atol=1e-12)


@pytest.mark.parametrize("order", [1.0, 2.0])
def test_wasserstein_1d_gradient(order):
    rng = np.random.default_rng(7)
    x = np.sort(rng.random(6))
    p, q = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
    dp = rng.normal(size=6)
    dp -= dp.mean()

    power = jax.jit(jax.value_and_grad(lambda a: dl.wasserstein_1d(a, q, x, order, root=False)))
    g = power(p)[1]
    h = 1e-7
    fd = (float(power(p + h * dp)[0]) - float(power(p - h * dp)[0])) / (2 * h)
    assert abs(float(g @ dp) - fd) <= 1e-6 * max(1.0, abs(fd))


@pytest.mark.parametrize(("n", "dim", "order"), [(8, 1, 1.0), (20, 2, 1.0), (12, 2, 2.0)])
def test_sinkhorn_approaches_exact(n, dim, order):
    """⟨π, C⟩ of the entropic plan is ≥ W_μ^μ − ½·marginal error·max C and tends to it as ε → 0.

    Measured relative excess ⟨π, C⟩/W_μ^μ − 1 at ε = 0.1, 1e-2, 1e-3, 3e-4: n = 8 on a line: 2.8e-2,
    6.3e-6, −3e-10, −9e-10 (within the marginal error); n = 20 in the plane: 0.25, 1.6e-3, 1.8e-4, 9.6e-5;
    μ = 2: 0.72, 3.4e-2, 3.8e-4, 1.2e-5. Marginal errors ≤ 1e-9 (the threshold).
    """
    rng = np.random.default_rng(8 + n)
    pts = rng.random((n, dim))
    ground = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    p, q = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(n))
    p[:2] = 0.0
    p /= p.sum()
    exact = wasserstein(p, q, ground, order).value ** order
    eps = jnp.array([1e-1, 1e-2, 1e-3, 3e-4])
    out = jax.jit(jax.vmap(lambda e: dl.sinkhorn_wasserstein(p, q, ground, e, order)))(eps)
    assert bool(out.converged.all())
    cmax = float((ground**order).max())
    assert bool((out.cost >= exact - 0.5 * out.marginal_error * cmax - 1e-12).all())
    gap = np.asarray(out.cost) / exact - 1.0
    assert np.all(np.diff(gap) <= 1e-9)  # the excess shrinks with ε
    assert gap[-2] <= 1e-2 and abs(gap[-1]) <= 1e-3
    np.testing.assert_allclose(out.value, np.asarray(out.cost) ** (1 / order), rtol=1e-14)


def test_sinkhorn_batch_and_gradients():
    """jit(vmap) agrees with one law at a time; gradients are finite with zeros and match differences."""
    rng = np.random.default_rng(9)
    n = 10
    x = np.sort(rng.random(n))
    ground = np.abs(x[:, None] - x[None])
    P, Q = _laws(rng, 5, n, zeros=True)
    P[:, 3] = 0.0  # an output no P emits: gradient 0 there, finite elsewhere
    P /= P.sum(1, keepdims=True)

    def cost(p, q):
        return dl.sinkhorn_wasserstein(p, q, ground, 0.05).cost

    one = jax.jit(cost)
    value, (gp, gq) = jax.jit(jax.vmap(jax.value_and_grad(cost, argnums=(0, 1))))(P, Q)
    np.testing.assert_allclose(value, [one(p, q) for p, q in zip(P, Q, strict=True)], rtol=1e-9)
    assert bool(jnp.isfinite(gp).all() & jnp.isfinite(gq).all()) and bool((gp[:, 3] == 0).all())
    on = P[0] > 0
    dp = rng.normal(size=n) * on
    dp -= on * dp.sum() / on.sum()  # stays on the simplex and on P's support
    h = 1e-6
    fd = (float(one(P[0] + h * dp, Q[0])) - float(one(P[0] - h * dp, Q[0]))) / (2 * h)
    assert abs(float(gp[0] @ dp) - fd) <= 1e-6 * max(1.0, abs(fd))  # measured: 8e-11 relative


def test_sinkhorn_divergence():
    """S_ε(P, P) = 0 and S_ε(P, Q) is near W1 at a small ε (forward only: its unrolled gradient compiles
    for ~10 s)."""
    rng = np.random.default_rng(10)
    n = 12
    x = np.sort(rng.random(n))
    ground = np.abs(x[:, None] - x[None])
    p, q = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(n))
    div = jax.jit(jax.vmap(lambda a, b: dl.sinkhorn_divergence(a, b, ground, 1e-3)))
    same, apart = np.asarray(div(np.stack([p, p]), np.stack([p, q])))
    assert abs(same) <= 1e-9  # measured: −4e-11 (three Sinkhorn runs, each to a 1e-9 threshold)
    assert abs(apart / wasserstein(p, q, ground).value - 1.0) <= 2e-2  # measured: 0.9 % below W1
