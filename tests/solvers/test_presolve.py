"""Presolve: rows no prior or compared law weighs (and outputs no row may use) are dropped before
the solver and put back exactly; the reduced problem has the whole problem's optimum (checked
against the LP and Clarabel on the whole problem), and the certificate is of the whole problem."""

import dataclasses

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.solvers._presolve import presolve


def sparse_problem(seed: int, n: int = 5, *, constraint=None, support=None,
                   objective="expected") -> dp.Problem:
    """Two items on an ``n × n`` grid, each on a random third of the cells (many cells empty in
    both), prior their average, Euclidean loss."""
    rng = np.random.default_rng(seed)
    dom = dp.Domain.grid(n, n, 1.0)
    cells = rng.permutation(n * n)
    a, b = np.zeros(n * n), np.zeros(n * n)
    a[cells[: n * n // 3]] = rng.uniform(0.2, 1.0, n * n // 3)
    b[cells[n * n // 4: n * n // 4 + n * n // 3]] = rng.uniform(0.2, 1.0, n * n // 3)
    a, b = a / a.sum(), b / b.sum()
    constraint = constraint or dp.DistP(((0, 1),), 0.7)
    return dp.Problem(dom, dom, dom.distances(dom), (a + b) / 2, items=(dp.Item("a", a), dp.Item("b", b)),
                      constraints=(constraint,), support=support, objective=objective)


def test_drops_exactly_the_rows_nothing_weighs():
    p = sparse_problem(0)
    pre = presolve(p)
    used = (p.prior[0] > 0) | (p.items[0].dist > 0) | (p.items[1].dist > 0)
    assert 0 < pre.rows.size < p.shape[1]
    np.testing.assert_array_equal(pre.rows, np.flatnonzero(used))
    assert pre.problem.shape == (1, pre.rows.size, p.shape[2])  # no support: every output kept
    for full, part in zip(p.blocks(), pre.problem.blocks(), strict=True):
        np.testing.assert_array_equal(part.wa, full.wa[:, pre.rows])
        np.testing.assert_array_equal(part.eps, full.eps)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("objective", ["expected", "worst"])
def test_reduced_problem_has_the_whole_optimum(seed, objective):
    p = sparse_problem(seed, objective=objective)
    pre = presolve(p)
    whole, part = dp.solvers.lp(p), dp.solvers.lp(pre.problem)
    assert part.value == pytest.approx(whole.value, rel=1e-7, abs=1e-9)
    restored = pre.restore(part.table)
    np.testing.assert_allclose(restored.sum(-1), 1.0)
    assert p.objective_value(restored) == pytest.approx(whole.value, rel=1e-7, abs=1e-9)
    assert dp.certify(p, restored, repair=True).ok


def test_optimize_with_presolve_certifies_the_whole_problem():
    p = sparse_problem(3, n=6)
    ref = dp.solvers.lp(p).value
    on = dp.design(p, method="pdhg", gap_tol=1e-3)
    off = dp.design(p, method="pdhg", gap_tol=1e-3, presolve=False)
    for d in (on, off):
        assert d.certificate.ok and d.result.status == "converged"
        assert d.result.lower_bound <= ref * (1 + 1e-9)
        assert d.certificate.loss <= ref * (1 + 2e-3)
    assert on.result.table.shape == p.shape
    kept = presolve(p).rows.size
    assert on.result.presolve == {"inputs": [kept, 36], "outputs": [36, 36]} and off.result.presolve is None
    assert on.certificate.meta["optimizer"]["presolve"]["inputs"] == [kept, 36]
    dropped = np.setdiff1d(np.arange(p.shape[1]), presolve(p).rows)
    # a dropped row sends everything to its least-loss output (its own cell)
    np.testing.assert_array_equal(on.result.table[0, dropped].argmax(-1), dropped)
    np.testing.assert_array_equal(on.result.table[0, dropped].max(-1), 1.0)


def test_outputs_no_row_may_use_are_dropped():
    n = 5
    support = np.ones((n * n, n * n), bool)
    support[:, [3, 7, 11]] = False
    p = sparse_problem(4, support=support)
    pre = presolve(p)
    assert pre.outs.size == n * n - 3 and not np.isin([3, 7, 11], pre.outs).any()
    whole, part = dp.solvers.lp(p), dp.solvers.lp(pre.problem)
    assert part.value == pytest.approx(whole.value, rel=1e-7)
    restored = pre.restore(part.table)
    assert np.all(restored[..., [3, 7, 11]] == 0)
    assert dp.certify(p, restored, repair=True).ok


def test_divergence_and_extended_distp_keep_the_optimum():
    """The f-divergence solvers run on the reduced problem: their bound stays below Clarabel's
    optimum of the whole problem, and their certified table within gap_tol of it."""
    pytest.importorskip("cvxpy")
    for c in (dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=0.2),
              dp.ExtendedDistP(pairs=((0, 1),), divergence="hellinger", epsilon=0.05)):
        p = sparse_problem(5, constraint=c)
        pre = presolve(p)
        assert pre is not None
        for full, part in zip(p.blocks(), pre.problem.blocks(), strict=True):
            np.testing.assert_array_equal(part.eps, full.eps)  # ε·W of the whole problem
        ref = dp.solvers.convex(p).value
        d = dp.design(p, method="cuts", gap_tol=1e-3)
        assert d.certificate.ok and d.result.status == "converged"
        assert d.result.lower_bound <= ref * (1 + 1e-6)
        assert d.certificate.loss <= ref * (1 + 2e-3)


def test_no_presolve_where_rows_are_compared_or_all_used():
    p = sparse_problem(6)
    assert presolve(dataclasses.replace(p, constraints=(dp.LocalDP(2.0),))) is None
    dense = dataclasses.replace(p, prior=np.full(p.shape[1], 1.0 / p.shape[1]))
    assert presolve(dense) is None
    assert presolve(dataclasses.replace(p, objective="transport")) is None


def test_warm_start_of_the_whole_shape():
    p = sparse_problem(7)
    first = dp.optimize(p, method="pdhg", gap_tol=1e-2)
    again = dp.optimize(p, method="pdhg", gap_tol=1e-3, init=first)  # state of the reduced problem
    assert again.status == "converged" and again.table.shape == p.shape
    table = dp.optimize(p, method="pdhg", gap_tol=1e-3, init=first.table)
    assert table.status == "converged"
    with pytest.raises(ValueError, match="init: shape"):
        dp.optimize(p, method="pdhg", init=first.table[:, :-1])


SPARSE_TOML = """
description = "points on a few cells of a 6x6 grid"
[inputs]
grid = { rows = 6, cols = 6, cell = 1.0 }
[loss]
kind = "euclidean"
[[items]]
name = "a"
distribution = { points = [[0.5, 0.5], [1.5, 0.5], [4.5, 4.5], [0.5, 0.5]] }
[[items]]
name = "b"
distribution = { points = [[3.5, 3.5], [4.5, 4.5], [5.5, 5.5]] }
[[constraints]]
kind = "distp"
epsilon = 1.0
pairs = [["a", "b"]]
[optimizer]
method = "pdhg"
gap_tol = 1e-3
"""


def test_the_cli_says_what_presolve_kept(tmp_path):
    import json

    from typer.testing import CliRunner

    from diffpriv.cli import app

    config = tmp_path / "sparse.toml"
    config.write_text(SPARSE_TOML)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["optimize", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["presolve"] == {"inputs": [5, 36], "outputs": [36, 36]}  # five cells hold points
    assert "solved on 5 of 36 inputs" in result.stdout
    assert summary["ok"] and summary["stop"] == "converged"


def test_step_bytes_follow_the_presolved_table():
    """One PDHG step moves a fixed number of table-sized passes (float64: 8 bytes an entry, ten
    to thirty passes): 16× the entries, 10–17× the bytes; and a presolved problem is counted at
    its reduced size."""
    dense = [dataclasses.replace(sparse_problem(8, n), prior=np.full(n * n, 1.0 / (n * n))) for n in (6, 12)]
    small, large = (dp.solvers.step_bytes(p) for p in dense)
    assert 10 < large / small < 17
    assert 8 * 10 < large / 144**2 < 8 * 30
    sparse = sparse_problem(8, 12)
    kept = presolve(sparse).rows.size
    assert dp.solvers.step_bytes(sparse) < large * (kept / 144 + 0.1)
    r = dp.optimize(sparse, method="pdhg", gap_tol=1e-2)
    assert 0 < r.polish_seconds < r.seconds


def test_vacuous_comparisons_are_met_by_every_table():
    """``vacuous`` marks exactly the comparisons no table can break: TV or squared Hellinger at
    1 or more, Wasserstein at the outputs' largest distance or more; checked against the
    certifier's levels on extreme and random tables (its ``ok`` keeps a rounding margin, so a
    level of exactly 1 at a budget of 1 is mixed a little by the repair)."""
    from diffpriv.problems._blocks import vacuous

    dom = dp.Domain.grid(3, 3, 1.0)
    near = dp.problems.pairs_within(dom, 1.0)
    prior = np.full(9, 1 / 9)
    cases = [(dp.DivergenceDP(divergence="tv", epsilon=1.0, pairs=near), True),
             (dp.DivergenceDP(divergence="tv", epsilon=0.99, pairs=near), False),
             (dp.DivergenceDP(divergence="hellinger", epsilon=1.0, pairs=near), True),
             (dp.DivergenceDP(divergence="hellinger", epsilon=0.9, pairs=near), False),
             (dp.DivergenceDP(divergence="kl", epsilon=50.0, pairs=near), False),
             (dp.WassersteinDP(epsilon=3.0, pairs=near), True),  # the diagonal is 2.83
             (dp.WassersteinDP(epsilon=2.8, pairs=near), False)]
    rng = np.random.default_rng(0)
    one_hot = np.eye(9)[None]  # every row on its own cell: TV 1, Hellinger 1, W the distance
    corner = np.zeros((1, 9, 9))
    corner[0, ::2, 0], corner[0, 1::2, 8] = 1.0, 1.0  # rows on opposite corners
    for c, expected in cases:
        p = dp.Problem(dom, dom, dom.distances(dom), prior, constraints=(c,))
        marks = np.concatenate([vacuous(b) for b in p.blocks()])
        assert marks.all() == expected and (marks.any() == expected), c
        tables = (one_hot, corner, rng.dirichlet(np.full(9, 0.1), size=(1, 9)))
        margins = [dp.certify(p, t).constraints[0].margin for t in tables]
        if expected:
            assert min(margins) >= -1e-12, (c, margins)
            fixed = dp.certify(p, one_hot, repair=True)
            assert fixed.ok and fixed.repair_t < 1e-9
        else:
            assert min(margins) < -1e-3, (c, margins)


def test_auto_leaves_out_what_every_table_meets():
    """TV-DP at budget 1 between 4-neighbour cells of a 10×10 grid with the prior on 4 cells
    (where mirror-prox would tighten it and stall above the optimum of 0) beside a binding DistP:
    ``"auto"`` solves DistP alone, at the whole problem's optimum by the LP reference (which keeps
    the TV rows); an explicit method keeps the constraint."""
    n = 10
    dom = dp.Domain.grid(n, n, 1.0)
    rng = np.random.default_rng(1)
    a, b = np.zeros(n * n), np.zeros(n * n)
    a[[0, 11, 45]], b[[45, 78, 99]] = rng.dirichlet(np.ones(3)), rng.dirichlet(np.ones(3))
    tv = dp.DivergenceDP(divergence="tv", epsilon=1.0, pairs=dp.problems.pairs_within(dom, 1.0))
    p = dp.Problem(dom, dom, dom.distances(dom), (a + b) / 2, items=(dp.Item("a", a), dp.Item("b", b)),
                   constraints=(tv, dp.DistP(((0, 1),), 1.0)))
    ref = dp.solvers.lp(p).value
    assert ref > 0.1  # DistP binds
    d = dp.design(p, gap_tol=1e-2)
    assert d.result.presolve["constraints"] == [1, 2] and d.result.presolve["inputs"][0] == 5
    assert d.certificate.ok and d.result.status == "converged"
    assert d.certificate.loss == pytest.approx(ref, rel=1e-6)
    assert d.result.lower_bound <= ref * (1 + 1e-9)
    alone = dataclasses.replace(p, constraints=(tv,))
    zero = dp.design(alone, gap_tol=1e-2)
    assert zero.result.status == "converged" and zero.certificate.ok and zero.certificate.loss < 1e-9
    kept = dp.optimize(p, method="pdhg", gap_tol=1e-2, steps=200)  # (what presolve kept, not the result)
    assert kept.presolve is None or "constraints" not in kept.presolve


def test_the_cli_says_which_constraints_were_left_out(tmp_path):
    import json

    from typer.testing import CliRunner

    from diffpriv.cli import app

    config = tmp_path / "vacuous.toml"
    config.write_text(SPARSE_TOML.replace('method = "pdhg"', 'method = "auto"') + """
[[constraints]]
kind = "divergence_dp"
divergence = "tv"
epsilon = 1.0
neighbours = "grid4"
""")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["optimize", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["presolve"] == {"inputs": [5, 36], "outputs": [36, 36], "constraints": [1, 2]}
    assert "1 of 2 constraints left out" in " ".join(result.stdout.replace("│", " ").split())  # wrapped
    assert summary["ok"] and summary["stop"] == "converged"
