"""Planar Laplace on the plane snapped to a grid, and the optimal remapping
(:mod:`diffpriv.mechanisms._continuous`): against Monte Carlo, numerical integration, brute force
over remappings, and the certifier."""

import itertools

import numpy as np
import pytest
import scipy.integrate

import diffpriv as dp
from diffpriv.certification._summary import constraint_levels
from diffpriv.mechanisms._continuous import _tail, planar_laplace_continuous, planar_laplace_remap, remap


def _geo(rows=6, cols=5, cell=1.5, eps=0.8):
    d = dp.Domain.grid(rows, cols, cell, "km")
    rng = np.random.default_rng(0)
    prior = rng.dirichlet(np.full(d.size, 0.3))
    return dp.Problem(d, d, loss=d.distances(d), prior=prior,
                      constraints=(dp.ExtendedDP(eps, pairs=dp.problems.pairs_within(d, cell)),))


@pytest.mark.parametrize(("a", "b"), [(0.0, 0.0), (0.5, 0.0), (0.3, 1.7), (2.5, 0.4), (4.0, 3.0)])
def test_the_tail_is_the_integral_of_the_density(a, b):
    eps = 1.3
    density = lambda y, x: eps**2 / (2 * np.pi) * np.exp(-eps * np.hypot(x, y))  # noqa: E731
    exact, err = scipy.integrate.dblquad(density, a, 60, b, 60, epsabs=1e-13, epsrel=1e-12)
    assert float(_tail(eps, np.array(a), np.array(b))) == pytest.approx(exact, abs=1e-11)


def test_a_row_matches_monte_carlo():
    problem = _geo()
    table = planar_laplace_continuous(problem, epsilon=0.8)
    assert np.all(table > 0) and np.allclose(table.sum(axis=-1), 1.0, atol=1e-15)
    rng = np.random.default_rng(1)
    x, n, side = 13, 400_000, 1.5
    centre = problem.inputs.coords[x]
    r, th = rng.gamma(2.0, 1 / 0.8, n), rng.uniform(0, 2 * np.pi, n)  # planar Laplace: radius Γ(2, 1/ε)
    pts = centre + np.c_[r * np.cos(th), r * np.sin(th)]
    col = np.clip(np.floor(pts[:, 0] / side), 0, 4).astype(int)
    row = np.clip(np.floor(pts[:, 1] / side), 0, 5).astype(int)
    freq = np.bincount(row * 5 + col, minlength=30) / n
    sd = np.sqrt(table[0, x] * (1 - table[0, x]) / n)
    assert np.all(np.abs(freq - table[0, x]) <= 5 * sd + 1e-12)


def test_its_level_is_at_most_epsilon():
    problem = _geo(eps=0.8)
    for eps in (0.3, 0.8, 2.0):
        (c,) = constraint_levels(problem, planar_laplace_continuous(problem, epsilon=eps))
        assert c.level <= eps * (1 + 1e-9)  # post-processing of ε-geo-indistinguishability
        assert c.level > 0.5 * eps  # and not far below it between neighbours


def test_remapping_is_the_best_map_and_costs_no_privacy():
    problem = _geo(rows=2, cols=2, cell=1.0)
    table = planar_laplace_continuous(problem, epsilon=1.0)
    best = problem.expected_loss(remap(problem, table))
    for targets in itertools.product(range(4), repeat=4):  # every map of the 4 outputs
        mapped = np.zeros_like(table)
        for y, t in enumerate(targets):
            mapped[..., t] += table[..., y]
        assert best <= problem.expected_loss(mapped) + 1e-15
    big = _geo(eps=0.8)
    plain = planar_laplace_continuous(big, epsilon=0.8)
    mapped = planar_laplace_remap(big, epsilon=0.8)
    assert np.allclose(mapped.sum(axis=-1), 1.0, atol=1e-15)
    assert big.expected_loss(mapped) < big.expected_loss(plain)
    (a,), (b,) = constraint_levels(big, plain), constraint_levels(big, mapped)
    assert b.level <= a.level * (1 + 1e-12)


def test_evaluate_calibrates_the_remapped_baseline(runner):
    from diffpriv.cli import app

    result = runner.invoke(app, ["evaluate", "configs/quickstart.toml", "-m", "planar_laplace_remap",
                                 "--calibrate"])
    assert result.exit_code == 0, result.output
    assert "planar_laplace_remap" in result.stdout and "calibrated epsilon" in result.stdout


def test_it_needs_a_grid():
    X = dp.Domain(("a", "b", "c"), np.array([[0.0, 0.0], [1.0, 0.0], [5.0, 2.0]]))
    problem = dp.Problem(X, X, loss=X.distances(X), prior=np.ones(3) / 3)
    with pytest.raises(ValueError, match="full grid of square cells"):
        planar_laplace_continuous(problem, epsilon=1.0)
    Y = dp.Domain(("u", "v"), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="outputs equal to the inputs"):
        planar_laplace_continuous(dp.Problem(X, Y, loss=np.ones((3, 2)), prior=np.ones(3) / 3),
                                  epsilon=1.0)
