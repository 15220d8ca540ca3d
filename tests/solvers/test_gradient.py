"""The smooth objectives (estimation error, mutual information) and the gradient search: the numpy
values against closed forms and independent formulas, the JAX twins against numpy, gradients
against finite differences, and the search against randomized response, optimal for binary inputs."""

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import diffpriv as dp
from diffpriv.measures._utilities import estimation_mse, mutual_information
from diffpriv.problems import EstimationError, InformationLoss, SpecError
from diffpriv.solvers._methods import route
from diffpriv.solvers._utilities import utility_data, utility_value
from tests._comparisons import central_difference


def _rr(k: int, eps: float) -> np.ndarray:
    """k-ary randomized response at ``eps``."""
    table = np.full((k, k), 1.0 / (math.exp(eps) + k - 1))
    np.fill_diagonal(table, math.exp(eps) / (math.exp(eps) + k - 1))
    return table


def _problem(prior, objective, eps: float = 1.0, outputs: int | None = None, profiles: int = 1):
    k = np.shape(prior)[-1]
    x = dp.Domain(tuple(f"v{i}" for i in range(k)))
    y = x if outputs is None else dp.Domain(tuple(f"o{j}" for j in range(outputs)))
    loss = 1.0 - np.eye(k) if outputs is None else np.ones((k, outputs))
    return dp.Problem(x, y, loss, np.asarray(prior, np.float64), constraints=(dp.LocalDP(epsilon=eps),),
                      objective=objective)


def _random_table(rng, shape) -> np.ndarray:
    table = rng.random(shape) + 0.05
    return table / table.sum(axis=-1, keepdims=True)


def test_the_estimation_error_of_randomized_response_is_its_closed_form():
    """Wang et al. (2017): the frequency estimate of k-RR has variance ``γ(1 − γ)/(N (p − q)²)``
    per value, ``γ = λ_x p + (1 − λ_x) q``."""
    rng = np.random.default_rng(0)
    for k, eps, n in ((2, 0.5, 100), (5, 1.0, 1000), (12, 3.0, 50)):
        lam = rng.dirichlet(np.ones(k))
        p, q = _rr(k, eps)[0, 0], _rr(k, eps)[0, 1]
        gamma = lam * p + (1 - lam) * q
        expected = np.sum(gamma * (1 - gamma)) / (n * (p - q) ** 2)
        assert estimation_mse(lam[None], _rr(k, eps)[None], n) == pytest.approx(expected, rel=1e-10)


def test_the_estimation_error_is_the_trace_of_the_estimates_covariance():
    """``tr(Bᵀ (diag q − qqᵀ) B) / N`` with ``B`` the pseudo-inverse of the population's channel,
    two profiles and more outputs than inputs; a channel whose rows repeat identifies no law."""
    rng = np.random.default_rng(1)
    prior = rng.dirichlet(np.ones(8)).reshape(2, 4)
    table = _random_table(rng, (2, 4, 7))
    lam = prior.sum(axis=0)
    channel = np.einsum("sx,sxy->xy", prior / lam, table)
    b = np.linalg.pinv(channel)  # [Y, X]
    q = lam @ channel
    expected = np.trace(b.T @ (np.diag(q) - np.outer(q, q)) @ b) / 300
    assert estimation_mse(prior, table, 300) == pytest.approx(expected, rel=1e-9)
    same = np.broadcast_to(table[:, :1], table.shape)
    assert estimation_mse(prior, same, 300) == math.inf


def test_mutual_information_is_its_definition_and_that_of_binary_randomized_response():
    """By the definition summed entry by entry, and ``ln 2 − H(p)`` for binary RR on a uniform prior."""
    rng = np.random.default_rng(2)
    prior = rng.dirichlet(np.ones(6)).reshape(2, 3)
    table = _random_table(rng, (2, 3, 4))
    joint = np.einsum("sx,sxy->xy", prior, table)
    lam, q = joint.sum(axis=1), joint.sum(axis=0)
    expected = sum(joint[x, y] * math.log(joint[x, y] / (lam[x] * q[y])) for x in range(3) for y in range(4))
    assert mutual_information(prior, table) == pytest.approx(expected, rel=1e-12)
    p = _rr(2, 1.0)[0, 0]
    entropy = -(p * math.log(p) + (1 - p) * math.log(1 - p))
    assert mutual_information(np.full((1, 2), 0.5), _rr(2, 1.0)[None]) == pytest.approx(math.log(2) - entropy)
    assert mutual_information(np.full((1, 3), 1 / 3), np.full((1, 3, 3), 1 / 3)) == 0.0


@pytest.mark.parametrize("objective", [EstimationError(reports=500), InformationLoss()])
def test_the_searchs_objective_and_its_gradient_match_numpy(objective):
    """The JAX twin equals the certifier's value, and its gradient central differences of it."""
    rng = np.random.default_rng(3)
    prior = rng.dirichlet(np.ones(8)).reshape(2, 4)
    problem = dataclasses.replace(_problem(prior[0] / prior[0].sum(), objective, outputs=5),
                                  prior=prior / prior.sum(), profiles=("young", "old"))
    table = _random_table(rng, problem.shape)
    data = utility_data(problem)
    rows = jnp.asarray(table.reshape(-1, 5))
    assert float(utility_value(objective.kind, data, rows)) == pytest.approx(problem.objective_value(table),
                                                                            rel=1e-9)
    grad = np.asarray(jax.grad(lambda a: utility_value(objective.kind, data, a))(rows)).reshape(table.shape)
    for index in [(0, 0, 0), (1, 2, 4), (0, 3, 1), (1, 1, 2)]:
        numeric = central_difference(lambda t: problem.objective_value(t), table, index)
        assert grad[index] == pytest.approx(numeric, rel=1e-5, abs=1e-9)


def test_objectives_round_trip_through_json_and_refuse_bad_reports():
    for objective in (EstimationError(reports=77), InformationLoss()):
        problem = _problem([0.5, 0.5], objective)
        again = dp.problems.problem_from_dict(dp.problems.problem_to_dict(problem))
        assert again.objective == objective
    for bad in (0, -3, 2.5, True):
        with pytest.raises(SpecError, match="objective.reports"):
            EstimationError(reports=bad)


def test_a_smooth_objective_routes_to_the_gradient_search_and_nothing_else():
    problem = _problem([0.7, 0.3], InformationLoss())
    assert route(problem, "auto") == ("gradient",) and route(problem, "gradient") == ("gradient",)
    with pytest.raises(SpecError, match="'pdhg' minimises linear and convex objectives"):
        route(problem, "pdhg")
    with pytest.raises(SpecError, match="'gradient' runs the smooth objectives"):
        route(_problem([0.7, 0.3], "expected"), "gradient")
    kl = dataclasses.replace(problem, constraints=(dp.DivergenceDP(divergence="kl", epsilon=0.5),))
    with pytest.raises(SpecError, match="handles linear constraints"):
        route(kl, "auto")


@pytest.mark.parametrize("objective", [InformationLoss(), pytest.param(EstimationError(reports=1000),
                                                                     marks=pytest.mark.slow)])
def test_the_search_finds_randomized_response_on_binary_inputs(objective):
    """Every ε-LDP channel of a binary input is a garbling of randomized response (Kairouz, Oh &
    Viswanath 2014), so RR is optimal for both objectives: the certified table is RR's value, and
    not below it."""
    problem = _problem([0.8, 0.2], objective, eps=1.0)
    d = dp.design(problem, steps=4000)
    rr = problem.objective_value(_rr(2, 1.0)[None])
    assert d.certificate.ok and d.result.method == "gradient" and d.gap == math.inf
    assert d.certificate.loss == pytest.approx(rr, rel=1e-5)  # (k-RR calibrated to ε within 10⁻⁶)
    assert d.certificate.loss >= rr - 1e-9 * abs(rr)


@pytest.mark.slow  # (two or three compiles of the vmapped search: make test-slow)
def test_the_search_keeps_more_information_than_randomized_response_on_a_skewed_prior():
    """Four values, a skewed prior, ε = 1: no worse than k-RR at the same certified ε (a start), and
    better (binary-output mechanisms keep more information at small ε: Kairouz et al. 2014)."""
    problem = _problem([0.55, 0.25, 0.15, 0.05], InformationLoss(), eps=1.0)
    d = dp.design(problem, steps=4000)
    rr = problem.objective_value(_rr(4, 1.0)[None])
    assert d.certificate.ok and d.result.starts["restarts"] >= 5
    assert d.certificate.loss < rr * (1 + 1e-3) < 0  # −I: more information than RR's


@pytest.mark.slow  # (about 30 s; the CLI's gradient path without a bound: test_user_utility.py's CLI test)
def test_the_shipped_estimation_config_runs_through_the_cli_without_a_bound(runner, tmp_path):
    """``configs/estimation.toml``: optimized, certified, no lower bound stated (said so), and no
    worse than k-RR calibrated to the same budget; ``certify`` accepts what it wrote."""
    from pathlib import Path

    from diffpriv.cli import app
    from diffpriv.mechanisms import calibrate

    config = Path(__file__).resolve().parents[2] / "configs" / "estimation.toml"
    out = tmp_path / "out"
    result = runner.invoke(app, ["optimize", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "no optimality bound: non-convex objective" in " ".join(result.stdout.split())
    summary = json.loads((out / "summary.json").read_text())
    assert "lower_bound" not in summary and summary["method"] == "gradient" and summary["restarts"] >= 5
    problem, _ = dp.load_config(config)
    krr = problem.objective_value(calibrate(problem, "krr").certificate.table)
    assert summary["certified"] <= krr * (1 + 1e-9)
    check = runner.invoke(app, ["certify", str(out / "certificate.json")])
    assert check.exit_code == 0, check.output


@pytest.mark.slow  # (two or three compiles of the vmapped search: make test-slow)
def test_the_feasible_starts_certify_and_a_callers_table_is_never_beaten_by_the_result():
    """:func:`._gradient.starts` on categorical LDP: the expected loss's LP optimum (no more
    expected loss than k-RR's) and k-RR calibrated (certified as it is); ``init=`` adds a start
    and a candidate, so a second run from the first one's table ends at most at its loss."""
    from diffpriv.solvers._gradient import starts

    problem = _problem([0.55, 0.25, 0.15, 0.05], EstimationError(reports=200), eps=0.8)
    found = dict(starts(problem))
    assert set(found) == {"expected-loss optimum", "krr"} and dp.certify(problem, found["krr"]).ok
    assert problem.expected_loss(found["expected-loss optimum"]) <= problem.expected_loss(found["krr"]) + 1e-9
    first = dp.design(problem, steps=2000)
    again = dp.design(problem, steps=2000, init=first.result)
    assert again.certificate.ok and again.certificate.loss <= first.certificate.loss * (1 + 1e-12)
    with pytest.raises(ValueError, match="^init: the gradient search starts from a table of shape"):
        dp.design(problem, init=np.ones((1, 3, 3)))
