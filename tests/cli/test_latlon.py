"""From latitude and longitude to a deployed table: a grid over a bbox, a points file with
``lat,lon`` columns, ``sample --point`` and ``--coords``; bad input is one line, exit 2."""

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.cli import app
from tests.cli.test_cli import _error_line

BBOX = "[-121.56, 38.24, -120.59, 39.03]"

CONFIG = f"""
[inputs]
grid = {{ bbox = {BBOX}, cell_km = 20.0 }}

[loss]
kind = "euclidean"

[[profiles]]
name = "users"
prior = {{ points_file = "points.csv" }}

[[constraints]]
kind = "xdp"
name = "geo"
epsilon = 0.1
neighbours = "grid4"
"""


def _points(tmp_path, n=300, seed=0, text=None):
    rng = np.random.default_rng(seed)
    lat, lon = rng.uniform(38.3, 38.9, n), rng.uniform(-121.5, -120.7, n)
    pairs = enumerate(zip(lat, lon, strict=True))
    rows = "".join(f"sale {k},{a:.6f},{b:.6f},{100000 + k}\n" for k, (a, b) in pairs)
    (tmp_path / "points.csv").write_text(text or "name,Latitude,Longitude,price\n" + rows)
    return lat, lon


def _write(tmp_path, text=CONFIG):
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_a_bbox_grid_bins_lat_lon_points(tmp_path):
    lat, lon = _points(tmp_path)
    problem, _ = dp.load_config(_write(tmp_path))
    d = dp.Domain.from_bbox([-121.56, 38.24, -120.59, 39.03], 20.0)
    assert problem.inputs.geo == d.geo and problem.inputs.units == "km"
    assert np.allclose(problem.prior[0], d.histogram(lat, lon), atol=1e-15)
    # neighbours follow the cells' side in km
    pairs = len(problem.constraints[0].pairs)
    assert pairs in (d.geo.rows * (d.geo.cols - 1) + d.geo.cols * (d.geo.rows - 1),
                     2 * (d.geo.rows * (d.geo.cols - 1) + d.geo.cols * (d.geo.rows - 1)))


def test_optimize_then_sample_from_a_point(runner, tmp_path):
    _points(tmp_path)
    out = tmp_path / "out"
    result = runner.invoke(app, ["optimize", str(_write(tmp_path)), "--out", str(out)])
    assert result.exit_code == 0, result.output
    cert = out / "certificate.json"
    assert runner.invoke(app, ["certify", str(cert)]).exit_code == 0
    labels = runner.invoke(app, ["sample", str(cert), "--point", "38.58,-121.49", "-n", "50"])
    assert labels.exit_code == 0, labels.output
    problem = dp.verify(str(cert)).problem
    assert set(labels.stdout.split()) <= set(problem.outputs.labels)
    for how in ("centre", "uniform"):
        result = runner.invoke(app, ["sample", str(cert), "--point", "38.58,-121.49", "-n", "40",
                                     "--coords", how])
        assert result.exit_code == 0, result.output
        pts = np.array([[float(v) for v in line.split(",")] for line in result.stdout.split()])
        cells = problem.outputs.cell_of(pts[:, 0], pts[:, 1])
        assert (cells >= 0).all()
        if how == "centre":  # exactly the cells' centres
            lat, lon = problem.outputs.latlon(cells)
            assert np.allclose(pts, np.c_[lat, lon], atol=1e-6)


@pytest.mark.parametrize(("change", "words"), [
    (lambda t: t.replace("cell_km = 20.0", "cell_km = 20.0, rows = 3"),
     "give rows, cols (and cell), or bbox"),
    (lambda t: t.replace(BBOX, "[-120, 38.24, -121, 39.03]"), "west < east"),
    (lambda t: t.replace(BBOX, "[-121.56, 38.24, -120.59, 38.5]"), "outside the grid's bbox"),
    (lambda t: t.replace(f"bbox = {BBOX}, cell_km = 20.0", "rows = 4, cols = 4"), "need a grid over them"),
])
def test_bad_grids_and_points_are_one_line(runner, tmp_path, change, words):
    _points(tmp_path)
    result = runner.invoke(app, ["leakage", str(_write(tmp_path, change(CONFIG)))])
    assert words in _error_line(result)


def test_a_bad_lat_lon_row_names_its_line(runner, tmp_path):
    _points(tmp_path, text="lat,lon\n38.5,-121.0\n38.6,west\n")
    assert "points.csv line 3" in _error_line(runner.invoke(app, ["leakage", str(_write(tmp_path))]))
    _points(tmp_path, text="lat,lon\n98.5,-121.0\n")
    result = runner.invoke(app, ["leakage", str(_write(tmp_path))])
    assert "not a latitude and longitude" in _error_line(result)


def test_sample_point_errors(runner, tmp_path):
    _points(tmp_path)
    out = tmp_path / "out"
    assert runner.invoke(app, ["optimize", str(_write(tmp_path)), "--out", str(out)]).exit_code == 0
    cert = str(out / "certificate.json")
    for args, words in ((("--point", "48.0,-121.0"), "outside the grid's bbox"),
                        (("--point", "north"), "expected LAT,LON"),
                        (("--point", "38.5,-121.0", "--input", "r0c0"), "one of them"),
                        (("--input", "r0c0", "--coords", "corner"), "expected centre or uniform")):
        assert words in _error_line(runner.invoke(app, ["sample", cert, *args]))
