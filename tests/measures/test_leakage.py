"""The quantitative-information-flow measures (:mod:`diffpriv.measures._leakage`) against a
published example, closed forms and exact enumeration in rational arithmetic."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from diffpriv.measures._leakage import g_leakage, identity_table, joint, leakage, within_gain


def test_the_qif_library_example():
    # The example of the QIF library's documentation (after Alvim et al., The Science of
    # Quantitative Information Flow, 2020): prior Bayes vulnerability 1/3, posterior 0.5.
    prior = np.array([[1 / 3, 1 / 3, 0, 1 / 3]])
    channel = np.array([[1 / 2, 1 / 6, 1 / 3, 0],
                        [0, 1 / 3, 2 / 3, 0],
                        [0, 1 / 2, 0, 1 / 2],
                        [1 / 4, 1 / 4, 1 / 2, 0]])[None]
    m = leakage(prior, channel, 1 - np.eye(4), gain=np.eye(4))
    assert m.prior_vulnerability == pytest.approx(1 / 3, abs=1e-15)
    assert m.posterior_vulnerability == pytest.approx(0.5, abs=1e-15)
    assert m.multiplicative_leakage == pytest.approx(1.5, abs=1e-14)
    assert m.min_entropy_leakage == pytest.approx(math.log2(1.5), abs=1e-14)
    # the identity gain is Bayes vulnerability; the 0-1 loss's error is 1 − vulnerability
    assert m.g_leakage.prior_vulnerability == pytest.approx(1 / 3, abs=1e-15)
    assert m.g_leakage.posterior_vulnerability == pytest.approx(0.5, abs=1e-15)
    assert m.adversary_error == pytest.approx(0.5, abs=1e-15)
    assert m.prior_adversary_error == pytest.approx(2 / 3, abs=1e-15)


@pytest.mark.parametrize(("k", "eps"), [(2, 0.5), (5, 1.0), (10, 2.0)])
def test_randomized_response_at_the_uniform_prior_leaks_its_capacity(k, eps):
    # The multiplicative Bayes capacity Σ_y max_x C[x, y] is reached at the uniform prior;
    # k-RR's is k e^ε / (e^ε + k − 1).
    e = math.exp(eps)
    table = np.full((k, k), 1 / (e + k - 1))
    np.fill_diagonal(table, e / (e + k - 1))
    m = leakage(np.full((1, k), 1 / k), table[None], 1 - np.eye(k))
    assert m.multiplicative_leakage == pytest.approx(k * e / (e + k - 1), rel=1e-13)


def test_the_identity_leaks_everything():
    rng = np.random.default_rng(0)
    prior = rng.dirichlet(np.ones(6)).reshape(1, 6)
    points = rng.normal(size=(6, 2))
    loss = np.linalg.norm(points[:, None] - points[None], axis=-1)
    m = leakage(prior, identity_table((1, 6, 6)), loss)
    assert m.posterior_vulnerability == pytest.approx(1.0, abs=1e-15)
    assert m.multiplicative_leakage == pytest.approx(1 / prior.max(), rel=1e-14)
    assert m.adversary_error == 0.0
    assert m.prior_adversary_error == pytest.approx(float(np.min(prior[0] @ loss)), abs=1e-15)
    with pytest.raises(ValueError, match="as many outputs as inputs"):
        identity_table((1, 3, 4))


def _exact(prior, table, loss, gain):
    """Every measure by enumeration in rational arithmetic (profiles summed by hand)."""
    ns, nx, ny = table.shape
    p = [[Fraction(v) for v in row] for row in prior]
    a = [[[Fraction(v) for v in row] for row in block] for block in table]
    j = [[sum(p[s][x] * a[s][x][y] for s in range(ns)) for y in range(ny)] for x in range(nx)]
    marg = [sum(p[s][x] for s in range(ns)) for x in range(nx)]
    g = [[Fraction(v) for v in row] for row in gain]
    loss = [[Fraction(v) for v in row] for row in loss]
    return {
        "prior": max(marg),
        "posterior": sum(max(j[x][y] for x in range(nx)) for y in range(ny)),
        "error": sum(min(sum(j[x][y] * loss[x][w] for x in range(nx)) for w in range(ny))
                     for y in range(ny)),
        "prior_error": min(sum(marg[x] * loss[x][w] for x in range(nx)) for w in range(ny)),
        "g_prior": max(sum(gw[x] * marg[x] for x in range(nx)) for gw in g),
        "g_posterior": sum(max(sum(gw[x] * j[x][y] for x in range(nx)) for gw in g) for y in range(ny)),
    }


@pytest.mark.parametrize("seed", range(6))
def test_every_measure_matches_exact_enumeration(seed):
    rng = np.random.default_rng(seed)
    ns = int(rng.integers(1, 4))
    nx, ny, nw = (int(v) for v in rng.integers(2, 6, size=3))
    prior = rng.dirichlet(np.ones(ns * nx)).reshape(ns, nx)
    prior[rng.random(prior.shape) < 0.3] = 0.0  # empty cells
    prior = prior / prior.sum() if prior.sum() > 0 else np.full((ns, nx), 1 / (ns * nx))
    table = rng.dirichlet(np.ones(ny) * 0.5, size=(ns, nx))
    loss = rng.random((nx, ny)) * 3
    gain = rng.random((nw, nx))
    m = leakage(prior, table, loss, gain)
    ex = _exact(prior, table, loss, gain)
    assert m.prior_vulnerability == pytest.approx(float(ex["prior"]), abs=1e-14)
    assert m.posterior_vulnerability == pytest.approx(float(ex["posterior"]), abs=1e-14)
    assert m.multiplicative_leakage == pytest.approx(float(ex["posterior"] / ex["prior"]), rel=1e-13)
    assert m.adversary_error == pytest.approx(float(ex["error"]), abs=1e-13)
    assert m.prior_adversary_error == pytest.approx(float(ex["prior_error"]), abs=1e-13)
    assert m.g_leakage.prior_vulnerability == pytest.approx(float(ex["g_prior"]), abs=1e-14)
    assert m.g_leakage.posterior_vulnerability == pytest.approx(float(ex["g_posterior"]), abs=1e-14)
    assert m.g_leakage.additive == pytest.approx(float(ex["g_posterior"] - ex["g_prior"]), abs=1e-13)


@pytest.mark.parametrize("seed", range(20))
def test_no_prior_nor_gain_leaks_more_than_the_bayes_capacity(seed):
    # The "miracle" theorem (Alvim et al. 2012, Thm. 6.1; the book's Thm. 7.5): for non-negative
    # gains and any prior, multiplicative g-leakage ≤ Σ_y max_x C[x, y].
    rng = np.random.default_rng(100 + seed)
    nx, ny = (int(v) for v in rng.integers(2, 7, size=2))
    table = rng.dirichlet(np.ones(ny) * 0.7, size=(1, nx))
    prior = rng.dirichlet(np.ones(nx) * 0.5).reshape(1, nx)
    capacity = float(np.sum(np.max(table[0], axis=0)))
    m = leakage(prior, table, np.zeros((nx, ny)), rng.random((4, nx)))
    assert m.multiplicative_leakage <= capacity * (1 + 1e-12)
    assert m.g_leakage.multiplicative <= capacity * (1 + 1e-12)


def test_gain_within_a_radius():
    points = np.array([0.0, 1.0, 2.5, 4.0])
    loss = np.abs(points[:, None] - points[None])
    g = within_gain(loss, 1.0)
    assert g.shape == (4, 4) and g[0].tolist() == [1, 1, 0, 0] and g[2].tolist() == [0, 0, 1, 0]
    prior = np.array([[0.1, 0.2, 0.3, 0.4]])
    table = np.full((1, 4, 4), 0.25)
    # radius 0 is Bayes vulnerability; a table that ignores its input leaks nothing
    m = leakage(prior, table, loss, within_gain(loss, 0.0))
    assert m.g_leakage.prior_vulnerability == pytest.approx(m.prior_vulnerability, abs=1e-15)
    assert m.g_leakage.posterior_vulnerability == pytest.approx(m.prior_vulnerability, abs=1e-15)
    assert m.multiplicative_leakage == pytest.approx(1.0, abs=1e-15)
    # best guess within 1 of the truth with no report: 2.5 (0.3) or 4 (0.4) alone, or 0 and 1
    assert g_leakage(prior[0], joint(prior, table), g).prior_vulnerability == pytest.approx(0.4, abs=1e-15)


def test_negative_gains_have_no_multiplicative_leakage():
    prior = np.array([[0.5, 0.5]])
    table = np.eye(2)[None]
    m = leakage(prior, table, 1 - np.eye(2), gain=np.array([[1.0, -1.0], [-1.0, 1.0]]))
    assert math.isnan(m.g_leakage.multiplicative)
    assert m.g_leakage.prior_vulnerability == 0.0
    assert m.g_leakage.posterior_vulnerability == pytest.approx(1.0)
    assert m.g_leakage.additive == pytest.approx(1.0)


def test_every_ordering_of_outputs_gives_the_same_measures():
    rng = np.random.default_rng(7)
    prior = rng.dirichlet(np.ones(5)).reshape(1, 5)
    table = rng.dirichlet(np.ones(5), size=(1, 5))
    loss = rng.random((5, 5))
    base = leakage(prior, table, loss)
    for order in itertools.islice(itertools.permutations(range(5)), 5):
        order = list(order)
        m = leakage(prior, table[:, :, order], loss[:, order])
        assert m.posterior_vulnerability == pytest.approx(base.posterior_vulnerability, abs=1e-15)
        assert m.adversary_error == pytest.approx(base.adversary_error, abs=1e-14)


def test_the_adversary_error_in_blocks_is_the_same(monkeypatch):
    from diffpriv.measures import _leakage

    rng = np.random.default_rng(3)
    prior = rng.dirichlet(np.ones(7)).reshape(1, 7)
    table = rng.dirichlet(np.ones(9), size=(1, 7))
    loss = rng.random((7, 9))
    whole = leakage(prior, table, loss).adversary_error
    monkeypatch.setattr(_leakage, "CHUNK", 10)  # one observed output at a time
    assert leakage(prior, table, loss).adversary_error == pytest.approx(whole, abs=1e-15)


def test_the_library_call_on_a_problem():
    import diffpriv as dp

    problem, _ = dp.load_config("configs/quickstart.toml")
    raw = dp.leakage(problem)
    assert raw.posterior_vulnerability == pytest.approx(1.0, abs=1e-12) and raw.adversary_error == 0.0
    assert raw.multiplicative_leakage == pytest.approx(1 / problem.prior.max(), rel=1e-12)
    uniform = np.full(problem.shape, 1 / problem.shape[2])
    assert dp.leakage(problem, uniform).multiplicative_leakage == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(ValueError, match="gain: expected"):
        dp.leakage(problem, gain=np.ones((2, 3)))
    with pytest.raises(ValueError, match="table: expected shape"):
        dp.leakage(problem, np.ones((1, 2, 2)))
