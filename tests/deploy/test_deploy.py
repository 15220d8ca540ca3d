"""Deployment: dyadic tables (quantize), the integer-only sampler against the certified table
(chi-squared over 10⁶ draws per row), refusals, and the black-box audit catching a planted bug."""

import json
import math

import numpy as np
import pytest
from scipy.stats import chisquare
from typer.testing import CliRunner

import diffpriv as dp
from diffpriv.certification import dyadic_counts, quantize
from diffpriv.cli import app
from diffpriv.deploy import Sampler, SamplerError, audit
from tests._problems import ldp_problem


def seeded(seed):
    rng = np.random.default_rng(seed)
    return lambda n: rng.bytes(n)


def krr_problem(k=4, eps=1.0):
    problem = ldp_problem(k, eps, names="abcdefgh")
    e = math.exp(eps * 0.95)
    table = (np.full((k, k), 1.0) + (e - 1) * np.eye(k))[None] / (e + k - 1)
    return problem, table


def distp_problem():
    """Pure DistP between two items on 5 labels, with zeros in the table (the LP optimum)."""
    X = dp.Domain(tuple("abcde"))
    items = (dp.Item("p", np.array([0.5, 0.3, 0.2, 0, 0])), dp.Item("q", np.array([0, 0, 0.2, 0.3, 0.5])))
    loss = np.abs(np.subtract.outer(np.arange(5), np.arange(5))).astype(float)
    problem = dp.Problem(X, X, loss, np.ones(5) / 5, items=items,
                         constraints=(dp.DistP(pairs=((0, 1),), epsilon=1.0),))
    return problem, dp.solvers.lp(problem).table


# -- quantize ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [1, 3, 8, 30, 53])
def test_quantize_rows_sum_to_two_to_the_bits_and_keep_the_support(bits):
    rng = np.random.default_rng(bits)
    for _ in range(50):
        y = int(rng.integers(1, 2 ** min(bits, 3) + 1))
        A = rng.dirichlet(np.full(y, 0.3), size=(2, 3))
        A[rng.random(A.shape) < 0.3] = 0.0
        A[..., 0] += 1e-300  # a tiny entry keeps one count
        counts, dyadic = quantize(A, bits)
        assert (counts.sum(axis=-1) == 2**bits).all()
        assert ((counts > 0) == (A > 0)).all()
        assert (dyadic_counts(dyadic, bits) == counts).all()
        assert (dyadic.sum(axis=-1) == 1.0).all()
    assert dyadic_counts(np.array([[[0.5, 0.5 - 2.0**-60, 2.0**-60]]]), 53) is None  # not over 2^53
    assert dyadic_counts(np.array([[[0.5, 0.25]]]), 2) is None  # counts sum to 3, not 4


def test_quantized_certificates_verify_and_a_false_quantization_claim_fails():
    problem, table = distp_problem()
    cert = dp.certify(problem, table, quantize=53, repair=True)
    assert cert.ok and cert.quantization_bits == 53 and dp.verify(cert).ok
    assert dyadic_counts(cert.table, 53) is not None
    d = json.loads(json.dumps(cert.to_dict()))
    assert dp.verify(d).ok
    d["table"][0][0] = (np.array(d["table"][0][0]) * (1 - 2.0**-50)).tolist()
    report = dp.verify(d)
    assert any(f.startswith("quantization: the table is not integer counts over 2^53")
               for f in report.failures)


def test_a_geo_table_with_tails_below_a_count_quantizes_at_a_negligible_repair():
    """Column generation's table for geo-indistinguishability on a uniform 10×10 grid at 2.71 per
    cell side (Sacramento's at 16×16, 0.5 per km) has entries ``e^{−2.71·d}`` down to ~10⁻²²,
    under one count of 2⁻⁵³: rounded, its tight ratios break, and the raised repair targets once
    mixed 55 % of the uniform output in (loss 3.25 for 0.231). Its quantised certificate holds
    with a repair weight below 10⁻⁶ and a loss within 10⁻⁶ of the largest loss of the float64
    table's, and verifies."""
    grid = dp.Domain.grid(10, 10, 1.0)
    problem = dp.Problem(grid, grid, grid.distances(grid), np.full(100, 1 / 100),
                         constraints=(dp.ExtendedDP(2.71, pairs=dp.problems.pairs_within(grid, 1.0)),))
    table = dp.optimize(problem, method="cuts", gap_tol=1e-2).table
    assert (table < 2.0**-53).sum() > 100
    exact = dp.certify(problem, table, repair=True)
    cert = dp.certify(problem, table, quantize=53, repair=True)
    assert exact.ok and cert.ok and dp.verify(cert).ok and dyadic_counts(cert.table, 53) is not None
    assert cert.repair_t < 1e-6
    assert cert.loss <= exact.loss + 1e-6 * float(problem.loss.max())


# -- the sampler ---------------------------------------------------------------------------------


def chi2_pvalues(sampler, draws):
    """One chi-squared p-value per row of ``sampler``'s table, from ``draws`` reports each;
    an output with no count must never be drawn."""
    out = []
    ns, nx, ny = sampler.shape
    probs = np.diff(np.concatenate([np.zeros((ns, nx, 1), np.int64), sampler.cumulative], axis=-1), axis=-1)
    for s in range(ns):
        for x in range(nx):
            seen = np.bincount(sampler.sample(x, draws, profile=s), minlength=ny)
            positive = probs[s, x] > 0
            assert seen[~positive].sum() == 0
            expected = probs[s, x, positive] / 2.0**sampler.bits * draws
            out.append(chisquare(seen[positive], expected).pvalue)
    return np.array(out)


@pytest.mark.parametrize(("which", "bits"), [("krr", 53), ("krr", 10), ("distp", 53), ("distp", 12)])
def test_a_million_draws_per_row_match_the_certified_table(which, bits):
    problem, table = krr_problem() if which == "krr" else distp_problem()
    cert = dp.certify(problem, table, quantize=bits, repair=True)
    assert cert.ok
    pvalues = chi2_pvalues(Sampler(cert, randbytes=seeded(bits)), 10**6)
    assert pvalues.min() > 1e-4, pvalues


class OffByOne(Sampler):
    """A planted bug: one random bit too few, so only the first half of each row's cumulative
    counts can be reached."""

    def uniform(self, n):
        return super().uniform(n) >> 1


def test_a_planted_off_by_one_fails_the_chi_squared_test_and_the_audit_catches_it():
    problem, table = krr_problem()
    cert = dp.certify(problem, table, quantize=53, repair=True)
    broken = OffByOne(cert, randbytes=seeded(1))
    assert chi2_pvalues(broken, 10**6).min() < 1e-12
    report = audit(broken, samples=20_000, confidence=0.999)
    assert report.contradicted and report.claims[0].contradicted > 0
    good = audit(Sampler(cert, randbytes=seeded(2)), samples=20_000, confidence=0.999)
    assert not good.contradicted and good.claims[0].comparisons == 6
    assert good.claims[0].lower <= 1.0  # the certified ε bounds the truth; the lower bound must not exceed it


def test_the_sampler_refuses_what_it_cannot_vouch_for(tmp_path):
    problem, table = krr_problem()
    with pytest.raises(SamplerError, match="not dyadic"):
        Sampler(dp.certify(problem, table, repair=True))
    d = json.loads(json.dumps(dp.certify(problem, table, quantize=53, repair=True).to_dict()))
    d["constraints"][0]["epsilon"] = 5.0  # a claim that does not match the problem
    with pytest.raises(SamplerError, match="does not verify: constraints"):
        Sampler(d)
    sampler = Sampler(dp.certify(problem, table, quantize=53, repair=True))
    with pytest.raises(SamplerError, match="--input: unknown input 'z'"):
        sampler.sample("z", 3)


def test_cli_sample_and_audit(tmp_path):
    problem, table = krr_problem()
    path = dp.certify(problem, table, quantize=53, repair=True).save(tmp_path / "c.json")
    runner = CliRunner()
    result = runner.invoke(app, ["sample", str(path), "--input", "b", "-n", "2000"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert len(lines) == 2000 and set(lines) <= set("abcd") and lines.count("b") > 600
    out = tmp_path / "reports.txt"
    result = runner.invoke(app, ["sample", str(path), "--input", "a", "-n", "10", "--out", str(out)])
    assert result.exit_code == 0
    assert len(out.read_text().splitlines()) == 10
    result = runner.invoke(app, ["sample", str(path), "--input", "z", "-n", "3"])
    assert result.exit_code == 2 and result.stderr.startswith("error: --input: unknown input 'z'")

    bad = json.loads(path.read_text())
    bad["table"][0][0][0] = 0.9  # not the certified table any more
    tampered = tmp_path / "bad.json"
    tampered.write_text(json.dumps(bad))
    target = tmp_path / "never.txt"
    result = runner.invoke(app, ["sample", str(tampered), "--input", "a", "--out", str(target)])
    assert result.exit_code == 1 and "does not verify" in result.stderr and not target.exists()

    result = runner.invoke(app, ["audit", str(path), "--samples", "20000"])
    assert result.exit_code == 0 and "consistent over 6 comparisons" in result.stdout


def test_cli_audit_of_claims_it_cannot_test_is_not_a_pass(tmp_path):
    """Divergence and Wasserstein claims only: exit 3, the last line says nothing was audited;
    beside an audited claim, exit 0 and the last line names the claims not audited."""
    X = dp.Domain(tuple("abcd"), np.arange(4.0)[:, None])
    problem, table = krr_problem()
    runner = CliRunner()
    for constraints, code, last in [
        ((dp.DivergenceDP(divergence="kl", epsilon=1.0, name="kl"), dp.WassersteinDP(epsilon=3.0)),
         3, "nothing audited: none of its 2 claim(s) is pure or (ε, δ)"),
        ((dp.LocalDP(epsilon=1.0), dp.DivergenceDP(divergence="kl", epsilon=1.0, name="kl")),
         0, "1 of 2 claim(s) audited; not audited: constraints[1] ('kl')"),
    ]:
        problem = dp.Problem(X, X, 1 - np.eye(4), np.ones(4) / 4, constraints=constraints)
        cert = dp.certify(problem, table, quantize=53, repair=True)
        assert cert.ok
        path = cert.save(tmp_path / f"c{code}.json")
        result = runner.invoke(app, ["audit", str(path), "--samples", "2000"])
        assert result.exit_code == code, result.output
        assert last in result.output.splitlines()[-1], result.output
        assert "('kl', divergence_dp, KL ≤ 1): not audited" in result.stdout


def test_a_plug_in_estimate_above_the_claim_is_reported_as_sampling_noise():
    """Randomized response at exactly ε = 1: the largest of its 12 plug-in log-ratios is above
    1 (noise), the Clopper–Pearson lower bound is not, and the report says which decides."""
    problem = ldp_problem(4, 1.0, names="abcd")
    e = math.exp(1.0)
    cert = dp.certify(problem, (np.ones((4, 4)) + (e - 1) * np.eye(4))[None] / (e + 3), quantize=53,
                      repair=True)
    report = audit(Sampler(cert, randbytes=seeded(3)), samples=20_000, confidence=0.999)
    (claim,) = report.claims
    assert not report.contradicted and claim.above > 0
    assert claim.lower <= 1.0 < claim.estimate < 1.1
    note = report.lines()[1]
    assert "above the claimed 1" in note and "by sampling noise" in note
    assert f"the samples prove only ε ≥ {claim.lower:.4g}" in note


def test_sparse_exports_hold_the_non_zero_entries_and_their_integer_counts(tmp_path):
    problem, table = distp_problem()
    cert = dp.certify(problem, table, quantize=53, repair=True)
    path = cert.save(tmp_path / "c.json")
    runner = CliRunner()
    for fmt in ("csv-sparse", "npz-sparse"):
        result = runner.invoke(app, ["export", str(path), "--format", fmt])
        assert result.exit_code == 0, result.output
    nonzero = int((cert.table > 0).sum())
    assert nonzero < cert.table.size  # the LP optimum has zeros
    rows = (tmp_path / "table-sparse.csv").read_text().splitlines()
    repaired = ",repair" if cert.repair_t > 0 else ""  # (the repair's share: the test below)
    assert rows[0] == "profile,input,output,probability,count" + repaired and len(rows) == 1 + nonzero
    counts = {}
    for line in rows[1:]:
        s, x, _, p, c = line.split(",")[:5]
        assert float(p) * 2.0**53 == int(c)
        counts[(s, x)] = counts.get((s, x), 0) + int(c)
    assert set(counts.values()) == {2**53}
    with np.load(tmp_path / "table-sparse.npz") as z:
        rebuilt = np.zeros(tuple(z["shape"]))
        rebuilt[z["profile"], z["input"], z["output"]] = z["probability"]
        assert np.array_equal(rebuilt, cert.table) and int(z["bits"]) == 53
        assert np.array_equal(z["count"], (cert.table[cert.table > 0] * 2.0**53).astype(np.int64))


def test_sparse_exports_name_the_repair_mass_a_deployment_must_keep(tmp_path):
    """A table with zeros under local DP needs the repair's mix everywhere: the sparse exports
    carry each entry's share of it, and the entries that are nothing but it are counted."""
    problem = ldp_problem(4, 1.0, names="abcd")
    table = np.array([[0.7, 0.3, 0.0, 0.0], [0.3, 0.7, 0.0, 0.0], [0.0, 0.0, 0.7, 0.3], [0.0, 0.0, 0.3, 0.7]])
    cert = dp.certify(problem, table[None], quantize=53, repair=True)
    assert cert.ok and cert.repair_t > 0
    floor = np.minimum(cert.repair_t * cert.repair_nu[None, None, :], cert.table)
    path = cert.save(tmp_path / "c.json")
    result = CliRunner().invoke(app, ["export", str(path), "--format", "csv-sparse"])
    assert result.exit_code == 0, result.output
    assert "8 of 16 entries are nothing else" in " ".join(result.stdout.split())
    rows = (tmp_path / "table-sparse.csv").read_text().splitlines()
    assert rows[0] == "profile,input,output,probability,count,repair" and len(rows) == 17
    labels = "abcd"
    for line in rows[1:]:
        s, x, y, p, _, r = line.split(",")
        assert float(r) == floor[0, labels.index(x), labels.index(y)] <= float(p)
    assert CliRunner().invoke(app, ["export", str(path), "--format", "npz-sparse"]).exit_code == 0
    with np.load(tmp_path / "table-sparse.npz") as z:
        assert np.array_equal(z["repair"], floor[z["profile"], z["input"], z["output"]])
    assert CliRunner().invoke(app, ["export", str(path), "--format", "csv"]).exit_code == 0
    assert (tmp_path / "table.csv").read_text().splitlines()[0] == "profile,input,output,probability"
