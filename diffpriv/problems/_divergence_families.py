"""Divergence privacy families: divergence DistP, divergence DP and extended DistP.

Kawamoto & Murakami 2019, *Local distribution obfuscation via probability coupling* (seed 000),
generalise distribution privacy from the max-divergence to any divergence ``D``:

* :class:`DivergenceDistP` — ``(ε, D)``-DistP: ``D(P_i‖P_j) ≤ ε`` and ``D(P_j‖P_i) ≤ ε`` for
  every protected pair of items (their Def. of ``(ε, D)``-DistP; with profiles, ``P_i`` is the
  lift of item ``i``'s distribution through its profile's table);
* :class:`DivergenceDP` — ``(ε, D)``-DP: the same between the rows ``A[s, x]``, ``A[s, x']`` of
  adjacent inputs (``pairs``; all pairs by default), in every profile;
* :class:`ExtendedDistP` — ``(ε, W, D)``-XDistP: ``D(P_i‖P_j) ≤ ε · W(λ_i, λ_j)`` where ``W`` is
  the Earth mover's distance ``W1`` or ``W∞`` of the two *input* distributions under the problem's
  input metric. The level is reported per unit of ``W``.

``D`` is one of ``kl``, ``reverse_kl``, ``tv``, ``chi2``, ``hellinger`` (½-normalised, seed 000's
Table I), ``renyi`` (order ``alpha > 0``; ``alpha = 1`` is ``kl``, ``alpha = inf`` is ``max``) and
``max`` (the max-divergence: pure DistP / local DP / the linear case). Both directions are bounded
unless ``direction = "forward"`` (``D(P‖Q)`` only, ``P`` the first of each pair). Total variation
is linear too — ``TV(P, Q) = Σ_y max(0, P[y] − Q[y])`` is the hockey-stick at ``ε = 0``, so
``TV ≤ ε`` is ``(0, ε)``-DistP — and its blocks say so (the LP and PDHG solve it exactly); in
extended DistP it stays a divergence. The certifier
computes every level exactly in float64 with outward rounding
(:mod:`diffpriv.measures._divergences`).

``W`` is computed once per problem, when its blocks are built, as a **certified lower bound** (the
budget ``ε·W`` must not be overestimated): for ``W1`` the dual potentials of POT's exact network
simplex, checked by :func:`~diffpriv.measures._transport.check_dual`; for ``W∞`` a Hall set,
checked in exact rationals by :func:`~diffpriv.measures._transport.check_hall`. numpy only
(POT is imported on first use, by the transport module).
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np

from diffpriv.measures._divergences import NAMES, divergence
from diffpriv.problems._blocks import Block, MixtureBlock
from diffpriv.problems._checks import SpecError, _check_budget
from diffpriv.problems._constraints import (
    _check_name,
    _get,
    _input_pairs,
    _InputPairs,
    _pairs_from,
    _pairs_json,
    _PairsJSON,
    _row_pairs,
    check_pairs,
    register_constraint,
)

__all__ = ["DIVERGENCE_NAMES", "DivergenceDistP", "DivergenceDP", "ExtendedDistP", "TRANSPORTS"]

DIVERGENCE_NAMES = NAMES
"""The divergences a divergence family may name (:data:`diffpriv.measures._divergences.NAMES`)."""

TRANSPORTS = ("w1", "winf")
"""The input-distribution distances of extended DistP."""

_DISTANCES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Per problem (while it lives): ``{(transport, i, j): certified lower bound of W(λ_i, λ_j)}``,
so that ``W`` of a pair is solved once however many ``xdistp`` constraints name it (what
:func:`diffpriv.certification.certify_cost` counts)."""



class _Divergence:
    """Validation, JSON and text shared by the families that name a divergence."""

    def _checked_divergence(self, field: str) -> dict[str, Any]:
        """The validated ``divergence``, ``alpha`` and ``direction`` (Rényi of order 1 and ∞
        become ``kl`` and ``max``)."""
        name, alpha = self.divergence, self.alpha
        if name not in DIVERGENCE_NAMES:
            raise SpecError(f"{field}.divergence: must be one of {', '.join(DIVERGENCE_NAMES)}, "
                            f"got {name!r}")
        if self.direction not in ("both", "forward"):
            raise SpecError(f"{field}.direction: must be 'both' or 'forward', got {self.direction!r}")
        if name != "renyi":
            if alpha is not None:
                raise SpecError(f"{field}.alpha: only the 'renyi' divergence takes an order, "
                                f"got alpha = {alpha!r} with {name!r}")
            return {"divergence": name, "alpha": None, "direction": self.direction}
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
            raise SpecError(f"{field}.alpha: the Rényi order must be a number > 0, got {alpha!r}")
        alpha = float(alpha)
        if not alpha > 0 or not (alpha <= 1e300 or alpha == math.inf):
            raise SpecError(f"{field}.alpha: the Rényi order must be > 0 (and at most 1e300, or "
                            f"inf), got {alpha!r}")
        if alpha == 1.0:
            return {"divergence": "kl", "alpha": None, "direction": self.direction}
        if alpha == math.inf:
            return {"divergence": "max", "alpha": None, "direction": self.direction}
        return {"divergence": "renyi", "alpha": alpha, "direction": self.direction}

    def _block_fields(self) -> dict[str, Any]:
        if self._linear_tv:  # TV(P, Q) = Σ max(0, P − Q): the hockey-stick at ε = 0, δ = TV budget
            return {"divergence": "hockey_stick" if self.epsilon > 0 else "max", "alpha": None,
                    "directed": False, "delta": float(self.epsilon)}
        return {"divergence": self.divergence, "alpha": self.alpha,
                "directed": self.direction == "forward"}

    def _block_eps(self, k: int) -> np.ndarray:
        return np.zeros(k) if self._linear_tv else np.full(k, float(self.epsilon))

    @property
    def _linear_tv(self) -> bool:
        """Total variation is linear: ``TV ≤ ε`` is ``(0, ε)``-DistP (both directions: TV is
        symmetric, so ``direction`` does not matter). Extended DistP keeps it as a divergence
        (its budget varies per pair)."""
        return self.divergence == "tv" and self.kind != "xdistp"

    @property
    def delta(self) -> float:
        """The δ of the blocks: the TV budget for total variation (a hockey-stick at ε = 0), else
        0 (a divergence budget has no δ)."""
        return float(self.epsilon) if self._linear_tv else 0.0

    def divergence_text(self) -> str:
        """``"KL"``, ``"Rényi(α=2)"``, …, with ``"→"`` for one direction."""
        return divergence(self.divergence, self.alpha).text + (" →" if self.direction == "forward" else "")

    def budget_text(self) -> str:
        return f"{self.divergence_text()} ≤ {self.epsilon:g}"

    def level_text(self, level: float, epsilon_at_delta: float | None) -> str:
        return f"{self.divergence_text()} = {level:.6g}"

    def _json_fields(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "divergence": self.divergence,
                "alpha": None if self.alpha is None else float(self.alpha),
                "direction": self.direction, "epsilon": float(self.epsilon)}

    @staticmethod
    def _fields_from(d: Mapping[str, Any], where: str) -> dict[str, Any]:
        return {"divergence": _get(d, "divergence", where), "alpha": _get(d, "alpha", where, None),
                "direction": _get(d, "direction", where, "both"), "epsilon": _get(d, "epsilon", where),
                "name": _get(d, "name", where)}


def _item_mixtures(problem, index: int, pairs, eps, scale, fields, scaled: bool = False) -> MixtureBlock:
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    items = problem.items
    return MixtureBlock(
        constraint=index,
        sa=[items[i].profile for i in pairs[:, 0]],
        wa=np.stack([items[i].dist for i in pairs[:, 0]]),
        sb=[items[j].profile for j in pairs[:, 1]],
        wb=np.stack([items[j].dist for j in pairs[:, 1]]),
        items=pairs,
        eps=eps,
        scale=scale,
        scaled=scaled,
        **fields,
    )


@register_constraint
@dataclasses.dataclass(frozen=True)
class DivergenceDistP(_PairsJSON, _Divergence):
    """``(ε, D)``-distribution privacy between pairs of protected items (module docstring)."""

    pairs: tuple[tuple[int, int], ...]
    divergence: str
    epsilon: float
    alpha: float | None = None
    direction: Literal["both", "forward"] = "both"
    name: str = "divergence_distp"
    kind: ClassVar[str] = "divergence_distp"
    pairs_of: ClassVar[str] = "items"

    def check(self, problem, field: str) -> DivergenceDistP:
        _check_name(field, self.name)
        return dataclasses.replace(
            self, epsilon=_check_budget(f"{field}.epsilon", self.epsilon),
            pairs=check_pairs(f"{field}.pairs", self.pairs, len(problem.items), "item"),
            **self._checked_divergence(field))

    def counts(self, problem) -> tuple[int, int]:
        """``(pair comparisons, mixture comparisons)`` it expands to."""
        return 0, len(self.pairs)

    def blocks(self, problem, index: int) -> tuple[Block, ...]:
        k = len(self.pairs)
        return (_item_mixtures(problem, index, self.pairs, self._block_eps(k), np.ones(k),
                               self._block_fields()),)



@register_constraint
@dataclasses.dataclass(frozen=True)
class DivergenceDP(_InputPairs, _PairsJSON, _Divergence):
    """``(ε, D)``-DP: rows ``A[s, x]``, ``A[s, x']`` of adjacent inputs, in every profile
    (``pairs=None``: all pairs of inputs)."""

    divergence: str
    epsilon: float
    alpha: float | None = None
    direction: Literal["both", "forward"] = "both"
    pairs: tuple[tuple[int, int], ...] | None = None
    name: str = "divergence_dp"
    kind: ClassVar[str] = "divergence_dp"

    def check(self, problem, field: str) -> DivergenceDP:
        _check_name(field, self.name)
        return dataclasses.replace(
            self, epsilon=_check_budget(f"{field}.epsilon", self.epsilon),
            pairs=self._checked_pairs(problem, field), **self._checked_divergence(field))

    def blocks(self, problem, index: int) -> tuple[Block, ...]:
        pairs = _input_pairs(problem, self.pairs)
        k = pairs.shape[0]
        return (_row_pairs(problem, index, pairs, self._block_eps(k), np.ones(k), **self._block_fields()),)



def input_ground(problem) -> np.ndarray:
    """``[X, X]``: the stored input metric, or the Euclidean distances of the input coordinates
    rounded down (a lower bound of ``W`` under it is one under the exact distances)."""
    if problem.input_metric is not None:
        return problem.input_metric
    from diffpriv.problems._problem import euclidean_bound  # lazy: _problem imports the families

    return euclidean_bound(problem.inputs.coords, problem.inputs.coords, "lower")


def transport_lower_bound(problem, a: np.ndarray, b: np.ndarray, transport: str,
                          ground: np.ndarray | None = None) -> float:
    """A certified lower bound of ``W(â, b̂)`` (``"w1"`` or ``"winf"``) under the input metric.

    ``a``, ``b``: the items' weight vectors *as stored*; the distributions are ``â = a / Σa`` and
    ``b̂ = b / Σb`` exactly (never a float renormalisation: ``W∞`` jumps where masses tie, and
    its Hall set is checked in rationals on these). The metric is ``ground``, by default
    :func:`input_ground` (pass it to compute it once for many pairs). A solver that fails gives
    0, a true lower bound (the budget ``ε·W`` is then 0).
    """
    from diffpriv.measures import _transport as ot  # lazy: POT loads on first use

    if ground is None:
        ground = input_ground(problem)
    try:
        if transport == "w1":
            sol = ot.wasserstein(a, b, ground)
            return 0.0 if sol.dual is None else ot.check_dual(a, b, ground, *sol.dual)
        sol = ot.w_infinity(a, b, ground)
    except ot.TransportError:
        return 0.0
    return 0.0 if sol.hall is None else ot.check_hall(a, b, ground, sol.hall)


@register_constraint
@dataclasses.dataclass(frozen=True)
class ExtendedDistP(_Divergence):
    """``(ε, W, D)``-extended DistP: ``D(P_i‖P_j) ≤ ε·W(λ_i, λ_j)`` (module docstring).

    ``transport``: ``"w1"`` (Earth mover's distance) or ``"winf"``, of the two items' input
    distributions under the problem's input metric (Euclidean on the input coordinates unless
    ``input_metric`` is given). Items of different profiles are compared the same way. A pair
    at distance 0 must have equal output laws.
    """

    pairs: tuple[tuple[int, int], ...]
    divergence: str
    epsilon: float
    transport: Literal["w1", "winf"] = "w1"
    alpha: float | None = None
    direction: Literal["both", "forward"] = "both"
    name: str = "xdistp"
    kind: ClassVar[str] = "xdistp"
    pairs_of: ClassVar[str] = "items"

    def check(self, problem, field: str) -> ExtendedDistP:
        _check_name(field, self.name)
        if self.transport not in TRANSPORTS:
            raise SpecError(f"{field}.transport: must be 'w1' or 'winf', got {self.transport!r}")
        if problem.input_metric is None and problem.inputs.coords is None:
            raise SpecError(f"{field}: extended DistP needs input coordinates or an input metric")
        out = dataclasses.replace(
            self, epsilon=_check_budget(f"{field}.epsilon", self.epsilon),
            pairs=check_pairs(f"{field}.pairs", self.pairs, len(problem.items), "item"),
            **self._checked_divergence(field))
        if problem.input_metric is not None:  # the O(X³) triangle check: once per distinct metric
            from diffpriv.measures._transport import check_metric

            try:
                check_metric(problem.input_metric, f"{field}: input_metric")
            except ValueError as e:
                raise SpecError(str(e)) from None
        return out

    def counts(self, problem) -> tuple[int, int]:
        """``(pair comparisons, mixture comparisons)`` it expands to."""
        return 0, len(self.pairs)

    def distances(self, problem) -> np.ndarray:
        """``[K]`` certified lower bounds of ``W(λ_i, λ_j)`` for the pairs: one transport per
        distinct pair of the problem, however many constraints name it (:data:`_DISTANCES`), on
        one ground (:func:`input_ground`)."""
        items, known = problem.items, _DISTANCES.setdefault(problem, {})
        todo = [(self.transport, i, j) for i, j in self.pairs if (self.transport, i, j) not in known]
        if todo:
            ground = input_ground(problem)
            for key in dict.fromkeys(todo):
                _, i, j = key
                known[key] = transport_lower_bound(problem, items[i].dist, items[j].dist,
                                                   self.transport, ground)
        return np.array([known[(self.transport, i, j)] for i, j in self.pairs])

    def blocks(self, problem, index: int) -> tuple[Block, ...]:
        w = self.distances(problem)
        with np.errstate(over="ignore"):
            eps = self.epsilon * w * (1.0 - 2.0**-52)  # rounded down: a budget, never above ε·W
        if not np.all(np.isfinite(eps)):
            raise SpecError(f"constraints[{index}].epsilon: the budget ε·W overflows float64")
        return (_item_mixtures(problem, index, self.pairs, eps, w, self._block_fields(), scaled=True),)

    def to_dict(self) -> dict[str, Any]:
        return {**self._json_fields(), "transport": self.transport, "pairs": _pairs_json(self.pairs)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> ExtendedDistP:
        return cls(pairs=_pairs_from(d, where), transport=_get(d, "transport", where, "w1"),
                   **cls._fields_from(d, where))

    def budget_text(self) -> str:
        return f"{self.divergence_text()} ≤ {self.epsilon:g}·{self.transport.upper()}"

    def level_text(self, level: float, epsilon_at_delta: float | None) -> str:
        return f"ε={level:.6g} per unit {self.transport.upper()}"
