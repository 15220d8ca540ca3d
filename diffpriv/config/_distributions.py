"""Distributions over the inputs, from the ``<distribution>`` values of a config.

A config describes each item's distribution (and each profile's prior) in one of several forms
(README, "Distributions"): a list of probabilities, probabilities by label, uniform, a mixture
of Gaussians discretised on the input coordinates, or a histogram of points (inline or from a
CSV file) or of label samples. :func:`distribution` turns one such value, already validated by
its schema (:class:`DistributionCfg`, part of the config schema of :mod:`diffpriv.config._config`),
into a ``[n_in]`` probability vector, or raises a :class:`ConfigError` whose one-line message
names the field. No JAX.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from scipy.spatial import cKDTree

from diffpriv.problems._problem import Domain, check_distribution

__all__ = ["ConfigError", "DistributionCfg", "GaussianCfg", "Number", "StrictModel", "distribution"]

SUM_TOL = 1e-6  # a given distribution may sum to 1 within this; it is then renormalised


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
    if p.ndim == 1 and p.size and abs(p.sum() - 1.0) <= SUM_TOL:
        p = p / p.sum()
    return check_distribution(field, p, n)


def _coords(field: str, xs: Domain, dim: int) -> np.ndarray:
    """``[n_in, dim]`` input coordinates, or an error if there are none of that dimension."""
    if xs.coords is None:
        raise ConfigError(f"{field}: needs input coordinates (a grid, or inputs.coords)")
    if dim != xs.coords.shape[1]:
        raise ConfigError(f"{field}: has {dim} coordinates, the inputs have {xs.coords.shape[1]}")
    return xs.coords


def _points(field: str, rows: list[list[float]], names: list[str]) -> np.ndarray:
    """``[n, d]`` points from rows of numbers (inline or from a file), checked: at least one,
    every row of the same length ``d >= 1``, every number finite. ``names[i]`` says where row
    ``i`` is, for the error message (``"point 3"``, ``"pts.csv line 4"``)."""
    if not rows:
        raise ConfigError(f"{field}: no points")
    for row, name in zip(rows, names, strict=True):
        if not row:
            raise ConfigError(f"{field}: {name} has no numbers")
        if len(row) != len(rows[0]):
            raise ConfigError(f"{field}: {name} has {len(row)} numbers, {names[0]} has {len(rows[0])}")
        if not all(np.isfinite(row)):
            raise ConfigError(f"{field}: {name} has a NaN or infinite number")
    return np.asarray(rows, dtype=np.float64)


def _read_points(field: str, path: Path) -> np.ndarray:
    """The points in a CSV file; a first line that is not numeric is a header."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        why = getattr(e, "strerror", None) or e
        raise ConfigError(f"{field}: cannot read {str(path)!r} ({why})") from None
    rows, names, first = [], [], True
    for line, row in enumerate(csv.reader(lines), start=1):
        if not row:
            continue
        try:
            rows.append([float(v) for v in row])
            names.append(f"{path.name} line {line}")
        except ValueError:
            if not first:
                raise ConfigError(f"{field}: {path.name} line {line} is not numeric") from None
        first = False
    return _points(field, rows, names)


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
            pts = _points(f"{field}.points", cfg.points, [f"point {i}" for i in range(len(cfg.points))])
        else:
            key = "points_file"
            pts = _read_points(f"{field}.points_file", base_dir / cfg.points_file)
        idx = cKDTree(_coords(f"{field}.{key}", xs, pts.shape[1])).query(pts)[1]
    w = np.ones(idx.size) if cfg.weights is None else np.asarray(cfg.weights, dtype=np.float64)
    if w.shape != idx.shape or np.any(w < 0):
        raise ConfigError(f"{field}.weights: need {idx.size} numbers >= 0, one per point")
    counts = np.bincount(idx, weights=w, minlength=xs.size) + cfg.smoothing
    if counts.sum() <= 0:
        raise ConfigError(f"{field}.{key}: the histogram is empty (all weights are 0)")
    return counts / counts.sum()


def _mixture(field: str, gaussians: list[GaussianCfg], xs: Domain) -> np.ndarray:
    """Each Gaussian discretised on the input coordinates, normalised, then mixed by weight."""
    w = np.asarray([g.weight for g in gaussians], dtype=np.float64)
    if w.sum() <= 0:
        raise ConfigError(f"{field}.gaussians: the weights sum to 0")
    out = np.zeros(xs.size)
    for k, g in enumerate(gaussians):
        coords = _coords(f"{field}.gaussians[{k}].center", xs, len(g.center))
        logp = -np.sum((coords - np.asarray(g.center)) ** 2, axis=1) / (2.0 * g.scale**2)
        p = np.exp(logp - logp.max())
        out += w[k] / w.sum() * p / p.sum()
    return out / out.sum()


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
