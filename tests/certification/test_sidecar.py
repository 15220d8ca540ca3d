"""Large arrays in an arrays file beside the certificate's JSON: the same claims, hash and table
as pure JSON; tampering with the arrays file is detected; small certificates are unchanged."""

import hashlib
import json
import os
import types
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import diffpriv as dp
from diffpriv._files import FileFormatError
from diffpriv.certification import Certificate, _arrays, _exact, _verify, certify, verify
from diffpriv.certification._schema import (
    CertificateFormatError,
    admit_certificate,
    certificate_bytes,
    check_certificate,
    read_certificate,
)
from diffpriv.certification._summary import ConstraintLevel
from diffpriv.cli import app
from diffpriv.problems import SizeError
from diffpriv.problems import _json as problem_json
from tests._configs import grid_toml

LIMIT = 8  # entries: the table (72), loss (36), prior (12), coords (12) go to the arrays file


@pytest.fixture
def small_limit(monkeypatch):
    monkeypatch.setattr(_arrays, "INLINE_LIMIT", LIMIT)


@pytest.fixture(scope="module")
def problem():
    """Two profiles, a support, an input metric, items small enough to stay inline."""
    rng = np.random.default_rng(1)
    X = dp.Domain.grid(2, 3)
    nx = X.size
    items = tuple(dp.Item(f"i{i}", rng.dirichlet(np.ones(nx)), profile=i % 2) for i in range(4))
    support = np.ones((2, nx, nx), bool)
    support[:, :, 5] = False
    return dp.Problem(
        X, X, X.distances(X), rng.dirichlet(np.ones(2 * nx)).reshape(2, nx), items=items,
        profiles=("home", "out"), support=support, input_metric=1.5 * X.distances(X),
        constraints=(dp.DistP(((0, 1), (2, 3)), 0.5), dp.DistP(((0, 3),), 0.3, 0.05, "apx"),
                     dp.LocalDP(2.0, name="ldp"), dp.ExtendedDP(1.5)),
    )


def table_for(problem, scale=2.0):
    A = np.exp(-scale * problem.loss) * problem.support_mask()
    return A / A.sum(axis=-1, keepdims=True)


def claims(d):
    """Everything of a certificate dict but the versions (the claims and the data)."""
    return {k: v for k, v in d.items() if k != "versions"}


@pytest.fixture
def pair(problem, small_limit, tmp_path):
    """A certificate saved with its arrays file: ``(json path, certificate)``."""
    cert = certify(problem, table_for(problem), seed=3, repair=True)
    return cert.save(tmp_path / "c.json"), cert


# -- the round trip ----------------------------------------------------------------------------


def test_round_trip_through_the_arrays_file_matches_pure_json(problem, pair, tmp_path, monkeypatch):
    path, cert = pair
    assert sorted(os.listdir(tmp_path)) == ["c.arrays.npz", "c.json"]
    stored = json.loads(path.read_text())
    refs = {"table": stored["table"], "problem.loss": stored["problem"]["loss"],
            "problem.prior": stored["problem"]["prior"],
            "problem.support": stored["problem"]["support"],
            "problem.input_metric": stored["problem"]["input_metric"],
            "problem.inputs.coords": stored["problem"]["inputs"]["coords"],
            "problem.outputs.coords": stored["problem"]["outputs"]["coords"]}
    for field, ref in refs.items():
        assert ref["$array"] == field and set(ref) == {"$array", "shape", "dtype", "sha256"}
    assert refs["problem.support"]["dtype"] == "bool" and refs["table"]["shape"] == [2, 6, 6]
    assert isinstance(stored["problem"]["items"][0]["dist"], list)  # 6 entries: inline
    with np.load(tmp_path / "c.arrays.npz", allow_pickle=False) as npz:
        assert sorted(npz.files) == sorted(refs)
        np.testing.assert_array_equal(npz["table"], cert.table)

    plain = certify(problem, table_for(problem), seed=3, repair=True)  # the same, as pure JSON
    monkeypatch.setattr(_arrays, "INLINE_LIMIT", 2**20)
    plain_path = plain.save(tmp_path / "plain" / "c.json")
    assert os.listdir(tmp_path / "plain") == ["c.json"]
    assert claims(cert.to_dict()) == claims(plain.to_dict())
    assert cert.problem_hash == plain.problem_hash == dp.problems.problem_hash(problem)
    loaded = Certificate.load(path)
    assert claims(loaded.to_dict()) == claims(json.loads(plain_path.read_text()))
    assert loaded.table.dtype == np.float64 and np.array_equal(loaded.table, plain.table)
    for obj in (path, str(path), cert, loaded, plain_path):
        report = verify(obj)
        assert report.ok, report.failures
    exact = verify(path, exact=True)
    assert exact.ok and exact.exact
    assert [c.level for c in exact.levels] == [c.level for c in verify(plain_path).levels]
    checked = check_certificate(read_certificate(path))
    assert dp.problems.problem_hash(checked.problem) == plain.problem_hash
    assert np.array_equal(checked.table, plain.table)


def test_saving_again_without_large_arrays_removes_the_stale_arrays_file(pair, tmp_path, monkeypatch):
    path, cert = pair
    monkeypatch.setattr(_arrays, "INLINE_LIMIT", 2**20)
    cert.save(path)
    assert os.listdir(tmp_path) == ["c.json"] and verify(path).ok


def test_the_arrays_file_is_written_before_the_json(pair, tmp_path, monkeypatch):
    """A failed JSON write leaves the previous JSON, never one whose arrays are missing."""
    path, cert = pair
    path.write_text("previous")
    real = os.replace

    def fail_json(src, dst):
        if str(dst).endswith(".json"):
            raise OSError("disk full")
        real(src, dst)

    monkeypatch.setattr(os, "replace", fail_json)
    with pytest.raises(OSError, match="disk full"):
        cert.save(path)
    assert path.read_text() == "previous"
    assert sorted(os.listdir(tmp_path)) == ["c.arrays.npz", "c.json"]


# -- small certificates are unchanged -----------------------------------------------------------


def _fixed_problems():
    X = dp.Domain(("a", "b", "c"))
    plain = dp.Problem(X, X, 1 - np.eye(3), np.ones(3) / 3, constraints=(dp.LocalDP(1.0),))
    G = dp.Domain.grid(2, 2)
    support = np.ones((4, 4), bool)
    support[0, 3] = False
    M = np.abs(np.subtract.outer(np.arange(4.0), np.arange(4.0)))
    rich = dp.Problem(G, G, M, np.array([0.1, 0.2, 0.3, 0.4]),
                      items=(dp.Item("i", np.array([0.25, 0.25, 0.5, 0.0])),
                             dp.Item("j", np.full(4, 0.25))),
                      constraints=(dp.DistP(((0, 1),), 0.5), dp.ExtendedDP(1.0)), support=support,
                      input_metric=2 * M, objective="worst")
    return plain, rich


def test_problem_hash_of_small_problems_is_unchanged():
    """Hashes computed by the pure-JSON definition (before arrays files existed)."""
    plain, rich = _fixed_problems()
    problem_hash = dp.problems.problem_hash
    assert problem_hash(plain) == "2459211bebffd30afc28c14c6489da083acf84eeb314018a05d14abda63c76e8"
    assert problem_hash(rich) == "6a771d75d72b8f9b4e5f71bcb783c08ee5ae21f337c0fa8038535cda861a92af"
    for p in (plain, rich):
        blob = json.dumps(dp.problems.problem_to_dict(p), sort_keys=True, separators=(",", ":")).encode()
        assert dp.problems.problem_hash(p) == hashlib.sha256(blob).hexdigest()


def test_small_certificate_files_are_byte_identical_to_the_pure_json_format(tmp_path):
    """A fixed certificate saves to the bytes the pure-JSON writer wrote (sha256 pinned)."""
    _, rich = _fixed_problems()
    table = rich.support_mask() / rich.support_mask().sum(-1, keepdims=True)
    level = ConstraintLevel(0, "distp", "distp0", 0.5, 0.0, 0.25, None, 0.25, True, 0,
                            {"pair": {"items": ["i", "j"]}, "P": [0.25] * 4, "Q": [0.5, 0.5, 0.0, 0.0]},
                            1, 0)
    cert = Certificate(
        problem=dp.problems.problem_to_dict(rich, arrays=True), problem_hash="ab" * 32, table=table,
        repair_t=0.125, repair_nu=np.array([0.5, 0.5, 0.0, 0.0]), repair_strategy="violation",
        objective="worst", loss=1.5, expected_loss=1.25, worst_loss=float("inf"),
        constraints=(level,), ok=True, versions={"python": "3", "numpy": "2", "diffpriv": "0"},
        seed=7, meta={"k": [1, 2.5, None]})
    path = cert.save(tmp_path / "c.json")
    assert os.listdir(tmp_path) == ["c.json"]
    text = path.read_bytes()
    assert hashlib.sha256(text).hexdigest() == (
        "6bc1e59ee107311fcd1418ddeb852dc45715ce1c043be116b776e991a3b2556d")
    assert text.decode() == cert.to_json() == json.dumps(cert.to_dict(), allow_nan=False)


def test_small_certify_output_is_pure_json(problem, tmp_path):
    cert = certify(problem, table_for(problem), repair=True)
    path = cert.save(tmp_path / "c.json")
    assert os.listdir(tmp_path) == ["c.json"]
    d = json.loads(path.read_text())
    assert d["problem"] == dp.problems.problem_to_dict(problem) and d["table"] == cert.table.tolist()
    assert path.read_text() == cert.to_json()


def test_problem_to_dict_keeps_arrays_on_request(problem):
    d = dp.problems.problem_to_dict(problem, arrays=True)
    assert isinstance(d["loss"], np.ndarray) and d["support"].dtype == bool
    assert problem_json.map_arrays(d, lambda f, v: problem_json.array_to_list(v)) == (
        dp.problems.problem_to_dict(problem))
    assert dp.problems.problem_hash(dp.problems.problem_from_dict(d)) == dp.problems.problem_hash(problem)


def test_problem_hash_of_large_arrays_is_over_their_digest(problem, monkeypatch):
    """Arrays beyond DIGEST_LIMIT enter the hash as ``{"$array": field, "shape", "dtype",
    "sha256"}``; the hash does not depend on how a certificate stores them."""
    before = dp.problems.problem_hash(problem)
    monkeypatch.setattr(_arrays, "INLINE_LIMIT", 1)  # storage does not change the hash
    assert dp.problems.problem_hash(problem) == before
    monkeypatch.setattr(problem_json, "DIGEST_LIMIT", 20)
    d = dp.problems.problem_to_dict(problem)
    for key in ("loss", "support", "input_metric"):  # 36 and 72 entries
        a = np.asarray(d[key], dtype=bool if key == "support" else np.float64)
        d[key] = {"$array": key, "shape": list(a.shape), "dtype": a.dtype.name,
                  "sha256": hashlib.sha256(a.tobytes()).hexdigest()}
    blob = json.dumps(d, sort_keys=True, separators=(",", ":")).encode()
    assert dp.problems.problem_hash(problem) == hashlib.sha256(blob).hexdigest() != before


# -- tampering -----------------------------------------------------------------------------------


def _rewrite(npz_path: Path, change) -> None:
    with np.load(npz_path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    change(arrays)
    np.savez(npz_path, **arrays)


def _cannot_check(path: Path) -> str:
    with pytest.raises(FileFormatError) as info:
        read_certificate(path)
    line = str(info.value)
    assert line.startswith(f"{path}: cannot be checked: {path.with_name('c.arrays.npz')}: ")
    report = verify(path)
    assert not report.ok and report.failures == [f"certificate: cannot be read (FileFormatError: "
                                                 f"{line})"]
    return line


def test_a_changed_entry_is_detected(pair):
    path, _ = pair

    def bump(a):
        a["table"] = a["table"].copy()
        a["table"][0, 1, 2] *= 1 + 1e-12

    _rewrite(path.with_name("c.arrays.npz"), bump)
    assert _cannot_check(path).endswith("table: its SHA-256 is not the reference's (the file was "
                                        "changed, or is another certificate's)")


def test_a_changed_entry_with_its_digest_updated_fails_the_claims(pair):
    """Digests only tie the pair together: the certifier recomputes every claim."""
    path, _ = pair
    npz = path.with_name("c.arrays.npz")
    with np.load(npz) as f:
        table = f["table"].copy()
    table[0, 0, :2] = table[0, 0, :2] + [0.01, -0.01]  # rows still sum to 1
    _rewrite(npz, lambda a: a.__setitem__("table", table))
    d = json.loads(path.read_text())
    d["table"]["sha256"] = problem_json.array_digest(table)
    path.write_text(json.dumps(d))
    report = verify(path)
    assert not report.ok and any("recomputed" in f for f in report.failures)


def test_another_certificates_arrays_file_is_detected(problem, pair, tmp_path):
    path, _ = pair
    other = certify(problem, table_for(problem, scale=1.0), repair=True).save(tmp_path / "other" / "c.json")
    os.replace(other.with_name("c.arrays.npz"), path.with_name("c.arrays.npz"))
    assert "table: its SHA-256 is not the reference's" in _cannot_check(path)


def test_a_missing_or_irregular_arrays_file_cannot_be_checked(pair):
    path, _ = pair
    npz = path.with_name("c.arrays.npz")
    npz.unlink()
    assert _cannot_check(path).endswith("c.arrays.npz: no such file")
    os.mkfifo(npz)
    assert _cannot_check(path).endswith("cannot read (a FIFO, not a regular file)")
    npz.unlink()
    npz.mkdir()
    assert _cannot_check(path).endswith("cannot read (a folder, not a regular file)")
    npz.rmdir()
    npz.write_bytes(b"PK\x03\x04 not a zip")
    assert "not an arrays file we can read (BadZipFile" in _cannot_check(path)


def test_the_arrays_file_holds_exactly_the_referenced_arrays(pair):
    path, _ = pair
    npz = path.with_name("c.arrays.npz")
    _rewrite(npz, lambda a: a.__setitem__("extra", np.zeros(2)))
    assert "unexpected ['extra.npy']" in _cannot_check(path)
    _rewrite(npz, lambda a: (a.pop("extra"), a.pop("table")))
    assert "missing ['table.npy']" in _cannot_check(path)


def test_a_member_is_checked_before_its_data_is_read(pair):
    """A pickle (object array), another shape or dtype, Fortran order: refused from the header."""
    path, cert = pair
    npz = path.with_name("c.arrays.npz")
    cases = {
        "object": np.array([{"x": 1}] * 72, dtype=object).reshape(2, 6, 6),
        "shape": np.zeros((10**4, 10**4), dtype=np.float64)[:1],
        "dtype": cert.table.astype(np.float32),
        "fortran": np.asfortranarray(cert.table),
    }
    with np.load(npz, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    for name, value in cases.items():
        arrays["table"] = value
        np.savez(npz, allow_pickle=name == "object", **arrays)
        line = _cannot_check(path)
        assert "table: holds shape" in line and "the reference says (2, 6, 6), float64" in line, name


def test_the_arrays_file_is_bounded(pair, monkeypatch):
    path, _ = pair
    monkeypatch.setattr(_arrays, "MAX_ARRAYS_BYTES", 100)
    assert "a certificate's arrays file may have at most 100 bytes" in _cannot_check(path)
    monkeypatch.setattr(_arrays, "MAX_ARRAYS_BYTES", 2**30)
    monkeypatch.setenv("DIFFPRIV_MEMORY_LIMIT", str(32 * path.stat().st_size + 100))
    with pytest.raises(FileFormatError, match="cannot be checked: reading it and its arrays needs"):
        read_certificate(path)


def _edit(path: Path, change) -> Path:
    d = json.loads(path.read_text())
    change(d)
    path.write_text(json.dumps(d))
    return path


REFERENCE_EDITS = {
    "a path": (lambda d: d["table"].__setitem__("$array", "../x"),
               "table.$array: names \"../x\", expected 'table' (a reference names the field it "
               "stands for)"),
    "another field": (lambda d: d["problem"].__setitem__("loss", d["table"]),
                      "problem.loss.$array: names \"table\", expected 'problem.loss'"),
    "an extra key": (lambda d: d["table"].__setitem__("path", "/etc/passwd"),
                     "table: an array reference has the keys $array, shape, dtype, sha256; got"),
    "a bad shape": (lambda d: d["table"].__setitem__("shape", [2, -6, 6]),
                    "table.shape: expected a list of 1 to 3 non-negative integers, got [2, -6, 6]"),
    "another dtype": (lambda d: d["table"].__setitem__("dtype", "object"),
                      "table.dtype: expected 'float64', got \"object\""),
    "a bad digest": (lambda d: d["table"].__setitem__("sha256", "ABC"),
                     "table.sha256: expected 64 lowercase hex digits, got \"ABC\""),
}


@pytest.mark.parametrize("what", list(REFERENCE_EDITS))
def test_malformed_references_name_their_field(pair, what):
    path, _ = pair
    change, expected = REFERENCE_EDITS[what]
    _edit(path, change)
    with pytest.raises(CertificateFormatError) as info:
        read_certificate(path)
    assert str(info.value).startswith(expected), str(info.value)
    assert not verify(path).ok


NOT_AN_ARRAY_FIELD = {
    "witness": (lambda d, ref: d["constraints"][0]["witness"].__setitem__("P", ref),
                "constraints[0].witness.P: expected a list"),
    "repair": (lambda d, ref: d["repair"].__setitem__("nu", ref), "repair.nu: expected a list"),
    "budget": (lambda d, ref: d["problem"]["constraints"][0].__setitem__("epsilon", ref),
               "problem.constraints[0].epsilon: expected a number"),
    "labels": (lambda d, ref: d["problem"]["inputs"].__setitem__("labels", ref),
               "problem.inputs.labels: expected a list"),
}


@pytest.mark.parametrize("what", list(NOT_AN_ARRAY_FIELD))
def test_a_reference_stands_only_where_an_array_may(pair, what):
    path, _ = pair
    change, expected = NOT_AN_ARRAY_FIELD[what]
    _edit(path, lambda d: change(d, dict(d["table"])))
    with pytest.raises(CertificateFormatError) as info:
        check_certificate(read_certificate(path))
    assert str(info.value).startswith(expected), str(info.value)


def test_an_unresolved_reference_in_a_dict_is_a_format_error(pair):
    path, _ = pair
    report = verify(json.loads(path.read_text()))
    assert not report.ok and report.failures == [
        "table: an array reference, resolved only when the certificate is read from its file, "
        "beside its arrays file"]


# -- sizes -----------------------------------------------------------------------------------------


def test_a_100x100_grid_certificate_is_admitted_with_its_arrays_file():
    n = 100 * 100
    grid = types.SimpleNamespace(
        shape=(1, n, n), items=(), support=None, input_metric=None,
        inputs=types.SimpleNamespace(coords=np.zeros((n, 2))),
        outputs=types.SimpleNamespace(coords=np.zeros((n, 2))))
    size = certificate_bytes(grid)
    assert size.arrays == 2 * 8 * n * n and size.json < 2 * 2**20  # the coordinates
    admit_certificate(grid)
    huge = types.SimpleNamespace(**{**vars(grid), "shape": (16, n, n)})
    with pytest.raises(SizeError, match="make a certificate's arrays file of ~"):
        admit_certificate(huge)


def test_exact_mode_refuses_tables_beyond_its_limit(pair, monkeypatch):
    path, _ = pair
    monkeypatch.setattr(_verify, "MAX_EXACT_ENTRIES", 71)
    assert _exact.MAX_EXACT_ENTRIES >= 10**6
    with pytest.raises(SizeError, match="exact arithmetic: the table has 72 entries, more than the 71"):
        verify(path, exact=True)
    assert verify(path).ok
    result = CliRunner().invoke(app, ["certify", "--exact", str(path)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {path}: cannot be checked: exact arithmetic: ")


# -- the command line ------------------------------------------------------------------------------

GRID_TOML = grid_toml(2, 3, (0.5, 0.5)) + "\n[optimizer]\nsteps = 2000\n"


def test_optimize_certify_export_through_the_arrays_file(tmp_path, small_limit, monkeypatch):
    runner = CliRunner()
    config = tmp_path / "config.toml"
    config.write_text(GRID_TOML)
    out = tmp_path / "out"
    result = runner.invoke(app, ["optimize", str(config), "--out", str(out), "--seed", "2"])
    assert result.exit_code == 0, result.output
    cert_path = out / "certificate.json"
    assert (out / "certificate.arrays.npz").is_file()
    assert json.loads(cert_path.read_text())["table"]["$array"] == "table"
    result = runner.invoke(app, ["certify", str(cert_path)])
    assert result.exit_code == 0 and "all claims hold" in result.output, result.output
    for fmt in ("npz", "csv"):
        result = runner.invoke(app, ["export", str(cert_path), "--format", fmt])
        assert result.exit_code == 0, result.output

    # the same certificate as pure JSON: the same claims, hash and exported table
    monkeypatch.setattr(_arrays, "INLINE_LIMIT", 2**20)
    cert = Certificate.load(cert_path)
    plain = cert.save(tmp_path / "plain" / "certificate.json")
    assert os.listdir(plain.parent) == ["certificate.json"]
    assert claims(json.loads(plain.read_text())) == claims(cert.to_dict())
    result = runner.invoke(app, ["export", str(plain), "--format", "npz"])
    assert result.exit_code == 0, result.output
    with np.load(out / "table.npz") as a, np.load(plain.parent / "table.npz") as b:
        np.testing.assert_array_equal(a["table"], b["table"])
        np.testing.assert_array_equal(a["table"], cert.table)
    assert (out / "table.csv").read_text().count("\n") == 1 + 6 * 6

    (out / "certificate.arrays.npz").unlink()
    for command in ("certify", "export"):
        result = runner.invoke(app, [command, str(cert_path), "--out", str(tmp_path / "t.csv")]
                               if command == "export" else [command, str(cert_path)])
        assert result.exit_code == 2, result.output
        assert result.stderr == (f"error: {cert_path}: cannot be checked: "
                                 f"{out / 'certificate.arrays.npz'}: no such file\n")
    assert not (tmp_path / "t.csv").exists()


@pytest.mark.parametrize("limit", [LIMIT, 2**20])
def test_as_read_is_the_json_round_trip_of_the_saved_form(problem, limit, monkeypatch):
    """:func:`_arrays.as_read` skips the JSON text of the arrays; what it returns is exactly what
    the text's round trip gave (inline arrays as the same nested lists, the support as 0/1, the
    referenced ones as the same arrays), with every array field of ``problem`` present."""
    monkeypatch.setattr(_arrays, "INLINE_LIMIT", limit)
    d = certify(problem, table_for(problem)).to_dict(arrays=True)
    text, arrays = _arrays.externalize(d)
    expected = _arrays.map_certificate(json.loads(json.dumps(text, allow_nan=False)),
                                       lambda f, v: arrays[f] if f in arrays else v)
    got = _arrays.as_read(d)
    fields = dict(_arrays.certificate_arrays(got))
    assert set(fields) == set(dict(_arrays.certificate_arrays(expected))) and len(fields) == 11
    for field, value in _arrays.certificate_arrays(expected):
        assert type(fields[field]) is type(value) and np.array_equal(fields[field], value), field
        if isinstance(value, np.ndarray):
            assert fields[field].dtype == value.dtype
    strip = lambda c: _arrays.map_certificate(c, lambda f, v: None)  # noqa: E731
    assert strip(got) == strip(expected)
    if limit > LIMIT:  # an inline NaN is refused, as the text refused it
        bad = dict(d, table=np.full_like(d["table"], np.nan))
        for trip in (_arrays.as_read, lambda c: json.dumps(_arrays.externalize(c)[0], allow_nan=False)):
            with pytest.raises(ValueError, match="not JSON compliant"):
                trip(bad)


def _legacy_problem():
    """A 20×20 grid: its table and loss (160,000 entries) lie between the hash's digest limit and
    the legacy one, so the two hashes differ."""
    dom = dp.Domain.grid(20, 20)
    four = tuple((i, i + 1) for i in range(399) if (i + 1) % 20)
    return dp.Problem(dom, dom, dom.distances(dom), np.full(400, 1 / 400),
                      constraints=(dp.LocalDP(1.0, pairs=four),))


def test_a_certificate_hashed_by_the_legacy_limit_still_verifies_and_a_wrong_hash_does_not(
        tmp_path, monkeypatch):
    """Certificates written while arrays of up to 2²⁰ entries were hashed by their numbers keep
    verifying (:func:`problem_json.hash_matches`); any other stored hash still fails."""
    p = _legacy_problem()
    legacy = problem_json.problem_hash(p, problem_json.LEGACY_DIGEST_LIMIT)
    assert legacy != problem_json.problem_hash(p)
    with monkeypatch.context() as m:  # written as before: inline, hashed by the numbers
        m.setattr(problem_json, "DIGEST_LIMIT", problem_json.LEGACY_DIGEST_LIMIT)
        m.setattr(_arrays, "INLINE_LIMIT", problem_json.LEGACY_DIGEST_LIMIT)
        cert = certify(p, np.full(p.shape, 1 / 400))
        path = cert.save(tmp_path / "certificate.json")
    assert cert.problem_hash == legacy
    assert not _arrays.arrays_path(path).exists() and verify(path).ok
    d = json.loads(Path(path).read_text())
    d["problem_hash"] = hashlib.sha256(b"another problem").hexdigest()
    report = verify(d)
    assert not report.ok and "problem_hash: does not match the stored problem" in report.failures
    fresh = certify(p, np.full(p.shape, 1 / 400))  # written now: by reference, hashed by digest
    path = fresh.save(tmp_path / "fresh.json")
    assert _arrays.arrays_path(path).exists() and fresh.problem_hash != legacy and verify(path).ok


def test_a_sweep_folder_with_the_legacy_hash_resumes_and_another_problem_does_not(tmp_path):
    from diffpriv._sweep import _resume, _spec

    p = _legacy_problem()
    spec = _spec(p, "ldp", "epsilon", (0.5, 1.0), (), 0, None, {})
    legacy = dict(spec, problem_hash=problem_json.problem_hash(p, problem_json.LEGACY_DIGEST_LIMIT))
    (tmp_path / "sweep.json").write_text(json.dumps(legacy))
    assert _resume(tmp_path, spec, [p, p], (), None, p) == {}
    (tmp_path / "sweep.json").write_text(json.dumps(dict(spec, problem_hash="0" * 64)))
    with pytest.raises(ValueError, match="holds another sweep \\(problem_hash differ\\)"):
        _resume(tmp_path, spec, [p, p], (), None, p)
