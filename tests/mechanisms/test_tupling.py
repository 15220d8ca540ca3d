"""The tupling mechanism (Kawamoto & Murakami 2019, Algorithm 1 and Theorem 3).

References are computed independently here: the tuple law straight from its definition by
enumerating ordered tuples with Python loops, the loss by enumerating the dummies. Tolerances:
1e-12 for float64 sums of a few hundred terms; Monte Carlo checks use a tolerance derived from
``n`` (Hoeffding / McDiarmid at failure probability 1e-9 unless said), with fixed seeds.
"""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import diffpriv as dp
from diffpriv.certification import delta_level
from diffpriv.mechanisms._tupling import (
    Tupling,
    evaluate_tupling,
    kl_bounds,
    sample_tuples,
    theorem3_beta,
    theorem3_bound,
    theorem3_delta,
    tuple_delta_exact,
    tuple_delta_monte_carlo,
    tuple_log_likelihood,
    tuple_multiset_laws,
    tupling_loss_matrix,
)

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)
FAIL = 1e-9  # failure probability behind every Monte Carlo tolerance


def hoeffding(n, spread=1.0, p=FAIL):
    """Two-sided Hoeffding half-width for a mean of ``n`` values in an interval of ``spread``."""
    return spread * math.sqrt(math.log(2 / p) / (2 * n))


def brute_tuple_law(P, k, nu):
    """``{ȳ: Q[ȳ]}`` over all ordered tuples, straight from ``1/(k+1) Σ_i P[y_i] Π_{j≠i} ν[y_j]``."""
    out = {}
    for t in itertools.product(range(len(P)), repeat=k + 1):
        q = 0.0
        for i in range(k + 1):
            w = P[t[i]]
            for j in range(k + 1):
                if j != i:
                    w *= nu[t[j]]
            q += w
        out[t] = q / (k + 1)
    return out


def random_law(rng, n, conc=1.0):
    return rng.dirichlet(np.full(n, conc))


NU_CASES = {"uniform": None, "zero": np.array([0.5, 0.0, 0.2, 0.3])}


@pytest.mark.parametrize("nu_name", NU_CASES)
def test_likelihood_matches_definition(nu_name):
    rng = np.random.default_rng(1)
    nu = NU_CASES[nu_name]
    nu_full = np.full(4, 0.25) if nu is None else nu
    P = random_law(rng, 4)
    brute = brute_tuple_law(P, 2, nu_full)
    tuples = np.array(list(brute))
    with np.errstate(divide="ignore"):
        expect = np.log(np.array(list(brute.values())))
    got = tuple_log_likelihood(tuples, P, nu)
    assert np.array_equal(np.isinf(got), np.isinf(expect))  # impossible tuples: exactly -inf
    fin = np.isfinite(expect)
    np.testing.assert_allclose(got[fin], expect[fin], rtol=1e-12)
    assert abs(np.exp(got).sum() - 1.0) < 1e-12


@pytest.mark.parametrize("nu_name", NU_CASES)
def test_sampler_frequencies_match_likelihood(nu_name):
    """TV(empirical, exact) ≤ E[TV] + McDiarmid: ``½ sqrt(m/n) + sqrt(ln(1/p)/(2n))``; the same
    samples must be farther than that from a wrong law (the real output always first)."""
    rng = np.random.default_rng(2)
    nu = NU_CASES[nu_name]
    A = np.stack([random_law(rng, 4) for _ in range(3)])
    lam = random_law(rng, 3)
    tp = Tupling(2, A, nu)
    n = 200_000
    tuples = tp.sample(lam, n, rng=rng)
    assert tuples.shape == (n, 3) and tuples.dtype == np.int64
    codes = tuples @ np.array([16, 4, 1])
    freq = np.bincount(codes, minlength=64) / n
    grid = np.array(list(itertools.product(range(4), repeat=3)))
    exact = np.exp(tp.log_likelihood(grid, lam))
    tol = 0.5 * math.sqrt(64 / n) + math.sqrt(math.log(1 / FAIL) / (2 * n))
    assert 0.5 * np.abs(freq - exact).sum() <= tol
    nu_full = tp.nu
    P = lam @ A
    wrong = P[grid[:, 0]] * nu_full[grid[:, 1]] * nu_full[grid[:, 2]]
    assert 0.5 * np.abs(freq - wrong).sum() > tol
    # Impossible tuples are never drawn (ν[1] = 0: at most one entry may be 1).
    assert np.all(freq[exact == 0] == 0)


def test_sampler_fixed_input_and_k0():
    A = np.array([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5]])
    t = Tupling(3, A).sample(0, 1000, rng=0)
    assert np.all((t == 1).sum(axis=1) >= 1)  # the real output of x = 0 is always 1
    pos = np.argmax(t == 1, axis=1)  # first occurrence: uniform over 4 places when no dummy is 1
    assert set(pos.tolist()) == {0, 1, 2, 3}
    t0 = sample_tuples(A[1], 0, 500, rng=1)
    assert t0.shape == (500, 1) and set(np.unique(t0)) <= {0, 2}


@pytest.mark.parametrize("nu_name", NU_CASES)
def test_multiset_laws_match_tuple_enumeration(nu_name):
    rng = np.random.default_rng(3)
    nu = NU_CASES[nu_name]
    nu_full = np.full(4, 0.25) if nu is None else nu
    P0, P1 = random_law(rng, 4), random_law(rng, 4, 0.3)
    ms, probs = tuple_multiset_laws(np.stack([P0, P1]), 2, nu)
    assert ms.shape == (math.comb(6, 3), 3)
    for b, P in enumerate((P0, P1)):
        grouped = {}
        for t, q in brute_tuple_law(P, 2, nu_full).items():
            key = tuple(sorted(t))
            grouped[key] = grouped.get(key, 0.0) + q
        np.testing.assert_allclose(probs[b], [grouped[tuple(m)] for m in ms], rtol=1e-12, atol=1e-15)
    q0 = np.array(list(brute_tuple_law(P0, 2, nu_full).values()))
    q1 = np.array(list(brute_tuple_law(P1, 2, nu_full).values()))
    for eps in (0.0, 0.3, 1.0):
        assert abs(tuple_delta_exact(P0, P1, eps, 2, nu) - float(delta_level(q0, q1, eps))) < 1e-12


def test_monte_carlo_delta_vs_exact():
    """|Y| = 4, k = 2: the exact δ lies in [lower, upper] and near the estimate."""
    rng = np.random.default_rng(4)
    P0, P1 = random_law(rng, 4, 0.5), random_law(rng, 4, 0.5)
    eps = 0.3
    exact = tuple_delta_exact(P0, P1, eps, 2)
    assert 0.02 < exact < 0.5  # a non-degenerate case
    n = 200_000
    est = tuple_delta_monte_carlo(P0, P1, eps, 2, samples=n, confidence=0.999, rng=5)
    assert est.lower <= exact <= est.upper
    assert abs(est.estimate - exact) <= hoeffding(n)
    assert est.upper - est.estimate <= math.sqrt(math.log(2 / 0.001) / (2 * n)) + 1e-15
    assert est.estimate == max(est.forward, est.backward) and est.samples == n


def test_confidence_bounds_keep_their_promise():
    """300 independent runs at 90 %: the upper bound misses the exact δ in at most 10 % of the
    runs (binomial: more than 45 misses has probability < 1e-3), and it is not vacuous (its mean
    excess over the exact δ is below Hoeffding's width)."""
    rng = np.random.default_rng(6)
    P0, P1 = random_law(rng, 4, 0.5), random_law(rng, 4, 0.5)
    eps, n, runs = 0.5, 500, 300
    exact = tuple_delta_exact(P0, P1, eps, 2)
    ests = [tuple_delta_monte_carlo(P0, P1, eps, 2, samples=n, confidence=0.9, rng=rng)
            for _ in range(runs)]
    upper_miss = sum(e.upper < exact for e in ests)
    lower_miss = sum(e.lower > exact for e in ests)
    assert upper_miss <= 45 and lower_miss <= 45
    assert np.mean([e.upper - exact for e in ests]) < math.sqrt(math.log(2 / 0.1) / (2 * n))


@pytest.mark.parametrize("n", [10, 1000, 100_000])
@pytest.mark.parametrize("successes", [0.0, 0.001, 0.2, 0.5, 1.0])
def test_kl_bounds_between_clopper_pearson_and_hoeffding(n, successes):
    """For Bernoulli data Clopper–Pearson is exact, so a valid bound for all [0,1] variables
    cannot be tighter; Pinsker makes it no wider than Hoeffding."""
    x = round(successes * n)
    mean, beta = x / n, 0.01
    lo, hi = kl_bounds(mean, n, beta)
    cp_hi = 1.0 if x == n else stats.beta.ppf(1 - beta, x + 1, n - x)
    cp_lo = 0.0 if x == 0 else stats.beta.ppf(beta, x, n - x + 1)
    width = math.sqrt(math.log(1 / beta) / (2 * n))
    assert cp_hi - 1e-12 <= hi <= min(1.0, mean + width) + 1e-12
    assert max(0.0, mean - width) - 1e-12 <= lo <= cp_lo + 1e-12


def test_k0_is_the_base_mechanism():
    rng = np.random.default_rng(7)
    A = np.stack([random_law(rng, 5) for _ in range(4)])
    lam0, lam1 = random_law(rng, 4), random_law(rng, 4)
    tp = Tupling(0, A)
    P0, P1 = lam0 @ A, lam1 @ A
    for eps in (0.0, 0.2, 0.7):
        base = float(delta_level(P0, P1, eps))
        assert abs(tp.delta_exact(lam0, lam1, eps) - base) < 1e-12
        est = tp.delta_monte_carlo(lam0, lam1, eps, samples=50_000, confidence=0.999, rng=8)
        assert est.lower <= base <= est.upper
    d = rng.uniform(0, 3, (4, 5))
    np.testing.assert_allclose(tupling_loss_matrix(d, 0), d, rtol=1e-15)  # a cumulative sum
    prior = random_law(rng, 4)
    assert abs(tp.expected_loss(d, prior) - float(np.einsum("x,xy,xy->", prior, A, d))) < 1e-12


def brute_expected_loss(A, d, prior, k, nu):
    total = 0.0
    X, Y = A.shape
    for x in range(X):
        for s in range(Y):
            for r in itertools.product(range(Y), repeat=k):
                w = prior[x] * A[x, s] * math.prod(nu[j] for j in r)
                total += w * min([d[x, s]] + [d[x, j] for j in r])
    return total


@pytest.mark.parametrize("nu_name", NU_CASES)
def test_expected_loss_vs_enumeration_and_monte_carlo(nu_name):
    rng = np.random.default_rng(9)
    nu = NU_CASES[nu_name]
    A = np.stack([random_law(rng, 4) for _ in range(3)])
    d = rng.integers(0, 4, (3, 4)).astype(float)  # integer distances: many ties
    prior = random_law(rng, 3)
    tp = Tupling(2, A, nu)
    exact = tp.expected_loss(d, prior)
    assert abs(exact - brute_expected_loss(A, d, prior, 2, tp.nu)) < 1e-12
    n = 40_000
    for x in range(3):
        t = tp.sample(x, n, rng=rng)
        mc = d[x][t].min(axis=1).mean()
        row = float(A[x] @ tupling_loss_matrix(d, 2, nu)[x])
        assert abs(mc - row) <= hoeffding(n, np.ptp(d[x]))


@SETTINGS
@given(st.integers(1, 3), st.integers(1, 4), st.integers(0, 3), st.integers(0, 2**32 - 1))
def test_loss_matrix_vs_enumeration_random(n_in, n_out, k, seed):
    rng = np.random.default_rng(seed)
    d = np.round(rng.uniform(0, 2, (n_in, n_out)), 1)
    nu = random_law(rng, n_out, 0.5)
    got = tupling_loss_matrix(d, k, nu)
    for x, y in itertools.product(range(n_in), range(n_out)):
        ref = sum(math.prod(nu[j] for j in r) * min([d[x, y]] + [d[x, j] for j in r])
                  for r in itertools.product(range(n_out), repeat=k))
        assert abs(got[x, y] - ref) < 1e-12


# -- Theorem 3 --------------------------------------------------------------------------------


def test_theorem3_delta_inverts_the_bound_and_validates():
    for k, N, beta in ((1, 4, 0.5), (5, 10, 0.2), (10, 100, 0.03)):
        for f in (0.1, 0.5, 0.95):
            eps, delta = theorem3_bound(k, N, f * k / N, beta)
            assert abs(theorem3_delta(k, N, eps, beta) - delta) <= 1e-9 * max(1.0, delta)
        assert theorem3_delta(k, N, math.log1p(beta * N / k), beta) is None  # α would be 0
    with pytest.raises(ValueError, match="alpha"):
        theorem3_bound(2, 4, 0.5, 0.5)  # α = k/|Y|
    with pytest.raises(ValueError, match="k >= 1"):
        theorem3_bound(0, 4, 0.1, 0.5)
    with pytest.raises(ValueError, match="beta, eta"):
        theorem3_bound(2, 4, 0.1, 1.5)


@SETTINGS
@given(st.integers(2, 6), st.integers(0, 20), st.floats(0.05, 1.0))
def test_theorem3_beta_is_the_least_member(N, m, eta):
    rng = np.random.default_rng(N * 100 + m)
    P0, P1 = random_law(rng, N, 0.5), random_law(rng, N, 0.5)
    beta = theorem3_beta(P0, P1, eta)

    def member(P, b):
        return np.mean(P <= b) >= 1 - eta

    assert member(P0, beta) and member(P1, beta)
    if beta > 0:
        below = np.nextafter(beta, 0)
        assert not (member(P0, below) and member(P1, below))
    assert theorem3_beta(P0, P1) == max(P0.max(), P1.max())


@SETTINGS
@given(st.integers(2, 6), st.integers(1, 3), st.sampled_from([0.3, 1.0, 5.0]),
       st.floats(0.05, 0.99), st.integers(0, 2**32 - 1))
def test_theorem3_never_below_exact(N, k, conc, frac, seed):
    """η = 0, ν uniform, β = max of the laws: the theorem's hypotheses hold."""
    rng = np.random.default_rng(seed)
    P0, P1 = random_law(rng, N, conc), random_law(rng, N, conc)
    beta = theorem3_beta(P0, P1)
    eps, delta = theorem3_bound(k, N, frac * k / N, beta)
    assert tuple_delta_exact(P0, P1, eps, k) <= delta + 1e-12


@pytest.mark.parametrize("seed", range(6))
def test_theorem3_never_below_monte_carlo(seed):
    """Larger domains (no enumeration): the theorem's δ is above the MC lower bound at 99.9 %,
    which it must be whenever it is above the exact δ."""
    rng = np.random.default_rng(seed)
    N, k = 30, 8
    P0, P1 = random_law(rng, N, 2.0), random_law(rng, N, 2.0)
    beta = theorem3_beta(P0, P1)
    eps, delta = theorem3_bound(k, N, 0.9 * k / N, beta)
    est = tuple_delta_monte_carlo(P0, P1, eps, k, samples=20_000, confidence=0.999, rng=seed)
    assert est.lower <= delta


def test_theorem3_with_positive_eta_is_false():
    """The statement for η > 0 fails (see theorem3_bound): a point mass vs uniform on 10 outputs."""
    N = 10
    P0, P1 = np.eye(N)[0], np.full(N, 1 / N)
    beta = eta = 1 / N
    assert theorem3_beta(P0, P1, eta) <= beta  # both laws are in Λ_{β,η,A}
    eps, delta = theorem3_bound(1, N, 0.99 / N, beta, eta)
    exact = tuple_delta_exact(P0, P1, eps, 1)
    assert exact >= (1 - 1 / N) ** 2 - 1e-12 > delta


# -- on a problem -----------------------------------------------------------------------------


def two_profile_problem(rng):
    X = dp.Domain(tuple("abcd"))
    loss = rng.uniform(0, 1, (4, 4))
    prior = random_law(rng, 8).reshape(2, 4)
    items = (dp.Item("home", random_law(rng, 4, 0.5), profile=0),
             dp.Item("away", random_law(rng, 4, 0.5), profile=1))
    return dp.Problem(X, X, loss, prior, items=items, profiles=("p", "q"),
                      constraints=(dp.DistP(pairs=((0, 1),), epsilon=0.4, delta=0.2),))


def test_evaluate_tupling_on_a_problem():
    rng = np.random.default_rng(10)
    problem = two_profile_problem(rng)
    A = np.stack([np.full((4, 4), 0.25) * 0.5 + 0.5 * np.eye(4),  # two very different tables
                  np.stack([random_law(rng, 4, 0.3) for _ in range(4)])])
    rep = evaluate_tupling(problem, 2, A, samples=100_000, confidence=0.999, rng=11)
    P0, P1 = problem.items[0].dist @ A[0], problem.items[1].dist @ A[1]
    exact = tuple_delta_exact(P0, P1, 0.4, 2)
    assert rep.delta.lower <= exact <= rep.delta.upper
    assert rep.items == ("home", "away") and rep.k == 2 and rep.delta.samples == 100_000
    loss = sum(Tupling(2, A[s]).expected_loss(problem.loss, problem.prior[s]) for s in range(2))
    assert abs(rep.expected_loss - loss) < 1e-12
    assert abs(rep.base_loss - problem.expected_loss(A)) < 1e-12
    assert rep.expected_loss <= rep.base_loss + 1e-12  # dummies can only lower min_i d
    assert rep.beta == max(P0.max(), P1.max())
    thm = theorem3_delta(2, 4, 0.4, rep.beta)
    assert rep.theorem3 == (None if thm is None else (0.4, thm))
    assert rep.meets_budget == (rep.delta.upper <= 0.2)
    # A mix-up of the profiles' tables would have been caught by the interval above.
    swapped = tuple_delta_exact(problem.items[0].dist @ A[1], problem.items[1].dist @ A[0], 0.4, 2)
    assert not rep.delta.lower <= swapped <= rep.delta.upper


def test_evaluate_tupling_theorem3_and_errors():
    rng = np.random.default_rng(12)
    problem = two_profile_problem(rng)
    uniformish = np.full((4, 4), 0.25) * 0.8 + 0.2 * np.eye(4)
    rep = evaluate_tupling(problem, 6, uniformish, epsilon=1.5, samples=20_000, rng=0)
    assert rep.theorem3 is not None and rep.theorem3[0] == 1.5
    assert rep.delta.lower <= rep.theorem3[1]
    nu = random_law(rng, 4)
    assert evaluate_tupling(problem, 6, uniformish, epsilon=1.5, samples=100, rng=0, nu=nu).theorem3 is None
    with pytest.raises(ValueError, match="shape"):
        evaluate_tupling(problem, 2, np.ones((3, 4)) / 4, samples=10)
    with pytest.raises(ValueError, match="DistP pairs"):
        evaluate_tupling(problem, 2, uniformish, samples=10, pair=1)
    with pytest.raises(ValueError, match="row 0"):
        Tupling(1, np.ones((2, 3)))
    with pytest.raises(ValueError, match="k"):
        Tupling(-1, np.eye(3))
