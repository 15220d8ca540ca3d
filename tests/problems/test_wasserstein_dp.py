"""Wasserstein DP (point and distribution forms): certified levels against a dense transport LP,
repair and exact mode, the convex reference against a closed form, configs and errors."""

import dataclasses
import json
import math

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.config import ConfigError
from diffpriv.problems import SpecError, problem_from_dict, problem_hash, problem_to_dict
from tests import _problems
from tests._transport_lp import transport_lp

N = 6
LINE = _problems.line(N, "p")
ITEMS = (dp.Item("left", np.array([0.5, 0.3, 0.2, 0, 0, 0])),
         dp.Item("right", np.array([0, 0, 0.2, 0.3, 0.5, 0])))


TRUNCATED = np.minimum(np.abs(np.subtract.outer(np.arange(N), np.arange(N))), 2).astype(float)
"""A metric on the outputs that is not the line's."""


def line_problem(*constraints) -> dp.Problem:
    return _problems.line_problem(N, *constraints, items=ITEMS, prefix="p")


def wp_lp(a, b, ground, p):
    """Independent: W_p by a dense transportation LP (HiGHS)."""
    return transport_lp(a, b, ground ** p) ** (1 / p)


@pytest.mark.parametrize("order", [1.0, 2.0, 3.0])
def test_point_form_level_is_the_largest_w_between_rows(order):
    problem = line_problem(dp.WassersteinDP(epsilon=100.0, order=order))
    table = np.random.default_rng(int(order)).dirichlet(np.ones(N), size=(1, N))
    (level,) = dp.certify(problem, table, repair=False).constraints
    ground = np.abs(np.subtract.outer(np.arange(N), np.arange(N))).astype(float)
    brute = max(wp_lp(table[0, i], table[0, j], ground, order) for i in range(N) for j in range(i + 1, N))
    assert level.n_comparisons == N * (N - 1) // 2
    assert brute <= level.level <= brute * (1 + 1e-6) + 1e-6  # an upper bound, tight
    assert level.ok and level.witness["P"] is not None


def test_distribution_form_and_a_given_metric():
    metric = np.minimum(np.abs(np.subtract.outer(np.arange(N), np.arange(N))), 2.0)  # truncated: a metric
    problem = line_problem(dp.WassersteinDistP(pairs=((0, 1),), epsilon=100.0, metric=metric.tolist()))
    table = np.random.default_rng(5).dirichlet(np.ones(N), size=(1, N))
    (level,) = dp.certify(problem, table, repair=False).constraints
    P, Q = ITEMS[0].dist @ table[0], ITEMS[1].dist @ table[0]
    exact = wp_lp(P, Q, metric, 1.0)
    assert exact <= level.level <= exact + 1e-9


def test_repair_verify_exact_and_a_table_just_over_the_budget():
    problem = line_problem(dp.WassersteinDP(epsilon=0.5), dp.WassersteinDistP(pairs=((0, 1),), epsilon=0.8,
                                                                               order=2.0))
    table = np.random.default_rng(0).dirichlet(np.ones(N), size=(1, N))
    assert not dp.certify(problem, table, repair=False).ok
    cert = dp.certify(problem, table, repair=True)
    assert cert.ok and 0 < cert.repair_t < 1
    d = json.loads(json.dumps(cert.to_dict()))
    assert dp.verify(d).ok and dp.verify(d, exact=True).ok
    level = max(wp_lp(table[0, i], table[0, j], problem.blocks()[0].ground, 1.0)
                for i in range(N) for j in range(i + 1, N))
    for eps, ok in ((level * (1 - 1e-6), False), (level * (1 + 1e-6), True)):
        p = line_problem(dp.WassersteinDP(epsilon=eps))
        assert dp.certify(p, table, repair=False).ok is ok
        assert dp.verify(json.loads(json.dumps(dp.certify(p, table, repair=False).to_dict())),
                         exact=True).ok is ok


def test_discretised_laplace_on_a_line_has_wdp_level_one_step():
    """Two translates have W_μ = the shift (the seed's setting, on a grid with room): a Laplace
    table concentrated well inside the grid has level ≈ the grid step for adjacent inputs."""
    n = 41
    grid = dp.Domain(tuple(f"g{i}" for i in range(n)), np.arange(n, dtype=float)[:, None] * 0.1)
    rows = np.exp(-np.abs(np.subtract.outer(np.arange(n), np.arange(n))) * 0.1 / 0.05)
    table = (rows / rows.sum(axis=1, keepdims=True))[None]
    pairs = tuple((i, i + 1) for i in range(15, 24))  # away from the boundary
    problem = dp.Problem(grid, grid, np.zeros((n, n)), np.full((1, n), 1 / n),
                         constraints=(dp.WassersteinDP(epsilon=1.0, order=2.0, pairs=pairs),))
    (level,) = dp.certify(problem, table, repair=False).constraints
    assert level.level == pytest.approx(0.1, rel=1e-6)


def test_convex_reference_matches_a_closed_form():
    """Two inputs at 0 and 1, outputs at 0 and 1, 0/1 loss, uniform prior: ``W1(A[0], A[1]) =
    |A[0,1] − A[1,1]|``, so ``W1 ≤ ε`` costs ``(1 − ε)/2`` (the symmetric flip is optimal)."""
    two = dp.Domain(("a", "b"), np.array([[0.0], [1.0]]))
    for eps in (0.1, 0.6):
        problem = dp.Problem(two, two, 1 - np.eye(2), np.full((1, 2), 0.5),
                             constraints=(dp.WassersteinDP(epsilon=eps),))
        ref = dp.solvers.convex(problem)
        assert ref.value == pytest.approx((1 - eps) / 2, abs=1e-7)
        assert dp.certify(problem, ref.table, repair=True).ok


def test_convex_reference_tables_certify_and_budgets_order():
    values = []
    for eps in (0.3, 0.6, 1.2):
        problem = line_problem(dp.WassersteinDP(epsilon=eps, order=2.0))
        ref = dp.solvers.convex(problem)
        cert = dp.certify(problem, ref.table, repair=True)
        assert cert.ok and cert.repair_t <= 1e-6
        assert cert.loss == pytest.approx(ref.value, rel=1e-5, abs=1e-7)
        values.append(ref.value)
    assert values[0] >= values[1] >= values[2]


@pytest.mark.parametrize("constraint, message", [
    (dp.WassersteinDP(epsilon=1.0, order=0.5), r"^constraints\[0\]\.order: the Wasserstein order μ must be"),
    (dp.WassersteinDP(epsilon=1.0, order=math.inf), r"^constraints\[0\]\.order"),
    (dp.WassersteinDP(epsilon=1.0, metric=((0.0, 1.0), (1.0, 0.0))), r"^constraints\[0\]\.metric: shape"),
    (dp.WassersteinDP(epsilon=1.0, metric=tuple(tuple(float(v) for v in row) for row in
                                                 np.where(np.eye(N) > 0, 0.0, 1.0) + np.diag(np.ones(N)))),
     r"^constraints\[0\]\.metric: nonzero diagonal"),
    (dp.WassersteinDistP(pairs=((0, 1),), epsilon=-1.0), r"^constraints\[0\]\.epsilon"),
])
def test_bad_parameters_are_one_line_errors(constraint, message):
    with pytest.raises(SpecError, match=message) as err:
        line_problem(constraint)
    assert "\n" not in str(err.value)


def test_a_ground_metric_that_is_not_a_metric_and_missing_coordinates():
    bad = np.abs(np.subtract.outer(np.arange(N), np.arange(N))).astype(float) ** 2  # squares: no triangle
    with pytest.raises(SpecError, match=r"^constraints\[0\]\.metric: triangle inequality fails"):
        line_problem(dp.WassersteinDP(epsilon=1.0, metric=bad.tolist()))
    bare = dp.Domain(tuple(f"p{i}" for i in range(N)))
    with pytest.raises(SpecError, match=r"^constraints\[0\]: Wasserstein DP needs output coordinates"):
        dp.Problem(LINE, bare, np.ones((N, N)), np.full((1, N), 1 / N),
                   constraints=(dp.WassersteinDP(epsilon=1.0),))


def test_json_round_trip():
    problem = line_problem(dp.WassersteinDP(epsilon=0.4, order=2.0, pairs=((0, 1),)),
                           dp.WassersteinDistP(pairs=((0, 1),), epsilon=1.0, metric=TRUNCATED.tolist()))
    d = json.loads(json.dumps(problem_to_dict(problem)))
    assert d["constraints"][0] == {"kind": "wdp", "name": "wdp", "epsilon": 0.4, "order": 2.0, "metric": None,
                                   "pairs": [[0, 1]]}
    back = problem_from_dict(d)
    assert back.constraints == problem.constraints and problem_hash(back) == problem_hash(problem)


@pytest.mark.parametrize("constraints", [
    (dp.WassersteinDP(epsilon=0.8),),
    pytest.param((dp.WassersteinDistP(pairs=((0, 1),), epsilon=1.5, order=2.0),
                  dp.WassersteinDP(epsilon=1.5, order=2.0)), marks=pytest.mark.slow),
])
def test_the_optimizer_on_a_line_matches_the_convex_reference(constraints):
    """The augmented Lagrangian with the exact 1-D W_μ: certified within 0.1 % of the convex
    optimum; its bound (every W_μ linearised by c-transformed potentials) is below it."""
    problem = line_problem(*constraints)
    ref = dp.solvers.convex(problem).value
    design = dp.design(problem, method="pdhg")
    assert design.certificate.ok
    assert ref * (1 - 1e-7) <= design.certificate.loss <= ref * 1.001
    assert design.result.lower_bound <= ref * (1 + 1e-7)


def test_configs_state_wdp(tmp_path):
    text = """
[inputs]
labels = ["a", "b", "c"]
coords = [[0.0], [1.0], [2.0]]

[loss]
kind = "euclidean"

[[constraints]]
kind = "wdp"
epsilon = 0.5
order = 2
"""
    path = tmp_path / "w.toml"
    path.write_text(text)
    problem, _ = dp.load_config(path)
    assert problem.constraints[0] == dp.WassersteinDP(epsilon=0.5, order=2.0, name="wdp0")
    path.write_text(text.replace('kind = "wdp"', 'kind = "ldp"'))
    with pytest.raises(ConfigError, match=r"^constraints\[0\]\.order: ldp takes no order$"):
        dp.load_config(path)
    path.write_text(text.replace("order = 2", "order = 0.5"))
    with pytest.raises((ConfigError, SpecError), match=r"constraints\[0\]\.order: the Wasserstein order"):
        dp.load_config(path)
    assert dataclasses.replace(problem.constraints[0], order=3.0).order == 3.0
