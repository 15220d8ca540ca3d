"""The entropic transport objective (``kind = "sinkhorn"``): the certifier's numpy value (POT)
against an independent conic solve and the transport bounds, the ott-jax twin against it, its
gradient against finite differences, and simplicial decomposition (and the gradient search)
against the exact transport optimum."""

import dataclasses
import json
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import diffpriv as dp
from diffpriv.measures._transport import wasserstein
from diffpriv.measures._utilities import entropic_transport
from diffpriv.problems import SinkhornLoss, SpecError
from diffpriv.solvers._methods import route
from diffpriv.solvers._utilities import utility_data, utility_value
from tests._comparisons import central_difference

ROOT = Path(__file__).resolve().parents[2]


def _grid_problem(objective, n: int = 3, eps: float = 1.0) -> dp.Problem:
    """Two profiles' laws on an ``n × n`` grid (one of them with empty cells), pure DistP between
    them, the Euclidean loss."""
    dom = dp.Domain.grid(n, n, 1.0)
    rng = np.random.default_rng(n)
    home = rng.dirichlet(np.ones(n * n))
    out = rng.dirichlet(np.ones(n * n))
    out[: n] = 0.0
    out /= out.sum()
    items = (dp.Item("home", home), dp.Item("out", out))
    return dp.Problem(dom, dom, dom.distances(dom), np.stack([home, out]) / 2, items=items,
                      profiles=("home", "out"),
                      constraints=(dp.DistP(epsilon=eps, pairs=((0, 1),)),), objective=objective)


@pytest.mark.parametrize("newton", [True, False])
def test_the_entropic_cost_is_the_conic_programs_optimum_and_lies_between_the_transport_bounds(
        newton, monkeypatch):
    """``min ⟨γ, C⟩ + ε·KL(γ ‖ a⊗b)`` over the couplings, solved by cvxpy's exponential cone (an
    independent solver), equals the value by Newton's method and by POT's Sinkhorn; and
    ``W ≤ S_ε ≤ W + ε·ln min(X, Y)``."""
    cp = pytest.importorskip("cvxpy")
    from diffpriv.measures import _utilities

    if not newton:
        monkeypatch.setattr(_utilities, "NEWTON_WORK", -1.0)
    rng = np.random.default_rng(0)
    a = rng.dirichlet(np.ones(5))
    a[1] = 0.0
    a /= a.sum()
    b = rng.dirichlet(np.ones(6))
    cost = rng.random((5, 6))
    for eps in (0.02, 0.3):
        value = entropic_transport(a, b, cost, eps)
        keep = a > 0
        plan = cp.Variable((keep.sum(), 6), nonneg=True)
        outer = np.outer(a[keep], b)
        objective = cp.sum(cp.multiply(plan, cost[keep])) + eps * cp.sum(cp.rel_entr(plan, outer))
        program = cp.Problem(cp.Minimize(objective),
                             [cp.sum(plan, axis=1) == a[keep], cp.sum(plan, axis=0) == b])
        program.solve(solver=cp.CLARABEL)
        assert value == pytest.approx(program.value, abs=1e-6)
        exact = wasserstein(a, b, cost, 1.0).value
        assert exact - 1e-12 <= value <= exact + eps * math.log(5) + 1e-12


def test_newtons_plan_meets_both_laws_and_gives_sinkhorns_value():
    """On random laws (some entries tiny or 0) and costs, ε from 0.05 to 5 of costs up to 14:
    where Newton's method returns a plan (most cases), its marginal errors are below the
    tolerance and the value equals POT's Sinkhorn value to 10⁻¹⁰ relative."""
    from diffpriv.measures import _utilities
    from diffpriv.measures._pot import pot

    rng = np.random.default_rng(1)
    ran = 0
    for _ in range(40):
        nx, ny = rng.integers(2, 40, size=2)
        c = np.linalg.norm(rng.uniform(0, 10, (nx, 1, 2)) - rng.uniform(0, 10, (1, ny, 2)), axis=2)
        a, b = rng.dirichlet(np.full(nx, 0.3)), rng.dirichlet(np.full(ny, 0.3))
        eps = float(rng.choice([0.05, 0.25, 1.0, 5.0]))
        plan = _utilities._newton_plan(a, b, c, eps)
        if plan is None:
            continue
        ran += 1
        assert _utilities._error(plan, a, b) <= _utilities.SINKHORN_TOLERANCE
        sinkhorn = pot().sinkhorn(a, b, c, eps, method="sinkhorn_log", numItermax=10**5, stopThr=1e-13)
        value = entropic_transport(a, b, c, eps)
        logs = np.log(np.where(sinkhorn > 0, sinkhorn, 1.0))
        entropy = np.sum(sinkhorn * logs) - np.sum(a * np.log(a)) - np.sum(b * np.log(b))
        by_pot = float(np.sum(sinkhorn * c) + eps * entropy)
        assert value == pytest.approx(by_pot, rel=1e-10)
    assert ran >= 30


def test_an_entropic_cost_sinkhorn_cannot_reach_is_refused_not_guessed(monkeypatch):
    from diffpriv.measures import _utilities

    monkeypatch.setattr(_utilities, "SINKHORN_ITERATIONS", 200)
    rng = np.random.default_rng(1)
    a, b = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4))
    with pytest.raises(FloatingPointError, match="a larger objective.epsilon"):
        entropic_transport(a, b, rng.random((4, 4)) * 1e4, 1e-3)


@pytest.mark.parametrize("laws", ["profiles", "items", "prior"])
def test_the_searchs_ott_value_and_its_gradient_match_the_certifiers_numpy(laws):
    """ott-jax's regularised cost equals POT's value at a random table; its gradient (implicit, at
    Sinkhorn's fixed point) equals central differences of the numpy value."""
    jax.config.update("jax_enable_x64", True)
    problem = _grid_problem(SinkhornLoss(laws=laws, epsilon=0.4))
    rng = np.random.default_rng(2)
    table = rng.random(problem.shape) + 0.05
    table /= table.sum(axis=-1, keepdims=True)
    data = utility_data(problem)
    rows = jnp.asarray(table.reshape(-1, problem.shape[-1]))
    value = float(utility_value("sinkhorn", data, rows))
    assert value == pytest.approx(problem.objective_value(table), rel=1e-7)
    grad = np.asarray(jax.grad(lambda a: utility_value("sinkhorn", data, a))(rows)).reshape(table.shape)
    for index in [(0, 0, 0), (1, 4, 8), (0, 7, 3), (1, 2, 5)]:
        numeric = central_difference(lambda t: problem.objective_value(t), table, index)
        assert grad[index] == pytest.approx(numeric, rel=1e-4, abs=1e-7)


@pytest.mark.parametrize("laws", ["profiles", "items"])
def test_the_masters_newton_terms_are_otts_values_and_potentials(laws):
    """Simplicial decomposition's numpy evaluation (:func:`_simplicial.newton_terms`) gives ott's
    values and, up to a constant per law (which a table's rows, summing to 1, do not see), its
    derivatives, at output laws with empty outputs; from its own potentials again, the same."""
    from diffpriv.solvers._simplicial import _terms, newton_terms

    jax.config.update("jax_enable_x64", True)
    problem = _grid_problem(SinkhornLoss(laws=laws, epsilon=0.4))
    data = utility_data(problem)
    rng = np.random.default_rng(3)
    table = rng.random(problem.shape) * (rng.random(problem.shape[-1]) > 0.3)  # some outputs unused
    table /= table.sum(axis=-1, keepdims=True)
    outputs = np.einsum("ksx,sxy->ky", np.asarray(data.laws), table)
    assert np.any(outputs == 0)
    start = (jnp.zeros_like(data.inputs), jnp.zeros((data.inputs.shape[0], problem.shape[-1])))
    values, grads = (np.asarray(v) for v in _terms(data, jnp.asarray(outputs), start, 1e-10)[:2])
    args = (np.asarray(data.cost), float(data.epsilon), np.asarray(data.inputs), outputs)
    mine, mine_grads, potentials = newton_terms(*args, np.zeros_like(outputs))
    again = newton_terms(*args, potentials)
    for v, g in ((mine, mine_grads), again[:2]):
        assert v == pytest.approx(values, rel=1e-9)
        shift = g - grads
        assert np.max(np.abs(shift - shift.mean(axis=1, keepdims=True))) <= 1e-7 * np.max(np.abs(grads))


def test_the_objective_round_trips_and_refuses_bad_parameters_in_one_line():
    for objective in (SinkhornLoss(), SinkhornLoss(laws="items", epsilon=0.25)):
        problem = _grid_problem(objective)
        again = dp.problems.problem_from_dict(json.loads(json.dumps(dp.problems.problem_to_dict(problem))))
        assert again.objective == objective
    for bad in (0, -1.0, math.inf, "x", True):
        with pytest.raises(SpecError, match="^objective.epsilon: must be a positive number"):
            SinkhornLoss(epsilon=bad)
    with pytest.raises(SpecError, match="^objective.laws"):
        SinkhornLoss(laws="everyone")
    with pytest.raises(SpecError, match="'items' needs protected items"):
        dataclasses.replace(_grid_problem("expected"), items=(), constraints=(dp.LocalDP(epsilon=1.0),),
                            objective=SinkhornLoss(laws="items"))
    problem = _grid_problem(SinkhornLoss())
    assert route(problem, "auto") == ("simplicial",) and route(problem, "gradient") == ("gradient",)
    assert SinkhornLoss().regularisation(problem) == pytest.approx(0.05 * problem.loss.mean())


def test_simplicial_decomposition_certifies_a_bound_below_the_exact_transport_optimums_table():
    """DistP on a 3×3 grid, ``auto`` (simplicial decomposition): converged, the certified entropic
    cost is the numpy value of the certified table, at most that of the exact transport
    objective's LP optimum (a feasible table) and within ``gap_tol`` of the run's lower bound,
    which lies below it; the table's exact transport cost lies between that optimum and its own
    entropic cost."""
    problem = _grid_problem(SinkhornLoss(laws="items", epsilon=0.2))
    d = dp.design(problem, gap_tol=1e-3)
    assert d.certificate.ok and d.result.method == "simplicial" and d.result.status == "converged"
    table = np.asarray(d.certificate.table, np.float64)
    assert d.certificate.loss == pytest.approx(problem.objective_value(table), rel=1e-12)
    lp = dp.design(dataclasses.replace(problem, objective=dp.TransportLoss(laws="items")))
    other = problem.objective_value(lp.certificate.table)
    assert d.result.lower_bound <= other and d.certificate.loss <= other * (1 + 1e-6)
    assert d.gap <= 1.01e-3
    exact = problem.objective.exact(problem, table)
    assert lp.result.lower_bound - 1e-9 <= exact <= d.certificate.loss + 1e-12


def test_the_simplex_projection_is_the_nearest_point_of_the_simplex():
    """Against the KKT conditions of ``min ‖w − v‖²`` over the simplex: ``w = max(v − τ, 0)`` for
    one ``τ``, summing to 1 (checked at random points and at a point of the simplex itself)."""
    from diffpriv.solvers._simplicial import project_simplex

    rng = np.random.default_rng(4)
    for v in [rng.normal(size=7) * 3, rng.random(5), np.array([0.2, 0.3, 0.5]), np.array([-1.0, 5.0])]:
        w = project_simplex(v)
        assert w.sum() == pytest.approx(1.0, abs=1e-12) and np.all(w >= 0)
        tau = np.mean((v - w)[w > 0])
        assert np.allclose(w, np.maximum(v - tau, 0.0), atol=1e-12)
    assert np.allclose(project_simplex(np.array([0.2, 0.3, 0.5])), [0.2, 0.3, 0.5])


@pytest.mark.slow  # (the vmapped search with Sinkhorn inside: minutes)
def test_the_gradient_search_on_the_entropic_cost_is_no_worse_than_the_transport_optimums_table():
    problem = _grid_problem(SinkhornLoss(laws="items", epsilon=0.2))
    d = dp.design(problem, method="gradient", steps=2000)
    assert d.certificate.ok and d.result.method == "gradient" and d.gap == math.inf
    lp = dp.design(dataclasses.replace(problem, objective=dp.TransportLoss(laws="items")))
    assert d.certificate.loss <= problem.objective_value(lp.certificate.table) * (1 + 1e-6)


def _run_config(runner, config: Path, out: Path) -> dict:
    from diffpriv.cli import app

    result = runner.invoke(app, ["optimize", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    problem, _ = dp.load_config(config)
    table = dp.Certificate.load(out / "certificate.json").table
    assert summary["exact_transport"] == pytest.approx(problem.objective.exact(problem, table), rel=1e-12)
    assert summary["method"] == "simplicial" and summary["lower_bound"] <= summary["certified"]
    top = summary["exact_transport"] + 0.25 * math.log(100)  # (ε·ln min(X, Y))
    assert summary["exact_transport"] <= summary["certified"] <= top
    assert "exact transport cost" in result.stdout
    assert runner.invoke(app, ["certify", str(out / "certificate.json")]).exit_code == 0
    return summary


def test_the_sinkhorn_config_on_a_coarser_grid_reports_the_exact_transport_cost(runner, tmp_path):
    """``configs/sinkhorn.toml`` with 2.5 km cells (4×4): optimized, certified within its gap_tol of
    the bound it states, the exact transport cost of the certified table in the summary."""
    text = (ROOT / "configs" / "sinkhorn.toml").read_text()
    assert "grid = { rows = 10, cols = 10, cell = 1.0 }" in text
    config = tmp_path / "sinkhorn.toml"
    config.write_text(text.replace("grid = { rows = 10, cols = 10, cell = 1.0 }",
                                   "grid = { rows = 4, cols = 4, cell = 2.5 }"))
    summary = _run_config(runner, config, tmp_path / "out")
    assert (summary["certified"] - summary["lower_bound"]) / summary["certified"] <= 0.01 + 1e-9


@pytest.mark.slow  # (about 30 s)
def test_the_shipped_sinkhorn_config_reports_the_exact_transport_cost(runner, tmp_path):
    _run_config(runner, ROOT / "configs" / "sinkhorn.toml", tmp_path / "out")
