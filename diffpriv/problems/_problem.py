"""The problem specification: domains, loss, profiles, protected items and constraints.

Everything here is plain numpy data, validated on construction, so that the JAX optimizer,
the LP reference and the numpy certifier all read the same problem. Nothing in this module
imports JAX: the certifier depends on it.

Shapes used throughout:

* ``loss``: ``[n_in, n_out]`` — ``L[x, y]``, the utility loss of reporting ``y`` for ``x``.
* ``prior``: ``[n_profiles, n_in]`` — ``π[s, x]``, joint weights, summing to 1.
* ``support``: ``[n_profiles, n_in, n_out]`` boolean — where the table may put mass.
* an item's ``dist``: ``[n_in]`` — a distribution ``λ`` over inputs, for one profile.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from diffpriv.problems._blocks import Block
from diffpriv.problems._checks import (
    SpecError,
    _check_labels,
    _float_array,
    _integer,
    check_distribution,
)
from diffpriv.problems._constraints import FAMILIES, DistP, ExtendedDP, LocalDP
from diffpriv.problems._geo import LatLon, bbox_grid
from diffpriv.problems._objectives import Objective, objective_from_json

__all__ = [
    "SpecError",
    "Domain",
    "Item",
    "DistP",
    "LocalDP",
    "ExtendedDP",
    "Constraint",
    "Problem",
]





@dataclasses.dataclass(frozen=True, eq=False)
class Domain:
    """A finite domain: unique labels and, optionally, coordinates ``[n, d]`` for each point and
    the coordinates' unit (``"km"``; display only: axis labels). A grid over latitude and
    longitude (:meth:`from_bbox`) also holds its projection ``geo`` (:class:`._geo.LatLon`), which
    maps points in degrees to cells and cells back to degrees."""

    labels: tuple[str, ...]
    coords: np.ndarray | None = None
    units: str = ""
    geo: LatLon | None = None

    def __post_init__(self):
        object.__setattr__(self, "labels", _check_labels("domain.labels", self.labels))
        if self.coords is not None:
            c = _float_array("domain.coords", self.coords)
            if c.ndim == 1:
                c = c[:, None]
            if c.ndim != 2 or c.shape[0] != len(self.labels):
                raise SpecError(
                    f"domain.coords: shape {c.shape} does not match {len(self.labels)} labels"
                )
            if not np.all(np.isfinite(c)):
                raise SpecError("domain.coords: has a NaN or infinite entry")
            object.__setattr__(self, "coords", c)
        if not isinstance(self.units, str) or len(self.units) > 32 or not self.units.isprintable():
            raise SpecError(f"domain.units: expected a short printable string, got {self.units!r}")
        if self.geo is not None:
            if not isinstance(self.geo, LatLon):
                raise SpecError(f"domain.geo: expected a LatLon projection, got {type(self.geo).__name__}")
            if self.geo.rows * self.geo.cols != len(self.labels) or self.coords is None:
                raise SpecError(f"domain.geo: a {self.geo.rows} × {self.geo.cols} grid needs as many "
                                f"labels and coordinates, got {len(self.labels)}")

    @property
    def size(self) -> int:
        """The number of points, ``len(labels)``."""
        return len(self.labels)

    def index(self, label: str, field: str) -> int:
        """The position of ``label``; a SpecError naming ``field`` if there is none."""
        try:
            return self.labels.index(str(label))
        except ValueError:
            raise SpecError(f"{field}: unknown label {label!r}") from None

    @staticmethod
    def grid(rows: int, cols: int, cell: float = 1.0, units: str = "") -> Domain:
        """A ``rows × cols`` grid of square cells; coordinates are the cell centres, in ``units``."""
        if rows < 1 or cols < 1:
            raise SpecError(f"domain.grid: needs rows, cols >= 1, got {rows}x{cols}")
        r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        coords = np.stack([(c.ravel() + 0.5) * cell, (r.ravel() + 0.5) * cell], axis=1)
        labels = tuple(f"r{i}c{j}" for i, j in zip(r.ravel(), c.ravel(), strict=True))
        return Domain(labels, coords, units)

    @staticmethod
    def from_bbox(bbox, cell_km: float) -> Domain:
        """A grid of square cells of ``cell_km`` covering ``bbox`` = ``[west, south, east,
        north]`` in degrees (:mod:`._geo`: equirectangular about its middle latitude); coordinates
        are the cells' centres in km from the south-west corner, and ``geo`` their projection."""
        try:
            geo = bbox_grid(bbox, float(cell_km))
        except (TypeError, ValueError) as e:
            raise SpecError(f"domain.grid.{e}") from None
        grid = Domain.grid(geo.rows, geo.cols, geo.cell, "km")
        return Domain(grid.labels, grid.coords, "km", geo)

    def _geo(self, what: str) -> LatLon:
        if self.geo is None:
            raise SpecError(f"{what}: needs a grid over latitude and longitude (Domain.from_bbox, or "
                            "grid = { bbox = [...], cell_km = ... } in a config)")
        return self.geo

    def cell_of(self, lat, lon) -> np.ndarray:
        """The cell (its index) that holds each point given in degrees; -1 outside the grid."""
        return self._geo("cell_of").cell_of(lat, lon)

    def latlon(self, index, uniform: bool = False, rng: np.random.Generator | None = None):
        """``(lat, lon)`` in degrees of the cells ``index``: their centres, or with ``uniform`` a
        point drawn uniformly in each cell (in the projection's km) by ``rng``."""
        geo, index = self._geo("latlon"), np.asarray(index, np.int64)
        xy = self.coords[index]
        if uniform:
            rng = np.random.default_rng() if rng is None else rng
            xy = xy + (rng.random(xy.shape) - 0.5) * geo.cell
        return geo.to_latlon(xy[..., 0], xy[..., 1])

    def histogram(self, lat, lon, weights=None, smoothing: float = 0.0) -> np.ndarray:
        """The distribution over the cells of points given in degrees (``lat``, ``lon``: arrays or
        a DataFrame's columns), each weighted (default 1), plus ``smoothing`` in every cell;
        points outside the grid are a SpecError."""
        lat, lon = np.asarray(lat, np.float64).ravel(), np.asarray(lon, np.float64).ravel()
        if lat.shape != lon.shape:
            raise SpecError(f"histogram: {lat.size} latitudes but {lon.size} longitudes")
        idx = self.cell_of(lat, lon)
        out = np.flatnonzero(idx < 0)
        if out.size:
            raise SpecError(f"histogram: point {out[0]} ({lat[out[0]]:g}, {lon[out[0]]:g}) lies outside "
                            "the grid")
        w = np.ones(idx.size) if weights is None else np.asarray(weights, np.float64).ravel()
        if w.shape != idx.shape or not np.all(np.isfinite(w)) or np.any(w < 0) or not smoothing >= 0:
            raise SpecError("histogram: needs one finite weight ≥ 0 per point and smoothing ≥ 0")
        counts = np.bincount(idx, weights=w, minlength=self.size) + smoothing
        if counts.sum() <= 0:
            raise SpecError("histogram: the points carry no weight")
        return counts / counts.sum()

    def distances(self, other: Domain) -> np.ndarray:
        """Euclidean distances ``[n_self, n_other]`` between coordinates (see :func:`euclidean`:
        two ``[n_self, n_other]`` arrays of memory, ``+∞`` beyond float64)."""
        if self.coords is None or other.coords is None:
            raise SpecError("loss: euclidean needs coordinates for both domains")
        if self.coords.shape[1] != other.coords.shape[1]:
            raise SpecError("loss: input and output coordinates have different dimensions")
        return euclidean(self.coords, other.coords, outer=True)


def euclidean(a: np.ndarray, b: np.ndarray, *, outer: bool = False) -> np.ndarray:
    """Euclidean distances between the rows of ``a`` ``[n, dim]`` and ``b``.

    ``outer=True``: every pair, ``[n, m]`` for ``b`` of shape ``[m, dim]``; else row by row,
    ``[n]`` for ``b`` of shape ``[n, dim]``. The coordinates are accumulated one at a time,
    ``r ← hypot(r, a_j − b_j)``, so no square is formed: a distance whose square would be
    subnormal (below ``1e-154``) or overflow (above ``1e154``) is still accurate, to
    ``3·dim·u`` relative (``u = 2^-53``: half an ulp for each difference, one ulp per
    ``hypot``). Memory is two result-sized arrays, never ``[n, m, dim]``. A distance beyond
    float64 (a difference that overflows) is ``+∞``, without a warning.
    """
    sub = np.subtract.outer if outer else np.subtract
    with np.errstate(over="ignore"):
        r = sub(a[:, 0], b[:, 0])
        np.abs(r, out=r)
        tmp = np.empty_like(r) if a.shape[1] > 1 else r
        for j in range(1, a.shape[1]):
            sub(a[:, j], b[:, j], out=tmp)
            np.hypot(r, tmp, out=r)
    return r


def euclidean_bound(a: np.ndarray, b: np.ndarray, side: str) -> np.ndarray:
    """``[n, m]`` outward-rounded Euclidean distances between the rows of ``a`` and ``b``.

    ``side="upper"``: every entry ``≥`` the exact distance of the stored coordinates;
    ``"lower"``: ``≤`` it. From :func:`euclidean` (``3·dim·u`` relative, plus ``dim`` ulps of the
    smallest subnormal where the distance itself is subnormal), doubled. A computed 0 is exact (a
    float difference is 0 only for equal numbers), and so is ``+∞`` as an upper bound.
    """
    d = euclidean(a, b, outer=True)
    dim = a.shape[1]
    rel = 2.0 * (3 * dim + 2) * 2.0**-53
    if side == "upper":
        with np.errstate(over="ignore"):
            return np.where(d > 0, d * (1.0 + rel) + 4 * dim * 2.0**-1074, 0.0)
    if side == "lower":
        return np.maximum(d * (1.0 - rel) - 4 * dim * 2.0**-1074, 0.0)
    raise ValueError(f"side: expected 'upper' or 'lower', got {side!r}")


@dataclasses.dataclass(frozen=True, eq=False)
class Item:
    """A protected item: a distribution ``dist`` over inputs, held by users of ``profile``."""

    name: str
    dist: np.ndarray
    profile: int = 0


Constraint = DistP | LocalDP | ExtendedDP




@dataclasses.dataclass(frozen=True, eq=False)
class Problem:
    """An obfuscation design problem on finite domains.

    Args:
      inputs: the input domain ``X``.
      outputs: the output domain ``Y``.
      loss: ``[n_in, n_out]`` non-negative utility loss ``L[x, y]``.
      prior: ``[n_profiles, n_in]`` joint weights ``π[s, x]`` summing to 1.
      items: protected items (distributions over inputs, each with its profile).
      constraints: the privacy constraints.
      profiles: profile names (auxiliary inputs); one profile ``"all"`` when not needed.
      support: optional ``[n_profiles, n_in, n_out]`` boolean mask of allowed outputs.
      input_metric: ``[n_in, n_in]`` metric for extended DP (Euclidean on coordinates if absent).
      objective: an :class:`~diffpriv.problems._objectives.Objective`, or its kind:
        ``"expected"`` (:class:`ExpectedLoss`) minimises ``U(A)``; ``"worst"``
        (:class:`WorstCaseLoss`) minimises the largest expected loss of a row
        ``max_{(s,x): π[s,x]>0} Σ_y A[s,x,y] L[x,y]``; ``"entry"`` (:class:`LargestEntry`) the
        largest weighted entry ``max_{(s,x): π[s,x]>0, y} L[x,y] A[s,x,y]``; ``"transport"``
        (:class:`TransportLoss`, or ``{"kind": "transport", "laws": "items"}``) the transport
        cost under the loss between input laws and their output laws. Stored as the object.
    """

    inputs: Domain
    outputs: Domain
    loss: np.ndarray
    prior: np.ndarray
    items: tuple[Item, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    profiles: tuple[str, ...] = ("all",)
    support: np.ndarray | None = None
    input_metric: np.ndarray | None = None
    objective: Objective | str = "expected"

    def __post_init__(self):
        nx, ny = self.inputs.size, self.outputs.size
        object.__setattr__(self, "profiles", _check_labels("profiles", self.profiles))
        object.__setattr__(self, "objective", objective_from_json(self.objective))
        ns = len(self.profiles)

        loss = _float_array("loss", self.loss)
        if loss.shape != (nx, ny):
            raise SpecError(f"loss: shape {loss.shape}, expected ({nx}, {ny}) = (inputs, outputs)")
        if not np.all(np.isfinite(loss)):
            raise SpecError("loss: has a NaN or infinite entry")
        if np.any(loss < 0):
            raise SpecError(f"loss: has a negative entry {loss.min():g}")
        object.__setattr__(self, "loss", loss)

        prior = _float_array("prior", self.prior)
        if prior.ndim == 1:
            prior = prior[None, :]
        if prior.shape != (ns, nx):
            raise SpecError(f"prior: shape {prior.shape}, expected ({ns}, {nx}) = (profiles, inputs)")
        object.__setattr__(self, "prior", check_distribution("prior", prior.ravel()).reshape(ns, nx))

        items = []
        names: set[str] = set()
        for i, item in enumerate(self.items):
            field = f"items[{i}]"
            if not isinstance(item, Item):
                raise SpecError(f"{field}: expected an Item, got {type(item).__name__}")
            if not isinstance(item.name, str):
                raise SpecError(f"{field}.name: expected a string, got {item.name!r}")
            if item.name in names:
                raise SpecError(f"{field}.name: duplicate item name {item.name!r}")
            names.add(item.name)
            profile = _integer(f"{field}.profile", item.profile)
            if not 0 <= profile < ns:
                raise SpecError(f"{field}.profile: index {profile} out of range for {ns} profiles")
            dist = check_distribution(f"items.{item.name}.distribution", item.dist, nx)
            items.append(Item(item.name, dist, profile))
        object.__setattr__(self, "items", tuple(items))

        if self.support is not None:
            try:
                sup = np.asarray(self.support, dtype=bool)
            except (TypeError, ValueError) as e:
                raise SpecError(f"support: expected a boolean array ({e})") from None
            if sup.shape == (nx, ny):  # one mask for every profile
                sup = np.broadcast_to(sup, (ns, nx, ny)).copy()
            if sup.shape != (ns, nx, ny):
                raise SpecError(f"support: shape {sup.shape}, expected ({ns}, {nx}, {ny})")
            empty = np.argwhere(~sup.any(axis=-1))
            if empty.size:
                s, x = empty[0]
                raise SpecError(f"support: input {self.inputs.labels[x]!r} of profile "
                                f"{self.profiles[s]!r} has no allowed output")
            object.__setattr__(self, "support", sup)

        if self.input_metric is not None:
            d = _float_array("input_metric", self.input_metric)
            if d.shape != (nx, nx):
                raise SpecError(f"input_metric: shape {d.shape}, expected ({nx}, {nx})")
            if not np.all(np.isfinite(d)) or np.any(d < 0):
                raise SpecError("input_metric: must be finite and non-negative")
            if np.any(np.diag(d) != 0):
                x = int(np.flatnonzero(np.diag(d))[0])
                raise SpecError(f"input_metric: must have a zero diagonal, d[{x}, {x}] = {d[x, x]:g}")
            if np.any(d != d.T):
                x, x2 = np.argwhere(d != d.T)[0]
                raise SpecError(f"input_metric: must be symmetric, d[{x}, {x2}] = {d[x, x2]:g} "
                                f"but d[{x2}, {x}] = {d[x2, x]:g}")
            object.__setattr__(self, "input_metric", d)

        object.__setattr__(
            self, "constraints", tuple(self._check_constraint(i, c) for i, c in enumerate(self.constraints))
        )
        if self.objective.transport:
            self.objective.transport_laws(self)  # "items" needs items: one line, before any solve
        self.objective.check(self)

    # -- validation -------------------------------------------------------------------------

    def _check_constraint(self, i: int, c) -> Constraint:
        field = f"constraints[{i}]"
        if type(c) not in FAMILIES.values():
            raise SpecError(f"{field}.kind: unknown constraint {type(c).__name__} "
                            f"(known kinds: {', '.join(FAMILIES)})")
        return c.check(self, field)

    # -- derived quantities -----------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(n_profiles, n_in, n_out)``: the shape of a mechanism table."""
        return len(self.profiles), self.inputs.size, self.outputs.size

    def metric(self) -> np.ndarray:
        """The input metric ``d(x, x')`` used by extended DP."""
        if self.input_metric is not None:
            return self.input_metric
        return self.inputs.distances(self.inputs)

    def support_mask(self) -> np.ndarray:
        """``[n_profiles, n_in, n_out]`` boolean mask (all True without a support)."""
        if self.support is None:
            return np.ones(self.shape, dtype=bool)
        return self.support

    def expected_loss(self, table: np.ndarray) -> float:
        """``U(A) = Σ_{s,x,y} π[s,x] A[s,x,y] L[x,y]`` in float64."""
        return float(np.einsum("sx,sxy,xy->", self.prior, np.asarray(table, np.float64), self.loss))

    def worst_loss(self, table: np.ndarray) -> float:
        """``max_{(s,x): π[s,x]>0} Σ_y A[s,x,y] L[x,y]`` in float64."""
        rows = np.einsum("sxy,xy->sx", np.asarray(table, np.float64), self.loss)
        return float(rows[self.prior > 0].max())

    def scaled(self, factor: float) -> Problem:
        """This problem with every constraint's budget ε times ``factor`` (a point of a
        privacy–utility frontier; divergence and Wasserstein budgets are scaled too)."""
        return dataclasses.replace(self, constraints=tuple(
            dataclasses.replace(c, epsilon=c.epsilon * factor) for c in self.constraints))

    def with_budget(self, name: str, value: float, field: str = "epsilon") -> Problem:
        """This problem with the constraint called ``name``'s budget ``field`` (``"epsilon"`` or
        ``"delta"``) set to ``value``, checked as any constraint's (a point of a frontier).

        Raises:
          ValueError: no constraint or several are called ``name``, or it has no such budget.
        """
        hits = [i for i, c in enumerate(self.constraints) if c.name == name]
        if len(hits) != 1:
            names = ", ".join(c.name for c in self.constraints) or "none"
            raise ValueError(f"{'no constraint' if not hits else f'{len(hits)} constraints'} named "
                             f"{name!r} (the constraints: {names})")
        c = self.constraints[hits[0]]
        if field not in ("epsilon", "delta") or field not in {f.name for f in dataclasses.fields(c)}:
            raise ValueError(f"constraint {name!r} ({type(c).__name__}) has no {field} budget")
        constraints = list(self.constraints)
        constraints[hits[0]] = dataclasses.replace(c, **{field: float(value)})
        return dataclasses.replace(self, constraints=tuple(constraints))

    def __repr__(self) -> str:
        ns, nx, ny = self.shape
        cons = ", ".join(f"{c.name} ({c.kind}, ε={getattr(c, 'epsilon', float('nan')):g})"
                         for c in self.constraints)
        who = f"{ns} profiles × " if ns > 1 else ""
        return (f"Problem({who}{nx} inputs → {ny} outputs, {self.objective.text}, "
                f"{len(self.constraints)} constraint{'s' * (len(self.constraints) != 1)}"
                + (f": {cons}" if cons else "") + ")")

    def objective_value(self, table: np.ndarray) -> float:
        """The value of this problem's objective for ``table``."""
        return self.objective.value(self, table)

    def pair_distances(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``[K]`` input distances ``d(a_k, b_k)`` (the input metric, else Euclidean), without
        building the ``[n_in, n_in]`` matrix."""
        if self.input_metric is not None:
            return self.input_metric[a, b]
        return euclidean(self.inputs.coords[a], self.inputs.coords[b])

    def blocks(self) -> tuple[Block, ...]:
        """Every constraint expanded into typed comparison blocks (:mod:`._blocks`), in
        constraint order. Built once per problem and cached; their arrays are read-only."""
        return self._blocks

    @property
    def linear(self) -> bool:
        """Whether every comparison block is linear in the table (max-divergence or hockey-stick
        in both directions): then the LP reference and PDHG solve the problem."""
        return all(block.linear for block in self.blocks())

    @functools.cached_property
    def _blocks(self) -> tuple[Block, ...]:
        return tuple(b for i, c in enumerate(self.constraints) for b in c.blocks(self, i))
