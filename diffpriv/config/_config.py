"""A problem from a TOML config: the schema (pydantic), then numpy arrays, then a ``Problem``.

Every bad input becomes one :class:`ConfigError` whose message is a single line
``"<field path>: <problem>"``, e.g. ``"items[1].distribution: sums to 0.9, expected 1"``.
Nothing here imports JAX: the CLI validates a whole config before the optimizer is loaded.
Distribution values (items, priors) have their schema and their vectors in
:mod:`diffpriv.config._distributions`.
The schema is documented key by key in ``docs/config.md``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
import tomllib
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, ValidationError, create_model, model_validator

from diffpriv._files import FileFormatError, read_text
from diffpriv.config._distributions import ConfigError, DistributionCfg, Number, StrictModel, distribution
from diffpriv.problems._divergence_families import DivergenceDistP, DivergenceDP, ExtendedDistP
from diffpriv.problems._neighbours import count_pairs_within, pairs_within
from diffpriv.problems._problem import DistP, Domain, ExtendedDP, Item, LocalDP, Problem, SpecError
from diffpriv.problems._transport_families import WassersteinDistP, WassersteinDP
from diffpriv.solvers._options import Options

__all__ = ["MAX_CONFIG_BYTES", "MAX_CONSTRAINTS", "MAX_GRID_CELLS", "MAX_ITEMS", "MAX_LABELS",
           "MAX_NESTING", "MAX_PAIRS", "MAX_PROFILES", "MAX_SEED", "MAX_SPAN", "ConfigError",
           "OptimizerOptions", "config_from_dict", "load_config"]

# Limits: every input is bounded before anything is built from it (docs/cli.md, "Limits").
MAX_CONFIG_BYTES = 4 * 2**20
"""Largest config file, in bytes (tomllib reads about 0.4 MB/s of the worst TOML)."""
MAX_NESTING = 64
"""Deepest nesting of arrays and inline tables, and most parts of one dotted key, in a config
(the schema needs 7; tomllib recurses per level and is quadratic in a key's parts)."""
MAX_GRID_CELLS = 10_000
"""Largest ``rows × cols`` of a grid domain (the table has ``|X|·|Y|`` entries per profile)."""
MAX_LABELS = MAX_GRID_CELLS
"""Most labels of a domain given by ``labels`` (the same bound as a grid's cells)."""
MAX_ITEMS = 10_000
"""Most ``[[items]]`` (each holds a vector over the inputs)."""
MAX_PROFILES = 1_000
"""Most ``[[profiles]]`` (the table has one ``|X| × |Y|`` block per profile)."""
MAX_CONSTRAINTS = 1_000
"""Most ``[[constraints]]``."""
MAX_PAIRS = 1_000_000
"""Most pairs the constraints of a config list or expand to, in all (``pairs``, ``neighbours``,
``radius``, ``distp`` on all pairs of items), counted before any is built. (``ldp``/``xdp`` on
all pairs of inputs are built as arrays, not listed: the size admission bounds them.)"""
MAX_SPAN = 1e150
"""Largest distance between two coordinates of the domains (their squares must stay finite)."""
MAX_SEED = 2**32 - 1
"""Largest random seed (``jax.random.PRNGKey`` takes a 32-bit seed)."""

# -- schema ----------------------------------------------------------------------------------

Pair = Annotated[list[str], Field(min_length=2, max_length=2)]


class GridCfg(StrictModel):
    rows: int = Field(ge=1)
    cols: int = Field(ge=1)
    cell: Number = Field(default=1.0, gt=0)

    @model_validator(mode="after")
    def _not_too_large(self) -> GridCfg:
        n = self.rows * self.cols
        if n > MAX_GRID_CELLS:
            raise ValueError(f"{self.rows} × {self.cols} = {n} cells, at most {MAX_GRID_CELLS} allowed")
        return self


class DomainCfg(StrictModel):
    grid: GridCfg | None = None
    labels: list[str] | None = Field(default=None, max_length=MAX_LABELS)
    coords: list[list[Number]] | None = None
    units: str = Field(default="", max_length=32, description="the coordinates' unit, for axis labels")


class LossCfg(StrictModel):
    kind: Literal["euclidean", "hamming", "matrix"]
    matrix: list[list[float]] | None = None


class ProfileCfg(StrictModel):
    name: str
    weight: Number | None = Field(default=None, ge=0)
    prior: DistributionCfg | None = None


class ItemCfg(StrictModel):
    name: str
    profile: str | None = None
    distribution: DistributionCfg


class ConstraintCfg(StrictModel):
    kind: Literal["distp", "ldp", "xdp", "divergence_distp", "divergence_dp", "xdistp", "wdp", "wdistp"]
    name: str | None = None
    epsilon: Number = Field(ge=0)
    delta: float | None = Field(default=None, ge=0, lt=1)
    divergence: str | None = None
    alpha: Number | None = None
    direction: Literal["both", "forward"] | None = None
    transport: Literal["w1", "winf"] | None = None
    order: Number | None = None
    metric: list[list[Number]] | None = None
    pairs: list[Pair] | None = Field(default=None, min_length=1)
    neighbours: Literal["grid4", "grid8"] | None = None
    radius: Number | None = Field(default=None, gt=0)


class MechanismCfg(StrictModel):
    support_radius: Number | None = Field(default=None, gt=0)


def _optimizer_schema() -> type[StrictModel]:
    """The ``[optimizer]`` table, derived field by field from the optimizer's settings
    (:class:`diffpriv.solvers._options.Options`: types, bounds, meaning), plus ``seed``.
    A key left out keeps the optimizer's default."""
    hints = typing.get_type_hints(Options)
    types = {int: int, float: Number, bool: bool}
    fields: dict[str, Any] = {"seed": (int, Field(default=0, ge=0, le=MAX_SEED))}
    for f in dataclasses.fields(Options):
        bounds = {k: v for k, v in f.metadata.items() if k in ("ge", "gt", "le")}
        kind = types.get(hints[f.name], hints[f.name])
        fields[f.name] = (kind | None, Field(default=None, description=f.metadata["doc"], **bounds))
    return create_model("OptimizerCfg", __base__=StrictModel, **fields)


OptimizerCfg = _optimizer_schema()


ObjectiveKind = Literal["expected", "worst", "entry", "transport"]
_OBJECTIVE_KINDS = typing.get_args(ObjectiveKind)


class ObjectiveCfg(StrictModel):
    """``objective``: a kind (``"expected"``), or a table with ``kind`` and, for
    ``"transport"``, ``laws`` (``{ kind = "transport", laws = "items" }``)."""

    kind: ObjectiveKind
    laws: Literal["prior", "profiles", "items"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _bare_kind(cls, v: Any) -> Any:
        if isinstance(v, str):
            if v not in _OBJECTIVE_KINDS:
                names = [repr(k) for k in _OBJECTIVE_KINDS]
                raise ValueError(f"must be {', '.join(names[:-1])} or {names[-1]}, got {_short(v)}")
            return {"kind": v}
        if not isinstance(v, dict):
            raise ValueError(f"expected a string or a table, got {_short(v)}")
        return v

    @model_validator(mode="after")
    def _laws_for_transport(self) -> ObjectiveCfg:
        if self.laws is not None and self.kind != "transport":
            raise ValueError(f'laws only goes with kind = "transport", not {self.kind!r}')
        return self

    def to_json(self) -> str | dict[str, str]:
        """What :class:`~diffpriv.problems._problem.Problem` takes as its objective."""
        return self.kind if self.laws is None else {"kind": self.kind, "laws": self.laws}


class ConfigCfg(StrictModel):
    description: str = ""
    objective: ObjectiveCfg = ObjectiveCfg(kind="expected")
    inputs: DomainCfg
    outputs: DomainCfg | None = None
    loss: LossCfg
    profiles: list[ProfileCfg] = Field(default=[], max_length=MAX_PROFILES)
    items: list[ItemCfg] = Field(default=[], max_length=MAX_ITEMS)
    constraints: list[ConstraintCfg] = Field(default=[], max_length=MAX_CONSTRAINTS)
    mechanism: MechanismCfg = MechanismCfg()
    optimizer: OptimizerCfg = OptimizerCfg()


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


# -- errors as one line ----------------------------------------------------------------------


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + _key(str(part))
    return out or "config"


def _key(name: str) -> str:
    """A key as a field path shows it: bare if TOML would write it bare, else quoted (cut)."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) else _short(name)


def _short(value: Any, width: int = 60) -> str:
    """``repr(value)`` cut to ``width`` characters: a message stays one short line."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _one_line(e: ValidationError) -> str:
    err = e.errors()[0]
    kind, msg = err["type"], err["msg"].removeprefix("Value error, ")
    if kind == "extra_forbidden":
        msg = "unknown key"
    elif kind == "missing":
        msg = "required key is missing"
    elif kind == "model_type":
        msg = "expected a table"
    elif kind == "literal_error":
        msg = f"must be {err['ctx']['expected']}, got {_short(err['input'])}"
    elif kind.endswith("_type") or kind in (
        "greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number"
    ):
        msg = f"{msg}, got {_short(err['input'])}"
    msg = msg[:1].lower() + msg[1:]
    more = e.error_count() - 1
    tail = f" (and {more} more error{'s' * (more > 1)})" if more else ""
    return f"{_path(err['loc'])}: {msg}{tail}"


# -- building the problem --------------------------------------------------------------------


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


def _domain(field: str, cfg: DomainCfg) -> Domain:
    if (cfg.grid is None) == (cfg.labels is None):
        raise ConfigError(f"{field}: give either grid or labels")
    if cfg.grid is not None:
        if cfg.coords is not None:
            raise ConfigError(f"{field}.coords: a grid has its own coordinates (cell centres)")
        g = cfg.grid
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


def _loss(cfg: LossCfg, xs: Domain, ys: Domain) -> np.ndarray:
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


def _profiles(cfg: ConfigCfg, xs: Domain, dists: list[np.ndarray], owners: list[int], base_dir):
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


def _profile_index(i: int, item: ItemCfg, names: list[str]) -> int:
    if item.profile is None:
        if len(names) > 1:
            raise ConfigError(f"items[{i}].profile: required when there are several profiles")
        return 0
    if item.profile not in names:
        raise ConfigError(
            f"items[{i}].profile: unknown profile {item.profile!r} (profiles: {', '.join(names)})"
        )
    return names.index(item.profile)


def _pairs(field: str, pairs: list[list[str]], names: tuple[str, ...], what: str):
    index = {name: k for k, name in enumerate(names)}
    out = []
    for j, (a, b) in enumerate(pairs):
        for n in (a, b):
            if n not in index:
                raise ConfigError(f"{field}[{j}]: unknown {what} {_short(n)}")
        if a == b:
            raise ConfigError(f"{field}[{j}]: compares {_short(a)} with itself")
        out.append((index[a], index[b]))
    return tuple(out)


def _count(field: str, n: int, budget: list[int], what: str) -> None:
    """Charges ``n`` pairs to ``budget[0]`` (what is left of :data:`MAX_PAIRS`)."""
    if n > budget[0]:
        used = MAX_PAIRS - budget[0]
        also = f" (besides {used} of the constraints before)" if used else ""
        raise ConfigError(f"{field}: {what}{also}, more than the {MAX_PAIRS} pairs allowed in all")
    budget[0] -= n


def _neighbours(field: str, c: ConstraintCfg, cfg: DomainCfg, xs: Domain, budget: list[int]):
    """Pairs of inputs within a radius (``neighbours = "grid4"|"grid8"`` on a grid)."""
    if c.neighbours is not None:
        if cfg.grid is None:
            raise ConfigError(f"{field}.neighbours: {c.neighbours} needs a grid input domain")
        radius = cfg.grid.cell * (1.0 if c.neighbours == "grid4" else np.sqrt(2.0))
    else:
        if xs.coords is None:
            raise ConfigError(f"{field}.radius: needs input coordinates")
        radius = c.radius
    # Counted first by a k-d tree (no [n, n] distance matrix: 800 MB at 10,000 cells), so that a
    # radius covering everything builds nothing; then listed.
    n_pairs = count_pairs_within(xs, radius)
    where = f"{field}.{'neighbours' if c.neighbours is not None else 'radius'}"
    _count(where, n_pairs, budget, f"{n_pairs} pairs of inputs within {radius:g}")
    pairs = pairs_within(xs, radius)
    if not pairs:
        raise ConfigError(f"{field}.radius: no pair of inputs is within {radius:g}")
    return pairs


def _constraint(i: int, c: ConstraintCfg, cfg: ConfigCfg, xs: Domain, items: tuple[str, ...],
                budget: list[int]):
    """The constraint ``c``; the pairs it lists are counted against ``budget`` before any is built."""
    field = f"constraints[{i}]"
    name = c.name or f"{c.kind}{i}"
    delta = c.delta or 0.0
    selectors = [k for k in ("pairs", "neighbours", "radius") if getattr(c, k) is not None]
    if len(selectors) > 1:
        raise ConfigError(f"{field}: give at most one of pairs, neighbours, radius")
    divergent = c.kind in ("divergence_distp", "divergence_dp", "xdistp")
    if divergent and c.delta is not None:
        raise ConfigError(f"{field}.delta: {c.kind} bounds a divergence by epsilon; it has no delta")
    if divergent and c.divergence is None:
        raise ConfigError(f"{field}.divergence: {c.kind} needs a divergence (kl, reverse_kl, tv, chi2, "
                          "hellinger, renyi or max)")
    for key in ("divergence", "alpha", "direction", "transport"):
        if getattr(c, key) is not None and not (divergent and (key != "transport" or c.kind == "xdistp")):
            raise ConfigError(f"{field}.{key}: {c.kind} takes no {key}")
    transport = c.kind in ("wdp", "wdistp")
    for key in ("order", "metric"):
        if getattr(c, key) is not None and not transport:
            raise ConfigError(f"{field}.{key}: {c.kind} takes no {key}")
    if transport and c.delta is not None:
        raise ConfigError(f"{field}.delta: {c.kind} bounds a Wasserstein distance by epsilon; "
                          "it has no delta")
    wass = {"order": 1.0 if c.order is None else c.order,
            "metric": None if c.metric is None else tuple(tuple(row) for row in c.metric)}
    div = {"divergence": c.divergence, "alpha": c.alpha, "direction": c.direction or "both"}
    if c.kind in ("distp", "divergence_distp", "xdistp", "wdistp"):
        if selectors and selectors[0] != "pairs":
            raise ConfigError(f"{field}.{selectors[0]}: {c.kind} pairs items; use pairs")
        if c.pairs is not None:
            _count(f"{field}.pairs", len(c.pairs), budget, f"{len(c.pairs)} pairs")
            pairs = _pairs(f"{field}.pairs", c.pairs, items, "item")
        elif len(items) < 2:
            raise ConfigError(f"{field}.pairs: {c.kind} needs at least two items")
        else:
            n = len(items) * (len(items) - 1) // 2
            _count(field, n, budget, f"{c.kind} on all pairs of {len(items)} items is {n} pairs")
            pairs = tuple(itertools.combinations(range(len(items)), 2))
        if c.kind == "divergence_distp":
            return DivergenceDistP(pairs=pairs, epsilon=c.epsilon, name=name, **div)
        if c.kind == "xdistp":
            return ExtendedDistP(pairs=pairs, epsilon=c.epsilon, name=name, transport=c.transport or "w1",
                                 **div)
        if c.kind == "wdistp":
            return WassersteinDistP(pairs=pairs, epsilon=c.epsilon, name=name, **wass)
        return DistP(pairs=pairs, epsilon=c.epsilon, delta=delta, name=name)
    if c.kind == "xdp" and c.delta is not None:
        raise ConfigError(f"{field}.delta: xdp has no delta")
    pairs = None
    if c.pairs is not None:
        _count(f"{field}.pairs", len(c.pairs), budget, f"{len(c.pairs)} pairs")
        pairs = _pairs(f"{field}.pairs", c.pairs, xs.labels, "input")
    elif selectors:
        pairs = _neighbours(field, c, cfg.inputs, xs, budget)
    if c.kind == "ldp":
        return LocalDP(epsilon=c.epsilon, delta=delta, pairs=pairs, name=name)
    if c.kind == "divergence_dp":
        return DivergenceDP(epsilon=c.epsilon, pairs=pairs, name=name, **div)
    if c.kind == "wdp":
        return WassersteinDP(epsilon=c.epsilon, pairs=pairs, name=name, **wass)
    return ExtendedDP(epsilon=c.epsilon, pairs=pairs, name=name)


def _support(cfg: MechanismCfg, xs: Domain, ys: Domain) -> np.ndarray | None:
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


def _build(cfg: ConfigCfg, base_dir: Path) -> Problem:
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
    item_names = tuple(it.name for it in items)
    budget = [MAX_PAIRS]
    constraints = [_constraint(i, c, cfg, xs, item_names, budget)
                   for i, c in enumerate(cfg.constraints)]
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
        objective=cfg.objective.to_json(),
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
        cfg = ConfigCfg.model_validate(d)
    except ValidationError as e:
        raise ConfigError(_one_line(e)) from None
    try:
        problem = _build(cfg, Path(base_dir))
    except SpecError as e:
        raise ConfigError(str(e)) from None
    opt = cfg.optimizer.model_dump()
    seed = opt.pop("seed")
    return problem, OptimizerOptions(seed, {k: v for k, v in opt.items() if v is not None})


def load_config(path: str | Path) -> tuple[Problem, OptimizerOptions]:
    """Reads a TOML config file; relative paths in it resolve against its folder.

    Raises:
      ConfigError: the file is missing, is not valid TOML, or describes an invalid problem.
    """
    path = Path(path)
    try:
        text = read_text(path, limit=MAX_CONFIG_BYTES, what="a config")
    except FileFormatError as e:
        raise ConfigError(str(e)) from None
    depth = _toml_nesting(text)
    if depth > MAX_NESTING:
        raise ConfigError(f"{path}: nested {depth} levels deep (arrays, inline tables or the parts "
                          f"of one dotted key), more than the {MAX_NESTING} allowed")
    try:
        d = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    except RecursionError:  # not reached within MAX_NESTING; a last line of defence
        raise ConfigError(f"{path}: invalid TOML: nested too deeply") from None
    return config_from_dict(d, base_dir=path.parent)


# The strings and comments of a TOML text. Each alternative consumes its match in one pass (an
# unterminated string runs to the end of its line, or of the text for a multi-line one), so
# that substituting them is linear in the text even for hostile input.
_TOML_SKIP = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*+(?:"{3,5}|\Z)'  # the closing """ may follow one or two "
    r"|'''(?:[^']|'(?!''))*+(?:'{3,5}|\Z)"
    r'|"(?:[^"\\\n]|\\[^\n])*+(?:"|$)'
    r"|'[^'\n]*+(?:'|$)"
    r"|#[^\n]*+",
    re.DOTALL | re.MULTILINE,
)
_SEPARATORS = np.frombuffer(b",=[]{}\n", dtype=np.uint8)


def _toml_nesting(text: str) -> int:
    """An upper bound on how deeply ``text`` nests, found without parsing it (linear time).

    Outside strings and comments: the deepest nesting of ``[``/``{``, and one more than the most
    dots in a run without a separator (``, = [ ] { }`` or a newline), i.e. the parts of a dotted
    key. A valid config nests at most 7 levels.
    """
    plain = _TOML_SKIP.sub("s", text).encode("utf-8", "surrogatepass")
    b = np.frombuffer(plain, dtype=np.uint8)
    at = np.flatnonzero((b == ord("[")) | (b == ord("{")) | (b == ord("]")) | (b == ord("}")))
    steps = np.where((b[at] == ord("[")) | (b[at] == ord("{")), 1, -1)
    depth = int(np.cumsum(steps).max(initial=0))
    dots = np.flatnonzero(b == ord("."))
    if not dots.size:
        return depth
    runs = np.searchsorted(np.flatnonzero(np.isin(b, _SEPARATORS)), dots)
    return max(depth, int(np.bincount(runs).max()) + 1)
