"""The command line: bad input exits 2 with one ``error:`` line; certify, export, reference work."""

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from diffpriv.cli import app
from tests._configs import BASE_TOML

ROOT = Path(__file__).resolve().parents[2]


# (case id, text to replace in BASE_TOML, replacement, start of the error line after "error: ")
BAD = [
    ("sum", "[0.5, 0.3, 0.2]", "[0.5, 0.3, 0.1]", "items[0].distribution: sums to 0.9, expected 1"),
    ("negative", "[0.2, 0.3, 0.5]", "[-0.2, 0.7, 0.5]",
     "items[1].distribution: has a negative entry"),
    ("nan", "[0.5, 0.3, 0.2]", "[0.5, nan, 0.5]", "items[0].distribution: has a NaN"),
    ("shape", "[0.5, 0.3, 0.2]", "[0.5, 0.5]", "items[0].distribution: has 2 entries, expected 3"),
    ("loss-shape", 'kind = "hamming"', 'kind = "matrix"\nmatrix = [[0, 1], [1, 0]]',
     "loss.matrix: shape (2, 2), expected (3, 3)"),
    ("kind", 'kind = "distp"', 'kind = "renyi"',
     "constraints[0].kind: must be 'distp', 'ldp', 'xdp', 'divergence_distp'"),
    ("eps<0", "epsilon = 0.5", "epsilon = -1.0",
     "constraints[0].epsilon: must be >= 0, got -1"),
    ("delta=1", "epsilon = 0.5", "epsilon = 0.5\ndelta = 1.0",
     "constraints[0].delta: must be in [0, 1), got 1"),
    ("delta<0", "epsilon = 0.5", "epsilon = 0.5\ndelta = -0.01",
     "constraints[0].delta: must be >= 0, got -0.01"),
    ("empty", '["a", "b", "c"]', "[]", "inputs.labels: is empty"),
    ("duplicate", '["a", "b", "c"]', '["a", "b", "b"]', "inputs.labels: duplicate label 'b'"),
    ("unknown-item", '[["p", "q"]]', '[["p", "r"]]', "constraints[0].pairs[0]: unknown item 'r'"),
    ("unknown-key", "[loss]", 'colour = "red"\n[loss]', "inputs.colour: unknown key"),
    ("toml-syntax", "epsilon = 0.5", "epsilon = ", "CONFIG: invalid TOML: "),
    ("grid-size", 'labels = ["a", "b", "c"]', "grid = { rows = 1000, cols = 1000 }",
     "inputs.grid: 1000 × 1000 = 1000000 cells, at most 10000 allowed"),
    ("ragged-points", "[0.5, 0.3, 0.2]", "{ points = [[1, 2], [3]] }",
     "items[0].distribution.points: point 1 has 1 numbers, point 0 has 2"),
]


@pytest.fixture
def runner():
    return CliRunner()


def _config(tmp_path: Path, text: str = BASE_TOML) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def _error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    assert lines[0].startswith("error: ")
    return lines[0].removeprefix("error: ")


@pytest.mark.parametrize(("old", "new", "expected"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
@pytest.mark.parametrize("command", ["optimize", "reference"])
def test_bad_config_exits_2_with_one_line(runner, tmp_path, command, old, new, expected):
    assert old in BASE_TOML
    config = _config(tmp_path, BASE_TOML.replace(old, new, 1))
    out = tmp_path / "out"
    result = runner.invoke(app, [command, str(config), "--out", str(out)])
    line = _error_line(result)
    assert line.startswith(expected.replace("CONFIG", str(config))), line
    assert not out.exists()  # nothing written


# one bad value of each kind for each [optimizer] field: (TOML line, start of the error line)
BAD_OPTIMIZER = [
    ("seed = -1", "optimizer.seed: input should be greater than or equal to 0, got -1"),
    ("steps = 0", "optimizer.steps: input should be greater than or equal to 1, got 0"),
    ("period = 2.5", "optimizer.period: input should be a valid integer, got 2.5"),
    ("omega = -0.3", "optimizer.omega: input should be greater than 0, got -0.3"),
    ("gap_tol = 0.0", "optimizer.gap_tol: input should be greater than 0, got 0.0"),
    ("gap_tol = nan", "optimizer.gap_tol: input should be a finite number, got nan"),
    ("chunk = 0", "optimizer.chunk: input should be greater than or equal to 1, got 0"),
    ("jitter = -1e-3", "optimizer.jitter: input should be greater than or equal to 0, got -0.001"),
    ('polish = "no"', "optimizer.polish: input should be a valid boolean, got 'no'"),
    ("rate = 0.1", "optimizer.rate: unknown key"),
    ("seed = 18446744073709551616",
     "optimizer.seed: input should be less than or equal to 4294967295, got 18446744073709551616"),
]


@pytest.mark.parametrize(("line", "expected"), BAD_OPTIMIZER, ids=[c[0] for c in BAD_OPTIMIZER])
def test_bad_optimizer_option_exits_2(runner, tmp_path, line, expected):
    config = _config(tmp_path, BASE_TOML + f"\n[optimizer]\n{line}\n")
    out = tmp_path / "out"
    assert _error_line(runner.invoke(app, ["optimize", str(config), "--out", str(out)])) == expected
    assert not out.exists()


@pytest.mark.parametrize("command", ["optimize", "reference", "certify", "export"])
def test_missing_file_exits_2(runner, tmp_path, command):
    missing = tmp_path / "missing.toml"
    args = [command, str(missing)]
    if command == "optimize":
        args += ["--out", str(tmp_path / "o")]
    assert _error_line(runner.invoke(app, args)) == f"{missing}: no such file"


def test_bad_config_fails_before_jax_is_imported(tmp_path):
    config = _config(tmp_path, BASE_TOML.replace("epsilon = 0.5", "epsilon = -1.0"))
    code = (
        "import sys; from diffpriv.cli import main; sys.argv = ['diffpriv', 'optimize', "
        f"{str(config)!r}, '--out', {str(tmp_path / 'o')!r}]\n"
        "try:\n    main()\nexcept SystemExit as e:\n"
        "    assert 'jax' not in sys.modules, 'jax was imported'; raise\n"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "error: constraints[0].epsilon: must be >= 0, got -1\n"


def test_optimize_keeps_compiled_programs_in_the_cache_folder(tmp_path):
    """JAX's persistent compilation cache (diffpriv/solvers/_cache.py), in a process of its own:
    JAX reads the folder at the process's first compilation."""
    cache = tmp_path / "cache"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "DIFFPRIV_COMPILE_CACHE": str(cache)}
    args = ["optimize", str(_config(tmp_path, BASE_TOML)), "--out", str(tmp_path / "o"),
            "--method", "pdhg", "--steps", "500", "--no-progress"]
    proc = subprocess.run([sys.executable, "-m", "diffpriv.cli", *args], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    assert any(cache.iterdir())


def test_the_compile_cache_folder_comes_from_the_environment(monkeypatch, tmp_path):
    from diffpriv.solvers._cache import cache_dir, enable_compile_cache

    assert enable_compile_cache() is None  # the tests' conftest turns it off
    for off in ("off", "OFF", "0", ""):
        assert cache_dir(off) is None
    assert cache_dir(str(tmp_path / "c")) == tmp_path / "c"
    monkeypatch.delenv("DIFFPRIV_COMPILE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_dir() == tmp_path / "x" / "diffpriv" / "jax"


def test_help_explains_every_command(runner):
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("optimize", "certify", "export", "plot", "reference"):
        assert command in result.output
        sub = runner.invoke(app, [command, "--help"])
        assert sub.exit_code == 0 and "Usage" in sub.output


@pytest.fixture
def lp_certificate(runner, tmp_path) -> Path:
    """The LP optimum of the small config, certified: ``tmp/lp/certificate.json``."""
    out = tmp_path / "lp"
    result = runner.invoke(app, ["reference", str(_config(tmp_path)), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out / "certificate.json"


def test_reference_certify_export_round_trip(runner, lp_certificate):
    from diffpriv.certification import Certificate
    from diffpriv.solvers._lp import solve_lp

    out = lp_certificate.parent
    summary = json.loads((out / "summary.json").read_text())
    cert = Certificate.load(lp_certificate)
    assert summary["ok"] and cert.ok
    assert summary["certified"] == cert.loss
    assert [c["name"] for c in summary["constraints"]] == ["distp0"]
    # the certified table is the LP table, repaired at most by a tiny mixing weight
    lp = solve_lp(cert_problem(cert))
    assert abs(cert.loss - lp.value) <= 1e-6, (cert.loss, lp.value)

    result = runner.invoke(app, ["certify", str(lp_certificate)])
    assert result.exit_code == 0, result.output
    assert "all claims hold" in result.output

    for fmt in ("csv", "npz", "json"):
        result = runner.invoke(app, ["export", str(lp_certificate), "--format", fmt])
        assert result.exit_code == 0, result.output
    with open(out / "table.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["profile", "input", "output", "probability"]
    assert len(rows) == 9
    from_csv = np.array([float(r["probability"]) for r in rows]).reshape(1, 3, 3)
    np.testing.assert_array_equal(from_csv, cert.table)  # 17 digits: exact float64
    with np.load(out / "table.npz") as npz:  # closed here, not whenever GC runs
        np.testing.assert_array_equal(npz["table"], cert.table)
        assert npz["inputs"].tolist() == ["a", "b", "c"]
    exported = json.loads((out / "table.json").read_text())
    np.testing.assert_array_equal(np.asarray(exported["table"]), cert.table)


def cert_problem(cert):
    from diffpriv.problems import problem_from_dict

    return problem_from_dict(cert.problem)


def test_tampered_certificate_fails_and_is_not_exported(runner, lp_certificate):
    data = json.loads(lp_certificate.read_text())
    # the identity: ln(0.5 / 0.2) > 0.5, so the claims for this table are false
    data["table"] = np.eye(3)[None].tolist()
    lp_certificate.write_text(json.dumps(data))

    result = runner.invoke(app, ["certify", str(lp_certificate)])
    assert result.exit_code == 1
    assert "do not hold" in result.stderr

    target = lp_certificate.parent / "tampered.csv"
    result = runner.invoke(app, ["export", str(lp_certificate), "--out", str(target)])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ")
    assert not target.exists()


def test_not_a_certificate_exits_2(runner, tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{not json")
    assert _error_line(runner.invoke(app, ["certify", str(path)])).startswith(f"{path}: not a JSON")
    path.write_text("[]")
    line = _error_line(runner.invoke(app, ["export", str(path), "--format", "csv"]))
    assert line == f"{path}: certificate: expected a JSON object"


def _set(data: dict, path: str, value) -> None:
    """Sets (or, with ``value`` ``...``, deletes) the dotted ``path``; integers index lists."""
    *parents, last = [int(k) if k.isdigit() else k for k in path.split(".")]
    for k in parents:
        data = data[k]
    if value is ...:
        del data[last]
    else:
        data[last] = value


# a certificate with one edit: (case id, dotted path, new value or ... to delete, error after FILE: )
MALFORMED = [
    ("table-huge-int", "table.0.0.0", 10**400, "table[0][0][0]: integer too large for a float64"),
    ("repair-t-huge-int", "repair.t", 10**400, "repair.t: integer too large for a float64"),
    ("constraints-not-list", "constraints", 5, "constraints: expected a list, got 5"),
    ("constraint-not-object", "constraints.0", 1, "constraints[0]: expected an object, got 1"),
    ("constraint-not-object-list", "constraints.0", [], "constraints[0]: expected an object, got []"),
    ("constraints-count", "constraints", [], "constraints: has 0 entries, the problem has 1"),
    ("missing-loss", "loss", ..., "loss: required key is missing"),
    ("missing-repair", "repair", ..., "repair: required key is missing"),
    ("ok-not-bool", "ok", "yes", 'ok: expected true or false, got "yes"'),
    ("level-not-number", "constraints.0.level", "high", "constraints[0].level: expected a number"),
    ("missing-n-failed", "constraints.0.n_failed", ..., "constraints[0].n_failed: required key"),
    ("witness-length", "constraints.0.witness.P", [0.5, 0.5], "constraints[0].witness.P: shape (2,)"),
    ("witness-not-numbers", "constraints.0.witness.Q", ["a", "b", "c"],
     "constraints[0].witness.Q: not an array of numbers"),
    ("table-string", "table.0.0.0", "inf", "table: not an array of numbers"),
    ("table-null", "table.0.0.0", None, "table: not an array of numbers"),
    ("table-ragged", "table.0.0", [1.0], "table: not an array of numbers"),
    ("table-shape", "table", [[[1.0]]], "table: shape (1, 1, 1), expected (1, 3, 3)"),
    ("repair-nu", "repair.nu", [1.0], "repair.nu: shape (1,), expected (3,)"),
    ("format", "format", "other/2", "format: 'other/2', expected 'diffpriv-certificate/1'"),
    ("problem-missing", "problem.loss", ..., "problem: missing field 'loss'"),
    ("problem-not-object", "problem", [1, 2], "problem: expected an object, got [1, 2]"),
]


@pytest.mark.parametrize(("where", "value", "expected"), [c[1:] for c in MALFORMED],
                         ids=[c[0] for c in MALFORMED])
@pytest.mark.parametrize("command", ["certify", "export", "plot"])
def test_malformed_certificate_exits_2_with_one_line(runner, tmp_path, lp_certificate, command,
                                                     where, value, expected):
    data = json.loads(lp_certificate.read_text())
    _set(data, where, value)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    target = tmp_path / "written.png"
    args = [command, str(bad)] + ([] if command == "certify" else ["--out", str(target)])
    line = _error_line(runner.invoke(app, args))
    assert line.startswith(f"{bad}: {expected}"), line
    assert not target.exists()


@pytest.mark.parametrize(("text", "expected"), [
    ('{"loss": NaN}', "not strict JSON: NaN is not a JSON number"),
    ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "not a JSON file we can read (nested too deeply)"),
    ('{"a": ' + "1" * 5000 + "}", "not a JSON file (Exceeds the limit"),
    ("[" * 100_000, "certificate: expected a JSON object"),  # found before parsing
    (b"\xff\xfe\x00", "cannot read ("),
])
def test_unreadable_certificate_exits_2(runner, tmp_path, text, expected):
    path = tmp_path / "c.json"
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    for command in ("certify", "export", "plot"):
        assert _error_line(runner.invoke(app, [command, str(path)])).startswith(f"{path}: {expected}")
    assert sorted(os.listdir(tmp_path)) == ["c.json"]
    assert _error_line(runner.invoke(app, ["certify", str(tmp_path)])).startswith(f"{tmp_path}: cannot read")


def test_verify_raising_is_one_line_not_a_traceback(runner, lp_certificate, monkeypatch):
    """Should ``verify`` raise on a certificate the CLI found well-formed: exit 2, one line."""
    import diffpriv.certification

    def boom(*args, **kwargs):
        raise OverflowError("int too large to convert to float")

    monkeypatch.setattr(diffpriv.certification, "verify", boom)
    for args in (["certify"], ["export", "--format", "json"]):
        line = _error_line(runner.invoke(app, [args[0], str(lp_certificate), *args[1:]]))
        assert line == (f"{lp_certificate}: certificate: cannot be checked "
                        "(OverflowError: int too large to convert to float)")
    assert not (lp_certificate.parent / "table.json").exists()


def test_plot_that_cannot_be_drawn_exits_2(runner, tmp_path, lp_certificate, monkeypatch):
    import diffpriv.io._plot

    def singular(*args, **kwargs):
        raise np.linalg.LinAlgError("Singular matrix")

    monkeypatch.setattr(diffpriv.io._plot, "plot_certificate", singular)
    target = tmp_path / "p.png"
    line = _error_line(runner.invoke(app, ["plot", str(lp_certificate), "--out", str(target)]))
    assert line.startswith(f"{lp_certificate}: cannot be drawn (LinAlgError: Singular matrix)")
    assert not target.exists()


@pytest.mark.parametrize(("args", "expected"), [
    (["--seed", "18446744073709551616"], "--seed: input should be less than or equal to 4294967295"),
    (["--seed", "-1"], "--seed: input should be greater than or equal to 0"),
    (["--steps", "0"], "--steps: input should be greater than or equal to 1"),
])
def test_bad_option_value_is_one_line(runner, tmp_path, args, expected):
    out = tmp_path / "out"
    result = runner.invoke(app, ["optimize", str(_config(tmp_path)), "--out", str(out), *args])
    assert _error_line(result) == expected
    assert not out.exists()


def test_missing_option_is_one_line(runner, tmp_path):
    line = _error_line(runner.invoke(app, ["optimize", str(_config(tmp_path))]))
    assert line == "Missing option '--out' / '-o'"


def test_atomic_open_leaves_the_target_or_nothing(tmp_path, monkeypatch):
    from diffpriv._files import atomic_open, atomic_write

    path = atomic_write(tmp_path / "new" / "f.txt", "first")  # creates the folder
    with pytest.raises(RuntimeError), atomic_open(path) as f:
        f.write("half")
        raise RuntimeError("interrupted")
    assert path.read_text() == "first"
    monkeypatch.setattr(os, "replace", lambda src, dst: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, b"bytes")
    assert path.read_text() == "first" and os.listdir(path.parent) == ["f.txt"]


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077])
def test_atomic_write_gives_the_permissions_of_a_new_file(tmp_path, mask):
    from diffpriv._files import atomic_write

    old = os.umask(mask)
    try:
        path = atomic_write(tmp_path / "f.txt", "x")
    finally:
        os.umask(old)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~mask


def test_umask_is_read_with_and_without_proc(monkeypatch):
    from diffpriv import _files as _io

    def no_proc(*args, **kwargs):
        raise OSError("no /proc")

    old = os.umask(0o027)
    try:
        assert _io.umask() == 0o027
        monkeypatch.setattr(_io, "open", no_proc, raising=False)
        assert _io.umask() == 0o027  # the set-and-restore fallback
        assert os.umask(0o027) == 0o027  # ... restored it
    finally:
        os.umask(old)


def test_jsonable_stores_floats_as_certificates_do():
    from diffpriv._files import json_number
    from diffpriv.io._export import jsonable

    data = {"a": (np.float64(np.inf), 1.5, -math.inf, math.nan, 2, None, "s"), "b": [np.float64(0.1)]}
    assert jsonable(data) == {"a": ["inf", 1.5, "-inf", "nan", 2, None, "s"], "b": [0.1]}
    assert all(jsonable(x) == json_number(x) for x in (np.inf, -np.inf, 0.25, np.float64(3.0)))


def test_export_unknown_format_exits_2(runner, lp_certificate):
    line = _error_line(runner.invoke(app, ["export", str(lp_certificate), "--format", "xlsx"]))
    assert line == "--format: must be one of csv, npz, json, csv-sparse, npz-sparse, got 'xlsx'"


@pytest.mark.parametrize("name", ["quickstart", "categorical", "profiles"])
def test_reference_runs_shipped_configs(runner, name):
    result = runner.invoke(app, ["reference", str(ROOT / "configs" / f"{name}.toml")])
    assert result.exit_code == 0, result.output
    assert "LP optimum" in result.output


def test_progress_bar_only_on_a_terminal_stderr(capsys, monkeypatch):
    from diffpriv.solvers._progress import progress_bar as _progress_bar

    for var in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(var, raising=False)
    with _progress_bar(True) as report:  # stderr is captured: not a terminal
        assert report is None
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich: treat stderr as a terminal
    with _progress_bar(False) as report:
        assert report is None
    with _progress_bar(True) as report:
        report(500, 1000, 1e-3)
    out, err = capsys.readouterr()
    assert out == "" and "500/1000 steps" in err  # drawn on stderr, stdout untouched


def test_optimize_end_to_end(runner, tmp_path, monkeypatch):
    from diffpriv.solvers._lp import solve_lp

    for var in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(var, raising=False)
    from diffpriv.certification import Certificate, verify

    options = ('method = "pdhg"\nseed = 5\nsteps = 100000\nperiod = 250\nomega = 0.3\nchunk = 2\n'
               'polish = true\n')
    config = _config(tmp_path, BASE_TOML + "\n[optimizer]\n" + options)
    out = tmp_path / "opt"
    args = ["optimize", str(config), "--out", str(out), "--steps", "2000", "--seed", "1"]
    result = runner.invoke(app, args)  # progress on, but stderr is not a terminal: no bar
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    lines = runner.invoke(app, [*args[:3], str(tmp_path / "lines"), *args[4:], "--progress"])
    assert lines.exit_code == 0 and lines.stderr.startswith("optimizing: "), lines.stderr[:200]
    *steps, last = lines.stderr.splitlines()
    assert all(line.startswith("optimizing: ") and " of 1e-04" in line for line in steps)
    assert last.startswith("certifying: ") and last.endswith(" s")  # the phase that ends the run
    assert result.stdout.startswith("diffpriv optimize"), result.stdout[:80]  # no blank line
    for words in ("optimized table", "certified table", "lower bound", "repair weight", "distp0"):
        assert words in result.stdout

    summary = json.loads((out / "summary.json").read_text())
    cert = Certificate.load(out / "certificate.json")
    assert verify(out / "certificate.json").ok and summary["ok"]
    assert (summary["seed"], cert.seed) == (1, 1)  # the command line overrides [optimizer]
    assert summary["steps"] <= 2000
    assert summary["plan"] == "standard" and "solver plan" not in result.stdout
    assert summary["method"] == "pdhg" and cert.meta["optimizer"]["method"] == "pdhg"
    assert set(summary["seconds"]) == {"compile", "solve", "certify"}
    lp = solve_lp(cert_problem(cert)).value
    # the lower bound is certified, the table feasible: lower_bound <= LP optimum <= certified
    assert summary["lower_bound"] <= lp + 1e-9 <= summary["certified"] + 2e-9
    assert summary["certified"] - lp <= 1e-4 * lp, (summary["certified"], lp)
    assert cert.meta["config_sha256"] and cert.meta["optimizer"]["seed"] == 1
    used = cert.meta["optimizer"]["options"]  # [optimizer] reached the optimizer
    assert (used["steps"], used["period"], used["chunk"], used["polish"]) == (2000, 250, 2, True)


def test_optimize_by_default_runs_the_exact_lp_where_it_is_predicted_faster(runner, tmp_path):
    """``method = "auto"`` (the default) on a small linear config runs HiGHS; the summary names
    it, the bound is the LP's weak-duality bound and the certified table is at the optimum."""
    from diffpriv.certification import Certificate
    from diffpriv.solvers._lp import solve_lp

    config = _config(tmp_path, BASE_TOML)
    out = tmp_path / "auto"
    result = runner.invoke(app, ["optimize", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "highs: the exact LP" in result.stdout and "steps, seed" not in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    cert = Certificate.load(out / "certificate.json")
    assert (summary["method"], summary["plan"], summary["stop"]) == ("highs", "exact", "converged")
    assert cert.meta["optimizer"]["method"] == "highs"
    lp = solve_lp(cert_problem(cert)).value
    assert summary["lower_bound"] <= lp + 1e-12 <= summary["certified"] + 1e-9
    assert summary["certified"] - summary["lower_bound"] <= 1e-7 * lp


@pytest.mark.parametrize("name", ["quickstart", "categorical"])
def test_plot_writes_a_png(runner, tmp_path, monkeypatch, name):
    """A grid (maps on the plane) and categories (heatmap per profile): a non-empty PNG."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    out = tmp_path / name
    result = runner.invoke(app, ["reference", str(ROOT / "configs" / f"{name}.toml"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    target = tmp_path / "figures" / f"{name}.png"
    result = runner.invoke(app, ["plot", str(out / "certificate.json"), "--out", str(target)])
    assert result.exit_code == 0, result.output
    data = target.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
    assert sorted(os.listdir(target.parent)) == [f"{name}.png"]  # no temporary file left
    result = runner.invoke(app, ["plot", str(out / "certificate.json")])  # default: next to FILE
    assert result.exit_code == 0 and (out / "plot.png").stat().st_size > 20_000
    cells = ["--cells", "r2c2,r5c5"] if name == "quickstart" else []
    for suffix, magic in ((".pdf", b"%PDF-"), (".svg", b"<?xml")):
        target = tmp_path / "figures" / f"{name}{suffix}"
        result = runner.invoke(app, ["plot", str(out / "certificate.json"), "--out", str(target), *cells])
        assert result.exit_code == 0, result.output
        assert target.read_bytes().startswith(magic)


def test_plot_titles_name_what_made_the_table():
    from diffpriv.io._plot import describe

    krr = {"mechanism": {"name": "krr", "params": {"epsilon": 0.5}}}
    assert describe({"meta": krr}) == "krr (epsilon=0.5)"
    point = {"constraint": "home-vs-out", "field": "epsilon", "budget": 1.25, "index": 3}
    assert describe({"meta": {"optimizer": {"method": "highs"}, "sweep": point}}) == \
        "diffpriv optimum (highs) at ε = 1.25 of home-vs-out"
    assert describe({"meta": None}) == "certified mechanism"


def test_version(runner):
    import diffpriv

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"diffpriv {diffpriv.__version__}"


def test_plot_bad_input_exits_2(runner, tmp_path, lp_certificate):
    target = tmp_path / "p.png"
    missing = tmp_path / "missing.json"
    line = _error_line(runner.invoke(app, ["plot", str(missing), "--out", str(target)]))
    assert line == f"{missing}: no such file"
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    line = _error_line(runner.invoke(app, ["plot", str(junk), "--out", str(target)]))
    assert line.startswith(f"{junk}: not a JSON file")
    data = json.loads(lp_certificate.read_text())
    data["table"] = [[[1.0]]]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    line = _error_line(runner.invoke(app, ["plot", str(bad), "--out", str(target)]))
    assert line == f"{bad}: table: shape (1, 1, 1), expected (1, 3, 3)"
    del data["problem"]["loss"]
    bad.write_text(json.dumps(data))
    line = _error_line(runner.invoke(app, ["plot", str(bad), "--out", str(target)]))
    assert line == f"{bad}: problem: missing field 'loss'"
    line = _error_line(runner.invoke(app, ["plot", str(lp_certificate), "--out", str(tmp_path / "p.jpg")]))
    assert line.startswith("--out: must be a .png, .pdf or .svg file")
    args = ["plot", str(lp_certificate), "--out", str(target), "--cells", "zz"]
    line = _error_line(runner.invoke(app, args))
    assert line.startswith("--cells: unknown input 'zz'")
    assert not target.exists()


GRID_LDP = """\
[inputs]
grid = { rows = 6, cols = 6 }

[loss]
kind = "euclidean"

[[constraints]]
kind = "ldp"
epsilon = 1.0
"""


@pytest.mark.parametrize("command", ["optimize", "reference"])
def test_too_large_a_problem_is_refused_up_front(runner, tmp_path, monkeypatch, command):
    """Size admission: one line naming the size and the limit, exit 2, nothing written."""
    monkeypatch.setenv("DIFFPRIV_MEMORY_LIMIT", str(2**20))  # 1 MiB
    out = tmp_path / "out"
    args = [command, str(_config(tmp_path, GRID_LDP)), "--out", str(out)]
    line = _error_line(runner.invoke(app, args))
    assert line.startswith("inputs: 36 inputs × 36 outputs × 1 profile(s) with ldp on all pairs needs ~")
    assert "above the 1.0 MB limit; use neighbours or radius" in line
    assert not out.exists()


def test_the_summary_names_the_linear_relaxation_where_it_settles_the_problem(runner, tmp_path):
    """``configs/divergence.toml`` with its KL budget at 5 and ε-LDP at 0.1 beside: under
    ``"auto"`` the linear relaxation's repaired table is within ``gap_tol``, and the summary says so
    in words."""
    text = (ROOT / "configs" / "divergence.toml").read_text().replace("epsilon = 0.05", "epsilon = 5.0")
    text += '\n[[constraints]]\nkind = "ldp"\nname = "ldp"\nepsilon = 0.1\n\n[optimizer]\ngap_tol = 0.01\n'
    out = tmp_path / "relaxed"
    result = runner.invoke(app, ["optimize", str(_config(tmp_path, text)), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "relaxation (columns): the linear" in " ".join(result.stdout.split()), result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "relaxation (columns)" and summary["ok"]
    assert summary["lower_bound"] <= summary["certified"] <= summary["lower_bound"] * (1 + 1e-2)


GEO_SLOW = """\
[inputs]
grid = { rows = 8, cols = 8, cell = 1.0 }

[loss]
kind = "euclidean"

[[constraints]]
kind = "xdp"
epsilon = 0.5
neighbours = "grid4"

[optimizer]
method = "pdhg"
period = 100
gap_tol = 1e-9
"""
"""Geo-indistinguishability that PDHG does not close to 10⁻⁹ soon."""


def test_optimize_stops_at_its_time_limit_and_writes_a_certified_table(runner, tmp_path):
    config, out = _config(tmp_path, GEO_SLOW), tmp_path / "out"
    result = runner.invoke(app, ["optimize", str(config), "--out", str(out), "--time-limit", "2",
                                 "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "stopped by the time limit of 2 s" in result.output
    assert runner.invoke(app, ["certify", str(out / "certificate.json")]).exit_code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop"] == "time limit"


def test_ctrl_c_during_optimize_writes_the_best_table_then_exits_130(runner, tmp_path, monkeypatch):
    """The first Ctrl-C (SIGINT, here sent after the first chunk) lets the chunk finish; the
    best table so far is certified and written, and the command exits 130."""
    import signal

    import diffpriv._design as design_module

    real = design_module.design

    def interrupted(problem, **kwargs):
        sent = []

        def progress(done, total, gap):
            if not sent:
                sent.append(done)
                os.kill(os.getpid(), signal.SIGINT)

        return real(problem, **{**kwargs, "progress": progress})

    monkeypatch.setattr(design_module, "design", interrupted)
    # the premise: Python's own handler (in make test's worker another's was found installed, 12-07)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    config, out = _config(tmp_path, GEO_SLOW), tmp_path / "out"
    result = runner.invoke(app, ["optimize", str(config), "--out", str(out), "--no-progress"])
    assert result.exit_code == 130, result.output
    assert "stopped by Ctrl-C" in result.output
    assert runner.invoke(app, ["certify", str(out / "certificate.json")]).exit_code == 0


@pytest.mark.parametrize("name", ["quickstart", "categorical"])
def test_plot_draws_its_parts_one_by_one(runner, tmp_path, name):
    """``--parts`` draws only the rows (charts) named, in the figure's order; a part the layout
    lacks, or none, is one error line naming the layout's parts."""
    import diffpriv as dp
    from diffpriv.io._plot import _plane_figure, _table_figure, parts_of

    out = tmp_path / name
    result = runner.invoke(app, ["reference", str(ROOT / "configs" / f"{name}.toml"), "--out", str(out)])
    assert result.exit_code == 0
    cert = dp.Certificate.load(out / "certificate.json")
    problem = cert_problem(cert)
    known = parts_of(problem)
    assert known == (("items", "observed", "reports", "loss") if name == "quickstart" else
                     ("table", "items", "observed", "loss"))
    draw = _plane_figure if name == "quickstart" else _table_figure
    loss = np.einsum("sxy,xy->sx", cert.table, problem.loss)
    whole = draw(problem, cert.table, loss, None, known)
    alone = draw(problem, cert.table, loss, None, ("loss",))
    assert len(alone.axes) < len(whole.axes) and alone.get_size_inches()[1] < whole.get_size_inches()[1]
    titled = [f._suptitle.get_text() for f in alone.subfigs if f._suptitle is not None]
    titled += [ax.get_title() for ax in alone.axes]  # (the figure's own title is the headline)
    assert any("(a) expected loss" in t for t in titled) and not any("observer" in t for t in titled)
    target = tmp_path / "loss.png"
    args = ["plot", str(out / "certificate.json"), "--out", str(target), "--parts"]
    result = runner.invoke(app, [*args, "loss"])
    assert result.exit_code == 0 and target.read_bytes().startswith(b"\x89PNG")
    for bad in ("reports,nope", ","):
        result = runner.invoke(app, [*args, bad])
        assert result.exit_code == 2 and result.stderr.startswith("error: --parts: ")
        assert f"(its parts: {', '.join(known)})" in result.stderr


@pytest.mark.parametrize("theirs", [False, True])
def test_the_library_keeps_compiled_programs_unless_the_caller_chose_a_folder(tmp_path, theirs):
    """``dp.optimize`` of a JAX run in a fresh process writes its programs to the cache folder; a
    caller who set JAX's own cache folder keeps it (diffpriv's stays empty)."""
    cache, own = tmp_path / "cache", tmp_path / "own"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "DIFFPRIV_COMPILE_CACHE": str(cache)}
    setup = (f"jax.config.update('jax_compilation_cache_dir', {str(own)!r}); "
             "jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.2); ") if theirs else ""
    code = ("import jax, numpy as np, diffpriv as dp; " + setup +
            "x = dp.Domain(tuple('abcd')); "
            "p = dp.Problem(x, x, 1 - np.eye(4), np.full(4, 0.25), constraints=(dp.LocalDP(1.0),)); "
            "r = dp.optimize(p, method='pdhg', steps=500); assert r.method == 'pdhg', r.method")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    mine = cache.exists() and any(cache.iterdir())
    assert mine != theirs
    if theirs:
        assert any(own.iterdir())
