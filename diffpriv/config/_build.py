"""A problem from a validated config (:mod:`._schema`): numpy arrays, then a ``Problem``.

Every bad input becomes one :class:`ConfigError` whose message is a single line
``"<field path>: <problem>"``, e.g. ``"items[1].distribution: sums to 0.9, expected 1"``.
A constraint is built by its family from its own keys (:func:`._schema.family_form`); only the
pairs it lists by name (items or inputs, or inputs within ``neighbours`` or a ``radius``) are
resolved here, counted against :data:`MAX_PAIRS` before any is built.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from diffpriv.config._distributions import ConfigError, distribution
from diffpriv.config._schema import ProfileCfg, config_schema, one_line, short
from diffpriv.config._toml import read_toml
from diffpriv.problems._constraints import FAMILIES
from diffpriv.problems._neighbours import count_pairs_within, pairs_within
from diffpriv.problems._problem import Domain, Item, Problem, SpecError

__all__ = ["MAX_PAIRS", "MAX_SPAN", "OptimizerOptions", "config_from_dict", "config_gain", "load_config"]

MAX_PAIRS = 1_000_000
"""Most pairs the constraints of a config list or expand to, in all (``pairs``, ``neighbours``,
``radius``, ``distp`` on all pairs of items), counted before any is built. (``ldp``/``xdp`` on
all pairs of inputs are built as arrays, not listed: the size admission bounds them.)"""
MAX_SPAN = 1e150
"""Largest distance between two coordinates of the domains (their squares must stay finite)."""


@dataclasses.dataclass(frozen=True)
class OptimizerOptions:
    """The ``[optimizer]`` table: the seed and the settings the config gives (the others keep
    the optimizer's defaults)."""

    seed: int = 0
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def steps(self) -> int | None:
        return self.settings.get("steps")

    def kwargs(self) -> dict[str, Any]:
        """``{"seed", "steps", ...}`` for ``diffpriv.optimize(problem, **kwargs)`` (``steps``
        is ``None`` when the config leaves it to the optimizer)."""
        return {"seed": self.seed, "steps": self.steps,
                **{k: v for k, v in self.settings.items() if k != "steps"}}


def _span(coords: np.ndarray) -> float:
    """An upper bound on the distance between two rows of ``coords`` (``inf`` on overflow)."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        ext = np.ptp(coords, axis=0)
        top = float(ext.max(initial=0.0))
        if top == 0 or not math.isfinite(top):
            return top
        return top * float(np.sqrt(np.sum((ext / top) ** 2)))  # scaled: no overflow


def _check_span(field: str, coords: np.ndarray) -> None:
    span = _span(coords)
    if not span <= MAX_SPAN:
        raise ConfigError(f"{field}: the coordinates span {span:.3g}, more than the {MAX_SPAN:g} "
                          "allowed (squared distances would overflow float64)")


def _domain(field: str, cfg) -> Domain:
    if (cfg.grid is None) == (cfg.labels is None):
        raise ConfigError(f"{field}: give either grid or labels")
    if cfg.grid is not None:
        if cfg.coords is not None:
            raise ConfigError(f"{field}.coords: a grid has its own coordinates (cell centres)")
        g = cfg.grid
        if g.bbox is not None:
            if cfg.units not in ("", "km"):
                raise ConfigError(f"{field}.units: a grid over a bbox is in km, got {cfg.units!r}")
            return Domain.from_bbox(g.bbox, g.cell_km)
        if not g.cell * math.hypot(g.rows, g.cols) <= MAX_SPAN:
            raise ConfigError(f"{field}.grid.cell: {g.rows} × {g.cols} cells of {g.cell:g} span more "
                              f"than the {MAX_SPAN:g} allowed (squared distances would overflow "
                              "float64)")
        return Domain.grid(g.rows, g.cols, g.cell, cfg.units)
    labels = cfg.labels or []
    if not labels:
        raise ConfigError(f"{field}.labels: is empty; a domain needs at least one label")
    dup = _first_duplicate(labels)
    if dup is not None:
        raise ConfigError(f"{field}.labels: duplicate label {labels[dup]!r}")
    coords = None
    if cfg.coords is not None:
        if len(cfg.coords) != len(labels):
            n, m = len(cfg.coords), len(labels)
            raise ConfigError(f"{field}.coords: has {n} rows, expected {m} (one per label)")
        if len({len(c) for c in cfg.coords}) != 1 or not cfg.coords[0]:
            raise ConfigError(f"{field}.coords: every row needs the same number (>= 1) of numbers")
        coords = np.asarray(cfg.coords, dtype=np.float64)
        _check_span(f"{field}.coords", coords)
    return Domain(tuple(labels), coords, cfg.units)


def _loss(cfg, xs: Domain, ys: Domain) -> np.ndarray:
    if cfg.kind != "matrix" and cfg.matrix is not None:
        raise ConfigError('loss.matrix: only allowed with kind = "matrix"')
    if cfg.kind == "hamming":
        return (np.asarray(xs.labels)[:, None] != np.asarray(ys.labels)[None, :]).astype(float)
    if cfg.kind == "euclidean":
        if xs.coords is None or ys.coords is None:
            raise ConfigError("loss.kind: euclidean needs coordinates for inputs and outputs")
        if xs.coords.shape[1] != ys.coords.shape[1]:
            raise ConfigError("loss.kind: input and output coordinates have different dimensions")
        return xs.distances(ys)
    if cfg.matrix is None:
        raise ConfigError('loss.matrix: required with kind = "matrix"')
    if len({len(row) for row in cfg.matrix}) > 1:
        raise ConfigError("loss.matrix: rows have different lengths")
    m = np.asarray(cfg.matrix, dtype=np.float64)
    if m.shape != (xs.size, ys.size):
        raise ConfigError(
            f"loss.matrix: shape {m.shape}, expected ({xs.size}, {ys.size}) = (inputs, outputs)"
        )
    if not np.all(np.isfinite(m)) or np.any(m < 0):
        raise ConfigError("loss.matrix: entries must be finite and >= 0")
    return m


def _profiles(cfg, xs: Domain, dists: list[np.ndarray], owners: list[int], base_dir):
    """Returns the profile names and the joint prior ``π[s, x] = w_s · prior_s[x]``."""
    profiles = cfg.profiles or [ProfileCfg(name="all")]
    weights = [p.weight for p in profiles]
    if any(w is None for w in weights) and any(w is not None for w in weights):
        raise ConfigError("profiles: give a weight for every profile or for none")
    w = np.ones(len(profiles)) if weights[0] is None else np.asarray(weights, dtype=np.float64)
    if w.max() <= 0:
        raise ConfigError("profiles: the weights sum to 0")
    w = w / w.max()  # relative weights: their sum stays finite (weights of 1e308 are allowed)
    priors = []
    for s, p in enumerate(profiles):
        own = [d for d, o in zip(dists, owners, strict=True) if o == s]
        if p.prior is not None:
            priors.append(distribution(f"profiles[{s}].prior", p.prior, xs, base_dir))
        elif own:
            priors.append(np.mean(own, axis=0))
        else:
            priors.append(np.full(xs.size, 1.0 / xs.size))
    return tuple(p.name for p in profiles), (w / w.sum())[:, None] * np.stack(priors)


def _profile_index(i: int, item, names: list[str]) -> int:
    if item.profile is None:
        if len(names) > 1:
            raise ConfigError(f"items[{i}].profile: required when there are several profiles")
        return 0
    if item.profile not in names:
        raise ConfigError(
            f"items[{i}].profile: unknown profile {item.profile!r} (profiles: {', '.join(names)})"
        )
    return names.index(item.profile)


# -- the pairs a constraint lists by name ----------------------------------------------------------


@dataclasses.dataclass
class _Pairs:
    """Resolves the pairs constraints list by name; ``left`` is what :data:`MAX_PAIRS` still allows."""

    xs: Domain
    grid_cell: float | None
    items: tuple[str, ...]
    left: int = MAX_PAIRS

    def count(self, field: str, n: int, what: str) -> None:
        if n > self.left:
            used = MAX_PAIRS - self.left
            also = f" (besides {used} of the constraints before)" if used else ""
            raise ConfigError(f"{field}: {what}{also}, more than the {MAX_PAIRS} pairs allowed in all")
        self.left -= n

    def named(self, field: str, pairs: list[list[str]], names: tuple[str, ...], what: str):
        self.count(field, len(pairs), f"{len(pairs)} pairs")
        index = {name: k for k, name in enumerate(names)}
        out = []
        for j, (a, b) in enumerate(pairs):
            for n in (a, b):
                if n not in index:
                    raise ConfigError(f"{field}[{j}]: unknown {what} {short(n)}")
            if a == b:
                raise ConfigError(f"{field}[{j}]: compares {short(a)} with itself")
            out.append((index[a], index[b]))
        return tuple(out)

    def of_items(self, field: str, c) -> tuple[tuple[int, int], ...]:
        """``pairs`` of item names, or every pair of items."""
        if c.pairs is not None:
            return self.named(f"{field}.pairs", c.pairs, self.items, "item")
        if len(self.items) < 2:
            raise ConfigError(f"{field}.pairs: {c.kind} needs at least two items")
        n = len(self.items) * (len(self.items) - 1) // 2
        self.count(field, n, f"{c.kind} on all pairs of {len(self.items)} items is {n} pairs")
        return tuple(itertools.combinations(range(len(self.items)), 2))

    def of_inputs(self, field: str, c) -> tuple[tuple[int, int], ...] | None:
        """``pairs`` of input labels, the inputs within ``neighbours`` or ``radius``, or ``None``
        (every pair)."""
        given = [k for k in ("pairs", "neighbours", "radius") if getattr(c, k) is not None]
        if len(given) > 1:
            raise ConfigError(f"{field}: give at most one of pairs, neighbours, radius")
        if c.pairs is not None:
            return self.named(f"{field}.pairs", c.pairs, self.xs.labels, "input")
        if c.neighbours is not None:
            if self.grid_cell is None:
                raise ConfigError(f"{field}.neighbours: {c.neighbours} needs a grid input domain")
            radius = self.grid_cell * (1.0 if c.neighbours == "grid4" else np.sqrt(2.0))
        elif c.radius is not None:
            if self.xs.coords is None:
                raise ConfigError(f"{field}.radius: needs input coordinates")
            radius = c.radius
        else:
            return None
        # Counted first by a k-d tree (no [n, n] distance matrix: 800 MB at 10,000 cells), so that
        # a radius covering everything builds nothing; then listed.
        n_pairs = count_pairs_within(self.xs, radius)
        self.count(f"{field}.{given[0]}", n_pairs, f"{n_pairs} pairs of inputs within {radius:g}")
        pairs = pairs_within(self.xs, radius)
        if not pairs:
            raise ConfigError(f"{field}.radius: no pair of inputs is within {radius:g}")
        return pairs


def _tuples(value: Any) -> Any:
    """TOML arrays as the tuples the families hold."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _constraint(i: int, c, pairs: _Pairs):
    """The constraint of the config table ``c`` (its family's form), built by its family."""
    field = f"constraints[{i}]"
    family = FAMILIES[c.kind]
    values = {k: _tuples(v) for k, v in c if k not in ("kind", "name", "pairs", "neighbours", "radius")}
    pairs_of = getattr(family, "pairs_of", None)
    if pairs_of is not None:
        values["pairs"] = pairs.of_items(field, c) if pairs_of == "items" else pairs.of_inputs(field, c)
    return family(name=c.name or f"{c.kind}{i}", **values)


def _objective(o, base_dir: Path) -> str | dict[str, Any]:
    """What :class:`~diffpriv.problems._problem.Problem` takes as its objective (a user utility's
    file resolved against ``base_dir``)."""
    fields = {k: v for k, v in o if k != "kind"}
    if o.kind == "python" and fields.get("file"):
        fields["file"] = str((base_dir / fields["file"]).resolve())
    return {"kind": o.kind, **fields} if fields else o.kind


def _support(cfg, xs: Domain, ys: Domain) -> np.ndarray | None:
    r = cfg.support_radius
    if r is None:
        return None
    if xs.coords is None or ys.coords is None:
        raise ConfigError("mechanism.support_radius: needs coordinates for inputs and outputs")
    if xs.coords.shape[1] != ys.coords.shape[1]:
        raise ConfigError(
            f"mechanism.support_radius: the inputs have {xs.coords.shape[1]}-D coordinates, "
            f"the outputs {ys.coords.shape[1]}-D"
        )
    mask = xs.distances(ys) <= r * (1 + 1e-9)
    lonely = np.flatnonzero(~mask.any(axis=1))
    if lonely.size:
        raise ConfigError(
            f"mechanism.support_radius: input {xs.labels[lonely[0]]!r} has no output within {r:g}"
        )
    return mask


def _first_duplicate(names: list[str]) -> int | None:
    """Index of the first name seen before, or ``None``."""
    seen: set[str] = set()
    for i, n in enumerate(names):
        if n in seen:
            return i
        seen.add(n)
    return None


def _unique(field: str, names: list[str], what: str) -> None:
    i = _first_duplicate(names)
    if i is not None:
        raise ConfigError(f"{field}[{i}].name: duplicate {what} name {names[i]!r}")


def _build(cfg, base_dir: Path) -> Problem:
    xs = _domain("inputs", cfg.inputs)
    ys = xs if cfg.outputs is None else _domain("outputs", cfg.outputs)
    if ys is not xs and xs.coords is not None and ys.coords is not None \
            and xs.coords.shape[1] == ys.coords.shape[1]:
        _check_span("outputs", np.concatenate([xs.coords, ys.coords]))
    loss = _loss(cfg.loss, xs, ys)
    profile_names = [p.name for p in cfg.profiles] or ["all"]
    _unique("profiles", profile_names, "profile")
    _unique("items", [it.name for it in cfg.items], "item")
    owners = [_profile_index(i, it, profile_names) for i, it in enumerate(cfg.items)]
    dists = [
        distribution(f"items[{i}].distribution", it.distribution, xs, base_dir)
        for i, it in enumerate(cfg.items)
    ]
    profiles, prior = _profiles(cfg, xs, dists, owners, base_dir)
    items = tuple(Item(it.name, d, s) for it, d, s in zip(cfg.items, dists, owners, strict=True))
    pairs = _Pairs(xs, None if cfg.inputs.grid is None else cfg.inputs.grid.side,
                   tuple(it.name for it in items))
    constraints = [_constraint(i, c, pairs) for i, c in enumerate(cfg.constraints)]
    _unique("constraints", [c.name for c in constraints], "constraint")
    return Problem(
        inputs=xs,
        outputs=ys,
        loss=loss,
        prior=prior,
        items=items,
        constraints=tuple(constraints),
        profiles=profiles,
        support=_support(cfg.mechanism, xs, ys),
        objective=_objective(cfg.objective, base_dir),
    )


def config_from_dict(
    d: dict[str, Any], base_dir: str | Path = "."
) -> tuple[Problem, OptimizerOptions]:
    """Validates a config (the parsed TOML) and builds the problem and the optimizer options.

    Args:
      d: the config as nested dicts and lists, as ``tomllib`` returns it.
      base_dir: the folder that relative paths (``points_file``) resolve against.

    Raises:
      ConfigError: with a one-line ``"<field path>: <problem>"`` message.
    """
    try:
        cfg = config_schema().model_validate(d)
    except ValidationError as e:
        raise ConfigError(one_line(e, config_schema())) from None
    try:
        from diffpriv.problems._user import running_utilities

        with running_utilities():  # the user's own config: a utility it names is theirs to run
            problem = _build(cfg, Path(base_dir))
    except SpecError as e:
        raise ConfigError(str(e)) from None
    opt = cfg.optimizer.model_dump()
    seed = opt.pop("seed")
    return problem, OptimizerOptions(seed, {k: v for k, v in opt.items() if v is not None})


def load_config(path: str | Path) -> tuple[Problem, OptimizerOptions]:
    """Reads a TOML config file (:func:`._toml.read_toml`); relative paths in it resolve against
    its folder.

    Raises:
      ConfigError: the file is missing, is not valid TOML, or describes an invalid problem.
    """
    return config_from_dict(read_toml(path), base_dir=Path(path).parent)


def config_gain(d: dict[str, Any], problem: Problem) -> np.ndarray | None:
    """The gain ``[W, X]`` of the config's ``[leakage]`` table for ``problem`` (``d`` already
    validated by :func:`config_from_dict`), or ``None`` where it gives none: ``gain`` (one row
    per guess, one entry per input) or ``gain_within`` (:func:`diffpriv.measures._leakage.within_gain`).

    Raises:
      ConfigError: a row of ``gain`` without one entry per input.
    """
    from diffpriv.config._schema import LeakageCfg
    from diffpriv.measures._leakage import within_gain

    cfg = LeakageCfg.model_validate(d.get("leakage", {}))
    if cfg.gain_within is not None:
        return within_gain(problem.loss, cfg.gain_within)
    if cfg.gain is None:
        return None
    n = problem.shape[1]
    for w, row in enumerate(cfg.gain):
        if len(row) != n:
            raise ConfigError(f"leakage.gain[{w}]: has {len(row)} entries, expected {n} (one per input)")
    return np.asarray(cfg.gain, np.float64)
