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
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

__all__ = [
    "SpecError",
    "Domain",
    "Item",
    "DistP",
    "LocalDP",
    "ExtendedDP",
    "Constraint",
    "Problem",
    "Comparisons",
]

_SUM_TOL = 1e-9


class SpecError(ValueError):
    """A problem specification is invalid; the message names the field and the problem."""


def check_distribution(field: str, p: np.ndarray, n: int | None = None) -> np.ndarray:
    """Returns ``p`` as a float64 vector after checking it is a probability distribution."""
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1:
        raise SpecError(f"{field}: expected a vector, got shape {p.shape}")
    if n is not None and p.shape[0] != n:
        raise SpecError(f"{field}: has {p.shape[0]} entries, expected {n}")
    if p.shape[0] == 0:
        raise SpecError(f"{field}: is empty")
    if not np.all(np.isfinite(p)):
        raise SpecError(f"{field}: has a NaN or infinite entry at index {int(np.argmin(np.isfinite(p)))}")
    if np.any(p < 0):
        raise SpecError(f"{field}: has a negative entry {p.min():g} at index {int(np.argmin(p))}")
    total = float(p.sum())
    if abs(total - 1.0) > _SUM_TOL:
        raise SpecError(f"{field}: sums to {total:.6g}, expected 1")
    # Renormalise only beyond rounding, so a stored distribution reads back bit-identical.
    return p / total if abs(total - 1.0) > 2.0**-40 else p


def _check_budget(field: str, value: float, *, upper: float = math.inf, closed_upper=False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise SpecError(f"{field}: expected a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise SpecError(f"{field}: must be finite, got {value}")
    if value < 0:
        raise SpecError(f"{field}: must be >= 0, got {value:g}")
    if value > upper or (value == upper and not closed_upper):
        raise SpecError(f"{field}: must be in [0, {upper:g}), got {value:g}")
    return value


def _check_labels(field: str, labels: Sequence[str]) -> tuple[str, ...]:
    labels = tuple(str(label) for label in labels)
    if not labels:
        raise SpecError(f"{field}: is empty")
    seen: set[str] = set()
    for label in labels:
        if label in seen:
            raise SpecError(f"{field}: duplicate label {label!r}")
        seen.add(label)
    return labels


@dataclasses.dataclass(frozen=True, eq=False)
class Domain:
    """A finite domain: unique labels and, optionally, coordinates ``[n, d]`` for each point."""

    labels: tuple[str, ...]
    coords: np.ndarray | None = None

    def __post_init__(self):
        object.__setattr__(self, "labels", _check_labels("domain.labels", self.labels))
        if self.coords is not None:
            c = np.asarray(self.coords, dtype=np.float64)
            if c.ndim == 1:
                c = c[:, None]
            if c.ndim != 2 or c.shape[0] != len(self.labels):
                raise SpecError(
                    f"domain.coords: shape {c.shape} does not match {len(self.labels)} labels"
                )
            if not np.all(np.isfinite(c)):
                raise SpecError("domain.coords: has a NaN or infinite entry")
            object.__setattr__(self, "coords", c)

    @property
    def size(self) -> int:
        return len(self.labels)

    def index(self, label: str, field: str) -> int:
        try:
            return self.labels.index(str(label))
        except ValueError:
            raise SpecError(f"{field}: unknown label {label!r}") from None

    @staticmethod
    def grid(rows: int, cols: int, cell: float = 1.0) -> Domain:
        """A ``rows × cols`` grid of square cells; coordinates are the cell centres."""
        if rows < 1 or cols < 1:
            raise SpecError(f"domain.grid: needs rows, cols >= 1, got {rows}x{cols}")
        r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        coords = np.stack([(c.ravel() + 0.5) * cell, (r.ravel() + 0.5) * cell], axis=1)
        labels = tuple(f"r{i}c{j}" for i, j in zip(r.ravel(), c.ravel(), strict=True))
        return Domain(labels, coords)

    def distances(self, other: Domain) -> np.ndarray:
        """Euclidean distances ``[n_self, n_other]`` between coordinates."""
        if self.coords is None or other.coords is None:
            raise SpecError("loss: euclidean needs coordinates for both domains")
        if self.coords.shape[1] != other.coords.shape[1]:
            raise SpecError("loss: input and output coordinates have different dimensions")
        diff = self.coords[:, None, :] - other.coords[None, :, :]
        return np.sqrt(np.sum(diff * diff, axis=-1))


@dataclasses.dataclass(frozen=True, eq=False)
class Item:
    """A protected item: a distribution ``dist`` over inputs, held by users of ``profile``."""

    name: str
    dist: np.ndarray
    profile: int = 0


@dataclasses.dataclass(frozen=True)
class DistP:
    """(ε, δ)-distribution privacy between pairs of protected items (both directions).

    With ``delta == 0`` this is pure DistP: ``max_y |ln P_i[y] − ln P_j[y]| ≤ ε`` where
    ``P_i = A[s_i]#λ_i``. With ``delta > 0`` the hockey-stick divergence
    ``Σ_y max(0, P_i[y] − e^ε P_j[y])`` must be at most δ in both directions. Pairs of items
    of different profiles are profile-based privacy graph edges.
    """

    pairs: tuple[tuple[int, int], ...]
    epsilon: float
    delta: float = 0.0
    name: str = "distp"
    kind: Literal["distp"] = "distp"


@dataclasses.dataclass(frozen=True)
class LocalDP:
    """(ε, δ)-local DP: rows ``A[s, x]`` and ``A[s, x']`` for adjacent inputs, in every profile.

    ``pairs=None`` means all pairs of inputs.
    """

    epsilon: float
    delta: float = 0.0
    pairs: tuple[tuple[int, int], ...] | None = None
    name: str = "ldp"
    kind: Literal["ldp"] = "ldp"


@dataclasses.dataclass(frozen=True)
class ExtendedDP:
    """Extended DP (geo-indistinguishability): ``D∞(A[s,x] ‖ A[s,x']) ≤ ε · d(x, x')``.

    ``d`` is the problem's input metric. ``pairs=None`` means all pairs of inputs.
    """

    epsilon: float
    pairs: tuple[tuple[int, int], ...] | None = None
    name: str = "xdp"
    kind: Literal["xdp"] = "xdp"


Constraint = DistP | LocalDP | ExtendedDP


@dataclasses.dataclass(frozen=True, eq=False)
class Comparisons:
    """Every constraint expanded to comparisons of two output distributions.

    Comparison ``k`` bounds the divergence between ``P_k = Σ_x wa[k,x] A[sa[k], x]`` and
    ``Q_k = Σ_x wb[k,x] A[sb[k], x]`` in both directions: the hockey-stick divergence
    ``Σ_y max(0, P − e^{eps[k]} Q)`` must be at most ``delta[k]`` (``delta = 0`` is the pure,
    per-output ratio bound). ``group[k]`` is the index of the constraint it comes from and
    ``scale[k]`` divides its level when reporting (``d(x, x')`` for extended DP, else 1).
    """

    sa: np.ndarray  # [K] int
    wa: np.ndarray  # [K, n_in]
    sb: np.ndarray  # [K] int
    wb: np.ndarray  # [K, n_in]
    eps: np.ndarray  # [K]
    delta: np.ndarray  # [K]
    scale: np.ndarray  # [K]
    group: np.ndarray  # [K] int

    @property
    def size(self) -> int:
        return int(self.sa.shape[0])


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
      objective: ``"expected"`` minimises ``U(A)``; ``"worst"`` minimises the largest expected
        loss of a row ``max_{(s,x): π[s,x]>0} Σ_y A[s,x,y] L[x,y]``.
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
    objective: Literal["expected", "worst"] = "expected"

    def __post_init__(self):
        nx, ny = self.inputs.size, self.outputs.size
        object.__setattr__(self, "profiles", _check_labels("profiles", self.profiles))
        if self.objective not in ("expected", "worst"):
            raise SpecError(f"objective: must be 'expected' or 'worst', got {self.objective!r}")
        ns = len(self.profiles)

        loss = np.asarray(self.loss, dtype=np.float64)
        if loss.shape != (nx, ny):
            raise SpecError(f"loss: shape {loss.shape}, expected ({nx}, {ny}) = (inputs, outputs)")
        if not np.all(np.isfinite(loss)):
            raise SpecError("loss: has a NaN or infinite entry")
        if np.any(loss < 0):
            raise SpecError(f"loss: has a negative entry {loss.min():g}")
        object.__setattr__(self, "loss", loss)

        prior = np.asarray(self.prior, dtype=np.float64)
        if prior.ndim == 1:
            prior = prior[None, :]
        if prior.shape != (ns, nx):
            raise SpecError(f"prior: shape {prior.shape}, expected ({ns}, {nx}) = (profiles, inputs)")
        object.__setattr__(self, "prior", check_distribution("prior", prior.ravel()).reshape(ns, nx))

        items = []
        names: set[str] = set()
        for i, item in enumerate(self.items):
            field = f"items[{i}]"
            if item.name in names:
                raise SpecError(f"{field}.name: duplicate item name {item.name!r}")
            names.add(item.name)
            if not 0 <= int(item.profile) < ns:
                raise SpecError(f"{field}.profile: index {item.profile} out of range for {ns} profiles")
            dist = check_distribution(f"items.{item.name}.distribution", item.dist, nx)
            items.append(Item(item.name, dist, int(item.profile)))
        object.__setattr__(self, "items", tuple(items))

        if self.support is not None:
            sup = np.asarray(self.support, dtype=bool)
            if sup.ndim == 2:
                sup = np.broadcast_to(sup, (ns, nx, ny)).copy()
            if sup.shape != (ns, nx, ny):
                raise SpecError(f"support: shape {sup.shape}, expected ({ns}, {nx}, {ny})")
            empty = np.argwhere(~sup.any(axis=-1))
            if empty.size:
                s, x = empty[0]
                raise SpecError(f"support: input {self.inputs.labels[x]!r} has no allowed output")
            object.__setattr__(self, "support", sup)

        if self.input_metric is not None:
            d = np.asarray(self.input_metric, dtype=np.float64)
            if d.shape != (nx, nx):
                raise SpecError(f"input_metric: shape {d.shape}, expected ({nx}, {nx})")
            if not np.all(np.isfinite(d)) or np.any(d < 0):
                raise SpecError("input_metric: must be finite and non-negative")
            object.__setattr__(self, "input_metric", d)

        object.__setattr__(
            self, "constraints", tuple(self._check_constraint(i, c) for i, c in enumerate(self.constraints))
        )

    # -- validation -------------------------------------------------------------------------

    def _check_pairs(self, field: str, pairs, n: int, what: str) -> tuple[tuple[int, int], ...]:
        out = []
        for p in pairs:
            if len(p) != 2:
                raise SpecError(f"{field}: a pair must have two entries, got {p!r}")
            i, j = int(p[0]), int(p[1])
            for k in (i, j):
                if not 0 <= k < n:
                    raise SpecError(f"{field}: {what} index {k} out of range (have {n})")
            if i == j:
                raise SpecError(f"{field}: pair ({i}, {j}) compares a {what} with itself")
            out.append((i, j))
        if not out:
            raise SpecError(f"{field}: no pairs")
        return tuple(out)

    def _check_constraint(self, i: int, c: Constraint) -> Constraint:
        field = f"constraints[{i}]"
        nx = self.inputs.size
        if isinstance(c, DistP):
            eps = _check_budget(f"{field}.epsilon", c.epsilon)
            delta = _check_budget(f"{field}.delta", c.delta, upper=1.0)
            pairs = self._check_pairs(f"{field}.pairs", c.pairs, len(self.items), "item")
            return dataclasses.replace(c, epsilon=eps, delta=delta, pairs=pairs)
        if isinstance(c, LocalDP):
            eps = _check_budget(f"{field}.epsilon", c.epsilon)
            delta = _check_budget(f"{field}.delta", c.delta, upper=1.0)
            pairs = None if c.pairs is None else self._check_pairs(f"{field}.pairs", c.pairs, nx, "input")
            return dataclasses.replace(c, epsilon=eps, delta=delta, pairs=pairs)
        if isinstance(c, ExtendedDP):
            eps = _check_budget(f"{field}.epsilon", c.epsilon)
            if self.input_metric is None and self.inputs.coords is None:
                raise SpecError(f"{field}: extended DP needs input coordinates or an input metric")
            pairs = None if c.pairs is None else self._check_pairs(f"{field}.pairs", c.pairs, nx, "input")
            return dataclasses.replace(c, epsilon=eps, pairs=pairs)
        raise SpecError(f"{field}.kind: unknown constraint {type(c).__name__}")

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

    def objective_value(self, table: np.ndarray) -> float:
        """The value of this problem's objective for ``table``."""
        if self.objective == "worst":
            return self.worst_loss(table)
        return self.expected_loss(table)

    def comparisons(self) -> Comparisons:
        """Expands every constraint into pairwise comparisons of output distributions."""
        ns, nx, _ = self.shape
        eye = np.eye(nx)
        rows: list[tuple[int, np.ndarray, int, np.ndarray, float, float, float, int]] = []
        for g, c in enumerate(self.constraints):
            if isinstance(c, DistP):
                for i, j in c.pairs:
                    a, b = self.items[i], self.items[j]
                    rows.append((a.profile, a.dist, b.profile, b.dist, c.epsilon, c.delta, 1.0, g))
                continue
            pairs = c.pairs if c.pairs is not None else [
                (x, x2) for x in range(nx) for x2 in range(x + 1, nx)
            ]
            d = self.metric() if isinstance(c, ExtendedDP) else None
            for s in range(ns):
                for x, x2 in pairs:
                    if d is None:
                        rows.append((s, eye[x], s, eye[x2], c.epsilon, c.delta, 1.0, g))
                    else:
                        scale = float(d[x, x2])
                        rows.append((s, eye[x], s, eye[x2], c.epsilon * scale, 0.0, scale, g))
        if not rows:
            z = np.zeros((0,))
            return Comparisons(z.astype(int), np.zeros((0, nx)), z.astype(int), np.zeros((0, nx)),
                               z, z, z, z.astype(int))
        sa, wa, sb, wb, eps, delta, scale, group = zip(*rows, strict=True)
        return Comparisons(
            sa=np.asarray(sa, dtype=np.int64),
            wa=np.stack(wa),
            sb=np.asarray(sb, dtype=np.int64),
            wb=np.stack(wb),
            eps=np.asarray(eps, dtype=np.float64),
            delta=np.asarray(delta, dtype=np.float64),
            scale=np.asarray(scale, dtype=np.float64),
            group=np.asarray(group, dtype=np.int64),
        )
