"""Composition of K reports (:mod:`diffpriv.measures._composition`, :func:`diffpriv._compose.compose`)
against exact enumeration of the product laws, the optimal composition theorem's closed form and
Google's dp_accounting."""

import itertools
import math

import numpy as np
import pytest

from diffpriv.certification._levels import hockey_stick, pure_level
from diffpriv.measures._composition import divergence_level, dp_delta, dp_epsilon
from diffpriv.measures._divergences import divergence


def _product(P, k):
    """The law of k independent draws from P, over every tuple of outputs."""
    out = np.array([1.0])
    for _ in range(k):
        out = np.outer(out, P).ravel()
    return out


def _rr(eps):
    p = math.exp(eps) / (1 + math.exp(eps))
    return np.array([p, 1 - p]), np.array([1 - p, p])


@pytest.mark.parametrize(("eps", "k"), [(0.5, 1), (0.5, 4), (1.0, 6), (2.0, 7)])
def test_randomized_response_attains_the_bound(eps, k):
    P, Q = _rr(eps)
    Pk, Qk = _product(P, k), _product(Q, k)
    for eps_out in np.linspace(0, k * eps, 9):
        exact = float(hockey_stick(Pk, Qk, eps_out))
        assert dp_delta(eps, 0.0, k, eps_out) == pytest.approx(exact, rel=1e-10, abs=1e-15)
    assert float(pure_level(Pk, Qk)) == pytest.approx(k * eps, rel=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_any_pair_is_within_the_bound(seed):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(2, 5)), int(rng.integers(1, 5))
    P, Q = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(n))
    eps = float(max(pure_level(P, Q), 1e-3))
    delta = float(rng.choice([0.0, 0.01]))
    eps = eps * rng.uniform(0.5, 1.0) if delta else eps  # (ε, δ): a smaller ε with its δ
    delta = max(delta, float(max(hockey_stick(P, Q, eps), hockey_stick(Q, P, eps))))
    Pk, Qk = _product(P, k), _product(Q, k)
    for eps_out in np.linspace(0, k * eps, 7):
        exact = max(float(hockey_stick(Pk, Qk, eps_out)), float(hockey_stick(Qk, Pk, eps_out)))
        assert exact <= dp_delta(eps, delta, k, eps_out) * (1 + 1e-9) + 1e-15
    # divergences of products: exact rules, and total variation's bound
    for name in ("kl", "reverse_kl", "chi2", "hellinger", "max"):
        d = divergence(name)
        value, exact = divergence_level(name, float(d.level(P, Q)), k)
        assert exact and value == pytest.approx(float(d.level(Pk, Qk)), rel=1e-9, abs=1e-12)
    tv = divergence("tv")
    value, exact = divergence_level("tv", float(tv.level(P, Q)), k)
    assert not exact and float(tv.level(Pk, Qk)) <= value + 1e-12


def test_the_closed_form_of_the_theorem():
    # Kairouz, Oh & Viswanath (2015), Thm. 3.3: ((K − 2i)ε, 1 − (1 − δ)^K (1 − δ_i)) with
    # δ_i = Σ_{l<i} C(K, l)(e^{(K−l)ε} − e^{(K−2i+l)ε}) / (1 + e^ε)^K
    eps, delta, k = 0.7, 1e-3, 9
    for i in range(k // 2 + 1):
        di = sum(math.comb(k, l) * (math.exp((k - l) * eps) - math.exp((k - 2 * i + l) * eps))
                 for l in range(i)) / (1 + math.exp(eps)) ** k
        expected = 1 - (1 - delta) ** k * (1 - di)
        assert dp_delta(eps, delta, k, (k - 2 * i) * eps) == pytest.approx(expected, rel=1e-10, abs=1e-15)


def test_epsilon_at_delta_inverts_delta():
    eps, k = 0.3, 200
    e = dp_epsilon(eps, 0.0, k, 1e-6)
    assert e < k * eps / 2  # what δ buys: far below K·ε (27.7 against 60)
    assert dp_delta(eps, 0.0, k, e) <= 1e-6 < dp_delta(eps, 0.0, k, e * (1 - 1e-9))
    assert dp_epsilon(eps, 1e-3, k, 1e-6) == math.inf  # below 1 − (1 − δ)^K
    assert dp_epsilon(eps, 0.0, k, 1.0) == 0.0


@pytest.mark.parametrize(("eps", "k"), [(0.5, 10), (1.0, 50), (0.1, 400)])
def test_against_dp_accounting(eps, k):
    from dp_accounting.pld import privacy_loss_distribution as pld  # a test dependency

    # randomised response on 2 values at ε: its PLD, composed k times (pessimistic discretisation)
    accountant = pld.from_randomized_response(noise_parameter=2 / (1 + math.exp(eps)), num_buckets=2,
                                              value_discretization_interval=1e-5).self_compose(k)
    for eps_out in (0.0, 0.25 * k * eps, 0.5 * math.sqrt(k) * eps):
        theirs = accountant.get_delta_for_epsilon(eps_out)
        ours = dp_delta(eps, 0.0, k, eps_out)
        assert ours <= theirs * (1 + 1e-9) + 1e-12  # theirs bounds from above by discretisation
        assert theirs - ours <= 0.02 * ours + 1e-9  # their grid of 1e-5, k times


# -- dp.compose on problems and tables --------------------------------------------------------

def _problem(constraint: str):
    """Three labels, Hamming loss, items p and q with disjoint corners, and ``constraint``."""
    import tomllib

    from diffpriv.config import config_from_dict
    from tests._configs import BASE_TOML

    text = (BASE_TOML.split("[[constraints]]")[0].replace("[0.5, 0.3, 0.2]", "[0.6, 0.4, 0.0]")
            .replace("[0.2, 0.3, 0.5]", "[0.0, 0.3, 0.7]") + constraint)
    return config_from_dict(tomllib.loads(text))[0]


TABLE = np.array([[[0.7, 0.2, 0.1], [0.2, 0.6, 0.2], [0.1, 0.3, 0.6]]])


def _exact_same_input(problem, table, k):
    """Pure level of k reports from one input, by enumerating every tuple of outputs."""
    p, q = problem.items[0].dist, problem.items[1].dist
    worst = 0.0
    for ys in itertools.product(range(table.shape[2]), repeat=k):
        rows = np.prod([table[0][:, y] for y in ys], axis=0)
        worst = max(worst, abs(math.log(p @ rows) - math.log(q @ rows)))
    return worst


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_distribution_privacy_of_k_reports(k, monkeypatch):
    import diffpriv as dp
    from diffpriv import _compose

    problem = _problem('[[constraints]]\nkind = "distp"\nepsilon = 5.0\npairs = [["p", "q"]]\n')
    (row,) = dp.compose(problem, TABLE, k)
    one = float(pure_level(problem.items[0].dist @ TABLE[0], problem.items[1].dist @ TABLE[0]))
    assert row.per_report["epsilon"] == pytest.approx(one, abs=1e-12)
    assert row.composed == {"epsilon": pytest.approx(k * one, abs=1e-12), "delta": 0.0} and row.exact
    exact = _exact_same_input(problem, TABLE, k)
    assert row.same_input_exact and row.same_input == pytest.approx(exact, abs=1e-9)
    monkeypatch.setattr(_compose, "ENUMERATE", 0)  # the bound instead
    (bound,) = dp.compose(problem, TABLE, k)
    assert not bound.same_input_exact and bound.same_input >= exact - 1e-12


def test_approximate_and_divergence_claims():
    import diffpriv as dp

    problem = _problem('[[constraints]]\nkind = "distp"\nepsilon = 0.2\ndelta = 0.3\npairs = [["p", "q"]]\n'
                       '[[constraints]]\nkind = "divergence_distp"\ndivergence = "kl"\nepsilon = 5.0\n'
                       'pairs = [["p", "q"]]\n'
                       '[[constraints]]\nkind = "ldp"\nepsilon = 3.0\n')
    approx, kl, ldp = dp.compose(problem, TABLE, 4, delta=0.9)
    P, Q = problem.items[0].dist @ TABLE[0], problem.items[1].dist @ TABLE[0]
    d1 = max(float(hockey_stick(P, Q, 0.2)), float(hockey_stick(Q, P, 0.2)))
    assert approx.per_report == {"epsilon": 0.2, "delta": pytest.approx(d1, abs=1e-12)}
    assert approx.composed["delta"] == pytest.approx(1 - (1 - d1) ** 4, rel=1e-9)
    at = dp_epsilon(0.2, approx.per_report["delta"], 4, 0.9)
    assert approx.composed["epsilon_at_delta"] == pytest.approx(at)
    exact_kl = max(float(divergence("kl").level(P, Q)), float(divergence("kl").level(Q, P)))
    assert kl.composed["level"] == pytest.approx(4 * exact_kl, rel=1e-9) and kl.exact
    assert ldp.composed["epsilon"] == pytest.approx(4 * ldp.per_report["epsilon"]) and ldp.same_input is None
    with pytest.raises(ValueError, match="reports"):
        dp.compose(problem, TABLE, 0)
    with pytest.raises(ValueError, match="delta"):
        dp.compose(problem, TABLE, 2, delta=1.5)


def _exact_epsilon(P, Q, k, target):
    """The least ε' with δ(ε') ≤ target for the k-fold products, both directions, by bisection on
    the enumerated laws."""
    Pk, Qk = _product(P, k), _product(Q, k)

    def delta(e):
        return max(float(hockey_stick(Pk, Qk, e)), float(hockey_stick(Qk, Pk, e)))

    lo, hi = 0.0, float(k * max(pure_level(P, Q), 1e-9))
    if delta(lo) <= target:
        return 0.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if delta(mid) <= target else (mid, hi)
    return hi


@pytest.mark.parametrize("seed", range(6))
def test_the_tables_own_loss_distribution_bounds_k_reports(seed):
    from diffpriv.measures._composition import PLD_STEP, pld_epsilon

    rng = np.random.default_rng(200 + seed)
    n, k = int(rng.integers(2, 5)), int(rng.integers(2, 6))
    P, Q = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(n))
    eps = float(pure_level(P, Q))
    for target in (1e-3, 1e-1):
        exact = _exact_epsilon(P, Q, k, target)
        ours = pld_epsilon(P, Q, k, target)
        assert exact - 1e-9 <= ours <= exact + (k + 1) * PLD_STEP + 1e-9  # an upper bound, within the grid
        assert ours <= dp_epsilon(eps, 0.0, k, target) + (k + 1) * PLD_STEP


def test_compose_takes_the_smaller_of_the_two_bounds():
    import diffpriv as dp

    problem = _problem('[[constraints]]\nkind = "distp"\nepsilon = 5.0\npairs = [["p", "q"]]\n')
    (row,) = dp.compose(problem, TABLE, 8, delta=1e-4)
    c = row.composed
    assert c["epsilon_at_delta"] == min(c["theorem_epsilon"], c["pld_epsilon"])
    assert c["pld_epsilon"] < c["theorem_epsilon"]  # a table whose worst ratio is rare
    P, Q = problem.items[0].dist @ TABLE[0], problem.items[1].dist @ TABLE[0]
    assert c["pld_epsilon"] >= _exact_epsilon(P, Q, 8, 1e-4) - 1e-9
