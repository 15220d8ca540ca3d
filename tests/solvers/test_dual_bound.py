"""The smoothed linear dual's L-BFGS bound (``diffpriv.solvers._dual_bound``): below HiGHS's
optimum at every call and from any multipliers, the exact dual (float64) at the point its float32
steps reach, rising between restarts; mirror-prox's runs of hockey-stick bounds alone converge
sooner with it."""

import jax.numpy as jnp
import numpy as np
import pytest

import diffpriv as dp
from diffpriv.solvers._dual_bound import DualBound
from diffpriv.solvers._linear import linear_data, lower_bound, operator, soft_min
from diffpriv.solvers._optimizer import Optimizer
from diffpriv.solvers._x64 import float64


def hockey(n: int, tv: bool) -> dp.Problem:
    """(0.5, 0.02)-LDP or TV-DP at 0.1 between the 4-neighbour cells of an ``n × n`` grid."""
    dom = dp.Domain.grid(n, n, 1.0)
    prior = np.random.default_rng(n).dirichlet(np.ones(n * n))
    pairs = dp.problems.pairs_within(dom, 1.0)
    constraint = (dp.DivergenceDP(divergence="tv", epsilon=0.1, pairs=pairs) if tv
                  else dp.LocalDP(epsilon=0.5, delta=0.02, pairs=pairs))
    return dp.Problem(dom, dom, dom.distances(dom), prior, constraints=(constraint,))


@pytest.mark.parametrize("tv", [False, True])
@float64
def test_the_bound_holds_at_every_call_and_rises(tv):
    problem = hockey(5, tv)
    optimum = dp.solvers.lp(problem).bound
    data = linear_data(problem, nonlinear=True)
    op = operator(data)
    rng = np.random.default_rng(0)
    for scale in (0.0, 1e-3, 1.0):  # from nothing, small and large random multipliers
        dual = DualBound(data, op)
        u = jnp.asarray(scale * rng.uniform(size=(op.delta.shape[0], data.mask.shape[1])))
        start = float(lower_bound(data, u, op=op))
        bounds = [dual.raised(u) for _ in range(6)]  # the third and sixth calls start again from u
        assert max(bounds) <= optimum * (1 + 1e-9)
        assert dual.value == pytest.approx(float(lower_bound(data, dual.u, op=op)), rel=1e-12)
        assert bool(jnp.all(dual.u >= 0)) and dual.u.dtype == jnp.float32  # steps in float32
        assert start < bounds[0] < bounds[1] and bounds[2] < bounds[3] < bounds[4], (scale, start, bounds)


@pytest.mark.parametrize("tv", [pytest.param(False, marks=pytest.mark.slow), True])  # (approximate LDP: 24 s)
def test_mirror_prox_alone_reports_the_dual_bound(tv, monkeypatch):
    """The run's bound is the L-BFGS bound where that is higher; without it (the call replaced)
    the run takes more steps: 2,000 against 1,600 (approximate LDP), 1,600 against 1,200 (TV-DP)."""
    from diffpriv.solvers import _dual_bound

    problem = hockey(8, tv)
    optimum = dp.solvers.lp(problem).bound
    with_dual = Optimizer(method="mirror", gap_tol=1e-2)(problem)
    monkeypatch.setattr(_dual_bound.DualBound, "raised", lambda self, u: -np.inf)
    without = Optimizer(method="mirror", gap_tol=1e-2)(problem)
    for result in (with_dual, without):
        assert result.status == "converged" and result.lower_bound <= optimum * (1 + 1e-9)
        assert dp.certify(problem, result.table).loss <= optimum * (1 + 1e-2)
    assert with_dual.steps < without.steps


@float64
def test_the_soft_min_lies_within_tau_ln_y_below_the_row_minimum_over_allowed_outputs():
    rng = np.random.default_rng(3)
    z = rng.normal(size=(6, 9))
    mask = rng.uniform(size=z.shape) < 0.6
    mask[:, 0] = True
    z[~mask] = -50.0  # a left-out output must not count, however low
    tau = rng.uniform(0.01, 0.5, size=6)
    soft = np.asarray(soft_min(jnp.asarray(z), jnp.asarray(mask), jnp.asarray(tau)))
    hard = np.where(mask, z, np.inf).min(axis=1)
    allowed = mask.sum(axis=1)
    assert np.all(soft <= hard + 1e-12)
    assert np.all(soft >= hard - tau * np.log(allowed) - 1e-12)
    brute = -tau * np.log(np.where(mask, np.exp(-z / tau[:, None]), 0.0).sum(axis=1))
    np.testing.assert_allclose(soft, brute, rtol=1e-12)
