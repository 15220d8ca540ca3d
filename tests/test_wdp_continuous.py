"""``experiments/wdp_continuous.py``: the certifier's W_μ of discretised Laplace / Gaussian
mechanisms approaches the continuous value W_μ = Δ (translates), and the script says so."""

from __future__ import annotations

import math
import pathlib

import pytest

from tests._configs import experiment

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wdp():
    return experiment("wdp_continuous")


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
@pytest.mark.parametrize(("scale", "delta"), [(0.25, 1.0), (1.0, 0.3), (5.0, 2.0)])
@pytest.mark.parametrize("mu", [1, 2, 3])
def test_continuous_translates_are_delta_apart(wdp, noise, scale, delta, mu):
    r = wdp.continuous_w(wdp.NOISES[noise], scale, delta, mu, m=4096)
    assert r["value"] == pytest.approx(delta, rel=1e-13)
    assert r["deviation"] <= 1e-14 * (1 + scale)


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_discretised_certified_value_converges(wdp, noise):
    ns, delta = [100, 200, 400], 1.0
    rows = wdp.convergence(wdp.NOISES[noise], 1.0, delta, [1, 2, 3], ns, 1e-12)
    for r in rows:
        assert r["lower"] <= r["line"] * (1 + 1e-12) and r["line"] <= r["upper"] * (1 + 1e-12)
        assert r["lower"] <= r["upper"]
        assert r["simplex"] == pytest.approx(r["line"], rel=1e-9)
        assert r["tail"] <= 2e-12
    for mu in (2, 3):  # the grid adds ≈ (μ − 1)θ(1 − θ)h²/(2Δ): decreasing here, below (μ − 1)h²/(8Δ)
        errors = [abs(r["upper"] - delta) for r in rows if r["mu"] == mu]
        assert errors == sorted(errors, reverse=True) and errors[0] > errors[-1]
        finest = next(r for r in rows if r["mu"] == mu and r["n"] == ns[-1])
        assert abs(finest["upper"] - delta) <= (mu - 1) * finest["h"] ** 2 / (8 * delta) + 1e-4
        assert abs(finest["lower"] - delta) <= (mu - 1) * finest["h"] ** 2 / (8 * delta) + 1e-4
        assert finest["model"] == pytest.approx(finest["error"], rel=0.1)
    finest = next(r for r in rows if r["mu"] == 1 and r["n"] == ns[-1])
    assert abs(finest["upper"] - delta) <= 1e-4 and abs(finest["lower"] - delta) <= 1e-4


def test_table1_as_printed_and_verdicts(wdp):
    # Laplace (line 126): ½Δ(√(2[1/λ + e^{-1/λ} − 1]))^{1/μ}; at λ = Δ = μ = 1: ½√(2/e)
    assert wdp.LAPLACE.table1(1.0, 1.0, 1) == pytest.approx(0.5 * math.sqrt(2 / math.e))
    assert wdp.LAPLACE.table1(1.0, 2.0, 1) == pytest.approx(math.sqrt(2 / math.e))  # KL kept at 1
    assert wdp.GAUSSIAN.table1(2.0, 1.0, 1) == pytest.approx(0.25)  # ½(Δ/σ)^{1/μ}
    assert wdp.GAUSSIAN.table1(0.25, 1.0, 2) == pytest.approx(1.0)  # the one coincidence
    assert wdp.verdict(1.0, 1.0, 0.01) == "agrees"
    assert wdp.verdict(2.0, 1.0, 0.01).startswith("upper bound")
    assert wdp.verdict(0.5, 1.0, 0.01).startswith("disagrees")
    rows = wdp.compare(wdp.LAPLACE, 1.0, 1.0, [1, 2], 200, 1e-12, 0.01)
    assert all(r["verdict"].startswith("disagrees") and r["table1"] < r["lower"] for r in rows)
    for r in rows:  # Δ·TV^{1/μ}, TV = 1 − e^{−Δ/(2b)}: closed form vs the grid's certified value
        assert r["tv_closed"] == pytest.approx((1 - math.exp(-0.5)) ** (1 / r["mu"]))
        assert r["tv_certified"] == pytest.approx(r["tv_closed"], rel=1e-2)  # N = 200: h = 0.28


def test_grid_table_level_is_the_step_inside_and_less_at_the_boundary(wdp):
    r = wdp.grid_level(wdp.LAPLACE, 0.02, 41, 2)
    assert r["lower"] <= r["upper"]
    assert r["upper"] == pytest.approx(r["step"], rel=1e-6)
    assert r["least"] in (0, 39) and r["least_value"] < 0.9 * r["step"]
    wide = wdp.grid_level(wdp.GAUSSIAN, 1.0, 41, 1)
    assert wide["upper"] < 0.2 * wide["step"]


def test_script_writes_markdown_and_exits_zero(wdp, tmp_path, capsys):
    out = tmp_path / "wdp" / "table.md"
    args = ["--out", str(out), "--n", "100,200,400", "--mu", "1,2", "--compare-scales", "1",
            "--compare-deltas", "1", "--n-compare", "200", "--grid-points", "21", "--grid-scales", "0.05",
            "--tol", "1e-2"]
    assert wdp.main(args) == 0
    text = out.read_text()
    assert capsys.readouterr().out.startswith(text)
    assert "## 3. The seed's Table 1" in text and "line 126" in text
    assert "Result: converged and consistent" in text
    rows = [line for line in text.splitlines() if line.startswith("| laplace | 1 | 1 | 2 | 400 |")]
    assert len(rows) == 1
    assert wdp.main([*args[:-1], "1e-9"]) == 1  # μ = 2 on 400 cells is 1e-3 off: fails a 1e-9 tolerance
    assert "FAILED" in out.read_text()
