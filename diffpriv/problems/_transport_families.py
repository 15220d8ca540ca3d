"""Wasserstein differential privacy (Yang, Qi & Zhou 2024, seed 001): point and distribution forms.

* :class:`WassersteinDP` — ``(μ, ε)``-WDP: ``W_μ(A[s, x], A[s, x']) ≤ ε`` for adjacent inputs
  (``pairs``; all pairs by default), in every profile;
* :class:`WassersteinDistP` — its distribution form ``W_μ(P_i, P_j) ≤ ε`` for pairs of protected
  items (``P_i`` the lift of item ``i``'s distribution through its profile's table).

``W_μ`` is the order-``μ`` Wasserstein distance (``μ ≥ 1``) of the two output laws under a ground
metric on the outputs: ``metric`` if given (an ``[n_out, n_out]`` matrix, checked to be a metric),
else the Euclidean distance between the output coordinates. The certifier computes every level
with POT's exact network simplex and certifies it from the optimal coupling
(:func:`~diffpriv.measures._transport.check_coupling`, an outward-rounded upper bound).
numpy only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from diffpriv.problems._blocks import Block, MixtureBlock
from diffpriv.problems._checks import SpecError, _check_budget
from diffpriv.problems._constraints import (
    _check_name,
    _get,
    _input_pairs,
    _InputPairs,
    _PairsJSON,
    _row_pairs,
    check_pairs,
    register_constraint,
)

__all__ = ["WassersteinDP", "WassersteinDistP", "output_ground"]


def output_ground(problem, metric) -> np.ndarray:
    """The ground metric of the outputs: ``metric`` as stored, or the Euclidean distances of the
    output coordinates rounded up (:func:`~diffpriv.problems._problem.euclidean_bound`: ``W_μ`` is
    non-decreasing in the ground, so a bound under it is a bound under the exact distances)."""
    if metric is not None:
        return np.asarray(metric, dtype=np.float64)
    c = problem.outputs.coords
    from diffpriv.problems._problem import euclidean_bound  # lazy: _problem imports the families
    return euclidean_bound(c, c, "upper")


class _Transport:
    """Validation, JSON and text shared by the two forms."""

    delta: ClassVar[float] = 0.0

    def _checked(self, problem, field: str) -> dict[str, Any]:
        _check_name(field, self.name)
        order = self.order
        if isinstance(order, bool) or not isinstance(order, (int, float)) or not (
                math.isfinite(order) and order >= 1.0):
            raise SpecError(f"{field}.order: the Wasserstein order μ must be a number ≥ 1, got {order!r}")
        if self.metric is None:
            if problem.outputs.coords is None:
                raise SpecError(f"{field}: Wasserstein DP needs output coordinates or a metric")
            metric = None
        else:
            from diffpriv.measures._transport import check_metric  # numpy only

            metric = np.asarray(self.metric, dtype=np.float64)
            n = problem.outputs.size
            if metric.shape != (n, n):
                raise SpecError(f"{field}.metric: shape {metric.shape}, expected ({n}, {n})")
            try:
                check_metric(metric, f"{field}.metric")
            except ValueError as e:
                raise SpecError(str(e)) from None
            metric = tuple(tuple(float(v) for v in row) for row in metric)
        return {"epsilon": _check_budget(f"{field}.epsilon", self.epsilon), "order": float(order),
                "metric": metric}

    def _block_fields(self, problem) -> dict[str, Any]:
        return {"divergence": "wasserstein", "alpha": self.order,
                "ground": output_ground(problem, self.metric)}

    def budget_text(self) -> str:
        return f"W{self.order:g} ≤ {self.epsilon:g}"

    def level_text(self, level: float, epsilon_at_delta: float | None) -> str:
        return f"W{self.order:g} = {level:.6g}"

    def _json_fields(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "epsilon": float(self.epsilon),
                "order": float(self.order),
                "metric": None if self.metric is None else [list(row) for row in self.metric]}

    @staticmethod
    def _fields_from(d: Mapping[str, Any], where: str) -> dict[str, Any]:
        metric = _get(d, "metric", where, None)
        if metric is not None:
            if not isinstance(metric, (list, tuple)) or not all(isinstance(r, (list, tuple)) for r in metric):
                raise SpecError(f"{where}.metric: expected a matrix (a list of rows)")
            metric = tuple(tuple(row) for row in metric)
        return {"epsilon": _get(d, "epsilon", where), "order": _get(d, "order", where, 1.0),
                "metric": metric, "name": _get(d, "name", where)}


@register_constraint
@dataclasses.dataclass(frozen=True)
class WassersteinDP(_InputPairs, _PairsJSON, _Transport):
    """``(μ, ε)``-Wasserstein DP between rows of adjacent inputs (module docstring)."""

    epsilon: float
    order: float = 1.0
    pairs: tuple[tuple[int, int], ...] | None = None
    metric: tuple[tuple[float, ...], ...] | None = None
    name: str = "wdp"
    kind: ClassVar[str] = "wdp"

    def check(self, problem, field: str) -> WassersteinDP:
        return dataclasses.replace(self, pairs=self._checked_pairs(problem, field),
                                   **self._checked(problem, field))

    def blocks(self, problem, index: int) -> tuple[Block, ...]:
        pairs = _input_pairs(problem, self.pairs)
        k = pairs.shape[0]
        return (_row_pairs(problem, index, pairs, np.full(k, float(self.epsilon)), np.ones(k),
                           **self._block_fields(problem)),)



@register_constraint
@dataclasses.dataclass(frozen=True)
class WassersteinDistP(_PairsJSON, _Transport):
    """The distribution form ``W_μ(P_i, P_j) ≤ ε`` for pairs of items (module docstring)."""

    pairs: tuple[tuple[int, int], ...]
    epsilon: float
    order: float = 1.0
    metric: tuple[tuple[float, ...], ...] | None = None
    name: str = "wdistp"
    kind: ClassVar[str] = "wdistp"
    pairs_of: ClassVar[str] = "items"

    def check(self, problem, field: str) -> WassersteinDistP:
        return dataclasses.replace(
            self, pairs=check_pairs(f"{field}.pairs", self.pairs, len(problem.items), "item"),
            **self._checked(problem, field))

    def counts(self, problem) -> tuple[int, int]:
        """``(pair comparisons, mixture comparisons)`` it expands to."""
        return 0, len(self.pairs)

    def blocks(self, problem, index: int) -> tuple[Block, ...]:
        pairs = np.asarray(self.pairs, dtype=np.int64).reshape(-1, 2)
        items, k = problem.items, pairs.shape[0]
        return (MixtureBlock(
            constraint=index, sa=[items[i].profile for i in pairs[:, 0]],
            wa=np.stack([items[i].dist for i in pairs[:, 0]]), sb=[items[j].profile for j in pairs[:, 1]],
            wb=np.stack([items[j].dist for j in pairs[:, 1]]), items=pairs,
            eps=np.full(k, float(self.epsilon)), scale=np.ones(k), **self._block_fields(problem)),)

