"""Distributions over the inputs, from the ``<distribution>`` values of a config.

A config describes each item's distribution (and each profile's prior) in one of several forms
(``docs/config.md``, "Distributions"): a list of probabilities, probabilities by label, uniform, a mixture
of Gaussians discretised on the input coordinates, or a histogram of points (inline or from a
CSV file) or of label samples. :func:`distribution` turns one such value, already validated by
its schema (:class:`DistributionCfg`, part of the config schema of :mod:`diffpriv.config._schema`),
into a ``[n_in]`` probability vector, or raises a :class:`ConfigError` whose one-line message
names the field. No JAX.
"""

from __future__ import annotations

import csv
import io
import math
import re
import warnings
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from diffpriv._files import FileFormatError, read_bytes
from diffpriv.problems._problem import Domain, check_distribution

__all__ = ["MAX_POINTS_FILE_BYTES", "MAX_POINTS_LINE", "ConfigError", "DistributionCfg",
           "GaussianCfg", "Number", "StrictModel", "distribution"]

SUM_TOL = 1e-6  # a given distribution may sum to 1 within this; it is then renormalised
MAX_POINTS_FILE_BYTES = 32 * 2**20
"""Largest ``points_file``, in bytes (about a million points; read in about 6 s at worst)."""
MAX_POINTS_LINE = 64 * 2**10
"""Longest line of a ``points_file``, in characters."""
_CHUNK = 2**20  # characters of a points_file parsed at once
_LONG_LINE = re.compile(f"(?<![^\\n])[^\\n]{{{MAX_POINTS_LINE + 1}}}")  # at line starts only: linear


class ConfigError(ValueError):
    """A config is invalid; the message is one line, ``"<field path>: <problem>"``."""


# -- schema (the base model and Number are shared with the rest of the config schema) ---------

Number = Annotated[float, Field(allow_inf_nan=False)]


class StrictModel(BaseModel):
    """Base of every config table: unknown keys are errors, no type coercion, immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class GaussianCfg(StrictModel):
    center: list[Number]
    scale: Number = Field(gt=0)
    weight: Number = Field(default=1.0, ge=0)


_SOURCES = ("values", "uniform", "labels", "points", "points_file", "samples", "gaussians")


class DistributionCfg(StrictModel):
    """A distribution over the inputs; a bare list is shorthand for ``{ values = [...] }``."""

    values: list[float] | None = None
    uniform: Literal[True] | None = None
    labels: dict[str, float] | None = None
    points: list[list[Number]] | None = None
    points_file: str | None = None
    samples: list[str] | None = None
    weights: list[Number] | None = None
    smoothing: Number = Field(default=0.0, ge=0)
    gaussians: list[GaussianCfg] | None = Field(default=None, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _bare_list(cls, v: Any) -> Any:
        if isinstance(v, list):
            return {"values": v}
        if not isinstance(v, dict):
            raise ValueError(f"expected a list of numbers or a table, got {v!r}")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> DistributionCfg:
        given = [s for s in _SOURCES if getattr(self, s) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(_SOURCES)} (got {given or 'none'})")
        histogram = given[0] in ("points", "points_file", "samples")
        if not histogram and (self.weights is not None or self.smoothing):
            raise ValueError("weights and smoothing only go with points, points_file or samples")
        return self


# -- the vector --------------------------------------------------------------------------------


def _normalised(field: str, p, n: int) -> np.ndarray:
    """A given distribution: checked, and renormalised if it sums to 1 within ``SUM_TOL``."""
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # a sum of ±1e308 entries: checked below
        total = p.sum() if p.ndim == 1 and p.size else np.nan
    if np.isfinite(total) and abs(total - 1.0) <= SUM_TOL:
        p = p / total
    return check_distribution(field, p, n)


def _coords(field: str, xs: Domain, dim: int) -> np.ndarray:
    """``[n_in, dim]`` input coordinates, or an error if there are none of that dimension."""
    if xs.coords is None:
        raise ConfigError(f"{field}: needs input coordinates (a grid, or inputs.coords)")
    if dim != xs.coords.shape[1]:
        raise ConfigError(f"{field}: has {dim} coordinates, the inputs have {xs.coords.shape[1]}")
    return xs.coords


def _points(field: str, rows: list[list[float]]) -> np.ndarray:
    """``[n, d]`` inline points, checked: at least one, every row of the same length ``d >= 1``,
    every number finite."""
    if not rows:
        raise ConfigError(f"{field}: no points")
    for i, row in enumerate(rows):
        if not row:
            raise ConfigError(f"{field}: point {i} has no numbers")
        if len(row) != len(rows[0]):
            raise ConfigError(f"{field}: point {i} has {len(row)} numbers, point 0 has {len(rows[0])}")
        if not all(map(math.isfinite, row)):
            raise ConfigError(f"{field}: point {i} has a NaN or infinite number")
    return np.asarray(rows, dtype=np.float64)


def _parse_rows(field: str, name: str, lines: list[str], first: int,
                shape: tuple[int, int] | None, header: bool):
    """Rows of numbers from CSV ``lines`` (the first is line ``first`` of the file), checked:
    finite, and as many in every row as in the first point (``shape``: its width and line,
    ``None`` before it is found); a non-numeric first row is a header if ``header``.
    Returns the rows and ``shape``."""
    rows: list[list[float]] = []
    for offset, text in enumerate(lines):
        line = first + offset
        try:
            row = next(csv.reader([text]), [])
        except csv.Error as e:
            raise ConfigError(f"{field}: {name} line {line} is not CSV ({e})") from None
        if not row:
            continue
        try:
            numbers = [float(v) for v in row]
        except ValueError:
            if header:
                header = False
                continue
            raise ConfigError(f"{field}: {name} line {line} is not numeric") from None
        header = False
        if shape is None:
            shape = (len(numbers), line)
        elif len(numbers) != shape[0]:
            raise ConfigError(f"{field}: {name} line {line} has {len(numbers)} numbers, {name} "
                              f"line {shape[1]} has {shape[0]}")
        if not all(map(math.isfinite, numbers)):
            raise ConfigError(f"{field}: {name} line {line} has a NaN or infinite number")
        rows.append(numbers)
    return rows, shape


LATITUDE = ("lat", "latitude")
LONGITUDE = ("lon", "lng", "long", "longitude")
"""Column names (any case) that make a points file's rows latitude and longitude in degrees."""


class LatLonPoints(np.ndarray):
    """Points read as ``[n, 2]`` (latitude, longitude) in degrees, not in the domain's coordinates."""


def _latlon_header(first: str) -> tuple[int, int, int] | None:
    """``(latitude column, longitude column, columns)`` where the header names both, else None."""
    names = [c.strip().strip('"').strip().lower() for c in next(csv.reader([first.strip("\r")]), [])]
    lat = [i for i, c in enumerate(names) if c in LATITUDE]
    lon = [i for i, c in enumerate(names) if c in LONGITUDE]
    return (lat[0], lon[0], len(names)) if len(lat) == 1 and len(lon) == 1 else None


def _read_latlon(field: str, name: str, text: str, header: tuple[int, int, int]) -> LatLonPoints:
    """The latitude and longitude columns of a CSV file whose header names them (other columns,
    numeric or not, are ignored); a bad row is a ConfigError naming its line."""
    ilat, ilon, width = header
    out = []
    for line, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if line == 1 or not row or not any(c.strip() for c in row):
            continue
        if len(row) != width:
            raise ConfigError(f"{field}: {name} line {line} has {len(row)} columns, the header {width}")
        try:
            lat, lon = float(row[ilat]), float(row[ilon])
        except ValueError:
            raise ConfigError(f"{field}: {name} line {line}: latitude and longitude must be numbers, "
                              f"got {row[ilat].strip()!r}, {row[ilon].strip()!r}") from None
        if not (-90 <= lat <= 90 and -180 <= lon <= 180):
            raise ConfigError(f"{field}: {name} line {line}: ({lat:g}, {lon:g}) is not a latitude and "
                              "longitude in degrees")
        out.append((lat, lon))
    if not out:
        raise ConfigError(f"{field}: no points")
    return np.asarray(out, np.float64).view(LatLonPoints)


def _read_points(field: str, path: Path) -> np.ndarray:
    """The points in a CSV file, one per row; a first line that is not numeric is a header. A
    header that names a latitude and a longitude column (:data:`LATITUDE`, :data:`LONGITUDE`)
    makes them the points, in degrees (:class:`LatLonPoints`), whatever the other columns hold.

    Only a regular file of at most :data:`MAX_POINTS_FILE_BYTES` is read (never a FIFO or a
    device), with lines of at most :data:`MAX_POINTS_LINE` characters. It is parsed in chunks of
    about 1 MB by ``numpy.loadtxt`` (a chunk it refuses is parsed again line by line, which
    finds the line to blame), so time and memory stay linear in the file's size."""
    try:
        data = read_bytes(path, limit=MAX_POINTS_FILE_BYTES, what="a points_file")
        text = data.decode("utf-8-sig")
    except FileFormatError as e:
        reason = e.reason.removeprefix("cannot read (").removesuffix(")")
        raise ConfigError(f"{field}: cannot read {str(path)!r} ({reason})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{field}: cannot read {str(path)!r} (not UTF-8 text: {e.reason} at "
                          f"byte {e.start})") from None
    del data
    header = _latlon_header(text[:MAX_POINTS_LINE + 2].split("\n", 1)[0])
    if header is not None:
        return _read_latlon(field, path.name, text, header)
    name, chunks, shape, start, line = path.name, [], None, 0, 1
    while start < len(text):
        end = text.find("\n", min(start + _CHUNK, len(text)))
        end = len(text) if end < 0 else end + 1
        long = _LONG_LINE.search(text, start, end)
        if long:
            at = line + text.count("\n", start, long.start())
            raise ConfigError(f"{field}: {name} line {at} is longer than {MAX_POINTS_LINE} "
                              "characters")
        chunk = text[start:end]
        rows = None
        if shape is not None:  # else this chunk may hold the header and the first point
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # "input contained no data"
                    rows = np.loadtxt(io.StringIO(chunk), delimiter=",", dtype=np.float64,
                                      ndmin=2, comments=None, quotechar='"')
            except ValueError:
                rows = None
            if rows is not None and rows.size and (
                    rows.shape[1] != shape[0] or not np.isfinite(rows).all()):
                rows = None  # let the line-by-line parse name the line
        if rows is None:
            parsed, shape = _parse_rows(field, name, chunk.split("\n"), line, shape, start == 0)
            rows = np.asarray(parsed, dtype=np.float64).reshape(len(parsed), shape[0] if shape else 0)
        if rows.size:
            chunks.append(rows)
        line += chunk.count("\n")
        start = end
    if not chunks:
        raise ConfigError(f"{field}: no points")
    return np.concatenate(chunks)


def _histogram(field: str, cfg: DistributionCfg, xs: Domain, base_dir: Path) -> np.ndarray:
    """Counts of points (nearest input coordinate) or samples (labels), plus ``smoothing``."""
    if cfg.samples is not None:
        key = "samples"
        index = {label: i for i, label in enumerate(xs.labels)}
        unknown = [s for s in cfg.samples if s not in index]
        if unknown:
            raise ConfigError(f"{field}.samples: unknown label {unknown[0]!r}")
        idx = np.asarray([index[s] for s in cfg.samples], dtype=np.int64)
    else:
        if cfg.points is not None:
            key = "points"
            pts = _points(f"{field}.points", cfg.points)
        else:
            key = "points_file"
            pts = _read_points(f"{field}.points_file", base_dir / cfg.points_file)
        if isinstance(pts, LatLonPoints):
            return _weighted(field, key, cfg, _latlon_cells(f"{field}.{key}", xs, pts, cfg.points_file), xs)
        idx = _tree(_coords(f"{field}.{key}", xs, pts.shape[1])).query(pts)[1]
        far = np.flatnonzero(idx == xs.size)  # the distance overflows: no nearest input found
        if far.size:
            where = f"point {far[0]}" if key == "points" else f"point {far[0]} of {cfg.points_file}"
            raise ConfigError(f"{field}.{key}: {where} is too far from every input for float64 "
                              "(its squared distance overflows)")
    return _weighted(field, key, cfg, idx, xs)


def _latlon_cells(field: str, xs: Domain, pts: np.ndarray, file: str) -> np.ndarray:
    """The cell of each point given in degrees; a ConfigError where the inputs are no grid over
    latitude and longitude, or a point lies outside it."""
    if xs.geo is None:
        raise ConfigError(f"{field}: {file} holds latitudes and longitudes: the inputs need a grid over "
                          "them, grid = { bbox = [west, south, east, north], cell_km = ... }")
    idx = xs.cell_of(pts[:, 0], pts[:, 1])
    out = np.flatnonzero(idx < 0)
    if out.size:
        raise ConfigError(f"{field}: point {out[0]} of {file} ({pts[out[0], 0]:g}, {pts[out[0], 1]:g}) lies "
                          "outside the grid's bbox")
    return idx


def _weighted(field: str, key: str, cfg: DistributionCfg, idx: np.ndarray, xs: Domain) -> np.ndarray:
    """The histogram of the points' inputs ``idx`` with ``cfg``'s weights and smoothing."""
    w = np.ones(idx.size) if cfg.weights is None else np.asarray(cfg.weights, dtype=np.float64)
    if w.shape != idx.shape or np.any(w < 0):
        raise ConfigError(f"{field}.weights: need {idx.size} numbers >= 0, one per point")
    # Relative weights: divided by the largest number first, so that sums stay finite.
    top = max(float(w.max(initial=0.0)), cfg.smoothing)
    if top <= 0:
        raise ConfigError(f"{field}.{key}: the histogram is empty (all weights are 0)")
    counts = np.bincount(idx, weights=w / top, minlength=xs.size) + cfg.smoothing / top
    return counts / counts.sum()


def _mixture(field: str, gaussians: list[GaussianCfg], xs: Domain) -> np.ndarray:
    """Each Gaussian discretised on the input coordinates, normalised, then mixed by weight."""
    w = np.asarray([g.weight for g in gaussians], dtype=np.float64)
    if w.max() <= 0:
        raise ConfigError(f"{field}.gaussians: the weights sum to 0")
    w = w / w.max()  # relative weights: their sum stays finite
    out = np.zeros(xs.size)
    for k, g in enumerate(gaussians):
        where = f"{field}.gaussians[{k}]"
        coords = _coords(f"{where}.center", xs, len(g.center))
        center = np.asarray(g.center, dtype=np.float64)
        # In units of the scale, so that nothing is squared before it is scaled; an input whose
        # distance overflows gets density 0, as it would at any precision.
        with np.errstate(over="ignore", under="ignore"):
            z = (coords - center) / g.scale
            logp = -0.5 * np.sum(z * z, axis=1)
        if not np.isfinite(logp).any():
            raise ConfigError(_vanishes(where, g, coords, center))
        p = np.exp(logp - logp.max())
        out += w[k] * p / p.sum()
    return out / out.sum()


def _vanishes(where: str, g: GaussianCfg, coords: np.ndarray, center: np.ndarray) -> str:
    """Why a Gaussian is 0 at every input in float64: its center is far off, or its scale tiny."""
    low, high = coords.min(axis=0), coords.max(axis=0)
    with np.errstate(over="ignore"):
        margin = np.maximum(high - low, 1.0)
        inside = bool(np.all((center >= low - margin) & (center <= high + margin)))
    if inside:
        return (f"{where}.scale: {g.scale:g} is too small for float64: the Gaussian is 0 at "
                "every input (each is more than 1e154 scales from the center)")
    return (f"{where}.center: is too far from every input for float64 at scale {g.scale:g}: "
            "the Gaussian is 0 at every input")


def distribution(field: str, cfg: DistributionCfg, xs: Domain, base_dir: Path) -> np.ndarray:
    """The ``[n_in]`` distribution that a ``<distribution>`` value describes.

    Args:
      field: the value's path in the config, for error messages (``"items[0].distribution"``).
      cfg: the value, validated by the schema (exactly one source given).
      xs: the input domain; its labels and coordinates.
      base_dir: the folder that a relative ``points_file`` resolves against.

    Raises:
      ConfigError: the value does not describe a distribution over ``xs``.
      SpecError: a given vector is not a distribution (wrong length, negative, NaN, sum ≠ 1).
    """
    if cfg.values is not None:
        return _normalised(field, cfg.values, xs.size)
    if cfg.uniform:
        return np.full(xs.size, 1.0 / xs.size)
    if cfg.labels is not None:
        unknown = sorted(set(cfg.labels) - set(xs.labels))
        if unknown:
            raise ConfigError(f"{field}.labels: unknown label {unknown[0]!r}")
        return _normalised(f"{field}.labels", [cfg.labels.get(k, 0.0) for k in xs.labels], xs.size)
    if cfg.gaussians is not None:
        return _mixture(field, cfg.gaussians, xs)
    return _histogram(field, cfg, xs, base_dir)


def _tree(points):
    """scipy's k-d tree of ``points`` (imported here: 0.5 s, only for the histogram forms)."""
    from scipy.spatial import cKDTree

    return cKDTree(points)
