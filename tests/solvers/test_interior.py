"""The structured interior point (:mod:`diffpriv.solvers._interior`) on small real-like problems:
concentrated priors with empty cells, 4- and 8-neighbour cells, small and large budgets, against
the LP optimum (HiGHS on the whole LP)."""

import dataclasses

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.problems import k_rr_problem, pairs_within
from diffpriv.problems._checks import SpecError
from diffpriv.solvers import _interior, _methods


def _concentrated(n: int, eps: float, radius: float, seed: int, empty: float = 0.6) -> dp.Problem:
    """An ``n × n`` grid, a Dirichlet(0.3) prior with ``empty`` of its cells at 0, geo-
    indistinguishability ``eps`` per unit between cells within ``radius``."""
    rng = np.random.default_rng(seed)
    dom = dp.Domain.grid(n, n, 1.0)
    prior = rng.dirichlet(np.full(n * n, 0.3))
    prior[rng.random(n * n) < empty] = 0.0
    if not prior.any():
        prior[0] = 1.0
    prior /= prior.sum()
    return dp.Problem(dom, dom, dom.distances(dom), prior,
                      constraints=(dp.ExtendedDP(eps, pairs=pairs_within(dom, radius)),))


CASES = [(4, 0.3, 1.0, 0), (5, 1.0, 1.0, 1), (5, 3.0, 1.0, 2), (4, 0.5, 1.5, 3), (5, 2.0, 1.5, 4),
         (6, 0.7, 1.0, 5)]
"""``(side, ε, neighbour radius, seed)``: 4-neighbour cells at radius 1, 8-neighbour at 1.5."""


@pytest.mark.parametrize(("n", "eps", "radius", "seed"), CASES)
def test_certified_within_gap_tol_of_the_lp_optimum_on_concentrated_priors(n, eps, radius, seed):
    problem = _concentrated(n, eps, radius, seed)
    assert _interior.applies(problem)
    optimum = dp.solvers.lp(problem).value
    d = dp.design(problem, method="interior", gap_tol=1e-3)
    assert d.certificate.ok and d.result.method == "interior point" and d.result.converged
    assert d.result.lower_bound <= optimum + 1e-9 * max(1.0, optimum)
    assert optimum <= d.certificate.loss + 1e-9
    assert d.certificate.loss <= optimum + 1e-3 * optimum + 1e-9


def test_every_iterate_is_a_table_within_the_budgets_and_every_bound_holds():
    """The run keeps its iterates inside the tightened budgets and its bound below the optimum
    at every iteration, not only at the end."""
    from diffpriv.solvers._options import Options

    problem = _concentrated(5, 1.0, 1.5, 7)
    optimum = dp.solvers.lp(problem).value
    run = _interior.InteriorRun(Options(gap_tol=1e-6, steps=40), problem, 0)
    for _ in range(25):
        run.chunk()
        assert run.bound <= optimum + 1e-9
        table = run.table()
        assert np.allclose(table.sum(axis=-1), 1.0, atol=1e-9)
        assert dp.certify(problem, table).ok


def test_local_dp_with_every_row_linked_matches_the_lp():
    problem = k_rr_problem(6, 1.0)
    assert _interior._Pairs(problem).u == 5  # every row linked to every other: blocks of 5 rows
    d = dp.design(problem, method="interior", gap_tol=1e-4)
    optimum = dp.solvers.lp(problem).value
    assert d.certificate.ok and d.certificate.loss <= optimum * (1 + 1e-4) + 1e-9


def test_refuses_what_it_does_not_solve_in_one_line():
    problem = _concentrated(4, 0.5, 1.0, 0)
    worst = dataclasses.replace(problem, objective="worst")
    near = pairs_within(problem.inputs, 1.0)
    delta = dataclasses.replace(problem, constraints=(dp.LocalDP(0.5, delta=0.01, pairs=near),))
    for p in (worst, delta):
        assert not _interior.applies(p)
        with pytest.raises(SpecError, match="'interior' needs pure local / extended DP"):
            _methods.route(p, "interior")


def test_optimize_says_up_front_how_long_a_long_run_is_expected_to_take(capsys, monkeypatch):
    """``diffpriv optimize`` announces the interior point's expected duration above its threshold,
    and nothing below it or for another solver."""
    from diffpriv.cli import _optimize

    problem = _concentrated(6, 0.7, 1.0, 5)
    _optimize._announce(problem, "auto", 1e-2)
    assert capsys.readouterr().out == ""
    monkeypatch.setattr(_optimize, "LONG_RUN", 0.0)
    _optimize._announce(problem, "auto", 1e-2)
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith("expect a long run: about 0 minutes for the interior point")
    assert "--time-limit" in out
    _optimize._announce(problem, "exact", 1e-2)
    assert capsys.readouterr().out == ""


def test_write_lp_writes_the_reference_lp_that_highs_reads_back_at_its_optimum(tmp_path):
    """``dp.solvers.write_lp``: the LP of :func:`dp.solvers.lp` as an MPS file (what the benchmarks
    give HiGHS's other algorithms), read back and solved to the same optimum."""
    import highspy

    problem = _concentrated(4, 0.5, 1.0, 0)
    sizes = dp.solvers.write_lp(problem, tmp_path / "geo.mps")
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(tmp_path / "geo.mps"))
    h.run()
    assert h.getNumCol() == sizes["variables"] and h.getNumRow() == sizes["rows"]
    assert h.getInfo().objective_function_value == pytest.approx(dp.solvers.lp(problem).value, rel=1e-7)
