"""Constraint families: each kind owns its validation, its blocks, its JSON form and its report.

A family is a frozen dataclass with a ``kind`` tag, registered in :data:`FAMILIES` by
:func:`register_constraint`. The rest of diffpriv reaches a kind only through this interface:

* ``check(problem, field)`` — a validated copy (raises :class:`SpecError` naming ``field``);
* ``blocks(problem, index)`` — its comparisons as typed blocks (:mod:`._blocks`);
* ``to_dict()`` / ``from_dict(d, where)`` — its JSON form inside a problem or a certificate;
* ``budget_text()`` / ``level_text(level, epsilon_at_delta)`` — how its budget and its
  certified level read in a summary.

Adding a kind is one module with such a class, decorated with :func:`register_constraint`, plus its tests;
the certifier needs nothing new as long as its blocks use a divergence the certifier knows.
numpy only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from diffpriv.problems._blocks import Block, MixtureBlock, PairBlock
from diffpriv.problems._checks import SpecError, _check_budget, _integer, _is_sequence, add_kind

__all__ = ["FAMILIES", "register_constraint", "DistP", "LocalDP", "ExtendedDP", "constraint_from_dict",
           "check_pairs"]

FAMILIES: dict[str, type] = {}
"""Every constraint family by its ``kind``."""


def register_constraint(cls: type) -> type:
    """Class decorator: makes a constraint family known by its ``kind`` (JSON, configs)."""
    return add_kind(FAMILIES, cls, "constraint")


def constraint_from_dict(d: Any, where: str):
    """The constraint a JSON dict describes, by its ``kind`` (a SpecError naming ``where``)."""
    if not isinstance(d, Mapping):
        raise SpecError(f"{where}: expected a mapping, got {type(d).__name__}")
    kind = d.get("kind")
    if kind not in FAMILIES:
        raise SpecError(f"{where}.kind: unknown constraint kind {kind!r}")
    return FAMILIES[kind].from_dict(d, where)


def check_pairs(field: str, pairs, n: int, what: str) -> tuple[tuple[int, int], ...]:
    """``pairs`` as a tuple of index pairs in ``[0, n)``, two different indices each."""
    if not _is_sequence(pairs):
        raise SpecError(f"{field}: expected a sequence of pairs, got {pairs!r}")
    out = []
    for j, p in enumerate(pairs):
        where = f"{field}[{j}]"
        if not _is_sequence(p) or len(p) != 2:
            raise SpecError(f"{where}: a pair must be a sequence of two indices, got {p!r}")
        a, b = _integer(where, p[0]), _integer(where, p[1])
        for k in (a, b):
            if not 0 <= k < n:
                raise SpecError(f"{where}: {what} index {k} out of range (have {n})")
        if a == b:
            raise SpecError(f"{where}: pair ({a}, {b}) compares {what} {a} with itself")
        out.append((a, b))
    if not out:
        raise SpecError(f"{field}: no pairs")
    return tuple(out)


def _pairs_json(pairs):
    return None if pairs is None else [[int(i), int(j)] for i, j in pairs]


def _get(d: Mapping[str, Any], key: str, where: str, *default):
    if key in d:
        return d[key]
    if default:
        return default[0]
    raise SpecError(f"{where}: missing field {key!r}")


def _pairs_from(d: Mapping[str, Any], where: str):
    pairs = _get(d, "pairs", where, None)
    if pairs is not None and not isinstance(pairs, (list, tuple)):
        raise SpecError(f"{where}.pairs: expected a list, got {type(pairs).__name__}")
    return None if pairs is None else tuple(pairs)


def _check_name(field: str, name) -> None:
    if not isinstance(name, str):
        raise SpecError(f"{field}.name: expected a string, got {name!r}")


def _input_pairs(problem, pairs) -> np.ndarray:
    """``[K, 2]`` input pairs: the given ones, or all pairs ``x < x'``."""
    if pairs is not None:
        return np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    a, b = np.triu_indices(problem.inputs.size, k=1)
    return np.stack([a, b], axis=1)


class _InputPairs:
    """Families over pairs of inputs (``pairs``; ``None`` = all pairs), in every profile."""

    pairs_of: ClassVar[str] = "inputs"
    """What ``pairs`` index (a config lists them by name, :mod:`diffpriv.config._schema`)."""

    def _checked_pairs(self, problem, field: str):
        if self.pairs is None:
            return None
        return check_pairs(f"{field}.pairs", self.pairs, problem.inputs.size, "input")

    def counts(self, problem) -> tuple[int, int]:
        """``(pair comparisons, mixture comparisons)`` it expands to, without building them."""
        nx = problem.inputs.size
        n = nx * (nx - 1) // 2 if self.pairs is None else len(self.pairs)
        return n * len(problem.profiles), 0


def _row_pairs(problem, index: int, pairs, eps, scale, delta: float = 0.0, scaled: bool = False,
               **measure) -> PairBlock:
    """One pair block: every input pair in every profile. ``measure``: the block's divergence
    fields (default: the max-divergence, or the hockey-stick when ``delta > 0``)."""
    ns = len(problem.profiles)
    k = pairs.shape[0]
    measure = {"divergence": "max" if delta == 0 else "hockey_stick", **measure}
    return PairBlock(
        constraint=index,
        s=np.repeat(np.arange(ns), k),
        a=np.tile(pairs[:, 0], ns),
        b=np.tile(pairs[:, 1], ns),
        eps=np.tile(eps, ns),
        scale=np.tile(scale, ns),
        delta=delta,
        scaled=scaled,
        **measure,
    )


class _PairsJSON:
    """``to_dict`` / ``from_dict`` of a family whose JSON is ``_json_fields()`` plus ``pairs``."""

    def to_dict(self) -> dict[str, Any]:
        return {**self._json_fields(), "pairs": _pairs_json(self.pairs)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str):
        return cls(pairs=_pairs_from(d, where), **cls._fields_from(d, where))


class _EpsilonDelta:
    """How an (ε, δ) budget and its certified level read (pure when δ = 0)."""

    def budget_text(self) -> str:
        return f"ε={self.epsilon:g}, δ={self.delta:g}" if self.delta else f"ε={self.epsilon:g}"

    def level_text(self, level: float, epsilon_at_delta: float | None) -> str:
        if self.delta:
            return f"δ(ε)={level:.4g}, ε(δ)={epsilon_at_delta:.4g}"
        return f"ε={level:.6g}"


@register_constraint
@dataclasses.dataclass(frozen=True)
class DistP(_EpsilonDelta):
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
    kind: ClassVar[str] = "distp"
    pairs_of: ClassVar[str] = "items"

    def check(self, problem, field: str) -> DistP:
        _check_name(field, self.name)
        return dataclasses.replace(
            self,
            epsilon=_check_budget(f"{field}.epsilon", self.epsilon),
            delta=_check_budget(f"{field}.delta", self.delta, upper=1.0),
            pairs=check_pairs(f"{field}.pairs", self.pairs, len(problem.items), "item"),
        )

    def counts(self, problem) -> tuple[int, int]:
        """``(pair comparisons, mixture comparisons)`` it expands to, without building them."""
        return 0, len(self.pairs)

    def blocks(self, problem, index: int) -> tuple[Block, ...]:
        pairs = np.asarray(self.pairs, dtype=np.int64).reshape(-1, 2)
        items = problem.items
        k = pairs.shape[0]
        return (MixtureBlock(
            constraint=index,
            sa=[items[i].profile for i in pairs[:, 0]],
            wa=np.stack([items[i].dist for i in pairs[:, 0]]),
            sb=[items[j].profile for j in pairs[:, 1]],
            wb=np.stack([items[j].dist for j in pairs[:, 1]]),
            items=pairs,
            eps=np.full(k, self.epsilon),
            scale=np.ones(k),
            delta=self.delta,
            divergence="max" if self.delta == 0 else "hockey_stick",
        ),)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "epsilon": float(self.epsilon),
                "delta": float(self.delta), "pairs": _pairs_json(self.pairs)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> DistP:
        return cls(pairs=_pairs_from(d, where), epsilon=_get(d, "epsilon", where),
                   delta=_get(d, "delta", where, 0.0), name=_get(d, "name", where))


@register_constraint
@dataclasses.dataclass(frozen=True)
class LocalDP(_InputPairs, _EpsilonDelta):
    """(ε, δ)-local DP: rows ``A[s, x]`` and ``A[s, x']`` for adjacent inputs, in every profile.

    ``pairs=None`` means all pairs of inputs.
    """

    epsilon: float
    delta: float = 0.0
    pairs: tuple[tuple[int, int], ...] | None = None
    name: str = "ldp"
    kind: ClassVar[str] = "ldp"

    def check(self, problem, field: str) -> LocalDP:
        _check_name(field, self.name)
        return dataclasses.replace(
            self,
            epsilon=_check_budget(f"{field}.epsilon", self.epsilon),
            delta=_check_budget(f"{field}.delta", self.delta, upper=1.0),
            pairs=self._checked_pairs(problem, field),
        )

    def blocks(self, problem, index: int) -> tuple[Block, ...]:
        pairs = _input_pairs(problem, self.pairs)
        k = pairs.shape[0]
        return (_row_pairs(problem, index, pairs, np.full(k, self.epsilon), np.ones(k),
                           self.delta, scaled=False),)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "epsilon": float(self.epsilon),
                "delta": float(self.delta), "pairs": _pairs_json(self.pairs)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> LocalDP:
        return cls(epsilon=_get(d, "epsilon", where), delta=_get(d, "delta", where, 0.0),
                   pairs=_pairs_from(d, where), name=_get(d, "name", where))


@register_constraint
@dataclasses.dataclass(frozen=True)
class ExtendedDP(_InputPairs):
    """Extended DP (geo-indistinguishability): ``D∞(A[s,x] ‖ A[s,x']) ≤ ε · d(x, x')``.

    ``d`` is the problem's input metric. ``pairs=None`` means all pairs of inputs. The level is
    reported as the effective ε, the largest ``D∞ / d(x, x')``.
    """

    epsilon: float
    pairs: tuple[tuple[int, int], ...] | None = None
    name: str = "xdp"
    kind: ClassVar[str] = "xdp"

    @property
    def delta(self) -> float:
        """Extended DP is pure: 0."""
        return 0.0

    def check(self, problem, field: str) -> ExtendedDP:
        _check_name(field, self.name)
        if problem.input_metric is None and problem.inputs.coords is None:
            raise SpecError(f"{field}: extended DP needs input coordinates or an input metric")
        out = dataclasses.replace(self, epsilon=_check_budget(f"{field}.epsilon", self.epsilon),
                                  pairs=self._checked_pairs(problem, field))
        out._check_budgets(problem, field)
        return out

    def _check_budgets(self, problem, field: str) -> None:
        """Every distance ``d(x, x')`` and budget ``ε·d(x, x')`` must be a finite float64 (an
        infinite one would certify any level, and ``0 · ∞`` is NaN). The pairs are measured only
        when a cheap upper bound of every distance (the largest metric entry, or ``√dim`` times
        the widest side of the coordinates' bounding box) does not already settle it."""
        with np.errstate(over="ignore", invalid="ignore"):  # inf and NaN are reported below
            if problem.input_metric is not None:
                bound = float(problem.input_metric.max(initial=0.0))
            else:
                c = problem.inputs.coords
                bound = float((c.max(axis=0) - c.min(axis=0)).max()) * np.sqrt(c.shape[1])
            if np.isfinite(2.0 * bound * max(self.epsilon, 1.0)):  # 2: room for rounding
                return
            pairs = _input_pairs(problem, self.pairs)
            d = problem.pair_distances(pairs[:, 0], pairs[:, 1])
            eps = self.epsilon * d
        labels = problem.inputs.labels
        if not np.all(np.isfinite(d)):
            a, b = pairs[np.argmin(np.isfinite(d))]
            raise SpecError(f"{field}: inputs {labels[a]!r} and {labels[b]!r} are farther apart "
                            "than float64 can represent")
        if not np.all(np.isfinite(eps)):
            k = int(np.argmin(np.isfinite(eps)))
            a, b = pairs[k]
            raise SpecError(f"{field}.epsilon: the budget ε·d(x, x') = {self.epsilon:g} · "
                            f"{d[k]:g} for inputs {labels[a]!r}, {labels[b]!r} overflows float64")

    def blocks(self, problem, index: int) -> tuple[Block, ...]:
        pairs = _input_pairs(problem, self.pairs)
        d = problem.pair_distances(pairs[:, 0], pairs[:, 1])  # finite, and so is ε·d (check)
        return (_row_pairs(problem, index, pairs, self.epsilon * d, d, 0.0, scaled=True),)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "epsilon": float(self.epsilon),
                "pairs": _pairs_json(self.pairs)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> ExtendedDP:
        return cls(epsilon=_get(d, "epsilon", where), pairs=_pairs_from(d, where),
                   name=_get(d, "name", where))

    def budget_text(self) -> str:
        return f"ε={self.epsilon:g} per unit d"

    def level_text(self, level: float, epsilon_at_delta: float | None) -> str:
        return f"ε={level:.6g}"
