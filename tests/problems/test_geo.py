"""Grids over latitude and longitude (:mod:`diffpriv.problems._geo`, ``Domain.from_bbox``): the
projection against great-circle distances, cells and their centres, binning, the JSON form."""

import math

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.problems import SpecError
from diffpriv.problems._geo import EARTH_KM, LatLon, bbox_grid
from diffpriv.problems._json import problem_from_dict, problem_hash, problem_to_dict

SACRAMENTO = [-121.56, 38.24, -120.59, 39.03]


def _haversine(lat1, lon1, lat2, lon2):
    p1, p2, dl = math.radians(lat1), math.radians(lat2), math.radians(lon2 - lon1)
    a = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_KM * math.asin(math.sqrt(a))


def test_the_projection_keeps_city_distances():
    geo = bbox_grid(SACRAMENTO, 2.0)
    rng = np.random.default_rng(0)
    lat = rng.uniform(38.24, 39.03, 200)
    lon = rng.uniform(-121.56, -120.59, 200)
    x, y = geo.to_km(lat, lon)
    back = geo.to_latlon(x, y)
    assert np.allclose(back[0], lat, atol=1e-12) and np.allclose(back[1], lon, atol=1e-12)
    # east–west scale off by about tan φ_m·|φ − φ_m| (here at most 0.4° from the middle latitude)
    bound = math.tan(math.radians(geo.lat_ref)) * math.radians(0.4) + 1e-3
    for k in range(0, 200, 2):
        projected = math.hypot(x[k] - x[k + 1], y[k] - y[k + 1])
        assert projected == pytest.approx(_haversine(lat[k], lon[k], lat[k + 1], lon[k + 1]), rel=bound)
    # north–south distances are exact on the sphere
    assert float(geo.to_km(39.0, -121.0)[1] - geo.to_km(38.5, -121.0)[1]) == pytest.approx(
        _haversine(38.5, -121.0, 39.0, -121.0), rel=1e-12)
    width, height = (float(v) for v in geo.to_km(39.03, -120.59))
    assert (geo.rows, geo.cols) == (math.ceil(height / 2.0), math.ceil(width / 2.0)) == (44, 43)


def test_cells_their_centres_and_points_inside():
    d = dp.Domain.from_bbox(SACRAMENTO, 3.0)
    assert d.units == "km" and d.geo.rows * d.geo.cols == d.size
    lat, lon = d.latlon(np.arange(d.size))
    assert np.array_equal(d.cell_of(lat, lon), np.arange(d.size))  # each centre lies in its own cell
    rng = np.random.default_rng(1)
    ulat, ulon = d.latlon(np.repeat(np.arange(d.size), 5), uniform=True, rng=rng)
    assert np.array_equal(d.cell_of(ulat, ulon), np.repeat(np.arange(d.size), 5))
    assert d.cell_of(38.24, -121.56) == 0  # the south-west corner
    assert d.cell_of([37.0, 38.5], [-121.0, -125.0]).tolist() == [-1, -1]
    # the corner cell's label and the numbering of Domain.grid
    assert d.labels[0] == "r0c0" and d.labels[d.geo.cols] == "r1c0"


def test_binning_points_in_degrees():
    d = dp.Domain.from_bbox(SACRAMENTO, 10.0)
    rng = np.random.default_rng(2)
    lat, lon = rng.uniform(38.3, 39.0, 500), rng.uniform(-121.5, -120.6, 500)
    hist = d.histogram(lat, lon)
    expected = np.bincount(d.cell_of(lat, lon), minlength=d.size) / 500
    assert np.allclose(hist, expected, atol=1e-15)
    smooth = d.histogram(lat, lon, weights=np.full(500, 2.0), smoothing=1.0)
    assert np.allclose(smooth, (2 * expected * 500 + 1) / (1000 + d.size), atol=1e-15)
    with pytest.raises(SpecError, match="outside the grid"):
        d.histogram([45.0], [-121.0])
    with pytest.raises(SpecError, match="needs a grid over latitude"):
        dp.Domain.grid(2, 2).histogram([0.0], [0.0])


@pytest.mark.parametrize(("bbox", "cell", "words"), [
    ([-121, 38, -122, 39], 1.0, "west < east"),
    ([-121, 38, -120, 95], 1.0, "south < north"),
    ([-121, 38, -120], 1.0, "expected [west, south, east, north]"),
    ([-121, 38, -120, 39], 0.0, "cell_km"),
])
def test_bad_boxes_name_the_field(bbox, cell, words):
    with pytest.raises(SpecError, match=r"domain\.grid\.") as e:
        dp.Domain.from_bbox(bbox, cell)
    assert words in str(e.value)


def test_the_projection_travels_with_the_problem():
    d = dp.Domain.from_bbox(SACRAMENTO, 8.0)
    problem = dp.Problem(d, d, loss=d.distances(d), prior=np.full(d.size, 1 / d.size),
                         constraints=(dp.ExtendedDP(1.0, pairs=dp.problems.pairs_within(d, 8.0)),))
    back = problem_from_dict(problem_to_dict(problem))
    assert back.inputs.geo == d.geo and problem_hash(back) == problem_hash(problem)
    plain = dp.Domain.grid(2, 2)
    assert "geo" not in problem_to_dict(dp.Problem(plain, plain, loss=plain.distances(plain),
                                                   prior=np.full(4, 0.25)))["inputs"]  # older readers
    bad = problem_to_dict(problem)
    bad["inputs"]["geo"]["rows"] = 3
    with pytest.raises(SpecError, match="inputs.geo"):
        problem_from_dict(bad)
    bad = problem_to_dict(problem)
    del bad["inputs"]["geo"]["cell"]
    with pytest.raises(SpecError, match="inputs.geo: expected the keys"):
        problem_from_dict(bad)
    with pytest.raises(ValueError, match="geo"):
        LatLon(38.0, -121.0, 95.0, 1.0, 1, 1)
