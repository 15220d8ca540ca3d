"""``diffpriv leakage``: the raw data's levels and measures from a config, a certified table's
from a certificate, the gain of ``[leakage]``, and bad input as one line, exit 2."""

import json
import math

import numpy as np
import pytest

from diffpriv.cli import app
from tests._configs import BASE_TOML
from tests.cli.test_cli import _config, _error_line

EMPTY_TOML = BASE_TOML.replace("[0.5, 0.3, 0.2]", "[0.5, 0.5, 0.0]")
"""Item ``p`` has no mass on ``c``: the raw data's DistP level is infinite."""


def _leakage(runner, path, *args, code=0):
    result = runner.invoke(app, ["leakage", str(path), *args])
    assert result.exit_code == code, result.output
    return result


def _json(runner, path, *args):
    return json.loads(_leakage(runner, path, "--json", *args).stdout)


def test_raw_data_levels_and_measures(runner, tmp_path):
    out = _json(runner, _config(tmp_path))
    assert out["source"] == "raw data"
    for key in ("prior_vulnerability", "posterior_vulnerability", "multiplicative_leakage",
                "min_entropy_leakage", "g_leakage", "adversary_error"):
        assert key in out
    prior = np.array([0.35, 0.3, 0.35])  # the items' mean
    assert out["prior_vulnerability"] == pytest.approx(0.35, abs=1e-15)
    assert out["posterior_vulnerability"] == pytest.approx(1.0, abs=1e-15)
    assert out["multiplicative_leakage"] == pytest.approx(1 / 0.35, rel=1e-14)
    assert out["min_entropy_leakage"] == pytest.approx(math.log2(1 / 0.35), rel=1e-14)
    assert out["adversary_error"] == 0.0 and out["g_leakage"] is None
    assert out["prior_adversary_error"] == pytest.approx(1 - prior.max(), abs=1e-15)  # Hamming
    (c,) = out["constraints"]
    # the identity's output laws are the items: max |ln p − ln q| = ln(0.5 / 0.2)
    assert c["level"] == pytest.approx(math.log(2.5), abs=1e-12) and not c["ok"]
    assert out["hints"] == []


def test_empty_cells_give_an_infinite_level_and_say_why(runner, tmp_path):
    path = _config(tmp_path, EMPTY_TOML)
    out = _json(runner, path)
    assert out["constraints"][0]["level"] == "inf"
    assert len(out["hints"]) == 1 and "smoothing" in out["hints"][0]
    text = _leakage(runner, path).stdout
    assert "smoothing" in text and "ε=inf" in text


def test_the_configs_gain(runner, tmp_path):
    gain = "\n[leakage]\ngain = [[1, 0, 0], [0, 1, 1]]\n"
    out = _json(runner, _config(tmp_path, BASE_TOML + gain))
    g = out["g_leakage"]
    assert g["prior_vulnerability"] == pytest.approx(0.65, abs=1e-15)  # guess "b or c"
    assert g["posterior_vulnerability"] == pytest.approx(1.0, abs=1e-15)
    assert g["multiplicative"] == pytest.approx(1 / 0.65, rel=1e-14)
    within = _json(runner, _config(tmp_path, BASE_TOML + "\n[leakage]\ngain_within = 0\n"))
    assert within["g_leakage"]["prior_vulnerability"] == pytest.approx(0.35, abs=1e-15)  # Bayes
    # --gain-within takes the place of the config's gain
    over = _json(runner, _config(tmp_path, BASE_TOML + gain), "--gain-within", "1")
    assert over["g_leakage"]["prior_vulnerability"] == pytest.approx(1.0, abs=1e-15)


def test_a_certified_tables_leakage(runner, tmp_path):
    ldp = BASE_TOML.replace('kind = "distp"\nepsilon = 0.5', 'kind = "ldp"\nepsilon = 1.0')
    config = _config(tmp_path, ldp.replace('pairs = [["p", "q"]]', ""))
    result = runner.invoke(app, ["evaluate", str(config), "-m", "krr", "--param", "epsilon=0.8",
                                 "--out", str(tmp_path / "krr")])
    assert result.exit_code == 0, result.output
    out = _json(runner, tmp_path / "krr" / "certificate.json")
    assert out["source"] == "certificate"
    e = math.exp(0.8)
    table = np.full((3, 3), 1 / (e + 2))
    np.fill_diagonal(table, e / (e + 2))
    prior = np.array([0.35, 0.3, 0.35])
    posterior = float(np.sum(np.max(prior[:, None] * table, axis=0)))
    assert out["posterior_vulnerability"] == pytest.approx(posterior, abs=1e-12)
    assert out["adversary_error"] == pytest.approx(1 - posterior, abs=1e-12)  # Hamming
    assert out["constraints"][0]["level"] == pytest.approx(0.8, abs=1e-9)
    assert "leakage of the certified table" in _leakage(runner, tmp_path / "krr" / "certificate.json").stdout


@pytest.mark.parametrize(("text", "args", "words"), [
    (BASE_TOML + "\n[leakage]\ngain = [[1, 0]]\n", (), "leakage.gain[0]: has 2 entries, expected 3"),
    (BASE_TOML + "\n[leakage]\ngain = [[1, 0, 0]]\ngain_within = 1\n", (), "not both"),
    (BASE_TOML + "\n[leakage]\ngain_within = -1\n", (), "leakage.gain_within"),
    (BASE_TOML, ("--gain-within", "-2"), "--gain-within: must be a finite number"),
    (BASE_TOML + '\n[outputs]\nlabels = ["x", "y", "z"]\n', (), "outputs: the raw data report each input"),
])
def test_bad_input_is_one_line(runner, tmp_path, text, args, words):
    if "[outputs]" in text:  # outputs need their own loss: a matrix
        matrix = "kind = \"matrix\"\nmatrix = [[0, 1, 1], [1, 0, 1], [1, 1, 0]]"
        text = text.replace('kind = "hamming"', matrix)
    result = runner.invoke(app, ["leakage", str(_config(tmp_path, text)), *args])
    assert words in _error_line(result)


def test_a_missing_certificate_is_one_line(runner, tmp_path):
    result = runner.invoke(app, ["leakage", str(tmp_path / "nothing.json")])
    assert "nothing.json" in _error_line(result)


def test_a_problem_beyond_the_memory_limit_is_one_line(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("DIFFPRIV_MEMORY_LIMIT", str(2**10))
    result = runner.invoke(app, ["leakage", str(_config(tmp_path))])
    assert "limit" in _error_line(result)
