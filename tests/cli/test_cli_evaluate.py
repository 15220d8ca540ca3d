"""``diffpriv evaluate``: named mechanisms certified like optimized tables (certify, export and
plot read their certificates); the tupling report; --compare; bad input is one line, exit 2."""

import csv
import json
import math
import os
import subprocess
import sys

import pytest

from diffpriv.cli import app
from tests._configs import BASE_TOML
from tests.cli.test_cli import _config, _error_line

LDP_TOML = BASE_TOML + '\n[[constraints]]\nkind = "ldp"\nepsilon = 1.0\n'

GRID_TOML = """\
[inputs]
grid = { rows = 3, cols = 3 }

[loss]
kind = "euclidean"

[[items]]
name = "p"
distribution = [0.3, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05]

[[items]]
name = "q"
distribution = [0.05, 0.05, 0.05, 0.05, 0.1, 0.1, 0.1, 0.2, 0.3]

[[constraints]]
kind = "distp"
epsilon = 0.5
pairs = [["p", "q"]]
"""


def _evaluate(runner, config, *args, code=0):
    result = runner.invoke(app, ["evaluate", str(config), *args])
    assert result.exit_code == code, result.output
    return result


def test_krr_is_certified_at_its_epsilon(runner, tmp_path):
    out = tmp_path / "krr"
    result = _evaluate(runner, _config(tmp_path, LDP_TOML), "-m", "krr", "--param", "epsilon=0.8",
                       "--out", str(out))
    for words in ("krr (epsilon=0.8)", "certified table", "certified level", "ldp1", "wrote"):
        assert words in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] and summary["mechanism"] == "krr" and summary["params"] == {"epsilon": 0.8}
    ldp = summary["constraints"][1]
    assert ldp["kind"] == "ldp" and abs(ldp["level"] - 0.8) <= 1e-9  # k-RR is exactly ε-LDP
    assert summary["certified"] == pytest.approx(2 / (math.exp(0.8) + 2), abs=1e-12)  # (k−1)/(e^ε+k−1)
    meta = json.loads((out / "certificate.json").read_text())["meta"]
    assert meta["mechanism"] == {"name": "krr", "params": {"epsilon": 0.8}}
    assert meta["command"] == "evaluate" and meta["config_sha256"]
    result = runner.invoke(app, ["certify", str(out / "certificate.json")])
    assert result.exit_code == 0 and "all claims hold" in result.output


def test_a_violated_budget_exits_1_and_is_reported(runner, tmp_path):
    out = tmp_path / "krr"
    result = _evaluate(runner, _config(tmp_path, LDP_TOML), "-m", "krr", "-p", "epsilon=1.5",
                       "-o", str(out), code=1)
    assert "NO" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert not summary["ok"] and summary["constraints"][1]["level"] == pytest.approx(1.5, abs=1e-9)
    assert runner.invoke(app, ["certify", str(out / "certificate.json")]).exit_code == 1


def test_calibrated_planar_laplace_meets_the_budget_and_round_trips(runner, tmp_path, monkeypatch):
    """--calibrate; then certify, export (csv) and plot read the certificate unchanged."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    out = tmp_path / "pl"
    result = _evaluate(runner, _config(tmp_path, GRID_TOML), "-m", "planar_laplace", "--calibrate",
                       "-o", str(out))
    assert "calibrated epsilon" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    level = summary["constraints"][0]["level"]
    assert summary["ok"] and 0.5 - 1e-5 <= level <= 0.5  # just meets the budget
    calibrated = summary["calibrated"]
    assert calibrated["parameter"] == "epsilon" and calibrated["value"] == summary["params"]["epsilon"]
    assert calibrated["value"] < calibrated["failing"] <= calibrated["value"] * (1 + 1e-5)
    cert = out / "certificate.json"
    assert json.loads(cert.read_text())["meta"]["mechanism"]["calibrated"]["parameter"] == "epsilon"

    result = runner.invoke(app, ["certify", str(cert)])
    assert result.exit_code == 0 and "all claims hold" in result.output
    result = runner.invoke(app, ["export", str(cert), "--format", "csv"])
    assert result.exit_code == 0, result.output
    with open(out / "table.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 81 and list(rows[0]) == ["profile", "input", "output", "probability"]
    result = runner.invoke(app, ["plot", str(cert)])
    assert result.exit_code == 0, result.output
    assert (out / "plot.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_params_are_numbers_booleans_or_text(runner, tmp_path):
    out = tmp_path / "c"
    args = ["-m", "coupling", "-p", "source=prior", "-p", "worst=true", "-p", "seed=3", "-o", str(out)]
    result = runner.invoke(app, ["evaluate", str(_config(tmp_path)), *args])
    assert result.exit_code in (0, 1), result.output  # a certificate, whether or not it holds
    params = json.loads((out / "summary.json").read_text())["params"]
    assert params == {"target": "barycenter", "source": "prior", "perturb": 0.0, "seed": 3.0,
                      "worst": True, "estimate": ""}


def test_tupling_writes_a_summary_and_no_certificate(runner, tmp_path):
    out = tmp_path / "tp"
    args = ["-m", "tupling", "-p", "k=2", "-p", "base=krr", "-p", "base_epsilon=1",
            "-p", "samples=2000", "-o", str(out)]
    result = _evaluate(runner, _config(tmp_path), *args)
    for words in ("expected loss", "exact δ", "upper confidence bound", "Theorem 3", "no certificate"):
        assert words in result.stdout
    assert sorted(os.listdir(out)) == ["summary.json"]
    s = json.loads((out / "summary.json").read_text())
    assert s["certificate"] is None and s["params"]["k"] == 2 and s["items"] == ["p", "q"]
    assert s["delta"]["samples"] == 2000 and 0 <= s["delta"]["lower"] <= s["delta"]["upper"] <= 1
    # k-RR at ε = 1 already meets DistP ε = 0.5 (level 0.48): dummies keep δ(0.5) exactly 0
    assert s["delta"]["exact"] == 0.0 and s["ok"]
    assert s["expected_loss"] < s["base_expected_loss"]  # the least loss over a tuple


@pytest.mark.parametrize("extra", [["-p", "base=restricted_laplace", "-p", "base_radius=1.5"],
                                   ["-p", "base=planar_laplace", "-p", "dummies=population"],
                                   ["-p", "base=krr", "-p", "dummies=q"]])
def test_tupling_bases_and_dummy_laws(runner, tmp_path, extra):
    """Seed 003's restricted Laplace base and non-uniform dummies: the exact δ lies within the
    Monte Carlo confidence interval, and the summary records what ran."""
    out = tmp_path / "tp"
    config = _config(tmp_path, GRID_TOML)
    args = ["-m", "tupling", "-p", "k=2", "-p", "base_epsilon=1", "-p", "samples=20000", *extra,
            "-o", str(out)]
    result = runner.invoke(app, ["evaluate", str(config), *args])
    assert result.exit_code in (0, 1), result.output
    s = json.loads((out / "summary.json").read_text())
    d = s["delta"]
    assert d["exact"] is not None and d["lower"] - 1e-12 <= d["exact"] <= d["upper"] + 1e-12
    assert s["params"]["base"] == extra[1].split("=")[1]
    if any(a.startswith("dummies=") for a in extra):
        assert s["theorem3"] is None and "uniform dummies only" in result.stdout


def test_tupling_exits_0_on_a_monte_carlo_bound_only_with_accept_estimate(runner, tmp_path, monkeypatch):
    import diffpriv.cli._tupling as tupling

    monkeypatch.setattr(tupling, "MAX_EXACT_MULTISETS", 0)  # as if the tuples were too many to enumerate
    config = _config(tmp_path, BASE_TOML.replace("epsilon = 0.5", "epsilon = 0.5\ndelta = 0.3"))
    args = ["-m", "tupling", "-p", "k=2", "-p", "base=krr", "-p", "base_epsilon=1", "-p", "samples=2000",
            "-o", str(tmp_path / "tp")]
    _evaluate(runner, config, *args, code=1)
    s = json.loads((tmp_path / "tp" / "summary.json").read_text())
    assert not s["proved"] and s["estimate_meets_budget"] and not s["ok"]
    _evaluate(runner, config, *args, "--accept-estimate", code=0)
    s = json.loads((tmp_path / "tp" / "summary.json").read_text())
    assert not s["proved"] and s["ok"]


# (args after CONFIG, config text, start of the error line after "error: ")
BAD = [
    (["-m", "nope"], BASE_TOML, "--mechanism: unknown mechanism 'nope' (known: coupling, krr,"),
    (["-m", "krr", "-p", "eps=1"], BASE_TOML,
     "--param: mechanism 'krr' has no parameter 'eps' (it has epsilon)"),
    (["-m", "krr", "-p", "epsilon=-1"], BASE_TOML,
     "--param: mechanism 'krr': parameter 'epsilon' must be a finite non-negative number, got -1.0"),
    (["-m", "krr", "-p", "epsilon=high"], BASE_TOML, "--param: mechanism 'krr': parameter 'epsilon' must"),
    (["-m", "krr", "-p", "epsilon"], BASE_TOML, "--param: expected key=value, got 'epsilon'"),
    (["-m", "krr", "-p", "epsilon=1", "-p", "epsilon=2"], BASE_TOML, "--param: 'epsilon' is given twice"),
    (["-m", "krr"], BASE_TOML, "--param: mechanism 'krr' needs 'epsilon'"),
    (["-m", "planar_laplace", "-p", "epsilon=1"], BASE_TOML, "mechanism 'planar_laplace' needs coordinates"),
    (["-m", "coupling", "--calibrate"], BASE_TOML,
     "--calibrate: mechanism 'coupling' has no parameter to calibrate"),
    (["-m", "krr", "--calibrate", "-p", "epsilon=1"], BASE_TOML, "--calibrate: finds 'epsilon'"),
    (["-m", "restricted_laplace", "--calibrate"], GRID_TOML,
     "--param: mechanism 'restricted_laplace' needs 'radius'"),
    ([], BASE_TOML, "--mechanism: missing"),
    (["-m", "tupling", "-p", "base_epsilon=1"], BASE_TOML, "--param: mechanism 'tupling' needs 'k'"),
    (["-m", "tupling", "-p", "k=1.5", "-p", "base_epsilon=1"], BASE_TOML,
     "--param: k must be an integer >= 0, got 1.5"),
    (["-m", "tupling", "-p", "k=2", "-p", "base_epsilon=1"], BASE_TOML,
     "tupling: base table: mechanism 'planar_laplace' needs coordinates"),
    (["-m", "tupling", "-p", "k=2", "-p", "base_epsilon=1", "-p", "base=krr"],
     LDP_TOML.replace('kind = "distp"', 'kind = "ldp"').replace('pairs = [["p", "q"]]\n', ""),
     "tupling: evaluate_tupling: the problem has 0 DistP pairs"),
    (["-m", "tupling", "--calibrate"], BASE_TOML,
     "--calibrate: mechanism 'tupling' has no parameter to calibrate"),
]


@pytest.mark.parametrize(("args", "text", "expected"), BAD, ids=[" ".join(c[0]) for c in BAD])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(runner, tmp_path, args, text, expected):
    out = tmp_path / "out"
    result = runner.invoke(app, ["evaluate", str(_config(tmp_path, text)), *args, "--out", str(out)])
    assert _error_line(result).startswith(expected)
    assert not out.exists()


def test_calibrate_that_cannot_meet_the_budgets_exits_1(runner, tmp_path):
    out = tmp_path / "out"
    args = ["-m", "restricted_laplace", "-p", "radius=1", "--calibrate", "-o", str(out)]
    result = runner.invoke(app, ["evaluate", str(_config(tmp_path, GRID_TOML)), *args])
    assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("error: calibrate: mechanism 'restricted_laplace' meets the "
                                    "budgets at no epsilon")
    assert not out.exists()


def test_list_and_help(runner):
    result = runner.invoke(app, ["evaluate", "--list"])
    assert result.exit_code == 0
    for name in ("krr", "planar_laplace", "planar_gaussian", "restricted_laplace", "coupling",
                 "one_bit_cluster", "smooth_one_bit", "smooth_categorical", "tupling"):
        assert f"{name}: " in result.stdout
    assert "A[x,y] ∝ exp(−ε·d(x,y))" in result.stdout  # summaries printed as text, not markup
    assert "--calibrate finds precision" in result.stdout
    result = runner.invoke(app, ["evaluate", "--help"])
    assert result.exit_code == 0 and "dp.design" in result.stdout


def test_compare_against_the_optimized_table(runner, tmp_path):
    config = _config(tmp_path, BASE_TOML + "\n[optimizer]\nsteps = 2000\n")
    out = tmp_path / "cmp"
    result = _evaluate(runner, config, "-m", "krr", "--calibrate", "--compare", "-o", str(out))
    lines = result.stdout.splitlines()
    assert any(line.startswith("optimized ") for line in lines)
    assert any(line.startswith("krr ") and "epsilon=" in line for line in lines)
    assert "not compared: planar_laplace: mechanism 'planar_laplace' needs coordinates" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    names = [row["name"] for row in summary["comparison"]]
    assert names[0] == "optimized (highs)" and "krr" in names  # labelled by the method that ran
    assert {"planar_laplace", "one_bit_cluster"} <= {n["name"] for n in summary["not_compared"]}
    optimized, krr = summary["comparison"][0], summary["comparison"][names.index("krr")]
    assert optimized["loss"] <= krr["loss"] * (1 + 1e-6) and krr["gap_percent"] >= -1e-4
    assert krr["loss"] == pytest.approx(summary["certified"], rel=1e-9)  # the same calibration


def test_evaluate_does_not_import_jax(tmp_path):
    config = _config(tmp_path, GRID_TOML)
    code = (
        "import sys; from diffpriv.cli import main; sys.argv = ['diffpriv', 'evaluate', "
        f"{str(config)!r}, '-m', 'planar_gaussian', '--calibrate']\n"
        "try:\n    main()\nexcept SystemExit as e:\n"
        "    assert 'jax' not in sys.modules, 'jax was imported'; raise\n"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "planar_gaussian (precision=" in proc.stdout


PROFILES_TOML = """\
[inputs]
labels = ["a", "b", "c"]

[loss]
kind = "hamming"

[[profiles]]
name = "P"

[[profiles]]
name = "Q"

[[items]]
name = "p"
profile = "P"
distribution = [0.5, 0.3, 0.2]

[[items]]
name = "q"
profile = "Q"
distribution = [0.2, 0.3, 0.5]

[[constraints]]
kind = "distp"
epsilon = 0.5
pairs = [["p", "q"]]
"""


def test_coupling_estimate_given_directly_is_recorded_with_its_loss(runner, tmp_path):
    """λ̂ from a file: the certificate records it and the loss the mechanism expects under it
    (recomputed here from the certified table), beside the certified loss under the truth."""
    import numpy as np

    estimate = tmp_path / "estimate.csv"
    estimate.write_text("0.4,0.35,0.25\n0.25,0.3,0.45\n")
    out = tmp_path / "cp"
    config = _config(tmp_path, PROFILES_TOML)
    result = runner.invoke(app, ["evaluate", str(config), "-m", "coupling", "-p", f"estimate={estimate}",
                                 "-o", str(out)])
    assert result.exit_code in (0, 1), result.output
    assert "expects" in result.stdout
    cert = json.loads((out / "certificate.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    details = cert["meta"]["mechanism"]["details"]
    lam = np.array([[0.4, 0.35, 0.25], [0.25, 0.3, 0.45]])
    assert np.allclose(details["estimate"], lam)
    table, loss = np.array(cert["table"]), 1 - np.eye(3)
    prior = np.array(cert["problem"]["prior"])
    w = prior.sum(axis=1) / prior.sum()
    assert details["loss_under_estimate"] == pytest.approx(np.einsum("s,sx,sxy,xy->", w, lam, table, loss))
    assert summary["loss_under_estimate"] == details["loss_under_estimate"]
    assert cert["loss"] == pytest.approx(np.einsum("sx,sxy,xy->", prior, table, loss))
    for body, message in [("1,2\n", "shape (1, 2), expected (2, 3)"), ("0.5,0.5,0.5\n0.2,0.3,0.5\n",
                                                                      "row 0 sums to 1.5")]:
        estimate.write_text(body)
        result = runner.invoke(app, ["evaluate", str(config), "-m", "coupling", "-p", f"estimate={estimate}"])
        assert result.exit_code == 2 and message in result.stderr
