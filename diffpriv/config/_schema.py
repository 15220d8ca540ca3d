"""The config's schema (pydantic), and its errors as one line.

The fixed tables (domains, loss, profiles, items, mechanism, optimizer) are written out here. A
constraint or an objective takes the form its family declares: the family's dataclass fields
(:data:`~diffpriv.problems._constraints.FAMILIES`, :data:`~diffpriv.problems._objectives.OBJECTIVES`)
become the keys of a table tagged by ``kind``, and :func:`config_schema` joins them in
discriminated unions built from the registries, so a family registered later (one module) is a
config kind too. A family over pairs (``pairs_of``) takes them by name: ``pairs`` of items, or
``pairs`` of inputs, ``neighbours`` or ``radius``. Its values are checked by the family itself when
the problem is built (``check``), with the same field paths.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import re
import types
import typing
from typing import Annotated, Any, Literal, Union

from pydantic import Field, ValidationError, create_model, field_validator, model_validator

from diffpriv.config._distributions import DistributionCfg, Number, StrictModel
from diffpriv.problems._constraints import FAMILIES
from diffpriv.problems._objectives import OBJECTIVES
from diffpriv.solvers._options import Options

__all__ = ["MAX_CONSTRAINTS", "MAX_GRID_CELLS", "MAX_ITEMS", "MAX_LABELS", "MAX_PROFILES", "MAX_SEED",
           "DomainCfg", "GridCfg", "ItemCfg", "LeakageCfg", "LossCfg", "MechanismCfg", "OptimizerCfg",
           "ProfileCfg",
           "config_schema", "family_form", "objective_form", "one_line", "short"]

# Limits: every input is bounded before anything is built from it (docs/cli.md, "Limits").
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
MAX_SEED = 2**32 - 1
"""Largest random seed (``jax.random.PRNGKey`` takes a 32-bit seed)."""

Pair = Annotated[list[str], Field(min_length=2, max_length=2)]


class GridCfg(StrictModel):
    rows: int | None = Field(default=None, ge=1)
    cols: int | None = Field(default=None, ge=1)
    cell: Number = Field(default=1.0, gt=0)
    bbox: list[Number] | None = Field(default=None, min_length=4, max_length=4,
                                      description="[west, south, east, north] in degrees")
    cell_km: Number | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _not_too_large(self) -> GridCfg:
        if self.bbox is not None or self.cell_km is not None:
            if self.bbox is None or self.cell_km is None or {"rows", "cols", "cell"} & self.model_fields_set:
                raise ValueError("give rows, cols (and cell), or bbox and cell_km")
            from diffpriv.problems._geo import bbox_grid

            geo = bbox_grid(self.bbox, self.cell_km)
            rows, cols = geo.rows, geo.cols
        elif self.rows is None or self.cols is None:
            raise ValueError("give rows, cols (and cell), or bbox and cell_km")
        else:
            rows, cols = self.rows, self.cols
        if rows * cols > MAX_GRID_CELLS:
            raise ValueError(f"{rows} × {cols} = {rows * cols} cells, at most {MAX_GRID_CELLS} allowed")
        return self

    @property
    def side(self) -> float:
        """The cells' side: ``cell_km`` over a bounding box, else ``cell``."""
        return self.cell if self.cell_km is None else self.cell_km


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


class LeakageCfg(StrictModel):
    """``[leakage]``: the gain of ``diffpriv leakage``'s g-leakage (one of the two)."""

    gain: list[list[Number]] | None = Field(default=None, min_length=1, max_length=MAX_LABELS)
    gain_within: Number | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _one(self):
        if self.gain is not None and self.gain_within is not None:
            raise ValueError("give gain or gain_within, not both")
        return self


class MechanismCfg(StrictModel):
    support_radius: Number | None = Field(default=None, gt=0)


def _optimizer_schema() -> type[StrictModel]:
    """The ``[optimizer]`` table, derived field by field from the optimizer's settings
    (:class:`diffpriv.solvers._options.Options`: types, bounds, meaning), plus ``seed``.
    A key left out keeps the optimizer's default."""
    hints = typing.get_type_hints(Options)
    kinds = {int: int, float: Number, bool: bool}
    fields: dict[str, Any] = {"seed": (int, Field(default=0, ge=0, le=MAX_SEED))}
    for f in dataclasses.fields(Options):
        bounds = {k: v for k, v in f.metadata.items() if k in ("ge", "gt", "le")}
        kind = kinds.get(hints[f.name], hints[f.name])
        fields[f.name] = (kind | None, Field(default=None, description=f.metadata["doc"], **bounds))
    return create_model("OptimizerCfg", __base__=StrictModel, **fields)


OptimizerCfg = _optimizer_schema()


# -- the forms the families declare ------------------------------------------------------------


def _toml_type(hint: Any, where: str) -> Any:
    """The TOML (pydantic, strict) type of a dataclass field's type: numbers, strings, booleans,
    literals, optional values and variadic tuples (as arrays)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is float:
        return Number
    if hint in (int, str, bool, type(None)) or origin is Literal:
        return hint
    if origin in (Union, types.UnionType):
        return Union[tuple(_toml_type(a, where) for a in args)]  # noqa: UP007 (built from a tuple)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return list[_toml_type(args[0], where)]
    raise TypeError(f"{where}: a field of type {hint!r} has no config form")


def _fields(cls: type, skip: tuple[str, ...]) -> dict[str, Any]:
    """``{name: (type, default)}`` of ``cls``'s dataclass fields but ``skip``."""
    hints = typing.get_type_hints(cls)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in skip or not f.init:
            continue
        default = f.default if f.default is not dataclasses.MISSING else ...
        out[f.name] = (_toml_type(hints[f.name], f"{cls.__name__}.{f.name}"), default)
    return out


@functools.cache
def family_form(cls: type) -> type[StrictModel]:
    """The config table of the constraint family ``cls``: ``kind``, ``name`` (default: the kind
    and the constraint's index) and the family's fields, with its ``pairs`` by name."""
    fields = _fields(cls, ("name", "pairs"))
    pairs_of = getattr(cls, "pairs_of", None)
    if pairs_of is not None:
        fields["pairs"] = (list[Pair] | None, Field(default=None, min_length=1))
    if pairs_of == "inputs":
        fields["neighbours"] = (Literal["grid4", "grid8"] | None, None)
        fields["radius"] = (Number | None, Field(default=None, gt=0))
    return create_model(f"{cls.__name__}Cfg", __base__=StrictModel, kind=(Literal[cls.kind], ...),
                        name=(str | None, None), **fields)


@functools.cache
def objective_form(cls: type) -> type[StrictModel]:
    """The config table of the objective ``cls``: ``kind`` and its fields."""
    return create_model(f"{cls.__name__}Cfg", __base__=StrictModel, kind=(Literal[cls.kind], ...),
                        **_fields(cls, ()))


def _tagged(forms: list[type]) -> Any:
    """One of ``forms`` by its ``kind`` (a discriminated union; one form alone needs no tag)."""
    if len(forms) == 1:
        return forms[0]
    return Annotated[Union[tuple(forms)], Field(discriminator="kind")]  # noqa: UP007


def config_schema() -> type[StrictModel]:
    """The whole config's schema, with the constraint and objective kinds registered now."""
    return _schema(tuple(FAMILIES.values()), tuple(OBJECTIVES.values()))


def _bare_kind(v: Any) -> Any:
    """``objective = "worst"`` is ``objective = { kind = "worst" }``."""
    if isinstance(v, str):
        if v not in OBJECTIVES:
            raise ValueError(f"must be {_choices(OBJECTIVES)}, got {short(v)}")
        return {"kind": v}
    if not isinstance(v, dict):
        raise ValueError(f"expected a string or a table, got {short(v)}")
    return v


@functools.cache
def _schema(families: tuple[type, ...], objectives: tuple[type, ...]) -> type[StrictModel]:
    constraint = _tagged([family_form(c) for c in families])
    objective = _tagged([objective_form(c) for c in objectives])
    return create_model(
        "ConfigCfg", __base__=StrictModel,
        __validators__={"_bare_kind": field_validator("objective", mode="before")(_bare_kind)},
        description=(str, ""),
        objective=(objective, Field(default="expected", validate_default=True)),
        inputs=(DomainCfg, ...),
        outputs=(DomainCfg | None, None),
        loss=(LossCfg, ...),
        profiles=(list[ProfileCfg], Field(default=[], max_length=MAX_PROFILES)),
        items=(list[ItemCfg], Field(default=[], max_length=MAX_ITEMS)),
        constraints=(list[constraint], Field(default=[], max_length=MAX_CONSTRAINTS)),
        mechanism=(MechanismCfg, MechanismCfg()),
        leakage=(LeakageCfg, LeakageCfg()),
        optimizer=(OptimizerCfg, OptimizerCfg()),
    )


# -- errors as one line ----------------------------------------------------------------------


def _untagged(loc: tuple[int | str, ...]) -> tuple[tuple[int | str, ...], str | None]:
    """``loc`` without the tag a discriminated union puts after ``constraints[i]`` or ``objective``,
    and that tag (the kind)."""
    loc = tuple(loc)
    if len(loc) >= 3 and loc[0] == "constraints" and isinstance(loc[1], int) and loc[2] in FAMILIES:
        return loc[:2] + loc[3:], str(loc[2])
    if len(loc) >= 2 and loc[0] == "objective" and loc[1] in OBJECTIVES:
        return loc[:1] + loc[2:], str(loc[1])
    return loc, None


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + _key(str(part))
    return out or "config"


def _key(name: str) -> str:
    """A key as a field path shows it: bare if TOML would write it bare, else quoted (cut)."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) else short(name)


def short(value: Any, width: int = 60) -> str:
    """``repr(value)`` cut to ``width`` characters: a message stays one short line."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _choices(names) -> str:
    names = [repr(n) for n in names]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _models(annotation) -> list[type[StrictModel]]:
    """The config tables an annotation holds (through unions, lists, ``Annotated``)."""
    if isinstance(annotation, type) and issubclass(annotation, StrictModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def _keys_at(model: type[StrictModel] | None, loc: tuple[int | str, ...]) -> list[str]:
    """The keys the table at ``loc`` takes (a location of pydantic's, tags of discriminated unions
    included), ``model`` the whole config's; none where that cannot be told."""
    tables = [model] if model is not None else []
    for part in loc:
        if isinstance(part, int):
            continue
        tagged = [m for m in tables if "kind" in m.model_fields
                  and typing.get_args(m.model_fields["kind"].annotation) == (part,)]
        tables = tagged or [m for t in tables if part in t.model_fields
                            for m in _models(t.model_fields[part].annotation)]
    return sorted({k for t in tables for k in t.model_fields})


def _near(value: Any, names) -> str:
    """`` (did you mean 'x'?)`` where ``value`` is a string close to one of ``names`` (difflib's
    ratio at least 0.6), else ``""``."""
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, [str(n) for n in names], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close and close[0] != value else ""


def one_line(e: ValidationError, model: type[StrictModel] | None = None) -> str:
    """The first error of ``e`` as ``"<field path>: <problem>"`` (and how many more), with the
    nearest kind, or key of the same table of ``model`` (the config's schema), where the one
    given is a typo of it (``did you mean ...?``). A missing key whose typo stands beside it in the
    same table is reported as that typo."""
    errors = e.errors()
    err = errors[0]
    if err["type"] == "missing":
        typos = [x for x in errors if x["type"] == "extra_forbidden" and x["loc"][:-1] == err["loc"][:-1]
                 and _near(x["loc"][-1], [err["loc"][-1]])]
        err = typos[0] if typos else err
    what, msg = err["type"], err["msg"].removeprefix("Value error, ")
    loc, tag = _untagged(err["loc"])
    if what == "extra_forbidden":
        keys = _keys_at(model, err["loc"][:-1])
        msg = (f"{tag} takes no {loc[-1]}" if tag else "unknown key") + _near(loc[-1], keys)
    elif what == "missing":
        msg = "required key is missing"
    elif what == "union_tag_not_found":
        loc, msg = (*loc, "kind"), "required key is missing"
    elif what == "union_tag_invalid":
        kinds = FAMILIES if loc[0] == "constraints" else OBJECTIVES
        given = err["ctx"]["tag"]
        loc, msg = (*loc, "kind"), f"must be {_choices(kinds)}, got {short(given)}{_near(given, kinds)}"
    elif what == "model_type":
        msg = "expected a table"
    elif what == "literal_error":
        expected = re.findall(r"'([^']*)'", err["ctx"]["expected"])
        msg = f"must be {err['ctx']['expected']}, got {short(err['input'])}{_near(err['input'], expected)}"
    elif what.endswith("_type") or what in (
        "greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number"
    ):
        msg = f"{msg}, got {short(err['input'])}"
    msg = msg[:1].lower() + msg[1:]
    more = e.error_count() - 1
    tail = f" (and {more} more error{'s' * (more > 1)})" if more else ""
    return f"{_path(loc)}: {msg}{tail}"
