"""The price of privacy (the optimum's rate of change in a budget, from HiGHS's multipliers): the
closed form of k-RR's optimum, central finite differences of the LP optimum for local, extended
and distribution privacy and for δ, and the frontier CSV's column against its own differences."""

import csv
import math
from pathlib import Path

import numpy as np
import pytest

import diffpriv as dp

H = 1e-5


def _optimum(problem) -> float:
    return dp.optimize(problem, method="exact").objective


def _difference(problem, name: str, field: str) -> float:
    value = getattr(next(c for c in problem.constraints if c.name == name), field)
    up = _optimum(problem.with_budget(name, value + H, field))
    down = _optimum(problem.with_budget(name, value - H, field))
    return (up - down) / (2 * H)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_the_price_of_local_dp_is_the_derivative_of_k_rrs_loss(eps):
    """Uniform prior, Hamming loss: k-RR is optimal, its loss ``(k − 1)/(e^ε + k − 1)``, whose
    derivative is ``−(k − 1) e^ε / (e^ε + k − 1)²``."""
    k = 4
    x = dp.Domain(tuple("abcd"))
    problem = dp.Problem(x, x, 1 - np.eye(k), np.full(k, 1 / k), constraints=(dp.LocalDP(epsilon=eps),))
    result = dp.optimize(problem, method="exact")
    closed = -(k - 1) * math.exp(eps) / (math.exp(eps) + k - 1) ** 2
    assert result.prices == {"ldp": {"epsilon": pytest.approx(closed, rel=1e-8)}}


def test_the_price_of_extended_dp_and_of_distp_are_the_optimums_finite_differences():
    """A 4×4 grid with a skewed prior under extended DP between 4-neighbours (the budget scales
    with the distance) and the quick start's DistP between two item laws on a 10×10 grid."""
    grid = dp.Domain.grid(4, 4, 1.0)
    prior = np.random.default_rng(0).dirichlet(np.full(16, 0.5))
    geo = dp.Problem(grid, grid, grid.distances(grid), prior,
                     constraints=(dp.ExtendedDP(0.7, pairs=dp.problems.pairs_within(grid, 1.0)),))
    quick, _ = dp.load_config(Path(__file__).resolve().parents[2] / "configs" / "quickstart.toml")
    for problem in (geo, quick):
        name = problem.constraints[0].name
        price = dp.optimize(problem, method="exact").prices[name]["epsilon"]
        assert price < 0
        assert price == pytest.approx(_difference(problem, name, "epsilon"), rel=1e-6)


@pytest.mark.parametrize("kind", ["geo-empty-cells", "ldp"])
def test_the_interior_points_price_is_the_optimums_finite_difference(kind):
    """The interior point's rates from its pair rows' multipliers: extended DP between 8-neighbour
    cells of a 6×6 grid whose prior leaves 22 cells empty (the run starts on the cells with data
    and prices the others in), and local DP on 5 values with a skewed prior; at ``gap_tol``
    10⁻⁶ within 10⁻⁴ of HiGHS's finite differences, at 10⁻² within 10 %."""
    rng = np.random.default_rng(2)
    if kind == "ldp":
        x = dp.Domain(tuple("abcde"))
        problem = dp.Problem(x, x, 1 - np.eye(5), np.array([0.5, 0.2, 0.15, 0.1, 0.05]),
                             constraints=(dp.LocalDP(epsilon=1.0),))
    else:
        grid = dp.Domain.grid(6, 6, 1.0)
        prior = rng.dirichlet(np.full(36, 0.5))
        prior[rng.permutation(36)[:22]] = 0.0
        problem = dp.Problem(grid, grid, grid.distances(grid), prior / prior.sum(),
                             constraints=(dp.ExtendedDP(0.5, pairs=dp.problems.pairs_within(grid, 1.5)),))
    name = problem.constraints[0].name
    exact = _difference(problem, name, "epsilon")
    for gap_tol, rel in ((1e-6, 1e-4), (1e-2, 0.1)):
        result = dp.optimize(problem, method="interior", gap_tol=gap_tol)
        assert result.method == "interior point" and set(result.prices) == {name}
        assert result.prices[name]["epsilon"] == pytest.approx(exact, rel=rel)


@pytest.mark.parametrize("gap_tol", [1e-2, 1e-6])
def test_column_generations_price_is_the_optimums_finite_difference(gap_tol):
    """The quick start's DistP (column generation's last master LP: every privacy row, the columns
    found): its rate is the LP's, whose optimum the master reaches, at either gap_tol."""
    problem, _ = dp.load_config(Path(__file__).resolve().parents[2] / "configs" / "quickstart.toml")
    result = dp.optimize(problem, method="cuts", gap_tol=gap_tol)
    assert result.method == "cuts"
    exact = _difference(problem, "home-vs-out", "epsilon")
    assert result.prices["home-vs-out"]["epsilon"] == pytest.approx(exact, rel=1e-6)


def test_the_price_of_delta_is_the_optimums_finite_difference():
    x = dp.Domain(tuple("abc"))
    problem = dp.Problem(x, x, 1 - np.eye(3), np.array([0.6, 0.3, 0.1]),
                         constraints=(dp.LocalDP(epsilon=0.5, delta=0.05, name="approx"),))
    price = dp.optimize(problem, method="exact").prices["approx"]
    assert set(price) == {"epsilon", "delta"} and price["delta"] < 0
    for field in ("epsilon", "delta"):
        assert price[field] == pytest.approx(_difference(problem, "approx", field), rel=1e-6, abs=1e-9)


def test_the_frontier_csv_prices_each_budget_as_its_neighbours_differences_say(tmp_path):
    """A sweep over three close budgets (HiGHS at each): the middle row's price is the central
    difference of the certified losses on either side; the interior point's agrees; column
    generation over output columns (pure pair bounds) prices nothing."""
    grid = dp.Domain.grid(4, 4, 1.0)
    prior = np.random.default_rng(1).dirichlet(np.full(16, 0.5))
    geo = dp.ExtendedDP(1.0, pairs=dp.problems.pairs_within(grid, 1.0), name="geo")
    problem = dp.Problem(grid, grid, grid.distances(grid), prior, constraints=(geo,))
    h = 1e-4
    frontier = dp.sweep(problem, [1.0 - h, 1.0, 1.0 + h], out=tmp_path / "s", method="exact")
    with open(tmp_path / "s" / "frontier.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    losses = [float(r["certified_loss"]) for r in rows]
    assert float(rows[1]["price"]) == pytest.approx((losses[2] - losses[0]) / (2 * h), rel=1e-4)
    assert [r["price"] for r in frontier.rows] == pytest.approx([float(r["price"]) for r in rows])
    prices = [r["price"] for r in frontier.rows]
    with open(tmp_path / "s" / "frontier.csv", "w", newline="") as f:  # as a sweep before the column wrote it
        writer = csv.DictWriter(f, [k for k in rows[0] if k != "price"])
        writer.writeheader()
        writer.writerows({k: v for k, v in r.items() if k != "price"} for r in rows)
    again = dp.sweep(problem, [1.0 - h, 1.0, 1.0 + h], out=tmp_path / "s", method="exact")
    assert again.resumed == 3 and [r["price"] for r in again.rows] == pytest.approx(prices)
    inner = dp.sweep(problem, [1.0], method="interior")  # its pair rows' multipliers
    assert inner.rows[0]["price"] == pytest.approx(prices[1], rel=1e-3)
    other = dp.sweep(problem, [1.0], method="cuts")  # column generation over outputs prices nothing
    assert other.rows[0]["method"] == "columns" and math.isnan(other.rows[0]["price"])
