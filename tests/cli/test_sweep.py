"""``dp.sweep`` and ``diffpriv sweep``: a frontier certified at every budget against the LP, the
baselines calibrated, the folder resumed after an interruption without losing or repeating a
budget, another sweep's folder refused, bad input one error line; HiGHS warm-started from a
neighbouring budget's basis gives the cold solve's optimum and bound."""

import csv
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

import diffpriv as dp
from diffpriv._sweep import budget_grid, constraint_index
from diffpriv.cli import app
from diffpriv.cli._sweep import parse_budget
from diffpriv.problems._known import k_rr_problem
from diffpriv.solvers._lp import solve_lp
from tests._configs import BASE_TOML

ROOT = Path(__file__).resolve().parents[2]



def _text(out: str) -> str:
    """The CLI's output with rich's line wrapping undone (it wraps long paths at the terminal's width)."""
    return " ".join(out.split())

def _rows(out: Path) -> list[dict]:
    with open(out / "frontier.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def city():
    problem, _ = dp.load_config(ROOT / "configs" / "quickstart.toml")
    return problem


def test_sweep_certifies_every_budget_within_one_percent_of_the_lp(city, tmp_path):
    budgets = budget_grid(0.25, 4.0, 8, log=True)
    f = dp.sweep(city, budgets, out=tmp_path)
    assert [r["budget"] for r in f.rows] == list(budgets) and f.resumed == 0
    for b, row in zip(budgets, f.rows, strict=True):
        lp = solve_lp(dataclasses.replace(city, constraints=(
            dataclasses.replace(city.constraints[0], epsilon=b),))).value
        assert row["ok"] and row["status"] == "converged"
        assert lp <= row["certified_loss"] <= lp * 1.01
        assert row["lower_bound"] <= lp * (1 + 1e-9)
        report = dp.verify(tmp_path / row["certificate"])
        assert report.ok
        assert dp.Certificate.load(tmp_path / row["certificate"]).problem["constraints"][0]["epsilon"] == b
    assert len(_rows(tmp_path)) == 8
    losses = [r["certified_loss"] for r in f.rows]
    assert all(a > b for a, b in zip(losses, losses[1:], strict=False))  # more budget, less loss
    for name in ("frontier.png", "frontier.pdf"):
        assert (tmp_path / name).stat().st_size > 1000


def test_a_frontier_gives_its_rows_as_a_table_and_its_figure(city, tmp_path):
    f = dp.sweep(city, [2.0, 0.5, 1.0])  # listed out of order: the figure follows the budgets
    fig = f.plot(tmp_path / "f.pdf", ylabel="expected loss (cells)")
    assert (tmp_path / "f.pdf").read_bytes()[:4] == b"%PDF"
    (ax,) = fig.axes
    assert list(ax.lines[0].get_xdata()) == [0.5, 1.0, 2.0] and ax.get_ylabel() == "expected loss (cells)"
    ordered = sorted(f.rows, key=lambda r: r["budget"])
    assert list(ax.lines[0].get_ydata()) == [r["certified_loss"] for r in ordered]
    assert f.plot().axes[0].get_ylabel() == "certified loss"
    try:
        import pandas  # noqa: F401  (not a dependency)
    except ImportError:
        with pytest.raises(ImportError, match="pip install pandas"):
            f.to_pandas()
    else:
        table = f.to_pandas()
        assert list(table["budget"]) == [2.0, 0.5, 1.0] and list(table["certified_loss"]) == [
            r["certified_loss"] for r in f.rows]


def test_the_frontier_figure_names_the_loss_unit_keeps_its_legend_off_the_curves_and_fits_a_column(city):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from diffpriv.io._frontier import frontier_figure, loss_label

    assert loss_label(city) == "expected loss (km)"  # Euclidean cells of 1 km
    hamming = dataclasses.replace(city, loss=(city.loss > 0).astype(float))
    assert loss_label(hamming) == "expected loss"  # not a distance: no unit
    f = dp.sweep(city, [0.5, 1.0, 2.0])
    screen = frontier_figure(f, loss_label(city))
    FigureCanvasAgg(screen).draw()
    (ax,) = screen.axes
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1  # right of the axes
    assert ax.get_yscale() == "linear" and ax.get_ylabel() == "expected loss (km)"
    paper = f.plot(log_loss=True, paper=True)
    FigureCanvasAgg(paper).draw()
    (ax,) = paper.axes
    assert tuple(paper.get_size_inches()) == (3.5, 3.2) and ax.get_yscale() == "log"
    assert ax.get_legend().get_window_extent().y1 <= ax.get_window_extent().y0  # below the axes


def test_an_interrupted_sweep_resumes_without_losing_or_repeating_a_budget(city, tmp_path):
    budgets = [0.5, 1.0, 1.5, 2.0, 3.0]
    seen = []

    def stop_after_two(i, row):
        seen.append(i)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        dp.sweep(city, budgets, out=tmp_path, on_point=stop_after_two)
    assert [float(r["budget"]) for r in _rows(tmp_path)] == [0.5, 1.0]
    assert not (tmp_path / "frontier.png").exists()
    solved = []
    f = dp.sweep(city, budgets, out=tmp_path, on_point=lambda i, r: solved.append(i))
    assert f.resumed == 2 and solved == [0, 1, 2, 3, 4]
    rows = _rows(tmp_path)
    assert [float(r["budget"]) for r in rows] == budgets
    assert sorted(p.name for p in (tmp_path / "certificates").iterdir()) == \
        [f"budget-{i:03d}.json" for i in range(5)]
    again = dp.sweep(city, budgets, out=tmp_path)  # all done: nothing is solved again
    assert again.resumed == 5
    assert [r["certified_loss"] for r in again.rows] == pytest.approx([r["certified_loss"] for r in f.rows])


def _write_rows(out: Path, rows: list[dict]) -> None:
    with open(out / "frontier.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _edit_rows(edit):
    """A tampering of ``frontier.csv``: ``edit(rows, out)`` changes the rows in place."""
    def tamper(out: Path) -> None:
        rows = _rows(out)
        edit(rows, out)
        _write_rows(out, rows)
    return tamper


def _cert(out: Path, i: int) -> Path:
    return out / "certificates" / f"budget-{i:03d}.json"


def _edited_loss(out: Path) -> None:
    import json

    data = json.loads(_cert(out, 1).read_text())
    data["loss"] = data["loss"] / 2
    _cert(out, 1).write_text(json.dumps(data))


def _outside(rows, out):
    (out.parent / "elsewhere.json").write_bytes(_cert(out, 1).read_bytes())
    rows[1]["certificate"] = "../elsewhere.json"


def _below(rows, out):
    rows[1].update(certified_loss="0.0", lower_bound="0.0", gap="0.0", krr_loss="0.0", ok="True")


TAMPERED = {  # (tampering, the budgets solved again, how many rows are kept)
    "a loss edited below its bound": (_edit_rows(_below), [], 3),
    "a row naming another budget's certificate": (
        _edit_rows(lambda rows, out: rows[2].update(certificate="certificates/budget-000.json")), [2], 2),
    "another budget's certificate in its place": (
        lambda out: _cert(out, 2).write_bytes(_cert(out, 0).read_bytes()), [2], 2),
    "an empty certificate": (lambda out: _cert(out, 1).write_text(""), [1], 2),
    "a certificate whose loss was edited": (_edited_loss, [1], 2),
    "a row naming a system file": (_edit_rows(lambda rows, out: rows[1].update(certificate="/etc/passwd")),
                                   [1], 2),
    "a row naming a file outside the folder": (_edit_rows(_outside), [1], 2),
    "a kill between a certificate and its row": (_edit_rows(lambda rows, out: rows.pop()), [], 2),
}


@pytest.mark.parametrize("case", list(TAMPERED))
def test_a_resumed_sweep_rebuilds_each_row_from_its_verified_certificate(tmp_path, case):
    """Of a row, only that its budget was finished is trusted: its numbers come from the
    certificate at the expected path once it verifies for the problem at that budget, and a
    budget whose certificate does not is solved again and reported: the resumed frontier is
    the one a new sweep gives."""
    from diffpriv._sweep import at_budget

    problem, budgets = k_rr_problem(3, 1.0), [0.5, 1.0, 2.0]
    out = tmp_path / "out"
    before = dp.sweep(problem, budgets, out=out, baselines=["krr"])
    tamper, redo, kept = TAMPERED[case]
    tamper(out)
    redone = []
    after = dp.sweep(problem, budgets, out=out, baselines=["krr"], on_redo=lambda i, why: redone.append(i))
    assert redone == redo and after.resumed == kept
    on_disk = _rows(out)
    for i, (old, new, row) in enumerate(zip(before.rows, after.rows, on_disk, strict=True)):
        assert list(new) == list(old) and list(row) == list(old)
        for key, value in old.items():
            if isinstance(value, float) and key != "seconds":
                assert new[key] == pytest.approx(value, rel=1e-9), (i, key)
                assert float(row[key]) == pytest.approx(value, rel=1e-9), (i, key)
            elif key != "seconds":
                assert new[key] == value and row[key] == str(value), (i, key)
        assert row["certificate"] == f"certificates/budget-{i:03d}.json"
        assert dp.verify(out / row["certificate"], problem=at_budget(problem, 0, "epsilon", budgets[i])).ok


def test_a_resumed_batch_reads_its_status_back_from_its_certificates(tmp_path, monkeypatch):
    """A batched budget's certificate records no status: it is the certified gap against the
    ``gap_tol`` its options record, as when it was solved (the batch solved by HiGHS here, for
    speed)."""
    import diffpriv._sweep as sweep_module

    def by_highs(problems, index, options, seed, shard):
        solved = [solve_lp(problems[i]) for i in index]
        return [s.table for s in solved], [s.bound for s in solved]

    monkeypatch.setattr(sweep_module, "_solve_batch", by_highs)
    problem, budgets = k_rr_problem(3, 1.0), [0.5, 2.0]
    before = dp.sweep(problem, budgets, out=tmp_path, batch=True, method="pdhg")
    assert [r["status"] for r in before.rows] == ["converged"] * 2
    _write_rows(tmp_path, [{**r, "status": "step limit", "method": "highs"} for r in _rows(tmp_path)])
    after = dp.sweep(problem, budgets, out=tmp_path, batch=True, method="pdhg")
    assert after.resumed == 2
    for old, new in zip(before.rows, after.rows, strict=True):
        old, new = dict(old, seconds=0), dict(new, seconds=0)
        assert new == old


def test_a_resumed_sweep_says_why_it_solves_a_budget_again(tmp_path):
    problem, budgets = k_rr_problem(3, 1.0), [0.5, 1.0, 2.0]
    out = tmp_path / "out"
    dp.sweep(problem, budgets, out=out)
    _cert(out, 2).write_bytes(_cert(out, 0).read_bytes())
    _cert(out, 1).write_text("")
    why = {}
    dp.sweep(problem, budgets, out=out, on_redo=lambda i, w: why.setdefault(i, w))
    assert why[1] == f"{_cert(out, 1)}: certificate: expected a JSON object"
    assert why[2].startswith(f"{_cert(out, 2)}: does not verify: not the certificate of the given problem: "
                             "problem.constraints[0].epsilon: the certificate has 0.5, the config 2.0")
    assert all("\n" not in w for w in why.values())


def _csv_text(edit):
    def tamper(out: Path) -> None:
        path = out / "frontier.csv"
        path.write_bytes(edit(path.read_bytes()))
    return tamper


MALFORMED = {
    "a renamed column": (_csv_text(lambda b: b.replace(b"budget,", b"eps,", 1)),
                         "no column 'budget' (columns: 'eps', 'certified_loss'"),
    "an unknown column": (_csv_text(lambda b: b.replace(b"\r\n", b",x\r\n")), "unknown column 'x'"),
    "a budget that is not a number": (_edit_rows(lambda rows, out: rows[1].update(budget="abc")),
                                      "line 3: budget: not a number: 'abc'"),
    "a budget that is not the sweep's": (_edit_rows(lambda rows, out: rows[1].update(budget="7.0")),
                                         "line 3: budget: '7.0' is not one of the sweep's budgets"),
    "a budget twice": (_edit_rows(lambda rows, out: rows.append(dict(rows[0]))),
                       "line 4: budget: '0.5' appears twice"),
    "a short row": (_csv_text(lambda b: b + b"1.0,0.4\r\n"), "line 4: not as many fields as the header's 10"),
    "an empty file": (_csv_text(lambda b: b""), "empty (no header line)"),
    "text that is not UTF-8": (_csv_text(lambda b: b"\xff" + b), "cannot read ("),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_frontier_csv_that_is_not_a_sweeps_is_refused_in_one_line(tmp_path, case):
    problem, budgets = k_rr_problem(3, 1.0), [0.5, 1.0]
    out = tmp_path / "out"
    dp.sweep(problem, budgets, out=out)
    tamper, message = MALFORMED[case]
    tamper(out)
    before = (out / "frontier.csv").read_bytes()
    with pytest.raises(ValueError) as e:
        dp.sweep(problem, budgets, out=out)
    text = str(e.value)
    assert text.startswith(f"out: {out / 'frontier.csv'}: ") and message in text, text
    assert text.endswith("; use another folder, or delete it to start over") and "\n" not in text
    assert (out / "frontier.csv").read_bytes() == before  # refused before anything is written


def test_a_folder_holding_another_sweep_is_refused(city, tmp_path):
    dp.sweep(city, [1.0, 2.0], out=tmp_path)
    with pytest.raises(ValueError, match="holds another sweep .*budgets differ"):
        dp.sweep(city, [1.0, 2.0, 3.0], out=tmp_path)
    with pytest.raises(ValueError, match="problem_hash differ"):
        dp.sweep(city.scaled(2.0), [1.0, 2.0], out=tmp_path)
    with pytest.raises(ValueError, match="options differ"):
        dp.sweep(city, [1.0, 2.0], out=tmp_path, gap_tol=1e-3)


def test_baselines_are_calibrated_to_every_budget():
    # k-RR under local DP: the optimum is k-RR itself, (k − 1)/(e^ε + k − 1)
    problem = k_rr_problem(4, 1.0)
    f = dp.sweep(problem, [0.5, 1.0, 2.0], baselines=["krr"])
    for b, row in zip([0.5, 1.0, 2.0], f.rows, strict=True):
        exact = 3 / (math.exp(b) + 3)
        assert row["certified_loss"] == pytest.approx(exact, rel=1e-6)
        assert row["krr_loss"] == pytest.approx(exact, rel=1e-5)
        assert row["krr_param"] == pytest.approx(b, rel=1e-5)


def test_the_delta_of_a_constraint_can_be_swept(city):
    base = dataclasses.replace(city, constraints=(dataclasses.replace(city.constraints[0], delta=0.001),))
    f = dp.sweep(base, [0.001, 0.01, 0.05], field="delta")
    for d, row in zip([0.001, 0.01, 0.05], f.rows, strict=True):
        lp = solve_lp(dataclasses.replace(base, constraints=(
            dataclasses.replace(base.constraints[0], delta=d),))).value
        assert lp <= row["certified_loss"] <= lp * 1.01


def test_bad_sweeps_are_refused(city):
    with pytest.raises(ValueError, match="no constraint named 'x'"):
        constraint_index(city, "x")
    two = dataclasses.replace(city, constraints=city.constraints * 2)
    with pytest.raises(ValueError, match="2 constraints named"):
        constraint_index(two, "home-vs-out")
    with pytest.raises(ValueError, match="name the one to sweep"):
        constraint_index(two, None)
    with pytest.raises(ValueError, match="a value appears twice"):
        dp.sweep(city, [1.0, 1.0])
    with pytest.raises(ValueError, match="not a mechanism that can be calibrated"):
        dp.sweep(city, [1.0], baselines=["coupling"])
    kl = dataclasses.replace(city, constraints=(
        dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=0.1),))
    with pytest.raises(ValueError, match="has no delta budget"):
        dp.sweep(kl, [0.1], field="delta")
    with pytest.raises(dp.problems.SpecError):
        dp.sweep(city, [-1.0])
    for args, message in [((1.0, 0.5, 3), "LO <= HI"), ((0.0, 1.0, 3, True), "LO > 0"),
                          ((0.5, 1.0, 0), "positive integer"), ((0.5, 1.0, 1), "LO = HI")]:
        lo, hi, n, *log = args
        with pytest.raises(ValueError, match=message):
            budget_grid(lo, hi, n, log=bool(log))


def test_parse_budget():
    assert parse_budget("home-vs-out=0.25:4:3", False) == ("home-vs-out", "epsilon", [0.25, 2.125, 4.0])
    name, field, values = parse_budget("a.b=c.delta=0.001:0.1:3", True)
    assert (name, field) == ("a.b=c", "delta") and values == pytest.approx([0.001, 0.01, 0.1])
    assert parse_budget("geo=2,0.5,1", False) == ("geo", "epsilon", [2.0, 0.5, 1.0])  # as given
    assert parse_budget("geo.delta=1e-3", True) == ("geo", "delta", [1e-3])
    for text, message in [("0.1:1:3", "NAME=LO:HI:N"), ("x=0.1:1", "LO:HI:N"), ("x=a:1:3", "numbers"),
                          ("x=0.1:1:2000", "at most 1000"), ("x=0.5,a", "separated by commas"),
                          ("x=" + ",".join(["1"] * 1001), "at most 1000")]:
        with pytest.raises(ValueError, match=message):
            parse_budget(text, False)


def test_cli_sweep_writes_the_frontier_and_resumes(runner, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(BASE_TOML.replace('kind = "distp"', 'kind = "distp"\nname = "pq"'))
    out = tmp_path / "out"
    args = ["sweep", str(config), "--budget", "pq=0.25:2:4", "--out", str(out), "--baselines", "krr",
            "--log-loss"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (out / "frontier.pdf").read_bytes()[:4] == b"%PDF" and (out / "frontier.png").stat().st_size > 1000
    rows = _rows(out)
    assert len(rows) == 4 and all(r["ok"] == "True" for r in rows) and "krr_loss" in rows[0]
    assert "4 certificates" in _text(result.stdout)
    result = runner.invoke(app, ["certify", str(out / rows[2]["certificate"])])
    assert result.exit_code == 0, result.output
    point = out / rows[2]["certificate"]
    result = runner.invoke(app, ["certify", str(point), "--config", str(config)])
    assert result.exit_code == 1 and "not the certificate of" in result.stderr  # another budget
    hint = f"add --budget pq={float(rows[2]['budget'])!r})"
    assert result.stderr.strip().endswith(hint), result.stderr
    result = runner.invoke(app, ["certify", str(point), "--config", str(config), "--budget", hint[13:-1]])
    assert result.exit_code == 0 and "all claims hold" in result.stdout
    again = runner.invoke(app, args)
    assert again.exit_code == 0 and "4 read back" in _text(again.stdout)
    assert len(_rows(out)) == 4


def test_cli_sweep_resumes_from_verified_certificates_and_refuses_a_malformed_frontier(runner, tmp_path):
    from diffpriv._sweep import at_budget

    config = tmp_path / "c.toml"
    config.write_text(BASE_TOML.replace('kind = "distp"', 'kind = "distp"\nname = "pq"'))
    out = tmp_path / "out"
    args = ["sweep", str(config), "--budget", "pq=0.25:2:3", "--out", str(out)]
    assert runner.invoke(app, args).exit_code == 0
    fresh = _rows(out)
    rows = [dict(r) for r in fresh]
    rows[0]["certified_loss"] = "0.0"  # below its bound: rebuilt from the certificate
    _write_rows(out, rows)
    _cert(out, 2).write_bytes(_cert(out, 1).read_bytes())  # another budget's: solved again
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(f"warning: {_cert(out, 2)}: does not verify: not the certificate "
                                    "of the given problem: problem.constraints[0].epsilon:")
    assert result.stderr.count("\n") == 1 and result.stderr.rstrip().endswith("solving epsilon = 2 again")
    assert "2 read back" in _text(result.stdout)
    problem, _ = dp.load_config(config)
    for old, new in zip(fresh, _rows(out), strict=True):
        assert new["certified_loss"] == old["certified_loss"] and new["certificate"] == old["certificate"]
        p = at_budget(problem, 0, "epsilon", float(new["budget"]))
        assert dp.verify(out / new["certificate"], problem=p).ok
    path = out / "frontier.csv"
    path.write_text(path.read_text().replace("budget,", "eps,", 1))
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: out: {path}: no column 'budget' (columns: 'eps', ")
    assert result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize("args, message", [
    (["--budget", "pq=1:0.5:3"], "error: --budget: need 0 <= LO <= HI"),
    (["--budget", "nope=0.5:1:3"], "error: --budget: no constraint named 'nope'"),
    (["--budget", "pq.delta=0.5:1:3"], "error: --budget: constraints[0].delta: must be in [0, 1), got 1"),
    (["--budget", "pq=0.5:1:3", "--baselines", "krr,bogus"], "error: --baselines: 'bogus' is not"),
    (["--budget", "pq=0.5:1:3", "--method", "fast"], "error: --method: must be one of"),
])
def test_cli_sweep_bad_input_is_one_error_line(runner, tmp_path, args, message):
    config = tmp_path / "c.toml"
    config.write_text(BASE_TOML.replace('kind = "distp"', 'kind = "distp"\nname = "pq"'))
    out = tmp_path / "out"
    result = runner.invoke(app, ["sweep", str(config), *args, "--out", str(out)])
    assert result.exit_code == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr
    assert not out.exists()


def test_cli_sweep_interrupted_says_how_to_resume(runner, tmp_path, monkeypatch):
    import diffpriv._design as design_module

    config = tmp_path / "c.toml"
    config.write_text(BASE_TOML.replace('kind = "distp"', 'kind = "distp"\nname = "pq"'))
    out = tmp_path / "out"
    real, calls = design_module.design, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(design_module, "design", interrupted)
    args = ["sweep", str(config), "--budget", "pq=0.25:2:4", "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 130
    assert "interrupted after 2 of 4 budgets" in result.stderr
    assert "run the same command again" in result.stderr
    assert len(_rows(out)) == 2
    monkeypatch.setattr(design_module, "design", real)
    result = runner.invoke(app, args)
    assert result.exit_code == 0 and "2 read back" in _text(result.stdout) and len(_rows(out)) == 4


def test_highs_warm_started_from_a_neighbouring_budget_matches_the_cold_solve(city):
    worst = dataclasses.replace(city, objective=dp.WorstCaseLoss())
    approx = dataclasses.replace(city, constraints=(dataclasses.replace(city.constraints[0], delta=0.01),))
    for problem in (city, worst, approx, k_rr_problem(3, 1.0)):
        first = solve_lp(problem, keep_basis=True)
        cold = solve_lp(problem)
        assert first.value == pytest.approx(cold.value, rel=1e-9, abs=1e-12)
        assert first.bound == pytest.approx(cold.bound, rel=1e-9, abs=1e-12)
        for scale in (0.8, 1.3):
            warm = solve_lp(problem.scaled(scale), basis=first.basis)
            ref = solve_lp(problem.scaled(scale))
            assert warm.value == pytest.approx(ref.value, rel=1e-9, abs=1e-12)
            assert warm.bound == pytest.approx(ref.bound, rel=1e-9, abs=1e-12)
            assert np.abs(warm.table.sum(axis=-1) - 1).max() < 1e-9
    # a basis of another LP (other sizes) is ignored: a cold solve
    other = solve_lp(k_rr_problem(3, 1.0), basis=solve_lp(city, keep_basis=True).basis)
    assert other.value == pytest.approx(solve_lp(k_rr_problem(3, 1.0)).value)


SHARDED = """
import json, sys
import jax
import diffpriv as dp
from diffpriv.solvers._lp import solve_lp
assert jax.device_count() == 4, jax.devices()
problem, _ = dp.load_config(sys.argv[1])
budgets = [0.25, 0.5, 1.0, 1.5, 2.0]  # five: the batch is padded to eight over the four devices
one = dp.sweep(problem, budgets, batch=True, method="pdhg", steps=4000, shard=False)
split = dp.sweep(problem, budgets, batch=True, method="pdhg", steps=4000)
lp = [solve_lp(problem.scaled(b / problem.constraints[0].epsilon)).value for b in budgets]
print(json.dumps({"one": [r["certified_loss"] for r in one.rows],
                  "split": [r["certified_loss"] for r in split.rows],
                  "ok": [r["ok"] for r in one.rows + split.rows], "lp": lp,
                  "bounds": [r["lower_bound"] for r in split.rows]}))
"""


def test_a_batch_sharded_over_four_devices_certifies_what_one_device_does(tmp_path):
    import json
    import os
    import subprocess
    import sys

    config = tmp_path / "c.toml"
    config.write_text(BASE_TOML)
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    run = subprocess.run([sys.executable, "-c", SHARDED, str(config)], env=env, capture_output=True,
                         text=True, cwd=ROOT, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["split"] == pytest.approx(out["one"], rel=1e-12) and all(out["ok"])
    for loss, bound, lp in zip(out["split"], out["bounds"], out["lp"], strict=True):
        assert lp <= loss <= lp * 1.01 + 1e-9 and bound <= lp + 1e-9


@pytest.mark.slow
def test_two_processes_share_a_batched_sweep_and_process_0_writes_it(tmp_path):
    """Two processes on this machine (two CPU devices each) as two hosts would run it."""
    import os
    import socket
    import subprocess
    import sys

    config = tmp_path / "c.toml"
    config.write_text(BASE_TOML.replace('kind = "distp"', 'kind = "distp"\nname = "pq"'))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "out"
    exe = str(Path(sys.executable).with_name("diffpriv"))
    cmd = [exe, "sweep", str(config), "--budget", "pq=0.25:2:3", "--method", "pdhg", "--out", str(out)]
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
           "DIFFPRIV_COORDINATOR": f"127.0.0.1:{port}", "DIFFPRIV_NUM_PROCESSES": "2"}
    procs = [subprocess.Popen(cmd, env={**env, "DIFFPRIV_PROCESS_ID": str(i)}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results[0][1][-2000:] + results[1][1][-2000:]
    rows = _rows(out)
    assert len(rows) == 3 and all(r["method"] == "pdhg" and r["ok"] == "True" for r in rows)
    problem, _ = dp.load_config(config)
    for row in rows:
        lp = solve_lp(problem.scaled(float(row["budget"]) / 0.5)).value
        assert lp <= float(row["certified_loss"]) <= lp * 1.01 + 1e-9
        assert dp.verify(out / row["certificate"]).ok
        assert dp.Certificate.load(out / row["certificate"]).meta["optimizer"]["batched"] is True
