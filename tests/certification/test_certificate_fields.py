"""Every stored field is checked or declared unchecked: a mechanism's parameters against the
table they build, the constraints' indices, the repair's strategy."""

import json

import numpy as np
from typer.testing import CliRunner

import diffpriv as dp
from diffpriv.cli import app
from diffpriv.mechanisms import check_parameters
from tests._problems import ldp_problem

TOML = """\
[inputs]
labels = ["a", "b", "c", "d"]

[loss]
kind = "hamming"

[[constraints]]
kind = "ldp"
epsilon = 1.27
"""


def evaluated(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(TOML)
    result = CliRunner().invoke(app, ["evaluate", str(config), "--mechanism", "krr", "--param", "epsilon=1.2",
                                      "--out", str(tmp_path / "ev")])
    assert result.exit_code == 0, result.output
    return tmp_path / "ev" / "certificate.json"


def test_mechanism_parameters_are_checked_by_rebuilding_the_table(tmp_path):
    path = evaluated(tmp_path)
    d = json.loads(path.read_text())
    assert d["quantization"] == {"bits": 53}
    assert check_parameters(d) == (True, "the table is krr at epsilon=1.2")
    runner = CliRunner()
    result = runner.invoke(app, ["certify", str(path)])
    assert result.exit_code == 0
    assert "mechanism parameters: verified: the table is krr at epsilon=1.2" in result.stdout
    assert "not checked (free information): versions, seed, meta" in result.stdout
    d["meta"]["mechanism"]["params"]["epsilon"] = 0.001  # what the table is not
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(d))
    result = runner.invoke(app, ["certify", str(forged)])
    assert result.exit_code == 1
    assert "FAIL meta.mechanism.params: the table is not krr at epsilon=0.001" in result.stderr
    d["meta"]["mechanism"]["name"] = "no_such_mechanism"
    assert check_parameters(d)[0] is None and "parameters not verified" in check_parameters(d)[1]


def test_constraint_index_and_repair_strategy_are_checked():
    problem = ldp_problem(3, 1.0, names="abc")
    cert = dp.certify(problem, np.full((1, 3, 3), 1 / 3), repair=True)
    d = json.loads(json.dumps(cert.to_dict()))
    assert dp.verify(d).ok
    bad = json.loads(json.dumps(d))
    bad["constraints"][0]["index"] = 7
    assert any(f.startswith("constraints[0] ('ldp').index: stored 7") for f in dp.verify(bad).failures)
    bad = json.loads(json.dumps(d))
    bad["repair"]["strategy"] = "uniform"  # with t = 0
    assert any(f.startswith("repair.strategy: 'uniform' with t = 0.0") for f in dp.verify(bad).failures)
