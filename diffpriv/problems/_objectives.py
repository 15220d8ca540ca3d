"""Objectives as objects: what a table's loss is, how it is computed, and its JSON form.

An objective is a frozen dataclass with a ``kind`` tag, registered in :data:`OBJECTIVES` by
:func:`register_objective`. The rest of diffpriv reaches an objective through this interface:

* ``value(problem, table)`` — its value for a table, in float64 (the certifier's number);
* ``to_json()`` / ``from_json(value, where)`` — its JSON form in a problem or a certificate: the
  bare ``kind`` string when it has no parameters (``"expected"``), else a mapping with ``kind``;
* ``text`` — how it reads in a summary (``"expected loss"``);
* ``epigraph`` — for the linear solvers: ``""`` when the objective is ``Σ C[s,x,y] A[s,x,y]``
  for a fixed cost ``C``; ``"rows"`` when it is the largest of the per-row losses
  ``Σ_y A[s,x,y] L[x,y]`` over rows of positive prior, ``"entries"`` when it is the largest of
  the weighted entries ``L[x,y] A[s,x,y]`` over those rows (both minimised through an epigraph
  variable ``t`` with one linear constraint per row or per entry).

A solver that cannot handle an objective says so up front with a one-line
:class:`~diffpriv.SpecError`. numpy only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from diffpriv.problems._checks import SpecError, add_kind

__all__ = ["OBJECTIVES", "ExpectedLoss", "LargestEntry", "Objective", "WorstCaseLoss", "objective_from_json",
           "register_objective", "require_linear"]

OBJECTIVES: dict[str, type] = {}
"""Every objective by its ``kind``."""


def register_objective(cls: type) -> type:
    """Class decorator: makes an objective known by its ``kind`` (JSON, configs)."""
    return add_kind(OBJECTIVES, cls, "objective")


class Objective:
    """Base of the objectives (see the module docstring for the interface)."""

    kind: ClassVar[str]
    text: ClassVar[str]
    epigraph: ClassVar[str]

    def value(self, problem, table: np.ndarray) -> float:
        raise NotImplementedError

    def to_json(self) -> str | dict[str, Any]:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {"kind": self.kind, **fields} if fields else self.kind

    @classmethod
    def from_json(cls, value: Any, where: str) -> Objective:
        if isinstance(value, str):
            return cls()
        params = {k: v for k, v in value.items() if k != "kind"}
        try:
            return cls(**params)
        except TypeError:
            names = ", ".join(f.name for f in dataclasses.fields(cls)) or "none"
            raise SpecError(f"{where}: objective {cls.kind!r} takes the parameters {names}, "
                            f"got {', '.join(map(str, params))}") from None


@register_objective
@dataclasses.dataclass(frozen=True)
class ExpectedLoss(Objective):
    """The expected loss ``U(A) = Σ_{s,x,y} π[s,x] A[s,x,y] L[x,y]``."""

    kind: ClassVar[str] = "expected"
    text: ClassVar[str] = "expected loss"
    epigraph: ClassVar[str] = ""

    def value(self, problem, table: np.ndarray) -> float:
        return problem.expected_loss(table)


@register_objective
@dataclasses.dataclass(frozen=True)
class WorstCaseLoss(Objective):
    """The largest expected loss of a row of positive prior,
    ``max_{(s,x): π[s,x] > 0} Σ_y A[s,x,y] L[x,y]``."""

    kind: ClassVar[str] = "worst"
    text: ClassVar[str] = "worst-case loss"
    epigraph: ClassVar[str] = "rows"

    def value(self, problem, table: np.ndarray) -> float:
        return problem.worst_loss(table)


@register_objective
@dataclasses.dataclass(frozen=True)
class LargestEntry(Objective):
    """The largest loss-weighted entry of a row of positive prior,
    ``max_{(s,x): π[s,x] > 0, y} L[x,y] A[s,x,y]``.

    With the 0/1 loss it is the largest probability of reporting one given wrong value: the
    objective of Smooth Categorical (LP (6) of Geumlek & Chaudhuri 2019, seed 002), which bounds
    every category's distortion at once rather than a row's total."""

    kind: ClassVar[str] = "entry"
    text: ClassVar[str] = "largest weighted entry"
    epigraph: ClassVar[str] = "entries"

    def value(self, problem, table: np.ndarray) -> float:
        weighted = np.asarray(table, dtype=np.float64) * problem.loss[None]
        return float(weighted[problem.prior > 0].max(initial=0.0))


def objective_from_json(value: Any, where: str = "objective") -> Objective:
    """The objective a JSON value (a ``kind`` string or a mapping with ``kind``) or an
    :class:`Objective` describes; a one-line :class:`SpecError` naming ``where`` otherwise."""
    if isinstance(value, Objective):
        return value
    kind = value.get("kind") if isinstance(value, Mapping) else value
    if not isinstance(kind, str) or kind not in OBJECTIVES:
        names = [repr(k) for k in OBJECTIVES]
        known = " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
        raise SpecError(f"{where}: must be {known}, got {kind!r}")
    return OBJECTIVES[kind].from_json(value, where)


def require_linear(problem, solver: str, *, blocks: bool = True) -> None:
    """A one-line :class:`SpecError` unless ``problem``'s objective is one the linear solvers
    (PDHG, the LP reference) handle — :class:`ExpectedLoss`, :class:`WorstCaseLoss` or
    :class:`LargestEntry` — and (with ``blocks``) every comparison block is linear."""
    if not isinstance(problem.objective, LINEAR):
        raise SpecError(f"objective: the {solver} handles 'expected', 'worst' and 'entry', "
                        f"not {problem.objective.kind!r}")
    for block in problem.blocks() if blocks else ():
        if not block.linear:
            c = problem.constraints[block.constraint]
            raise SpecError(f"constraints[{block.constraint}]: the {solver} handles linear constraints "
                            f"(max-divergence, hockey-stick), not the {block.divergence!r} divergence of "
                            f"{c.kind} {c.name!r}")


LINEAR = (ExpectedLoss, WorstCaseLoss, LargestEntry)
"""The objectives the linear solvers handle (a linear cost, or an epigraph over rows or entries)."""
