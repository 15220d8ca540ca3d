"""``diffpriv compose``: K reports through a certified table; bad input is one line, exit 2."""

import json
import math

import pytest

from diffpriv.cli import app
from diffpriv.measures._composition import dp_epsilon
from tests._configs import BASE_TOML
from tests.cli.test_cli import _config, _error_line

LDP_TOML = BASE_TOML.replace('kind = "distp"\nepsilon = 0.5', 'kind = "ldp"\nepsilon = 1.0').replace(
    'pairs = [["p", "q"]]', "")


@pytest.fixture
def krr(runner, tmp_path):
    """A certificate of k-RR at ε = 0.8 under 1-LDP."""
    result = runner.invoke(app, ["evaluate", str(_config(tmp_path, LDP_TOML)), "-m", "krr", "--param",
                                 "epsilon=0.8", "--out", str(tmp_path / "krr")])
    assert result.exit_code == 0, result.output
    return tmp_path / "krr" / "certificate.json"


def test_k_reports_of_randomized_response(runner, krr):
    result = runner.invoke(app, ["compose", str(krr), "--reports", "30", "--delta", "1e-6", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["constraints"]
    assert row["per_report"]["epsilon"] == pytest.approx(0.8, abs=1e-9)
    assert row["composed"]["epsilon"] == pytest.approx(24.0, abs=1e-8) and row["exact"]
    c = row["composed"]
    assert c["theorem_epsilon"] == pytest.approx(dp_epsilon(row["per_report"]["epsilon"], 0.0, 30, 1e-6))
    # randomized response on 3 values: one output of ratio 1 between two rows, so the table's own
    # loss distribution proves less than the binary worst case does
    assert c["pld_epsilon"] < c["theorem_epsilon"] < 24.0
    assert c["epsilon_at_delta"] == c["pld_epsilon"]
    text = runner.invoke(app, ["compose", str(krr), "-k", "30", "--delta", "1e-6"]).stdout
    assert "30 reports" in text and "ε=24" in text and "pure levels add" in text


def test_distribution_privacy_says_what_one_input_gives(runner, tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(app, ["evaluate", str(_config(tmp_path, BASE_TOML.replace("0.5\n", "2.0\n", 1))),
                                 "-m", "krr", "--param", "epsilon=0.5", "--out", str(out)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["compose", str(out / "certificate.json"), "-k", "3", "--json"])
    (row,) = json.loads(result.stdout)["constraints"]
    assert row["same_input_exact"] and math.isfinite(row["same_input"])
    assert row["composed"]["epsilon"] == pytest.approx(3 * row["per_report"]["epsilon"], rel=1e-12)


@pytest.mark.parametrize(("args", "words"), [
    (("--reports", "0"), "--reports: must be an integer from 1"),
    (("--reports", "2", "--delta", "2"), "--delta: must be in [0, 1]"),
])
def test_bad_input_is_one_line(runner, krr, args, words):
    assert words in _error_line(runner.invoke(app, ["compose", str(krr), *args]))


def test_a_missing_certificate_is_one_line(runner, tmp_path):
    result = runner.invoke(app, ["compose", str(tmp_path / "none.json"), "-k", "2"])
    assert "none.json" in _error_line(result)
