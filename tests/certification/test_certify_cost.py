"""Bounded certification: the certifier's time and memory are estimated from the problem before
any level is computed, and a certificate above the limits is refused in one line (exit 2)."""

import json
import re
import time
import tracemalloc

import _problems
import numpy as np
import pytest
from typer.testing import CliRunner

import diffpriv as dp
from diffpriv.certification import certify_cost
from diffpriv.cli import app
from diffpriv.problems import SizeError, problem_hash, problem_to_dict


def line_problem(nx, ny, constraint, items=()):
    return _problems.line_problem(nx, constraint, outputs=ny, items=items)


def forged(tmp_path, problem, table):
    """A certificate of a small problem with ``problem`` and ``table`` put in its place, as a
    hostile user would write it (its other claims no longer match: never checked here)."""
    small = line_problem(3, 2, problem.constraints[0])
    d = dp.certify(small, np.full((1, 3, 2), 0.5), repair=True).to_dict()
    d["problem"], d["problem_hash"] = problem_to_dict(problem), problem_hash(problem)
    d["table"] = table.tolist()
    path = tmp_path / "certificate.json"
    path.write_text(json.dumps(d))
    return path


def test_a_20000_input_wasserstein_dp_certificate_is_refused_before_any_level(tmp_path):
    problem = line_problem(20_000, 2, dp.WassersteinDP(epsilon=1.0))
    path = forged(tmp_path, problem, np.full((1, 20_000, 2), 0.5))
    start = time.perf_counter()
    with pytest.raises(SizeError, match=r"certification would take ~\S+ h \(199,990,000 comparisons"):
        dp.verify(path, max_seconds=300)
    assert time.perf_counter() - start < 20  # reading and admitting; the check itself: a day
    result = CliRunner().invoke(app, ["certify", str(path)])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert re.fullmatch(rf"error: {re.escape(str(path))}: cannot be checked: certification would take "
                        r"~\S+ h \(199,990,000 comparisons; most in constraints\[0\] \(wdp, 199,990,000 "
                        r"comparisons of 2 outputs\)\), above the limit of 5\.0 min; raise the limit "
                        r"\(--max-seconds\) to run it anyway", line), line


def test_max_seconds_and_max_memory_refuse_and_a_larger_limit_runs(tmp_path):
    problem = line_problem(40, 4, dp.LocalDP(epsilon=50.0))
    path = dp.certify(problem, np.full((1, 40, 4), 0.25), repair=True).save(tmp_path / "c.json")
    runner = CliRunner()
    result = runner.invoke(app, ["certify", str(path), "--max-seconds", "1e-6"])
    assert result.exit_code == 2 and "certification would take ~" in result.stderr
    result = runner.invoke(app, ["certify", str(path), "--max-memory", "1e-6"])
    assert result.exit_code == 2 and "certification would need ~" in result.stderr
    assert "above the limit of 0.0 MB" in result.stderr
    result = runner.invoke(app, ["certify", str(path), "--max-seconds", "-1"])
    assert result.exit_code == 2 and result.stderr.strip() == "error: --max-seconds: must be > 0, got -1.0"
    assert runner.invoke(app, ["certify", str(path), "--max-seconds", "60"]).exit_code == 0
    with pytest.raises(SizeError, match="exact certification would take"):
        dp.verify(path, exact=True, max_seconds=1e-9)


def measured_peak(data, exact=False) -> int:
    tracemalloc.start()
    dp.verify(data, exact=exact)
    _, top = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return top


@pytest.mark.parametrize(("nx", "ny", "kind"), [(600, 4, "ldp"), (120, 256, "ldp"), (300, 8, "distp")])
def test_memory_estimate_is_within_2x_of_the_measured_peak(nx, ny, kind):
    rng = np.random.default_rng(0)
    items = tuple(dp.Item(f"i{k}", rng.dirichlet(np.ones(nx))) for k in range(nx if kind == "distp" else 0))
    constraint = (dp.LocalDP(epsilon=50.0) if kind == "ldp"
                  else dp.DistP(pairs=tuple((k, k + 1) for k in range(nx - 1)), epsilon=50.0))
    problem = line_problem(nx, ny, constraint, items)
    data = dp.certify(problem, rng.dirichlet(np.ones(ny), size=(1, nx)), repair=False).to_dict(arrays=True)
    peak, estimate = measured_peak(data), certify_cost(problem).bytes
    assert 0.5 * peak <= estimate <= 2 * peak, (peak, estimate)


def test_time_estimate_grows_with_the_kind_of_comparison():
    """Not a timing: the model's ordering (the rates are measured by benchmarks/certify_cost.py)."""
    costs = [certify_cost(line_problem(50, 16, c)).seconds for c in (
        dp.LocalDP(epsilon=1.0), dp.DivergenceDP(divergence="kl", epsilon=1.0),
        dp.WassersteinDP(epsilon=1.0, order=2.0), dp.WassersteinDP(epsilon=1.0, order=3.0))]
    assert costs == sorted(costs) and costs[0] > 0
    ldp = line_problem(50, 16, dp.LocalDP(epsilon=1.0))
    assert certify_cost(ldp, exact=True).seconds > 10 * certify_cost(ldp).seconds
    assert certify_cost(ldp).comparisons == 50 * 49 // 2


# -- a certificate bound to the config it is for --------------------------------------------------


def test_certify_with_its_config_holds_and_with_another_budget_names_the_field(tmp_path):
    from _configs import BASE_TOML

    config = tmp_path / "config.toml"
    config.write_text(BASE_TOML)
    runner = CliRunner()
    assert runner.invoke(app, ["reference", str(config), "--out", str(tmp_path / "lp")]).exit_code == 0
    cert = tmp_path / "lp" / "certificate.json"
    result = runner.invoke(app, ["certify", str(cert), "--config", str(config)])
    assert result.exit_code == 0 and "all claims hold" in result.stdout

    weaker = tmp_path / "weaker.toml"
    weaker.write_text(BASE_TOML.replace("epsilon = 0.5", "epsilon = 0.7"))
    result = runner.invoke(app, ["certify", str(cert), "--config", str(weaker)])
    assert result.exit_code == 1
    assert ("FAIL not the certificate of the given problem: problem.constraints[0].epsilon: the "
            "certificate has 0.5, the config 0.7") in result.stderr

    other = tmp_path / "other.toml"
    other.write_text(BASE_TOML.replace("[0.2, 0.3, 0.5]", "[0.2, 0.4, 0.4]"))
    result = runner.invoke(app, ["certify", str(cert), "--config", str(other)])
    assert result.exit_code == 1  # the prior is derived from the items here: the first to differ
    assert "problem.prior[0, 1]: the certificate has 0.3, the config 0.35" in result.stderr

    result = runner.invoke(app, ["certify", str(cert), "--config", str(tmp_path / "missing.toml")])
    assert result.exit_code == 2 and result.stderr.startswith("error: ")


def test_verify_against_a_problem():
    problem = line_problem(4, 3, dp.LocalDP(epsilon=1.0))
    cert = dp.certify(problem, np.full((1, 4, 3), 1 / 3), repair=True)
    assert dp.verify(cert, problem=problem).ok
    report = dp.verify(cert, problem=line_problem(4, 3, dp.LocalDP(epsilon=1.0, name="other")))
    assert report.failures == ["not the certificate of the given problem: problem.constraints[0].name: "
                               "the certificate has 'ldp', the config 'other'"]
