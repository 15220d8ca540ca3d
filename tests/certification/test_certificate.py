"""Certificates: certify, save, verify from scratch; edited certificates must fail."""

import copy
import json
import math
import os

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.certification import (
    Certificate,
    certify,
    constraint_levels,
    exact_holds,
    pure_margin,
    verify,
)
from diffpriv.certification._schema import CertificateFormatError, check_certificate
from tests._problems import ldp_problem


def rr_table(k: int, eps: float) -> np.ndarray:
    """k-ary randomized response: A[x,x] = e^ε/(e^ε+k−1), otherwise 1/(e^ε+k−1)."""
    e = math.exp(eps)
    return ((np.ones((k, k)) + (e - 1) * np.eye(k)) / (e + k - 1))[None]


@pytest.fixture(scope="module")
def mixed_problem():
    """Two profiles, dense items, pure and approximate DistP, approximate LDP and XDP."""
    rng = np.random.default_rng(0)
    X = dp.Domain.grid(2, 3)
    nx = X.size
    items = tuple(dp.Item(f"i{i}", rng.dirichlet(np.ones(nx)), profile=i % 2) for i in range(4))
    return dp.Problem(
        X, X, X.distances(X), rng.dirichlet(np.ones(2 * nx)).reshape(2, nx), items=items,
        profiles=("home", "out"),
        constraints=(dp.DistP(((0, 1), (1, 2), (2, 3)), 0.5), dp.DistP(((0, 3),), 0.3, 0.05, "apx"),
                     dp.LocalDP(2.0, 0.01, name="ldp"), dp.ExtendedDP(1.5)),
    )


@pytest.fixture(scope="module")
def cert(mixed_problem):
    X = mixed_problem.inputs
    A = np.exp(-2.0 * X.distances(X))
    A = np.broadcast_to(A / A.sum(axis=-1, keepdims=True), mixed_problem.shape)
    return certify(mixed_problem, A, seed=3, meta={"optimizer": "test"}, repair=True)


def test_certificate_round_trip_and_verify(cert, tmp_path):
    assert cert.ok and 0 < cert.repair_t < 1
    assert [c.name for c in cert.constraints] == ["distp", "apx", "ldp", "xdp"]
    assert all(c.margin >= 0 and c.witness is not None for c in cert.constraints)
    assert cert.constraints[1].epsilon_at_delta is not None
    assert cert.problem_hash == dp.problems.problem_hash(dp.problems.problem_from_dict(cert.problem))
    path = cert.save(tmp_path / "cert.json")
    assert sorted(os.listdir(tmp_path)) == ["cert.json"]
    json.loads(path.read_text())  # strict JSON
    for obj in (cert, cert.to_dict(), path, str(path), Certificate.load(path)):
        report = verify(obj)
        assert report.ok, report.failures
    report = verify(path, exact=True)
    assert report.ok and report.exact, report.failures
    assert [c.level for c in report.levels] == [c.level for c in cert.constraints]
    assert Certificate.load(path).to_dict() == cert.to_dict()


def _edited(d, path, value):
    d = copy.deepcopy(d)
    *head, last = path
    target = d
    for key in head:
        target = target[key]
    target[last] = value(target[last]) if callable(value) else value
    return d


EDITS = {
    "level": (["constraints", 0, "level"], lambda v: v * 0.9),
    "margin": (["constraints", 0, "margin"], lambda v: v + 1e-3),
    "epsilon_at_delta": (["constraints", 1, "epsilon_at_delta"], lambda v: v + 0.1),
    "ok flag of a constraint": (["constraints", 2, "ok"], False),
    "worst pair": (["constraints", 0, "worst"], lambda v: v + 1),
    "witness": (["constraints", 3, "witness", "P", 0], lambda v: v * 1.01),
    "budget in the summary": (["constraints", 0, "epsilon"], lambda v: v * 2),
    "budget in the problem": (["problem", "constraints", 0, "epsilon"], lambda v: v * 2),
    "delta in the problem": (["problem", "constraints", 1, "delta"], lambda v: v / 2),
    "loss": (["loss"], lambda v: v * 0.999),
    "expected loss": (["expected_loss"], lambda v: v * 0.999),
    "worst loss": (["worst_loss"], lambda v: v * 1.001),
    "table entry": (["table", 1, 2, 3], lambda v: v * (1 + 1e-9)),
    "prior entry (tiny)": (["problem", "prior", 0, 1], lambda v: v + 1e-12),
    "prior entry (large)": (["problem", "prior", 0, 1], lambda v: v + 1e-2),
    "item distribution": (["problem", "items", 0, "dist", 0], lambda v: v + 1e-13),
    "loss matrix": (["problem", "loss", 0, 1], lambda v: v * 0.5),
    "ok flag": (["ok"], False),
    "problem hash": (["problem_hash"], "0" * 64),
    "repair weight": (["repair", "t"], lambda v: min(1.0, v * 3)),
    "repair nu": (["repair", "nu", 0], lambda v: v + 0.5),
    "format": (["format"], "diffpriv-certificate/0"),
    "a constraint dropped": (["constraints"], lambda v: v[:-1]),
}


@pytest.mark.parametrize("what", list(EDITS))
def test_edited_certificates_fail(cert, what):
    path, value = EDITS[what]
    report = verify(_edited(cert.to_dict(), path, value))
    assert not report.ok and report.failures


def test_edited_table_with_rows_still_summing_to_one_fails(cert):
    """Move mass between two outputs of one row: row sums stay 1, the claims do not."""
    d = cert.to_dict()
    row = d["table"][0][0]
    row[0], row[1] = row[0] + 0.01, row[1] - 0.01
    report = verify(d)
    assert not report.ok
    assert any("recomputed" in f for f in report.failures)


def test_tiny_violation_is_never_certified_without_repair():
    """Level ε·(1 + 1e-12): float64 refuses, exact arithmetic refuses, repair fixes it."""
    eps = 1.0
    problem = ldp_problem(2, eps)
    table = rr_table(2, eps * (1 + 1e-12))
    (level,) = constraint_levels(problem, table)
    assert level.level == pytest.approx(eps * (1 + 1e-12), rel=1e-14) and not level.ok
    bad = certify(problem, table, repair=False)
    assert not bad.ok and bad.repair_t == 0.0
    for exact in (False, True):
        report = verify(bad, exact=exact)
        assert not report.ok
        assert any("exceed the budget" in f for f in report.failures)
    assert not exact_holds(problem, bad.table).any()
    assert any("not proven by exact arithmetic" in f for f in verify(bad, exact=True).failures)
    good = certify(problem, table, repair=True)
    assert good.ok and 0 < good.repair_t < 1e-7
    assert good.constraints[0].level <= eps - pure_margin(eps, 2, 2)
    assert verify(good, exact=True).ok


def test_certify_reports_the_table_as_given_unless_asked_to_repair():
    """``certify(problem, table)`` never changes the table: a violating one is reported with its own
    level and ``ok = False``; ``repair=True`` certifies a mixed table instead."""
    problem = ldp_problem(3, 1.0)
    table = rr_table(3, 1.5)
    cert = certify(problem, table)
    assert not cert.ok and cert.repair_t == 0.0 and cert.repair_strategy == "none"
    np.testing.assert_array_equal(cert.table, table)
    assert cert.constraints[0].level == pytest.approx(1.5, rel=1e-12)
    fixed = certify(problem, table, repair=True)
    assert fixed.ok and fixed.repair_t > 0 and fixed.constraints[0].level <= 1.0


def test_items_stored_unnormalised_are_certified_as_normalised():
    """Regression: these items sum to 1 ∓ 9e-13, within the 2^-40 the spec keeps as stored.
    Lifting them unnormalised put the float δ 1.04e-12 below the budget (accepted) while the
    exact hockey-stick exceeds it by 1.3e-13. Float and exact must now both refuse."""
    X = dp.Domain(("a", "b", "c"))
    a = np.array([0.6420394723626383, 0.018370396477571438, 0.33959013115889036])
    b = np.array([0.3210197356818969, 0.0, 0.678980264319003])
    problem = dp.Problem(X, X, 1 - np.eye(3), np.ones(3) / 3,
                         items=(dp.Item("a", a), dp.Item("b", b)),
                         constraints=(dp.DistP(((0, 1),), math.log(2), 0.01837039747745852),))
    assert [it.dist.sum() for it in problem.items] != [1.0, 1.0]  # kept as stored
    table = np.eye(3)[None]
    assert not exact_holds(problem, table).any()
    bare = certify(problem, table, repair=False)
    (c,) = bare.constraints
    assert not bare.ok and not c.ok
    assert c.level - c.delta == pytest.approx(1.295e-13, rel=1e-2)  # the exact excess, to 1e-15
    for exact in (False, True):
        assert not verify(bare, exact=exact).ok
    fixed = certify(problem, table, repair=True)
    assert fixed.ok and fixed.repair_t > 0
    assert verify(fixed).ok and verify(fixed, exact=True).ok


def test_equal_items_of_one_profile_certify_at_zero_budget_without_repair():
    """Regression: DistP between two items with the same distribution and profile at ε = 0 was
    refused (no margin fits below 0) and repaired to t = 1, the whole table replaced."""
    X = dp.Domain(("a", "b", "c"))
    lam = np.array([0.2, 0.3, 0.5])
    problem = dp.Problem(X, X, 1 - np.eye(3), np.ones(3) / 3,
                         items=(dp.Item("i", lam), dp.Item("j", lam.copy())),
                         constraints=(dp.DistP(((0, 1),), 0.0), dp.DistP(((1, 0),), 0.0, 0.01)))
    table = rr_table(3, 1.0)
    cert = certify(problem, table, repair=True)
    assert cert.ok and cert.repair_t == 0.0
    assert [c.level for c in cert.constraints] == [0.0, 0.0]
    assert np.array_equal(cert.table, table)
    assert verify(cert).ok and verify(cert, exact=True).ok


def test_float_margin_is_conservative_where_exact_arithmetic_is_not():
    """Level ε·(1 − 1e-12) truly holds: exact arithmetic proves it, float64 (margin 1e-9) won't."""
    problem = ldp_problem(3, 1.0)
    table = rr_table(3, 1.0 - 1e-12)
    assert exact_holds(problem, table).all()
    assert not constraint_levels(problem, table)[0].ok


@pytest.mark.parametrize("k", [2, 4, 9])
@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_randomized_response_certifies(k, eps):
    """RR's level is ε to 1e-12. At exactly ε float64 cannot prove ``level ≤ ε − margin``, so
    certify mixes a tiny t (≈ margin, below 1e-7); RR at ε·(1 − 1e-6) certifies with t = 0."""
    problem = ldp_problem(k, eps)
    assert constraint_levels(problem, rr_table(k, eps))[0].level == pytest.approx(eps, abs=1e-12)
    cert = certify(problem, rr_table(k, eps), repair=True)
    m = pure_margin(eps, k, k)
    assert cert.ok and 0 <= cert.repair_t < 1e-7
    assert eps - 3 * m <= cert.constraints[0].level <= eps - m
    assert verify(cert, exact=True).ok
    loose = certify(problem, rr_table(k, eps * (1 - 1e-6)), repair=True)
    assert loose.ok and loose.repair_t == 0.0 and loose.repair_nu is None


def test_save_is_atomic(cert, tmp_path, monkeypatch):
    path = tmp_path / "cert.json"
    path.write_text("previous")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        cert.save(path)
    assert path.read_text() == "previous"
    assert sorted(os.listdir(tmp_path)) == ["cert.json"]


def test_unreadable_inputs_are_reported_not_raised(tmp_path):
    assert not verify(tmp_path / "missing.json").ok
    (tmp_path / "junk.json").write_text("{not json")
    assert not verify(tmp_path / "junk.json").ok
    assert not verify({"format": "diffpriv-certificate/1"}).ok


def test_meta_must_be_json():
    with pytest.raises(TypeError):
        certify(ldp_problem(2, 1.0), rr_table(2, 0.5), meta={"f": object()}, repair=True)


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_save_gives_the_permissions_of_a_new_file(cert, tmp_path, umask):
    """mkstemp creates 0600; a saved certificate is ``0o666 & ~umask``, like ``open(path, 'w')``."""
    old = os.umask(umask)
    try:
        path = cert.save(tmp_path / "cert.json")
        (tmp_path / "plain.txt").write_text("x")
    finally:
        os.umask(old)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask
    assert os.stat(path).st_mode & 0o777 == os.stat(tmp_path / "plain.txt").st_mode & 0o777


def test_verify_never_raises_on_overflowing_or_deeply_nested_input(cert, tmp_path):
    d = cert.to_dict()
    d["repair"]["t"] = 10**400  # a JSON integer no float64 holds
    d["loss"] = 10**400
    report = verify(d)
    assert not report.ok
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    report = verify(deep)
    assert not report.ok and "cannot be read" in report.failures[0]


def test_check_certificate_accepts_a_certificate_and_rebuilds_problem_and_table(cert):
    d = cert.to_dict()
    checked = check_certificate(json.loads(json.dumps(d)))
    assert checked.problem.shape == cert.table.shape
    assert dp.problems.problem_hash(checked.problem) == cert.problem_hash
    assert checked.table.dtype == np.float64 and np.array_equal(checked.table, cert.table)
    assert check_certificate(d).data is d


SCHEMA_EDITS = {
    "not an object": ([], [1, 2], "certificate: expected a JSON object"),
    "missing key": (["loss"], ..., "loss: required key is missing"),
    "bool for a number": (["repair", "t"], True, "repair.t: expected a number, got true"),
    "string for a bool": (["ok"], "yes", 'ok: expected true or false, got "yes"'),
    "constraint missing key": (["constraints", 1, "n_failed"], ...,
                               "constraints[1].n_failed: required key is missing"),
    "witness of wrong shape": (["constraints", 3, "witness", "P"], [0.5, 0.5],
                               "constraints[3].witness.P: shape (2,), expected (6,)"),
    "ragged table": (["table", 0], [[1.0]], "table: not an array of numbers"),
    "nu of wrong shape": (["repair", "nu"], [1.0], "repair.nu: shape (1,), expected (6,)"),
    "other format": (["format"], "other/2", "format: 'other/2', expected 'diffpriv-certificate/1'"),
    "bad problem": (["problem", "prior"], "x", "problem."),
}


@pytest.mark.parametrize("what", list(SCHEMA_EDITS))
def test_schema_names_the_field_and_verify_reports_it(cert, what):
    """check_certificate raises one line naming the field; verify reports that line, no raise."""
    path, value, expected = SCHEMA_EDITS[what]
    if not path:
        d = value
    elif value is ...:  # delete the key
        d = copy.deepcopy(cert.to_dict())
        target = d
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    else:
        d = _edited(cert.to_dict(), path, value)
    with pytest.raises(CertificateFormatError) as info:
        check_certificate(d)
    message = str(info.value)
    assert message.startswith(expected) and "\n" not in message
    report = verify(d)
    assert not report.ok and report.levels == ()
    if path:
        assert report.failures == [message]


@pytest.mark.parametrize("k", [2, 3])
def test_quantised_certification_lands_budgets_its_float_table_meets(k):
    """k-RR calibrated to ε from 25 to 35.5, whose off-diagonal entries e^{-ε} are a few hundred
    counts of 2^-53 or fewer: rounding to counts moves them by up to half a percent, enough to
    break a ratio the float64 table met (level 31.5004 at ε = 31.5). The quantised certificate
    holds in every case, repaired or not (evaluate's mechanism as it is), and verifies."""
    from diffpriv.mechanisms import calibrate

    for eps in np.arange(25.0, 35.5 + 1e-9, 0.5):
        problem = ldp_problem(k, float(eps))
        table = calibrate(problem, "krr").certificate.table
        assert dp.certify(problem, table).ok  # the float64 table holds
        for repair in (False, True):
            cert = dp.certify(problem, table, repair=repair, quantize=53)
            assert cert.ok, (k, eps, repair, cert.constraints[0].level)
            assert dp.verify(cert).ok


def test_quantised_geo_indistinguishability_on_long_cells_holds():
    """Extended DP at 0.3 per unit between 4-neighbour cells of 100 units (ε·d = 30): the
    optimized table's quantised certificate holds (the level was 0.30001) and verifies; so does
    the calibrated planar Laplace mechanism's, unrepaired."""
    from diffpriv.mechanisms import calibrate

    dom = dp.Domain.grid(3, 3, 100.0)
    geo = dp.ExtendedDP(epsilon=0.3, pairs=dp.problems.pairs_within(dom, 100.0))
    problem = dp.Problem(dom, dom, dom.distances(dom), np.full(9, 1 / 9), constraints=(geo,))
    d = dp.design(problem, quantize=53)
    assert d.certificate.ok and dp.verify(d.certificate).ok
    table = calibrate(problem, "planar_laplace").certificate.table
    cert = dp.certify(problem, table, quantize=53)
    assert cert.ok and dp.verify(cert).ok
