"""The JAX divergence and transport levels against the numpy certifier and exact OT (POT)."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffpriv.measures._divergences import divergence as np_divergence
from diffpriv.measures._transport import wasserstein, wasserstein_1d
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


def test_symmetric_levels_are_symmetric():
    """The divergences flagged symmetric (the residuals compute them once for both directions) give
    the same level both ways, with zeros on either side; the others do not."""
    laws = [_laws(np.random.default_rng(z + 7), 200, 7, zeros=z) for z in (False, True)]
    P, Q = np.concatenate(laws, axis=1)
    levels = _compiled()[0]
    forward, backward = np.asarray(levels(_log(P), _log(Q))), np.asarray(levels(_log(Q), _log(P)))
    flagged = [(name, alpha) for name, alpha in NAMES if dl.symmetric(name, alpha)]
    assert flagged == [("tv", None), ("hellinger", None), ("renyi", 0.5)]
    for (name, alpha), f, b in zip(NAMES, forward, backward, strict=True):
        both = np.isfinite(f) & np.isfinite(b)
        if dl.symmetric(name, alpha):
            np.testing.assert_array_equal(np.isfinite(f), np.isfinite(b), err_msg=f"{name} {alpha}")
            np.testing.assert_allclose(f[both], b[both], rtol=1e-13, atol=1e-16, err_msg=f"{name} {alpha}")
        else:
            assert np.max(np.abs(f[both] - b[both])) > 1e-3, f"{name} {alpha}"


def test_registry_and_validation():
    assert dl.renyi(1) is dl.kl and dl.renyi(math.inf) is dl.max_divergence
    assert dl.divergence("max") is dl.max_divergence and set(dl.DIVERGENCES) == {
        "kl", "reverse_kl", "tv", "chi2", "hellinger", "max"}
    lp, lq = np.log([0.5, 0.5]), np.log([0.25, 0.75])
    assert float(dl.level("renyi", lp, lq, alpha=2.0)) == float(dl.renyi(2.0)(lp, lq))
    for bad in [lambda: dl.divergence("renyi"), lambda: dl.divergence("kl", 2.0), lambda: dl.divergence("js"),
                lambda: dl.renyi(0.0), lambda: dl.kl(lp, lq[:1]), lambda: dl.wasserstein_1d(lp, lq, lp, 0.5),
                lambda: dl.log_lift(np.zeros((3, 2)), np.ones((1, 2)))]:
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


