"""``optimizer.method``: one table of methods, and ``"auto"`` (the default) running the exact
reference where the size model predicts it is faster, diffpriv's own solver elsewhere."""

import dataclasses
import importlib.util
import typing

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.problems._known import k_rr_problem
from diffpriv.solvers._methods import METHODS, PAIR_ENTRIES, choose, exact_solver
from diffpriv.solvers._options import Options
from tests._problems import geo_problem


def _kl(n_in: int = 5, eps: float = 0.1) -> dp.Problem:
    base = dp.problems.random_problem(0, n_in=n_in, n_out=n_in)
    items = tuple(dp.Item(f"item{i}", np.random.default_rng(i).dirichlet(np.ones(n_in)))
                  for i in range(2))
    return dataclasses.replace(base, items=items, constraints=(
        dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=eps),))


def test_the_options_allow_exactly_the_methods_of_the_table():
    assert typing.get_args(typing.get_type_hints(Options)["method"]) == tuple(METHODS)
    assert Options().method == "auto"
    with pytest.raises(ValueError, match=r"^optimizer.method: must be 'auto', 'pdhg', 'cuts', 'mirror', "
                                         r"'al', 'interior', 'exact' or 'gradient', got 'lp'$"):
        Options(method="lp")


def test_auto_runs_highs_on_small_linear_problems_and_pdhg_beyond_the_threshold():
    assert exact_solver(k_rr_problem(4, 1.0)) == "highs"
    assert exact_solver(geo_problem(8)) == "highs"
    # 4·Y·Kp pair entries: 20×20 with 4-neighbour pairs is 4·400·760 = 1.2M, above the limit.
    assert 4 * 400 * 760 > PAIR_ENTRIES and exact_solver(geo_problem(20)) is None
    result = dp.optimize(k_rr_problem(4, 1.0))
    assert (result.method, result.plan, result.status, result.steps) == ("highs", "exact", "converged", 0)
    ref = dp.solvers.lp(k_rr_problem(4, 1.0))
    assert result.lower_bound == ref.bound <= ref.value + 1e-12
    assert result.objective == pytest.approx(ref.value, abs=1e-12)


def test_auto_keeps_diffprivs_solver_where_the_references_cannot_run(monkeypatch):
    kl = _kl()
    assert exact_solver(kl) == "clarabel"
    # KL on 12×12 (20,736 variables): Clarabel at the default gap_tol, the smoothed dual at 1e-3.
    assert exact_solver(_kl(144)) == "clarabel" and exact_solver(_kl(144), 1e-3) is None
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "cvxpy" else real(name, *a))
    assert exact_solver(kl) is None  # without cvxpy
    monkeypatch.undo()
    monkeypatch.setenv("DIFFPRIV_MEMORY_LIMIT", "1000")
    assert exact_solver(k_rr_problem(4, 1.0)) is None  # the LP would not fit
    monkeypatch.delenv("DIFFPRIV_MEMORY_LIMIT")
    # A warm start continues a first-order run.
    first = dp.optimize(k_rr_problem(3, 1.0), method="pdhg", steps=500)
    assert dp.optimize(k_rr_problem(3, 1.0), steps=500, init=first).method == "pdhg"


def test_auto_on_divergence_constraints_runs_clarabel_when_small_and_cuts_beyond(monkeypatch):
    kl = _kl()
    ref = dp.solvers.convex(kl)
    small = dp.optimize(kl)
    assert (small.method, small.plan, small.status) == ("clarabel", "exact", "converged")
    # the bound is weak duality at the tangent relaxation of Clarabel's table, not its value
    assert ref.value * (1 - 1e-4) <= small.lower_bound <= ref.value
    cert = dp.certify(kl, small.table, repair=True)
    assert cert.ok and cert.loss == pytest.approx(ref.value, rel=1e-6)
    assert small.lower_bound <= cert.loss
    big = _kl(150)  # 150 × 150 = 22,500 table entries > CUTS_FROM
    assert choose(big, "auto") == "cuts" and choose(big, "auto", warm=True) == "pdhg"
    # the largest entry: Clarabel wherever it fits (cuts measured 40-160x slower on 10x10 grids)
    assert choose(dataclasses.replace(big, objective=dp.LargestEntry()), "auto") == "exact"
    result = dp.optimize(big)
    assert (result.method, result.plan, result.status) == ("cuts", "cuts", "converged")
    cert = dp.certify(big, result.table, repair=True)
    assert cert.ok and result.lower_bound <= cert.loss <= result.lower_bound * (1 + 1e-4)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "cvxpy" else real(name, *a))
    assert choose(kl, "auto") == "cuts"  # without cvxpy
    monkeypatch.undo()
    own = dp.optimize(kl, method="pdhg", gap_tol=1e-3)
    assert own.method == "dual" and own.lower_bound <= ref.value * (1 + 1e-7)
    with pytest.raises(ValueError, match="^optimizer.method: 'cuts' needs f-divergence"):
        dp.optimize(dataclasses.replace(k_rr_problem(3, 1.0), objective="entry"), method="cuts")


def test_auto_falls_back_to_pdhg_when_the_lp_fails_and_exact_says_why():
    """An infeasible problem (support radius 2 with distant items, as in test_optimizer): HiGHS
    reports it; "auto" then runs PDHG, whose bound proves infeasibility; "exact" raises."""
    from tests.solvers.test_optimizer import _home_out_with_radius

    problem, _ = _home_out_with_radius(2.0)
    assert exact_solver(problem) == "highs"
    result = dp.optimize(problem, steps=20_000)
    assert result.method == "pdhg" and result.infeasible
    with pytest.raises(dp.solvers.ReferenceSolveError, match="nfeasible"):
        dp.optimize(problem, method="exact")
    with pytest.raises(ValueError, match="^init: warm starts need method 'pdhg'$"):
        dp.optimize(k_rr_problem(3, 1.0), method="exact", init=np.full((1, 3, 3), 1 / 3))


def test_auto_is_one_table_that_the_docs_and_the_cli_help_show():
    """``"auto"``'s rows in docs/algorithms.md are :data:`_methods.AUTO`'s, and the CLI's help
    and the options' description read its cases; every row's runs are solvers or its four
    words, and the last row holds everywhere."""
    import pathlib

    from diffpriv.solvers import _methods

    docs = (pathlib.Path(__file__).parents[2] / "docs" / "algorithms.md").read_text()
    assert _methods.auto_table() in docs
    assert all(r.case in METHODS["auto"] for r in _methods.AUTO)
    words = {"own", "first order", "exact?", "interior?"}
    assert all(set(r.runs) <= set(_methods.SOLVERS) | words for r in _methods.AUTO)
    assert {r.method for r in _methods.AUTO} == {"exact", "cuts", "interior", "pdhg"}
    assert _methods.AUTO[-1].when(None)
