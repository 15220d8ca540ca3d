"""Grids over latitude and longitude: a bounding box in degrees, square cells in km.

A grid from a bounding box ``[west, south, east, north]`` (degrees) and a cell side ``c`` (km)
projects the sphere (radius :data:`EARTH_KM`) equirectangularly about the box's middle latitude
``φ_m``: ``x = R·(λ − west)·cos φ_m``, ``y = R·(φ − south)`` (radians, km from the south-west
corner). North–south distances are exact; east–west ones are off by the factor ``cos φ / cos φ_m``,
about ``tan φ_m · |φ − φ_m|`` (radians): 0.5 % at 40 km from the middle latitude at 38° N (a city),
6 % at 500 km (a country: project the data yourself there). The grid has ``⌈height / c⌉`` rows and
``⌈width / c⌉`` columns, cells numbered row by row from the south-west as
:meth:`~diffpriv.Domain.grid` numbers them, coordinates (cell centres) in km. The projection
travels with the domain (:class:`LatLon`), so a certificate maps a point to its cell and a
reported cell back to coordinates.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

__all__ = ["EARTH_KM", "LatLon", "bbox_grid"]

EARTH_KM = 6371.0088
"""The Earth's mean radius (IUGG), km."""


def _check_bbox(bbox) -> tuple[float, float, float, float]:
    values = [float(v) for v in bbox]
    if len(values) != 4 or not all(math.isfinite(v) for v in values):
        raise ValueError(f"bbox: expected [west, south, east, north] in degrees, got {list(bbox)!r}")
    west, south, east, north = values
    if not (-180 <= west < east <= 180):
        raise ValueError(f"bbox: needs -180 ≤ west < east ≤ 180, got west {west:g}, east {east:g}")
    if not (-90 < south < north < 90):
        raise ValueError(f"bbox: needs -90 < south < north < 90, got south {south:g}, north {north:g}")
    return west, south, east, north


@dataclasses.dataclass(frozen=True)
class LatLon:
    """The projection of a grid's km coordinates (module docstring): its south-west corner
    (degrees), the latitude it is equirectangular about (degrees), the cell side (km) and the
    grid's rows and columns."""

    south: float
    west: float
    lat_ref: float
    cell: float
    rows: int
    cols: int

    def __post_init__(self):
        for name in ("south", "west", "lat_ref", "cell"):
            if not math.isfinite(float(getattr(self, name))):
                raise ValueError(f"geo.{name}: must be finite")
        if not self.cell > 0 or not -90 < self.lat_ref < 90:
            raise ValueError("geo: needs cell > 0 and -90 < lat_ref < 90")
        if int(self.rows) < 1 or int(self.cols) < 1:
            raise ValueError("geo: needs rows, cols ≥ 1")

    @property
    def _scale(self) -> float:
        """km per radian of longitude."""
        return EARTH_KM * math.cos(math.radians(self.lat_ref))

    def to_km(self, lat, lon) -> tuple[np.ndarray, np.ndarray]:
        """``(x, y)`` in km of points given in degrees."""
        lat, lon = np.asarray(lat, np.float64), np.asarray(lon, np.float64)
        return self._scale * np.radians(lon - self.west), EARTH_KM * np.radians(lat - self.south)

    def to_latlon(self, x, y) -> tuple[np.ndarray, np.ndarray]:
        """``(lat, lon)`` in degrees of points given in km."""
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        return self.south + np.degrees(y / EARTH_KM), self.west + np.degrees(x / self._scale)

    def cell_of(self, lat, lon) -> np.ndarray:
        """Each point's cell (row-major index), or -1 for a point outside the grid."""
        x, y = self.to_km(lat, lon)
        with np.errstate(invalid="ignore"):
            inside = (x >= 0) & (x <= self.cols * self.cell) & (y >= 0) & (y <= self.rows * self.cell)
            col = np.clip(np.floor(np.where(inside, x, 0.0) / self.cell), 0, self.cols - 1)
            row = np.clip(np.floor(np.where(inside, y, 0.0) / self.cell), 0, self.rows - 1)
        return np.where(inside, row * self.cols + col, -1).astype(np.int64)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def bbox_grid(bbox, cell_km: float) -> LatLon:
    """The :class:`LatLon` of the grid covering ``bbox`` (``[west, south, east, north]``,
    degrees) with cells of ``cell_km``."""
    west, south, east, north = _check_bbox(bbox)
    if not (math.isfinite(cell_km) and cell_km > 0):
        raise ValueError(f"cell_km: must be a finite number > 0, got {cell_km!r}")
    lat_ref = 0.5 * (south + north)
    probe = LatLon(south, west, lat_ref, cell_km, 1, 1)
    width, height = probe.to_km(north, east)
    rows, cols = max(1, math.ceil(float(height) / cell_km)), max(1, math.ceil(float(width) / cell_km))
    return LatLon(south, west, lat_ref, float(cell_km), rows, cols)
