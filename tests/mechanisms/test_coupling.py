"""The coupling mechanism: the paper's example, Prop. 2, Thm. 3, W∞ and the barycenter."""

import itertools
import math

import numpy as np
import ot
import pytest
import scipy.optimize
from hypothesis import given, settings
from hypothesis import strategies as st

import diffpriv as dp
from diffpriv.mechanisms import _coupling as cp
from diffpriv.mechanisms._registry import MECHANISMS

# -- independent references (scipy's HiGHS on the transport polytope) -------------------------


def transport_lp(a, b, c, allowed=None, objective=True):
    """``min ⟨c, γ⟩`` over couplings of ``a`` and ``b`` supported on ``allowed`` (HiGHS)."""
    nx, ny = c.shape
    allowed = np.ones((nx, ny), bool) if allowed is None else allowed
    a_eq = np.zeros((nx + ny, nx * ny))
    for x, y in itertools.product(range(nx), range(ny)):
        a_eq[x, x * ny + y] = a_eq[nx + y, x * ny + y] = 1.0
    bounds = [(0, None) if allowed[x, y] else (0, 0) for x in range(nx) for y in range(ny)]
    cost = c.ravel() if objective else np.zeros(nx * ny)
    return scipy.optimize.linprog(cost, A_eq=a_eq, b_eq=np.concatenate([a, b]), bounds=bounds,
                                  method="highs")


def w1(a, b, c):
    res = transport_lp(a, b, c)
    assert res.status == 0
    return res.fun


def random_case(rng, *, zeros=True):
    """Random ``λ [S, X]`` (maybe with zeros), ``μ [Y]``, non-negative cost ``[X, Y]``."""
    ns, nx, ny = rng.integers(1, 4), rng.integers(2, 6), rng.integers(2, 6)
    lam = rng.dirichlet(np.ones(nx), size=ns)
    if zeros:
        lam[rng.random(lam.shape) < 0.2] = 0.0
        lam[np.arange(ns), rng.integers(0, nx, ns)] += 0.1  # every row keeps some mass
        lam /= lam.sum(axis=1, keepdims=True)
    mu = rng.dirichlet(np.ones(ny))
    if zeros and rng.random() < 0.3:
        mu[rng.integers(0, ny)] = 0.0
        mu /= mu.sum()
    cost = rng.random((nx, ny)) * rng.choice([1.0, 10.0])
    return lam, mu, cost


def output_laws(lam, table):
    return np.einsum("sx,sxy->sy", lam, table)


# -- the paper's example ------------------------------------------------------------------------

FIG2_LAMBDA = np.array([0.2, 0.5, 0.3])  # on {1, 2, 3} (Kawamoto & Murakami 2019, Fig. 2)
FIG2_MU = np.array([0.3, 0.2, 0.5])
FIG2_COST = np.abs(np.subtract.outer(np.arange(1.0, 4.0), np.arange(1.0, 4.0)))


def test_fig2_coupling_and_expected_loss():
    table = cp.coupling_mechanism(FIG2_LAMBDA, FIG2_MU, FIG2_COST)[0]
    # Example 2: input 2 goes to 1 with 20 %, to 3 with 40 %; the coupling moves 0.1 and 0.2
    np.testing.assert_allclose(table[1], [0.2, 0.4, 0.4], atol=1e-15)
    plan = FIG2_LAMBDA[:, None] * table
    np.testing.assert_allclose(plan, [[0.2, 0, 0], [0.1, 0.2, 0.2], [0, 0, 0.3]], atol=1e-15)
    np.testing.assert_allclose(FIG2_LAMBDA @ table, FIG2_MU, atol=1e-15)
    assert float(np.sum(plan * FIG2_COST)) == pytest.approx(0.3, abs=1e-15)  # the paper's 0.3


def test_fig2_through_the_registry_and_certifier():
    dom = dp.Domain(("1", "2", "3"), np.arange(1.0, 4.0))
    problem = dp.Problem(dom, dom, dom.distances(dom), FIG2_LAMBDA,
                         items=(dp.Item("lambda", FIG2_LAMBDA), dp.Item("mu", FIG2_MU)))
    table = MECHANISMS["coupling"](problem, target="mu", source="prior")
    cert = dp.certify(problem, table, repair=False)
    assert cert.ok and cert.repair_t == 0.0
    assert cert.loss == pytest.approx(0.3, abs=1e-15)
    # the worst-case variant: here every mass moves by at most 1 either way
    worst = MECHANISMS["coupling"](problem, target="mu", source="prior", worst=True)
    assert np.max(np.where(worst[0] > 0, FIG2_COST, 0)) == 1.0


# -- exact knowledge: every output law is the target -------------------------------------------


def _profile_problem(rng, lam, eps, coords=None):
    ns, nx = lam.shape
    dom = dp.Domain(tuple(f"x{i}" for i in range(nx)), rng.random((nx, 2)) if coords is None else coords)
    items = tuple(dp.Item(f"p{s}", lam[s], profile=s) for s in range(ns))
    pairs = tuple(itertools.combinations(range(ns), 2))
    return dp.Problem(dom, dom, dom.distances(dom), lam / ns, items=items,
                      constraints=(dp.DistP(pairs=pairs, epsilon=eps),),
                      profiles=tuple(f"s{s}" for s in range(ns)))


@pytest.mark.parametrize("target", ["barycenter", "uniform", "p1"])
@pytest.mark.parametrize("worst", [False, True])
def test_exact_knowledge_makes_every_profile_output_the_target(target, worst):
    rng = np.random.default_rng(7)
    lam = rng.dirichlet(np.ones(6), size=3)
    lam[0, 2] = lam[2, 4] = 0.0  # rows with λ[x] = 0 take the empty-row rule
    lam /= lam.sum(axis=1, keepdims=True)
    problem = _profile_problem(rng, lam, 1e-6)
    table = MECHANISMS["coupling"](problem, target=target, worst=worst)
    laws = output_laws(lam, table)
    np.testing.assert_allclose(laws, np.broadcast_to(laws[0], laws.shape), rtol=0, atol=1e-15)
    cert = dp.certify(problem, table, repair=False)
    assert cert.ok
    assert cert.constraints[0].level <= 1e-13  # 0 up to rounding
    if target == "uniform":
        np.testing.assert_allclose(laws[0], np.full(6, 1 / 6), atol=1e-15)


def test_empty_rows_report_the_target_within_the_support():
    lam = np.array([[0.5, 0.0, 0.5], [0.2, 0.3, 0.5]])
    mu = np.array([0.2, 0.3, 0.5])
    table = cp.coupling_mechanism(lam, mu, FIG2_COST)
    np.testing.assert_array_equal(table[0, 1], mu)
    allowed = np.ones((2, 3, 3), bool)
    allowed[0, 1, 2] = False
    table = cp.coupling_mechanism(lam, mu, FIG2_COST, allowed=allowed)
    np.testing.assert_allclose(table[0, 1], [0.4, 0.6, 0.0], atol=1e-15)
    assert np.all(table[~allowed] == 0)
    allowed[1, :, 2] = False  # nothing may reach the output that must receive 0.5
    with pytest.raises(cp.CouplingError, match="no coupling"):
        cp.coupling_mechanism(lam, mu, FIG2_COST, allowed=allowed)


# -- Prop. 2: the loss is W1 ------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_expected_loss_is_the_transport_cost(seed):
    rng = np.random.default_rng(seed)
    lam, mu, cost = random_case(rng)
    table = cp.coupling_mechanism(lam, mu, cost)
    np.testing.assert_allclose(table.sum(axis=-1), 1.0, atol=1e-15)
    np.testing.assert_allclose(output_laws(lam, table), np.broadcast_to(mu, (lam.shape[0], mu.size)),
                               atol=1e-14)
    for s in range(lam.shape[0]):
        loss = float(lam[s] @ np.sum(table[s] * cost, axis=1))
        assert loss == pytest.approx(w1(lam[s], mu, cost), rel=1e-9, abs=1e-12)


# -- Thm. 3: approximate knowledge -------------------------------------------------------------


def max_divergence(p, q):
    """``max_y ln(p/q)`` over ``supp p`` (``+∞`` if ``q = 0 < p``)."""
    on = p > 0
    with np.errstate(divide="ignore"):
        return float(np.max(np.log(p[on]) - np.log(q[on])))


def f_divergence(p, q, f):
    on = q > 0
    assert np.all(p[~on] == 0)
    return float(np.sum(q[on] * f(p[on] / q[on])))


F = {
    "kl": lambda t: t * np.log(t),
    "tv": lambda t: 0.5 * np.abs(t - 1),
    "chi2": lambda t: (t - 1) ** 2,
    "hellinger": lambda t: 0.5 * (np.sqrt(t) - 1) ** 2,
}


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.floats(0.01, 1.5))
def test_theorem3_bounds_for_approximate_knowledge(seed, size):
    rng = np.random.default_rng(seed)
    lam, mu, cost = random_case(rng)
    lam_hat = cp.perturb_distributions(lam, size, rng)
    on = lam > 0
    assert np.array_equal(lam_hat > 0, on)
    eps = float(np.max(np.abs(np.log(lam_hat[on]) - np.log(lam[on]))))  # both D∞, exactly
    assert eps <= size * (1 + 1e-12)
    if rng.random() < 0.5:
        mu = cp.barycenter(lam_hat, np.ones(lam.shape[0]), cost)
    table = cp.coupling_mechanism(lam_hat, mu, cost)
    laws = output_laws(lam, table)  # the true λ_s, not λ̂_s
    tol = 1e-12
    for s, t in itertools.permutations(range(lam.shape[0]), 2):
        p, q = laws[s], laws[t]
        assert max_divergence(p, q) <= 2 * eps + tol
        assert f_divergence(p, q, F["kl"]) <= 2 * eps * math.exp(eps) + tol
        for name in ("tv", "chi2", "hellinger"):
            bound = math.exp(eps) * float(F[name](np.exp(2 * eps)))
            assert f_divergence(p, q, F[name]) <= bound + tol, name
        # part 3 does not hold for reverse KL (f = −ln t): its bound e^ε·f(e^{2ε}) = −2εe^ε < 0;
        # every ratio lies in [e^{−2ε}, e^{2ε}], so the level is at most max f there = 2ε
        reverse = f_divergence(p, q, lambda t: -np.log(t))
        assert reverse <= 2 * eps + tol
        if np.abs(p - q).max() > 1e-9:
            assert reverse > math.exp(eps) * -2 * eps  # the paper's bound, which fails
    if lam.shape[0] > 1:  # the certifier's exact level for the true λ next to the bound 2ε
        nx, ny = cost.shape
        dom_x = dp.Domain(tuple(f"x{i}" for i in range(nx)))
        dom_y = dp.Domain(tuple(f"y{i}" for i in range(ny)))
        items = tuple(dp.Item(f"p{s}", lam[s], profile=s) for s in range(lam.shape[0]))
        problem = dp.Problem(dom_x, dom_y, cost, lam / lam.shape[0], items=items,
                             constraints=(dp.DistP(pairs=tuple(itertools.combinations(
                                 range(lam.shape[0]), 2)), epsilon=2 * eps + 1e-6),),
                             profiles=tuple(f"s{s}" for s in range(lam.shape[0])))
        cert = dp.certify(problem, table, repair=False)
        assert cert.ok
        level = cert.constraints[0].level
        worst = max(max_divergence(laws[s], laws[t])
                    for s, t in itertools.permutations(range(lam.shape[0]), 2))
        assert level == pytest.approx(worst, abs=1e-12)
        assert level <= 2 * eps + 1e-12


def test_perturbed_registry_mechanism_meets_theorem3():
    rng = np.random.default_rng(3)
    lam = rng.dirichlet(np.ones(5), size=3)
    for size in (0.05, 0.3):
        problem = _profile_problem(rng, lam, 2 * size + 1e-6)
        table = MECHANISMS["coupling"](problem, perturb=size, seed=11)
        cert = dp.certify(problem, table, repair=False)
        assert cert.ok and 0 < cert.constraints[0].level <= 2 * size


# -- the worst-case (W∞) variant -----------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_bottleneck_coupling_is_the_least_threshold(seed):
    rng = np.random.default_rng(seed)
    lam, mu, cost = random_case(rng)
    cost = np.round(cost, 1)  # ties between costs
    a = lam[0]
    plan, t = cp.bottleneck_coupling(a, mu, cost)
    np.testing.assert_allclose(plan.sum(1), a, atol=1e-12)
    np.testing.assert_allclose(plan.sum(0), mu, atol=1e-12)
    assert np.max(cost[plan > 0]) == t
    below = cost[(cost < t) & (a[:, None] > 0) & (mu[None, :] > 0)]
    if below.size:  # no coupling lives on {c < t}: HiGHS agrees
        res = transport_lp(a, mu, cost, allowed=cost < t, objective=False)
        assert res.status == 2  # infeasible
    best = transport_lp(a, mu, cost, allowed=cost <= t)
    assert float(np.sum(plan * cost)) == pytest.approx(best.fun, rel=1e-9, abs=1e-12)
    table = cp.coupling_mechanism(a, mu, cost, worst=True)[0]
    optimal = cp.coupling_mechanism(a, mu, cost)[0]
    on = a > 0
    assert np.max(np.where(table[on] > 0, cost[on], -np.inf)) == t
    assert np.max(np.where(optimal[on] > 0, cost[on], -np.inf)) >= t
    assert a @ np.sum(table * cost, 1) >= a @ np.sum(optimal * cost, 1) - 1e-12


# -- the barycenter ------------------------------------------------------------------------------


def total_cost(lam, w, mu, cost):
    return sum(wi * w1(li, mu, cost) for li, wi in zip(lam, w, strict=True))


def test_barycenter_on_a_line_is_the_weighted_median_of_cdfs():
    """In 1-D, ``W1(a, b) = Σ_k gap_k |F_a(k) − F_b(k)|``: the barycenter's CDF is a weighted
    median of the CDFs at every point, which gives the optimal value independently."""
    rng = np.random.default_rng(5)
    for _ in range(5):
        n = int(rng.integers(3, 8))
        pts = np.sort(rng.random(n) * 10)
        cost = np.abs(np.subtract.outer(pts, pts))
        lam = rng.dirichlet(np.ones(n), size=3)
        w = rng.random(3) + 0.1
        mu = cp.barycenter(lam, w, cost)
        cdf = np.cumsum(lam, axis=1)[:, :-1]  # [S, n - 1]
        value = 0.0
        for k, gap in enumerate(np.diff(pts)):
            value += gap * min(np.sum(w * np.abs(cdf[:, k] - g)) for g in cdf[:, k])
        assert total_cost(lam, w, mu, cost) == pytest.approx(value, rel=1e-9, abs=1e-12)


def test_barycenter_beats_a_grid_of_the_simplex():
    rng = np.random.default_rng(9)
    for _ in range(3):
        ns, nx = int(rng.integers(2, 4)), int(rng.integers(2, 5))
        lam = rng.dirichlet(np.ones(nx), size=ns)
        cost = rng.random((nx, 3))
        w = rng.random(ns) + 0.1
        best = total_cost(lam, w, cp.barycenter(lam, w, cost), cost)
        n = 24
        grid = [np.array([i, j, n - i - j]) / n for i in range(n + 1) for j in range(n + 1 - i)]
        values = [sum(wi * ot.emd2(li, g, cost) for li, wi in zip(lam, w, strict=True)) for g in grid]
        # Optimal: no grid point is better; and every μ is within 1/n in TV of a grid point,
        # where the total cost moves by at most Σw · max c · TV.
        assert best <= min(values) + 1e-9
        assert min(values) <= best + w.sum() * cost.max() / n


# -- solver failures raise -------------------------------------------------------------------


def test_a_solver_that_stops_early_raises(monkeypatch):
    real = ot.emd

    def stopped(*args, **kwargs):
        plan, log = real(*args, **kwargs)
        return plan, {**log, "result_code": 3, "warning": "numItermax reached before optimality"}

    monkeypatch.setattr(ot, "emd", stopped)
    with pytest.raises(cp.CouplingError, match="numItermax"):
        cp.coupling_mechanism(FIG2_LAMBDA, FIG2_MU, FIG2_COST)


def test_inexact_marginals_raise(monkeypatch):
    real = ot.emd

    def sloppy(*args, **kwargs):
        plan, log = real(*args, **kwargs)
        return plan * (1 + 1e-9), log

    monkeypatch.setattr(ot, "emd", sloppy)
    with pytest.raises(cp.CouplingError, match="marginals"):
        cp.optimal_coupling(FIG2_LAMBDA, FIG2_MU, FIG2_COST)


def test_registry_validates_parameters():
    rng = np.random.default_rng(0)
    problem = _profile_problem(rng, rng.dirichlet(np.ones(3), size=2), 0.1)
    with pytest.raises(ValueError, match="target"):
        MECHANISMS["coupling"](problem, target="nowhere")
    with pytest.raises(ValueError, match="perturb"):
        MECHANISMS["coupling"](problem, perturb=-1)
    with pytest.raises(ValueError, match="worst"):
        MECHANISMS["coupling"](problem, worst="maybe")


def test_optimal_coupling_does_not_depend_on_the_scale_of_the_cost():
    """POT's network simplex pivots with an absolute tolerance: the cost is rescaled exactly
    (by a power of 2) before solving, so tiny costs give the same optimal plan."""
    rng = np.random.default_rng(3)
    for _ in range(3):
        a, b = rng.dirichlet(np.ones(30)), rng.dirichlet(np.ones(30))
        cost = rng.random((30, 30))
        best = float(np.sum(cp.optimal_coupling(a, b, cost) * cost))
        for scale in (1e-12, 1e8):
            plan = cp.optimal_coupling(a, b, cost * scale)
            assert float(np.sum(plan * cost)) == pytest.approx(best, rel=1e-9)
