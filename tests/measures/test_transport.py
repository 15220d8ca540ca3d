"""Exact transport (diffpriv.measures._transport): W_p, W∞, the 1-D formula, and the checks
of its witnesses against independent references (HiGHS LPs, brute force over thresholds)."""

import itertools
import subprocess
import sys
import time

import numpy as np
import pytest
import scipy.optimize

from diffpriv.measures import _transport as tr

HIGHS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}


# -- independent references ---------------------------------------------------------------------


def transport_lp(a, b, cost, allowed=None):
    """``min ⟨cost, π⟩`` over couplings of ``a``, ``b`` on ``allowed`` (HiGHS); None if infeasible."""
    nx, ny = cost.shape
    allowed = np.ones((nx, ny), bool) if allowed is None else allowed
    a_eq = np.zeros((nx + ny, nx * ny))
    for x, y in itertools.product(range(nx), range(ny)):
        a_eq[x, x * ny + y] = a_eq[nx + y, x * ny + y] = 1.0
    bounds = [(0, None) if ok else (0, 0) for ok in allowed.ravel()]
    res = scipy.optimize.linprog(cost.ravel(), A_eq=a_eq, b_eq=np.concatenate([a, b]), bounds=bounds,
                                 method="highs", options=HIGHS)
    assert res.status in (0, 2), res.message
    return res.fun if res.status == 0 else None


def w_infinity_brute(a, b, d):
    """The least distance ``t`` whose cells ``{d ≤ t}`` carry a coupling (an LP per threshold)."""
    for t in np.unique(d):
        if transport_lp(a, b, np.zeros_like(d), allowed=d <= t) is not None:
            return t
    raise AssertionError("unreachable")


def points_metric(rng, n, dim=2):
    x = rng.random((n, dim))
    return np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))


def random_pair(rng, nx, ny, zeros=True):
    a, b = rng.dirichlet(np.ones(nx)), rng.dirichlet(np.ones(ny))
    if zeros and nx > 2:
        a[rng.integers(nx)] = 0.0
        a /= a.sum()
    return a, b


def dyadic(rng, n, bits=4):
    """A distribution whose masses are multiples of 2^-bits: sums and plans are exact in float64."""
    counts = rng.multinomial(2**bits, np.ones(n) / n)
    return counts / 2.0**bits


# -- W_p --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0])
def test_shifted_histogram_moves_by_the_shift(p):
    """A histogram and its copy shifted by s on a line: W_p = s for every p (a translation)."""
    rng = np.random.default_rng(0)
    x = np.arange(20.0)
    h = np.zeros(20)
    h[:12] = rng.random(12)
    h /= h.sum()
    for s in (1, 3, 8):
        g = np.roll(h, s)
        d = np.abs(x[:, None] - x[None, :])
        res = tr.wasserstein(h, g, d, p)
        assert res.value == pytest.approx(s, rel=1e-12)
        assert tr.wasserstein_1d(h, g, x, p).value == pytest.approx(s, rel=1e-12)
        lo, up = tr.check_dual(h, g, d, *res.dual, p=p), tr.check_coupling(h, g, d, res.plan, p)
        assert lo <= s <= up and up - lo < 1e-9  # rounding terms scale with max(ground)^p = 19^p


@pytest.mark.parametrize("p", [1.0, 1.5, 2.0, 3.0])
def test_quantile_formula_agrees_with_network_simplex(p):
    """1-D supports with ties, zeros and unequal spacing: quantile functions vs ``ot.emd``."""
    rng = np.random.default_rng(1)
    for _ in range(20):
        n = int(rng.integers(2, 25))
        x = np.sort(rng.choice([0.0, 0.5, 1.0, 2.5, 4.0, 7.0], n) + rng.random(n) * rng.integers(0, 2))
        a, b = random_pair(rng, n, n)
        d = np.abs(x[:, None] - x[None, :])
        one, emd = tr.wasserstein_1d(a, b, x, p), tr.wasserstein(a, b, d, p)
        assert one.value == pytest.approx(emd.value, rel=1e-11, abs=1e-13)
        assert tr.check_coupling(a, b, d, one.plan, p) >= emd.value  # the monotone plan is a coupling
        assert tr.check_coupling(a, b, d, one.plan, p) == pytest.approx(emd.value, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("p", [1.0, 2.0, 2.5])
def test_network_simplex_agrees_with_highs(p):
    """Rectangular random costs with empty rows and columns: W_p^p equals the LP optimum to 1e-9,
    and the checks bracket it."""
    rng = np.random.default_rng(2)
    for _ in range(15):
        nx, ny = rng.integers(2, 7, size=2)
        a, b = random_pair(rng, int(nx), int(ny))
        d = rng.random((nx, ny)) * rng.choice([1.0, 10.0])
        res = tr.wasserstein(a, b, d, p)
        exact = transport_lp(a, b, d**p)
        assert res.value**p == pytest.approx(exact, abs=1e-9)
        lo, up = tr.check_dual(a, b, d, *res.dual, p=p), tr.check_coupling(a, b, d, res.plan, p)
        assert lo**p <= exact + 1e-9 and up**p >= exact - 1e-9 and up - lo < 1e-10
        f, g = res.dual  # the dual is feasible on every cell, also off the supports
        assert np.all(f[:, None] + g[None, :] <= d**p + 1e-12)


def test_checks_bound_the_truth_for_any_witness():
    """Not only optimal witnesses: any coupling gives an upper bound, any potentials (even
    infeasible ones, their violation is subtracted) a lower bound; a plan that drops mass
    is charged ``η·D^p``."""
    rng = np.random.default_rng(3)
    for _ in range(30):
        n = int(rng.integers(2, 8))
        d = points_metric(rng, n)
        a, b = random_pair(rng, n, n)
        p = float(rng.choice([1.0, 2.0, 3.0]))
        truth = transport_lp(a, b, d**p) ** (1 / p)
        opt = tr.wasserstein(a, b, d, p).plan
        t = rng.random()
        mixed = (1 - t) * opt + t * np.outer(a, b)  # a coupling, not optimal
        assert tr.check_coupling(a, b, d, mixed, p) >= truth - 1e-12
        cheat = opt.copy()  # drop 1e-4 of mass from the most expensive cell in use
        i, j = np.unravel_index(np.argmax(np.where(opt > 1e-3, d, -1)), d.shape)
        cheat[i, j] -= 1e-4
        assert np.sum(cheat * d**p) < truth**p
        assert tr.check_coupling(a, b, d, cheat, p, tol=1e-3) >= truth
        f, g = rng.normal(size=n), rng.normal(size=n)
        assert tr.check_dual(a, b, d, f, g, p) <= truth + 1e-12


@pytest.mark.parametrize("scale", [1e-12, 1e-8, 1.0, 1e8])
def test_checks_bracket_the_solver_at_any_scale(scale):
    """Distances from 1e-12 to 1e8 times a random metric, masses down to 1e-30: the solver is
    scale-invariant (unscaled, POT stopped 4 % above the optimum at 1e-12), the two checks
    bracket its value, and the gap is a few ulps of the largest cost."""
    rng = np.random.default_rng(10)
    for _ in range(10):
        n = int(rng.integers(2, 30))
        d = points_metric(rng, n)
        a, b = random_pair(rng, n, n)
        a[0] = 1e-30
        a /= a.sum()
        unit = {p: tr.wasserstein(a, b, d, p).value for p in (1.0, 2.0)}
        d = d * scale
        for p in (1.0, 2.0):
            res = tr.wasserstein(a, b, d, p)
            assert res.value == pytest.approx(scale * unit[p], rel=1e-12)
            lo, up = tr.check_dual(a, b, d, *res.dual, p=p), tr.check_coupling(a, b, d, res.plan, p)
            assert lo <= res.value <= up
            assert (up**p - lo**p) <= 1e-12 * (d.max() ** p)


def test_tampered_plans_are_rejected():
    rng = np.random.default_rng(4)
    d = points_metric(rng, 5)
    a, b = random_pair(rng, 5, 5, zeros=False)
    plan = tr.wasserstein(a, b, d).plan
    assert tr.check_coupling(a, b, d, plan) == pytest.approx(tr.wasserstein(a, b, d).value, abs=1e-12)
    neg = plan.copy()
    i, j = np.argwhere(plan == 0)[0]
    neg[i, j] = -1e-18
    with pytest.raises(ValueError, match="expected finite and >= 0"):
        tr.check_coupling(a, b, d, neg)
    nan = plan.copy()
    nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="expected finite"):
        tr.check_coupling(a, b, d, nan)
    moved = plan.copy()  # one row's mass moved to another row: the columns still match
    k = np.argmax(plan[0])
    moved[1, k] += moved[0, k]
    moved[0, k] = 0.0
    with pytest.raises(ValueError, match="marginals are off"):
        tr.check_coupling(a, b, d, moved)
    with pytest.raises(ValueError, match="marginals are off"):
        tr.check_coupling(a, b, d, plan * (1 + 1e-8))
    with pytest.raises(ValueError, match="shape"):
        tr.check_coupling(a, b, d, plan[:, :4])
    with pytest.raises(ValueError, match="potentials must be finite"):
        tr.check_dual(a, b, d, np.full(5, np.inf), np.zeros(5))


# -- W∞ -----------------------------------------------------------------------------------------


def test_w_infinity_matches_brute_force():
    """Tiny domains, random and dyadic masses: the bisection's level is the least feasible
    threshold (one LP per threshold), its Hall set certifies it from below exactly, and its plan
    lives on ``{d ≤ W∞}``; with dyadic masses the plan is exact and certifies it from above."""
    rng = np.random.default_rng(5)
    for trial in range(30):
        nx, ny = (int(k) for k in rng.integers(1, 5, size=2))
        d = np.round(rng.random((nx, ny)) * 4) / 4  # ties among distances
        if trial % 2:
            a, b = dyadic(rng, nx), dyadic(rng, ny)
        else:
            a, b = random_pair(rng, nx, ny)
        res = tr.w_infinity(a, b, d)
        assert res.value == w_infinity_brute(a, b, d)
        assert np.all(res.plan[d > res.value] == 0)
        up = tr.check_coupling(a, b, d, res.plan, np.inf)
        assert up >= res.value
        if trial % 2:
            assert up == res.value
        if res.hall is None:
            assert res.value == d[np.ix_(a > 0, b > 0)].min()
        else:
            assert tr.check_hall(a, b, d, res.hall) == res.value


def test_w_infinity_tight_cases():
    """Hall sets that are tight exactly (equal masses): no witness may be claimed at such a level."""
    d = np.array([[0.0, 1.0], [1.0, 0.0]])
    half = np.array([0.5, 0.5])
    assert tr.w_infinity(half, half, d).value == 0.0  # the identity is a coupling
    a = np.array([0.1, 0.2, 0.7])  # not dyadic: every row is a tight Hall set at level 0
    res = tr.w_infinity(a, a, 1 - np.eye(3))
    assert res.value == 0.0 and res.hall is None
    d = np.array([[0.0, 3.0, 1.0], [3.0, 0.0, 2.0]])
    a, b = np.array([0.25, 0.75]), np.array([0.25, 0.5, 0.25])
    res = tr.w_infinity(a, b, d)  # row 1 needs column 2 for 0.25 of its mass: W∞ = 2
    assert res.value == 2.0 == w_infinity_brute(a, b, d)
    assert tr.check_hall(a, b, d, res.hall) == 2.0 == tr.check_coupling(a, b, d, res.plan, np.inf)


def test_hall_sets_bound_w_infinity_from_below():
    rng = np.random.default_rng(6)
    for _ in range(30):
        n = int(rng.integers(2, 5))
        d = np.round(points_metric(rng, n) * 8) / 8
        a, b = random_pair(rng, n, n)
        truth = w_infinity_brute(a, b, d)
        for rows in itertools.product([False, True], repeat=n):
            assert tr.check_hall(a, b, d, np.array(rows)) <= truth
    with pytest.raises(ValueError, match="rows"):
        tr.check_hall(a, b, d, np.ones(n + 1, bool))


def test_w_infinity_upper_bound_needs_exact_marginals():
    """W∞ is not continuous in the marginals: a plan off by one ulp certifies only the diameter."""
    d = np.array([[0.0, 1.0, 5.0], [1.0, 0.0, 5.0], [5.0, 5.0, 0.0]])
    a = np.array([0.25, 0.25, 0.5])
    plan = np.diag(a)
    assert tr.check_coupling(a, a, d, plan, np.inf) == 0.0
    plan[0, 0] = np.nextafter(0.25, 1.0)
    assert tr.check_coupling(a, a, d, plan, np.inf) == 5.0


# -- metric properties --------------------------------------------------------------------------


@pytest.mark.parametrize("p", [1.0, 2.0])
def test_wasserstein_is_a_metric(p):
    """Yang, Qi & Zhou 2024 (Props. 1-3): W_p is symmetric, 0 on equal laws and satisfies the
    triangle inequality; also W_1 ≤ W_2 ≤ W∞ (Lyapunov)."""
    rng = np.random.default_rng(7)
    for _ in range(15):
        n = int(rng.integers(2, 9))
        d = points_metric(rng, n)
        tr.check_metric(d)
        a, b, c = (rng.dirichlet(np.ones(n)) for _ in range(3))
        ab, ba = tr.wasserstein(a, b, d, p).value, tr.wasserstein(b, a, d, p).value
        assert ab == pytest.approx(ba, abs=1e-13)
        assert tr.wasserstein(a, a, d, p).value == 0.0
        ac, bc = tr.wasserstein(a, c, d, p).value, tr.wasserstein(b, c, d, p).value
        assert ac <= ab + bc + 1e-13
        if p == 2.0:
            assert tr.wasserstein(a, b, d, 1).value <= ab + 1e-13 <= tr.w_infinity(a, b, d).value + 2e-13


def test_check_metric():
    rng = np.random.default_rng(8)
    d = points_metric(rng, 40)
    tr.check_metric(d)
    tr.check_metric(np.zeros((3, 3)))  # a pseudometric is accepted
    bad = {
        "square": d[:, :5],
        "non-negative": -d,
        "diagonal": d + np.eye(40),
        "symmetric": d + np.triu(np.full((40, 40), 1e-15), 1),
        "triangle": d**2,  # squared distances are not a metric
    }
    for what, m in bad.items():
        with pytest.raises(ValueError, match=what):
            tr.check_metric(m)
    x = np.arange(4.0)
    line = np.abs(x[:, None] - x[None, :])
    line[0, 3] = line[3, 0] = 3.0 * (1 + 1e-13)  # within the relative 1e-12
    tr.check_metric(line)
    line[0, 3] = line[3, 0] = 3.0 * (1 + 1e-11)
    with pytest.raises(ValueError, match=r"triangle inequality fails: d\[0,3\]"):
        tr.check_metric(line)


# -- solver status, imports, size ---------------------------------------------------------------


def test_solver_that_stops_early_raises(monkeypatch):
    import ot

    def stopped(a, b, m, **kwargs):
        return np.outer(a, b), {"result_code": 3, "warning": "numItermax reached", "u": a, "v": b}

    monkeypatch.setattr(ot, "emd", stopped)
    with pytest.raises(tr.TransportError, match="code 3"):
        tr.wasserstein(np.ones(2) / 2, np.ones(2) / 2, np.ones((2, 2)))


def test_module_imports_neither_pot_nor_jax():
    code = ("import sys, diffpriv.measures._transport; "
            "assert not {'ot', 'jax'} & set(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_certifying_a_transport_constraint_runs_no_jax():
    """The certifier solves transport problems with POT's numpy backend: POT is imported, JAX
    (and POT's other backends) are not."""
    code = """
import sys
import numpy as np
import diffpriv.certification as c
import diffpriv.problems as p
X = p.Domain(("a", "b", "c"), np.arange(3.0)[:, None])
prob = p.Problem(X, X, 1 - np.eye(3), np.ones(3) / 3, constraints=(p.WassersteinDP(epsilon=2.0, order=1.0),))
cert = c.certify(prob, np.full((1, 3, 3), 0.2) + 0.4 * np.eye(3)[None], repair=False)
assert "ot" in sys.modules and cert.ok, cert
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("jax", "jaxlib", "torch", "tensorflow", "cupy"))
assert not loaded, loaded[:5]
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def test_w1_1000_by_1000(capsys):
    """A 1000×1000 W1 between random laws on random points of the unit square: timed, and
    bracketed by the two checks to 1e-10."""
    rng = np.random.default_rng(9)
    d = points_metric(rng, 1000)
    a, b = rng.dirichlet(np.ones(1000)), rng.dirichlet(np.ones(1000))
    start = time.perf_counter()
    res = tr.wasserstein(a, b, d)
    solve = time.perf_counter() - start
    start = time.perf_counter()
    lo, up = tr.check_dual(a, b, d, *res.dual), tr.check_coupling(a, b, d, res.plan)
    check = time.perf_counter() - start
    assert lo <= res.value <= up and up - lo < 1e-10
    with capsys.disabled():
        print(f"\n1000x1000 W1 = {res.value:.6f}: solve {solve:.2f} s, checks {check:.3f} s, "
              f"gap {up - lo:.1e}")
