"""Hostile input (issue 6, robustness): every bad input is one ``error:`` line on stderr and exit
code 2, with nothing written, no traceback, no warning, no hang and no memory blow-up.

Each case here failed before the limits of the error contract of docs/cli.md ("Limits") were
enforced: a traceback, a numpy warning on stderr, a message naming the wrong field, a hang or a
MemoryError. The fuzz tests at the end feed mutated configs and certificates to the CLI.
"""

import contextlib
import json
import math
import os
import re
import signal
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from diffpriv.certification._schema import MAX_CERTIFICATE_BYTES
from diffpriv.cli import app
from diffpriv.config import ConfigError, config_from_dict, load_config
from diffpriv.config._build import MAX_PAIRS
from diffpriv.config._distributions import MAX_POINTS_FILE_BYTES, MAX_POINTS_LINE
from diffpriv.config._toml import MAX_CONFIG_BYTES
from diffpriv.problems import SizeError
from tests._configs import BASE_TOML, grid_toml

GRID_TOML = grid_toml(3, 3, (1.0, 1.0))

LABELS_TOML = BASE_TOML


@pytest.fixture
def runner():
    return CliRunner()


@contextlib.contextmanager
def time_limit(seconds: float):
    """Fails the test (instead of hanging it) if the block takes more than ``seconds``."""

    def expired(signum, frame):
        raise TimeoutError(f"took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def error_line(result) -> str:
    """The one ``error:`` line of an exit-2 result, without the prefix."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    return lines[0].removeprefix("error: ")


def write(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def run_config(runner, tmp_path: Path, text: str, command: str = "reference") -> str:
    """Runs ``command`` on the config ``text`` with ``--out``; returns the error line and
    checks that nothing was written."""
    out = tmp_path / "out"
    with time_limit(30):
        result = runner.invoke(app, [command, str(write(tmp_path, text)), "--out", str(out)])
    line = error_line(result)
    assert not out.exists()
    return line


# -- config values that overflow inside the builders -------------------------------------------

GAUSSIAN = "{ center = [1.0, 1.0], scale = 1.0 }"

OVERFLOW = [
    ("gaussian-scale-tiny", GAUSSIAN, "{ center = [1.0, 1.0], scale = 1e-200 }",
     "items[0].distribution.gaussians[0].scale: 1e-200 is too small for float64"),
    ("gaussian-center-far", GAUSSIAN, "{ center = [1e200, 1.0], scale = 1.0 }",
     "items[0].distribution.gaussians[0].center: is too far from every input"),
    ("gaussian-center-max", GAUSSIAN, "{ center = [-1.7e308, 1.7e308], scale = 1e-300 }",
     "items[0].distribution.gaussians[0].center: is too far from every input"),
    ("grid-cell", "cell = 1.0", "cell = 1e200",
     "inputs.grid.cell: 3 × 3 cells of 1e+200 span more than the 1e+150 allowed"),
    ("grid-cell-max", "cell = 1.0", "cell = 1.7e308", "inputs.grid.cell: "),
    ("point-far", "{ uniform = true }", "{ points = [[1e200, 1.0]] }",
     "items[1].distribution.points: point 0 is too far from every input"),
]


@pytest.mark.parametrize(("old", "new", "expected"), [c[1:] for c in OVERFLOW],
                         ids=[c[0] for c in OVERFLOW])
def test_values_that_overflow_are_one_line_naming_the_field(runner, tmp_path, old, new, expected):
    assert old in GRID_TOML
    line = run_config(runner, tmp_path, GRID_TOML.replace(old, new, 1))
    assert line.startswith(expected), line


def test_coordinates_that_overflow_name_the_coordinates(runner, tmp_path):
    text = LABELS_TOML.replace('labels = ["a", "b", "c"]',
                               'labels = ["a", "b", "c"]\ncoords = [[0.0], [1e200], [-1e200]]')
    assert run_config(runner, tmp_path, text).startswith(
        "inputs.coords: the coordinates span 2e+200, more than the 1e+150 allowed")
    text = LABELS_TOML.replace('labels = ["a", "b", "c"]',
                               'labels = ["a", "b", "c"]\ncoords = [[0.0], [1.0], [2.0]]')
    text += '\n[outputs]\nlabels = ["x"]\ncoords = [[1.7e308]]\n'
    assert run_config(runner, tmp_path, text).startswith("outputs: the coordinates span 1.7e+308")


@pytest.mark.parametrize(("old", "new"), [
    ("scale = 1.0 }", "scale = 1e300 }"),
    ("scale = 1.0 }", "scale = 1e308 }"),
])
def test_a_very_wide_gaussian_is_uniform(old, new, tmp_path):
    """Computed in units of the scale, a Gaussian of scale 1e300 is uniform (it overflowed)."""
    problem, _ = load_config(write(tmp_path, GRID_TOML.replace(old, new, 1)))
    np.testing.assert_array_equal(problem.items[0].dist, np.full(9, 1 / 9))


def test_huge_relative_weights_are_normalised_first(tmp_path):
    """Weights are relative: 1e308 twice is an equal split, not an overflowing sum."""
    text = GRID_TOML.replace(
        "{ uniform = true }",
        "{ points = [[0.5, 0.5], [2.5, 2.5]], weights = [1.7e308, 1.7e308] }")
    text = text.replace(GAUSSIAN, "{ center = [0.5, 0.5], scale = 1.0, weight = 1.7e308 }, "
                                  "{ center = [2.5, 2.5], scale = 1.0, weight = 1.7e308 }")
    text += '\n[[profiles]]\nname = "all"\nweight = 1.7e308\n'
    problem, _ = load_config(write(tmp_path, text))
    expected = np.zeros(9)
    expected[[0, 8]] = 0.5
    np.testing.assert_array_equal(problem.items[1].dist, expected)
    assert problem.items[0].dist[0] == problem.items[0].dist[8]
    text = GRID_TOML.replace("{ uniform = true }", "{ points = [[0.5, 0.5]], smoothing = 1.7e308 }")
    problem, _ = load_config(write(tmp_path, text))
    np.testing.assert_allclose(problem.items[1].dist, np.full(9, 1 / 9), rtol=1e-15)


def test_two_profiles_with_overflowing_weights(tmp_path):
    text = LABELS_TOML + '\n[[profiles]]\nname = "a"\nweight = 1e308\n' \
        '[[profiles]]\nname = "b"\nweight = 1e308\n'
    text = text.replace('name = "p"\n', 'name = "p"\nprofile = "a"\n')
    text = text.replace('name = "q"\n', 'name = "q"\nprofile = "b"\n')
    problem, _ = load_config(write(tmp_path, text))
    np.testing.assert_allclose(problem.prior.sum(axis=1), [0.5, 0.5], rtol=0, atol=1e-15)


# -- optimizer options --------------------------------------------------------------------------


@pytest.mark.parametrize(("line", "expected"), [
    ("jitter = 1e308", "optimizer.jitter: input should be less than or equal to 10"),
    ("omega = 1e308", "optimizer.omega: input should be less than or equal to 1000000"),
    ("period = 9223372036854775807",
     "optimizer.period: input should be less than or equal to 100000, got 9223372036854775807"),
    ("period = 1000000000",
     "optimizer.period: input should be less than or equal to 100000, got 1000000000"),
    ("chunk = 9223372036854775807", "optimizer.chunk: input should be less than or equal to"),
    ("steps = 1e9", "optimizer.steps: input should be a valid integer"),
])
def test_optimizer_options_are_bounded(runner, tmp_path, line, expected):
    text = LABELS_TOML + f"\n[optimizer]\n{line}\n"
    assert run_config(runner, tmp_path, text, command="optimize").startswith(expected)


def test_steps_option_is_bounded(runner, tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(app, ["optimize", str(write(tmp_path, LABELS_TOML)), "--out", str(out),
                                 "--steps", str(10**10)])
    assert error_line(result) == "--steps: input should be less than or equal to 1000000000"
    assert not out.exists()


def test_steps_below_one_period_run_that_many_steps():
    """The documented behaviour: at most ``steps`` in all (a period longer is cut to them)."""
    import diffpriv as dp

    problem, _ = config_from_dict({"inputs": {"labels": ["a", "b"]}, "loss": {"kind": "hamming"},
                                   "constraints": [{"kind": "ldp", "epsilon": 1.0}]})
    result = dp.optimize(problem, method="pdhg", steps=5, period=40, gap_tol=1e-12)
    assert result.steps == 5


# -- points_file ---------------------------------------------------------------------------------


def points_config(name: str) -> str:
    return GRID_TOML.replace("{ uniform = true }", "{ points_file = " + json.dumps(name) + " }")


@pytest.mark.parametrize(("name", "expected"), [
    ("a\0b", "cannot read 'DIR/a\\x00b' (the path contains a NUL character)"),
    ("/dev/zero", "cannot read '/dev/zero' (a character device, not a regular file)"),
    ("fifo", "cannot read 'DIR/fifo' (a FIFO, not a regular file)"),
    ("folder", "cannot read 'DIR/folder' (a folder, not a regular file)"),
    ("big.csv", f"cannot read 'DIR/big.csv' (a points_file may have at most "
                f"{MAX_POINTS_FILE_BYTES / 2**20:.1f} MB, this file has "),
    ("long.csv", f"long.csv line 2 is longer than {MAX_POINTS_LINE} characters"),
    ("bad.csv", "bad.csv line 2 is not UTF-8 text"),
    ("cr.csv", "cr.csv line 2 is not CSV (new-line character seen in unquoted field"),
])
def test_points_file_is_a_bounded_regular_file(runner, tmp_path, name, expected):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    with open(tmp_path / "big.csv", "wb") as f:
        f.truncate(MAX_POINTS_FILE_BYTES + 1)  # sparse: takes no disk space
    (tmp_path / "long.csv").write_text("x,y\n" + "1," * MAX_POINTS_LINE + "1\n")
    (tmp_path / "bad.csv").write_bytes(b"1,1\n\xff,1\n")
    (tmp_path / "cr.csv").write_bytes(b"1,1\n1\r2,3\n")
    line = run_config(runner, tmp_path, points_config(name))
    assert line.startswith("items[1].distribution.points_file: ")
    expected = expected.replace("DIR", str(tmp_path))
    if name.endswith("g.csv") or name == "cr.csv":
        expected = expected.removeprefix(f"{tmp_path}/")
    if "UTF-8" in expected:
        expected = f"cannot read '{tmp_path}/bad.csv' (not UTF-8 text"
    assert line.removeprefix("items[1].distribution.points_file: ").startswith(expected), line


def test_points_file_with_a_byte_order_mark_and_a_header(tmp_path):
    (tmp_path / "pts.csv").write_bytes(b"\xef\xbb\xbfx,y\n0.5,0.5\n\n2.5,2.5\n")
    problem, _ = load_config(write(tmp_path, points_config("pts.csv")))
    assert problem.items[1].dist[0] == problem.items[1].dist[8] == 0.5


def test_points_file_is_parsed_in_chunks_with_exact_line_numbers(tmp_path):
    """Large files go through numpy in chunks; a bad line deep inside is still named."""
    n = 300_000  # more than one chunk
    body = "x,y\n" + "0.5,0.5\n" * n
    (tmp_path / "pts.csv").write_text(body + "2.5,2.5\n")
    problem, _ = load_config(write(tmp_path, points_config("pts.csv")))
    assert problem.items[1].dist[8] == pytest.approx(1 / (n + 1), rel=1e-12)
    (tmp_path / "pts.csv").write_text(body + "2.5,nan\n")
    with pytest.raises(ConfigError, match=rf"pts\.csv line {n + 2} has a NaN or infinite number$"):
        load_config(write(tmp_path, points_config("pts.csv")))
    (tmp_path / "pts.csv").write_text(body + "2.5,2.5,1\n")
    with pytest.raises(ConfigError, match=rf"pts\.csv line {n + 2} has 3 numbers, pts\.csv line 2 has 2$"):
        load_config(write(tmp_path, points_config("pts.csv")))


# -- the TOML text ---------------------------------------------------------------------------------


def test_deeply_nested_toml_is_refused_before_parsing(runner, tmp_path):
    with time_limit(5):
        line = run_config(runner, tmp_path, "a = " + "[" * 5000 + "]" * 5000 + "\n")
    assert line.endswith("nested 5000 levels deep (arrays, inline tables or the parts of one "
                         "dotted key), more than the 64 allowed")
    start = time.perf_counter()
    line = run_config(runner, tmp_path, "[" + ".".join(["a"] * 200_000) + "]\n")
    assert time.perf_counter() - start < 5  # 104 s in tomllib
    assert "nested 200000 levels deep" in line
    line = run_config(runner, tmp_path, "x = { " + "a = { " * 100 + "} " * 101 + "\n")
    assert "nested 101 levels deep" in line
    # a string closed by four quotes (its last character a quote) hides nothing after it
    line = run_config(runner, tmp_path, 'x = ["""a"""", ' + "[" * 100 + "]" * 101 + "\n")
    assert "nested 101 levels deep" in line


def test_nesting_scan_ignores_strings_and_comments(tmp_path):
    text = LABELS_TOML.replace('kind = "hamming"', 'kind = "hamming" # [[[[ a.b.c.d.e.f.g')
    text = text.replace('[[constraints]]', '[[constraints]]\nname = "' + "[{." * 100 + '"')
    text = "description = '''" + "[" * 100 + "\n" + "." * 100 + "'''\n" + text
    problem, _ = load_config(write(tmp_path, text))
    assert problem.constraints[0].name == "[{." * 100


def test_utf8_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + LABELS_TOML.encode())
    problem, _ = load_config(path)
    assert problem.inputs.labels == ("a", "b", "c")


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "big", "folder"])
def test_config_is_a_bounded_regular_file(runner, tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "c.toml"
        os.mkfifo(path)
        expected = f"{path}: cannot read (a FIFO, not a regular file)"
    elif kind == "/dev/zero":
        path, expected = Path(kind), "/dev/zero: cannot read (a character device, not a regular file)"
    elif kind == "big":
        path = tmp_path / "c.toml"
        with open(path, "wb") as f:
            f.truncate(MAX_CONFIG_BYTES + 1)
        expected = f"{path}: a config may have at most {MAX_CONFIG_BYTES / 2**20:.1f} MB"
    else:
        path, expected = tmp_path, f"{tmp_path}: cannot read (a folder, not a regular file)"
    for command in ("optimize", "reference"):
        out = tmp_path / "out"
        with time_limit(10):
            result = runner.invoke(app, [command, str(path), "--out", str(out)])
        assert error_line(result).startswith(expected)
        assert not out.exists()


# -- sizes: every input path is bounded before it is expanded ------------------------------------


def test_many_labels_are_refused_by_the_schema(runner, tmp_path):
    labels = ", ".join(f'"l{i}"' for i in range(100_000))
    text = f'[inputs]\nlabels = [{labels}]\n[loss]\nkind = "hamming"\n'
    with time_limit(20):
        line = run_config(runner, tmp_path, text)
    assert line == "inputs.labels: list should have at most 10000 items after validation, not 100000"


def test_distp_on_all_pairs_of_many_items_is_refused_before_building(runner, tmp_path):
    items = "".join(f'[[items]]\nname = "i{i}"\ndistribution = {{ uniform = true }}\n'
                    for i in range(2000))
    text = f'[inputs]\nlabels = ["a", "b", "c"]\n[loss]\nkind = "hamming"\n{items}' \
        '[[constraints]]\nkind = "distp"\nepsilon = 1.0\n'
    with time_limit(20):
        line = run_config(runner, tmp_path, text, command="optimize")
    assert line == (f"constraints[0]: distp on all pairs of 2000 items is 1999000 pairs, more than "
                    f"the {MAX_PAIRS} pairs allowed in all")


def test_a_radius_covering_a_large_grid_is_counted_before_building(runner, tmp_path):
    text = '[inputs]\ngrid = { rows = 100, cols = 100 }\n[outputs]\nlabels = ["y"]\n' \
        '[loss]\nkind = "hamming"\n' \
        '[[constraints]]\nkind = "xdp"\nepsilon = 1.0\nradius = 1e9\n'
    with time_limit(20):
        line = run_config(runner, tmp_path, text)
    assert line.startswith("constraints[0].radius: 49995000 pairs of inputs within 1e+09, more "
                           "than the 1000000 pairs allowed in all")


# -- certificates --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate_text(tmp_path_factory) -> str:
    """The certified LP optimum of the small config, as JSON text."""
    tmp = tmp_path_factory.mktemp("cert")
    out = tmp / "lp"
    result = CliRunner().invoke(app, ["reference", str(write(tmp, LABELS_TOML)), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return (out / "certificate.json").read_text()


@pytest.fixture
def certificate(tmp_path, certificate_text) -> Path:
    path = tmp_path / "certificate.json"
    path.write_text(certificate_text)
    return path


def run_certificate(runner, tmp_path, path: Path, command: str) -> str:
    """The error line of ``command`` on the certificate ``path``; nothing may be written."""
    before = sorted(os.listdir(tmp_path))
    args = [command, str(path)]
    if command != "certify":
        args += ["--out", str(tmp_path / ("o.png" if command == "plot" else "o.csv"))]
    with time_limit(20):
        line = error_line(runner.invoke(app, args))
    assert sorted(os.listdir(tmp_path)) == before
    return line


@pytest.mark.parametrize("command", ["certify", "export", "plot"])
def test_certificate_must_be_a_bounded_regular_file(runner, tmp_path, command):
    os.mkfifo(tmp_path / "fifo.json")
    with open(tmp_path / "big.json", "wb") as f:
        f.truncate(MAX_CERTIFICATE_BYTES + 1)  # sparse
    cases = {
        "/dev/zero": "/dev/zero: cannot read (a character device, not a regular file)",
        str(tmp_path / "fifo.json"): f"{tmp_path}/fifo.json: cannot read (a FIFO, not a regular file)",
        str(tmp_path / "big.json"): f"{tmp_path}/big.json: cannot be checked: a certificate may have "
                                    "at most 4.0 GB, this file has 4.0 GB",
    }
    for path, expected in cases.items():
        assert run_certificate(runner, tmp_path, Path(path), command) == expected


def test_a_large_json_array_is_refused_before_parsing(runner, tmp_path):
    path = tmp_path / "array.json"
    path.write_text("  [" + "[0]," * 2_000_000 + "0]")  # 8 MB; 200 MB took 25 s and 3.2 GB
    start = time.perf_counter()
    line = run_certificate(runner, tmp_path, path, "certify")
    assert line == f"{path}: certificate: expected a JSON object"
    assert time.perf_counter() - start < 2


def test_certificate_beyond_the_memory_limit_cannot_be_checked(runner, tmp_path, certificate,
                                                               monkeypatch):
    monkeypatch.setenv("DIFFPRIV_MEMORY_LIMIT", str(2**12))
    for command in ("certify", "export", "plot"):
        line = run_certificate(runner, tmp_path, certificate, command)
        assert re.fullmatch(rf"{re.escape(str(certificate))}: cannot be checked: reading \S+ KB of "
                            r"JSON needs ~\S+ KB, above the 4.0 KB limit", line), line


def test_certificate_too_large_to_check_is_exit_2_not_1(runner, tmp_path, monkeypatch):
    """A small file whose problem is too large for the certifier: its claims were not checked,
    which is not "the claims do not hold" (exit 1)."""
    import diffpriv as dp

    n = 600  # LDP on all pairs: 179,700 comparisons of one output each
    dom = dp.Domain(tuple(f"x{i}" for i in range(n)))
    out = dp.Domain(("y",))
    problem = dp.Problem(dom, out, loss=np.zeros((n, 1)), prior=np.full(n, 1 / n),
                         constraints=(dp.LocalDP(epsilon=1.0),))
    path = dp.certify(problem, np.ones((1, n, 1)), repair=True).save(tmp_path / "c.json")
    monkeypatch.setenv("DIFFPRIV_MEMORY_LIMIT", str(4 * 2**20))  # reads the 30 KB file, not more
    for command in ("certify", "export"):
        line = run_certificate(runner, tmp_path, path, command)
        assert line.startswith(f"{path}: cannot be checked: inputs: 600 inputs × 1 outputs × 1 "
                               "profile(s) with ldp on all pairs needs ~"), line
    with pytest.raises(SizeError):
        dp.verify(path)


def test_memory_error_while_checking_is_exit_2(runner, tmp_path, certificate, monkeypatch):
    import diffpriv.certification

    def oom(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(diffpriv.certification, "verify", oom)
    for command in ("certify", "export"):
        line = run_certificate(runner, tmp_path, certificate, command)
        assert line == f"{certificate}: cannot be checked: out of memory"


def edit(path: Path, change) -> Path:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("where", "change", "expected"), [
    ("label", lambda d: d["problem"]["inputs"]["labels"].__setitem__(0, "\ud800"),
     'problem.inputs.labels[0]: "\\ud800" is not valid Unicode (a lone surrogate)'),
    ("item-name", lambda d: d["problem"]["items"][0].__setitem__("name", "p\udfff"),
     'problem.items[0].name: "p\\udfff" is not valid Unicode (a lone surrogate)'),
    ("constraint-name", lambda d: d["constraints"][0].__setitem__("name", "\ud83d"),
     'constraints[0].name: "\\ud83d" is not valid Unicode (a lone surrogate)'),
    ("meta-key", lambda d: d["meta"].__setitem__("\ud800", 1),
     'meta."\\ud800": the key is not valid Unicode (a lone surrogate)'),
])
@pytest.mark.parametrize("command", ["certify", "export", "plot"])
def test_lone_surrogates_are_refused_by_the_schema(runner, tmp_path, certificate, command, where,
                                                   change, expected):
    path = edit(certificate, change)
    assert run_certificate(runner, tmp_path, path, command) == f"{path}: {expected}"


def test_lone_surrogates_fail_verify(certificate):
    import diffpriv as dp

    data = json.loads(certificate.read_text())
    data["problem"]["profiles"][0] = "\udc80"
    report = dp.verify(data)
    assert not report.ok and report.failures == [
        'problem.profiles[0]: "\\udc80" is not valid Unicode (a lone surrogate)']


@pytest.mark.parametrize("command", ["certify", "export", "plot"])
def test_duplicate_keys_are_refused(runner, tmp_path, certificate, command):
    text = certificate.read_text()
    assert text.startswith('{"format"')
    certificate.write_text('{"table": [], ' + text[1:])  # a second "table" would win
    line = run_certificate(runner, tmp_path, certificate, command)
    assert line == f"{certificate}: not strict JSON: duplicate key 'table' in an object"


@pytest.mark.parametrize(("where", "change", "expected"), [
    ("top", lambda d: d.__setitem__("tables", []), "tables: unknown key"),
    ("constraint", lambda d: d["constraints"][0].__setitem__("levels", 1),
     "constraints[0].levels: unknown key"),
    ("witness", lambda d: d["constraints"][0]["witness"].__setitem__("R", []),
     "constraints[0].witness.R: unknown key"),
    ("repair", lambda d: d["repair"].__setitem__("tt", 0), "repair.tt: unknown key"),
    ("problem", lambda d: d["problem"].__setitem__("prior2", []), "problem.prior2: unknown key"),
    ("domain", lambda d: d["problem"]["inputs"].__setitem__("coord", None),
     "problem.inputs.coord: unknown key"),
    ("item", lambda d: d["problem"]["items"][1].__setitem__("weight", 1),
     "problem.items[1].weight: unknown key"),
    ("problem-constraint", lambda d: d["problem"]["constraints"][0].__setitem__("eps", 1),
     "problem.constraints[0].eps: unknown key"),
    ("odd-key", lambda d: d.__setitem__("a b\n", 1), '"a b\\n": unknown key'),
    ("versions", lambda d: d.__setitem__("versions", []), "versions: expected an object, got []"),
    ("lower-bound-type", lambda d: d["meta"].__setitem__("optimizer", {"lower_bound": "low"}),
     'meta.optimizer.lower_bound: expected a number or "inf", "-inf", "nan", got "low"'),
])
@pytest.mark.parametrize("command", ["certify", "export"])
def test_the_certificate_schema_is_closed(runner, tmp_path, certificate, command, where, change,
                                          expected):
    path = edit(certificate, change)
    assert run_certificate(runner, tmp_path, path, command) == f"{path}: {expected}"


def test_absurd_table_entries_are_claims_that_fail_or_tables_that_cannot_be_drawn(
        runner, tmp_path, certificate):
    """Found by the fuzz test: overflowing row sums warned on stderr, and plot drew them."""
    edit(certificate, lambda d: d["table"][0].__setitem__(0, [1.7e308, 1.7e308, 0.0]))
    result = runner.invoke(app, ["certify", str(certificate)])  # a warning would raise here
    assert result.exit_code == 1 and "FAIL table: row sum off by inf" in result.stderr
    edit(certificate, lambda d: d["table"][0].__setitem__(0, [1.8586421132025832e197, 0.0, 0.2]))
    line = run_certificate(runner, tmp_path, certificate, "plot")
    assert line.startswith(f"{certificate}: cannot be drawn: table: row sum off by 1.86e+197")


def test_certify_checks_the_recorded_lower_bound(runner, certificate):
    loss = json.loads(certificate.read_text())["loss"]
    edit(certificate, lambda d: d["meta"].__setitem__("optimizer", {"lower_bound": loss * 0.99}))
    result = runner.invoke(app, ["certify", str(certificate)])
    assert result.exit_code == 0, result.output
    edit(certificate, lambda d: d["meta"].__setitem__("optimizer", {"lower_bound": loss * 1.01}))
    result = runner.invoke(app, ["certify", str(certificate)])
    assert result.exit_code == 1
    assert f"FAIL meta.optimizer.lower_bound: {loss * 1.01!r} is above the certified loss" \
        in result.stderr
    result = runner.invoke(app, ["export", str(certificate)])
    assert result.exit_code == 1 and not (certificate.parent / "table.csv").exists()


# -- output locations are checked before anything is computed -----------------------------------


@pytest.fixture
def no_computing(monkeypatch):
    """Fails a test that reaches the optimizer, the LP or the certifier."""
    import diffpriv._design
    import diffpriv.solvers._lp

    def computed(*args, **kwargs):
        raise AssertionError("computed before checking the output location")

    monkeypatch.setattr(diffpriv._design, "design", computed)
    monkeypatch.setattr(diffpriv.solvers._lp, "solve_lp", computed)


@pytest.mark.parametrize("command", ["optimize", "reference"])
def test_out_that_cannot_be_written_is_refused_up_front(runner, tmp_path, command, no_computing):
    config = write(tmp_path, LABELS_TOML)
    (tmp_path / "file").write_text("x")
    cases = {
        tmp_path / "file": f"--out: {tmp_path}/file exists and is not a folder",
        tmp_path / "file" / "sub": f"--out: {tmp_path}/file is not a folder",
        Path("/proc/diffpriv-hostile/out"): "--out: cannot write in /proc (",
    }
    for out, expected in cases.items():
        result = runner.invoke(app, [command, str(config), "--out", str(out)])
        assert error_line(result).startswith(expected)
    assert sorted(os.listdir(tmp_path)) == ["config.toml", "file"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a read-only folder")
def test_out_in_a_read_only_folder_is_refused_up_front(runner, tmp_path, no_computing):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        result = runner.invoke(app, ["optimize", str(write(tmp_path, LABELS_TOML)), "--out",
                                     str(locked / "out")])
        assert error_line(result).startswith(f"--out: cannot write in {locked} (")
    finally:
        locked.chmod(0o755)


@pytest.mark.parametrize("command", ["export", "plot"])
def test_export_and_plot_check_the_target_first(runner, tmp_path, certificate, command):
    (tmp_path / "file").write_text("x")
    name = "t.png" if command == "plot" else "t.csv"
    result = runner.invoke(app, [command, str(certificate), "--out", str(tmp_path / "file" / name)])
    assert error_line(result) == f"--out: {tmp_path}/file exists and is not a folder"
    result = runner.invoke(app, [command, str(certificate), "--out", f"/proc/x/{name}"])
    assert error_line(result).startswith("--out: cannot write in /proc (")


# -- fuzzing: mutated configs and certificates through the CLI -----------------------------------

SCALARS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2, 3, 10**4, 10**9, 2**63 - 1, 2**64]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 1.0, 0.5, 1e-300, 5e-324, 1e300, 1.7e308, -1e308, 1e-200, 1e200]),
    st.booleans(),
    st.text(max_size=8),
    st.sampled_from(["a", "b", "p", "q", "distp", "ldp", "xdp", "grid4", "matrix", "", "\ud800"]),
)
NUMBERS = st.one_of(
    st.floats(-3.0, 3.0), st.integers(-2, 12),
    st.sampled_from([1e300, 1.7e308, 1e-200, 1e200, 5e-324, -1e308]),
    st.sampled_from([0.0, 1e-300, 5e-324, 1e300, 1.7e308, -1e308, 1e-200, 1e200, 1e154, 2**63 - 1,
                     10**4, 10**9, math.inf, math.nan]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(["a", "rows", "cols", "x"]), inner,
                                                 max_size=3)), max_leaves=8)


def _paths(data, prefix=()):
    """Every path (tuple of keys and indices) into nested dicts and lists."""
    yield prefix
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _paths(v, (*prefix, i))


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


HOSTILE_STRINGS = st.sampled_from(["\ud800", "a\udfff", "", "\x00", "a\nb", "é" * 3, "x" * 300,
                                   "[[", "p", "q", "a"])


@st.composite
def mutated(draw, base: dict) -> dict:
    """``base`` with one to three edits: a number or a string replaced by an extreme one (the
    edits most likely to get past the schema), any value replaced, a key deleted or added."""
    data = json.loads(json.dumps(base))
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["number", "number", "number", "string", "replace",
                                       "delete", "add"]))
        paths = [p for p in _paths(data) if p]
        if action in ("number", "string"):
            leaves = [p for p in paths if (_is_number if action == "number"
                                           else lambda v: isinstance(v, str))(_at(data, p))]
            paths = leaves or paths
        path = draw(st.sampled_from(paths))
        parent = _at(data, path[:-1])
        if action == "number":
            parent[path[-1]] = draw(NUMBERS)
        elif action == "string":
            parent[path[-1]] = draw(HOSTILE_STRINGS)
        elif action == "replace":
            parent[path[-1]] = draw(VALUES)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "name", "weight", "pairs", "scale"]))] = draw(VALUES)
        else:
            parent.append(draw(VALUES))
    return data


def _at(data, path):
    for k in path:
        data = data[k]
    return data


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf
                                            else repr(v))
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def to_toml(d: dict) -> str:
    """A config as TOML: every top-level key as ``key = value``, nested values inline."""
    return "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in d.items())


BASE_CONFIGS = [
    {"inputs": {"grid": {"rows": 2, "cols": 2, "cell": 1.0}}, "loss": {"kind": "euclidean"},
     "items": [{"name": "p", "distribution": {"gaussians": [{"center": [0.5, 0.5], "scale": 1.0}]}},
               {"name": "q", "distribution": {"points": [[1.5, 1.5]], "smoothing": 0.1}}],
     "constraints": [{"kind": "distp", "epsilon": 0.5}, {"kind": "xdp", "epsilon": 1.0,
                                                         "neighbours": "grid4"}]},
    {"inputs": {"labels": ["a", "b", "c"]}, "loss": {"kind": "hamming"},
     "profiles": [{"name": "s", "weight": 1.0}, {"name": "t", "weight": 2.0}],
     "items": [{"name": "p", "profile": "s", "distribution": [0.5, 0.3, 0.2]},
               {"name": "q", "profile": "t", "distribution": {"labels": {"a": 0.5, "b": 0.5}}}],
     "constraints": [{"kind": "distp", "epsilon": 0.5, "delta": 0.1, "pairs": [["p", "q"]]},
                     {"kind": "ldp", "epsilon": 2.0}],
     "optimizer": {"steps": 100}},
]


def check_outcome(result, out: Path | None, outcomes: Counter | None = None) -> None:
    """The contract: exit 0, 1 or 2; no traceback; exit 2 is one line and writes nothing."""
    assert result.exit_code in (0, 1, 2), (result.exit_code, result.output)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert len(result.stderr.splitlines()) == 1, result.stderr
        assert result.stderr.startswith("error: ")
        assert out is None or not out.exists()
    if outcomes is not None:
        outcomes[result.exit_code] += 1


FUZZ = settings(max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


def fuzz_config(runner, tmp_path, data, text_edit, outcomes=None):
    text = to_toml(data) if isinstance(data, dict) else str(data)
    if text_edit is not None:
        at, junk = text_edit
        at %= len(text) + 1
        text = text[:at] + junk + text[at:]
    config = tmp_path / "fuzz.toml"
    config.write_text(text, encoding="utf-8", errors="surrogatepass")
    out = tmp_path / "fuzz-out"
    with time_limit(60):  # a hang guard: on a loaded 2-core machine one fuzzed LP took over 30 s
        result = runner.invoke(app, ["reference", str(config), "--out", str(out)])
    check_outcome(result, out, outcomes)
    if out.exists():
        for f in out.iterdir():
            f.unlink()
        out.rmdir()


TEXT_EDITS = st.none() | st.tuples(st.integers(0, 10**6), st.sampled_from(
    ["[", "]", "{", "\n", "=", ".", '"', "'''", "\ufeff", "\x00", "#", "[[items]]\n", "a.b.c = 1\n",
     "\n[optimizer]\nperiod = 1e9\n"]))


@FUZZ
@given(data=st.sampled_from(BASE_CONFIGS).flatmap(mutated), text_edit=TEXT_EDITS)
def test_fuzz_configs(runner, tmp_path, monkeypatch, data, text_edit):
    monkeypatch.setenv("DIFFPRIV_MEMORY_LIMIT", str(256 * 2**20))  # keeps every LP small
    fuzz_config(runner, tmp_path, data, text_edit)


@FUZZ
@given(data=st.data())
def test_fuzz_certificates(runner, tmp_path, certificate_text, data):
    fuzz_certificate(runner, tmp_path, certificate_text, data, ["certify", "export"])


def fuzz_certificate(runner, tmp_path, certificate_text, data, commands, outcomes=None):
    mode = data.draw(st.sampled_from(["json", "json", "json", "text"]))
    if mode == "json":
        text = json.dumps(data.draw(mutated(json.loads(certificate_text))))
    else:
        at = data.draw(st.integers(0, len(certificate_text)))
        junk = data.draw(st.sampled_from(['"', "{", "}", "[", ",", "1e999", "\\ud800", '"table": 1,',
                                          "\ufeff", "-", "NaN", "\x00"]))
        text = certificate_text[:at] + junk + certificate_text[at + data.draw(st.integers(0, 3)):]
    path = tmp_path / "fuzz.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    command = data.draw(st.sampled_from(commands))
    target = tmp_path / ("fuzz-out.png" if command == "plot" else "fuzz-out.csv")
    args = [command, str(path)] + (["--out", str(target)] if command != "certify" else [])
    if command == "certify" and data.draw(st.booleans()):
        args.append("--exact")
    with time_limit(30):
        result = CliRunner().invoke(app, args)
    check_outcome(result, target if command != "certify" else None, outcomes)
    if target.exists():
        assert result.exit_code == 0
        target.unlink()


FUZZ_LONG = settings(FUZZ, max_examples=1500)


@pytest.mark.slow
@FUZZ_LONG
@given(data=st.sampled_from(BASE_CONFIGS).flatmap(mutated), text_edit=TEXT_EDITS)
def test_fuzz_configs_long(runner, tmp_path, monkeypatch, data, text_edit):
    monkeypatch.setenv("DIFFPRIV_MEMORY_LIMIT", str(256 * 2**20))
    fuzz_config(runner, tmp_path, data, text_edit)


@pytest.mark.slow
@FUZZ_LONG
@given(data=st.data())
def test_fuzz_certificates_long(runner, tmp_path, certificate_text, data):
    fuzz_certificate(runner, tmp_path, certificate_text, data, ["certify", "export", "plot"])


EXTREMES = [0.0, -0.0, 5e-324, 1e-300, 1e-200, 1e154, 1e200, 1e300, 1.7e308, -1.7e308, -1.0,
            2**63 - 1, 2**64, 10**400]


@pytest.mark.parametrize("base", range(len(BASE_CONFIGS)))
def test_every_number_of_a_config_at_every_extreme(runner, tmp_path, monkeypatch, base):
    """A sweep rather than a search: each number of a config, one at a time, set to each
    extreme value (what the random search above reaches only rarely)."""
    monkeypatch.setenv("DIFFPRIV_MEMORY_LIMIT", str(256 * 2**20))
    config = BASE_CONFIGS[base]
    leaves = [p for p in _paths(config) if p and _is_number(_at(config, p))]
    outcomes = Counter()
    for path in leaves:
        for value in EXTREMES:
            data = json.loads(json.dumps(config))
            _at(data, path[:-1])[path[-1]] = value
            fuzz_config(runner, tmp_path, data, None, outcomes)
    assert outcomes[2] and outcomes[0]  # both refused and solved configs were reached


@pytest.mark.parametrize("command", ["certify", "export", "plot"])
def test_every_string_of_a_certificate_as_a_lone_surrogate(runner, tmp_path, certificate_text,
                                                            command):
    """A sweep: each string of a certificate (labels, names, kinds, ...) replaced by a lone
    surrogate, which no UTF-8 output can write: refused by the schema, never a crash."""
    data = json.loads(certificate_text)
    leaves = [p for p in _paths(data) if p and isinstance(_at(data, p), str)]
    assert len(leaves) > 10
    path = tmp_path / "c.json"
    for leaf in leaves:
        edited = json.loads(certificate_text)
        _at(edited, leaf[:-1])[leaf[-1]] = "\ud800"
        path.write_text(json.dumps(edited))
        line = run_certificate(runner, tmp_path, path, command)
        assert "lone surrogate" in line or "expected" in line, line


@pytest.mark.parametrize(("entries", "message"), [([1e308, 1e308, 1.0], "sums to inf"),
                                                  ([-1e308, -1e308, 1.0], "negative entry")])
def test_distribution_entries_near_the_float_limit_are_one_line_errors(entries, message):
    """Found by the long config fuzz: a sum of ±1e308 entries overflowed with a warning."""
    from diffpriv.config._distributions import _normalised
    from diffpriv.problems import SpecError

    with pytest.raises(SpecError, match=f"^items\\[0\\].distribution: .*{message}"):
        _normalised("items[0].distribution", entries, 3)
