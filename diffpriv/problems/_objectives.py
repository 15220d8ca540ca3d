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
  variable ``t`` with one linear constraint per row or per entry);
* ``transport`` — True for :class:`TransportLoss`, whose value is an optimal transport cost:
  the solvers add a conditional transport plan (one more row-stochastic ``[X, Y]`` table) and
  one marginal constraint, which keeps the problem linear;
* ``smooth`` — True for the differentiable objectives no linear or conic solver takes
  (:class:`EstimationError`, :class:`InformationLoss`, :class:`SinkhornLoss`): the gradient search
  runs them and states no lower bound on their optimum; ``convex`` says whether the objective is
  convex in the table (the entropic transport cost is, and simplicial decomposition runs it with a
  bound; the other two are not).

A solver that cannot handle an objective says so up front with a one-line
:class:`~diffpriv.problems.SpecError`. numpy only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np

from diffpriv.problems._checks import SpecError, add_kind

__all__ = ["OBJECTIVES", "EstimationError", "ExpectedLoss", "InformationLoss", "LargestEntry", "Objective",
           "SinkhornLoss", "TransportLoss", "WorstCaseLoss", "objective_from_json", "register_objective",
           "require_linear", "require_linear_blocks"]

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
    transport: ClassVar[bool] = False
    smooth: ClassVar[bool] = False
    convex: ClassVar[bool] = True

    def value(self, problem, table: np.ndarray) -> float:
        raise NotImplementedError

    def check(self, problem) -> None:
        """Raises a one-line :class:`SpecError` where the objective cannot serve ``problem``
        (called as the problem is built; nothing to check for most)."""

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


TRANSPORT_LAWS = ("prior", "profiles", "items")
"""The input laws a :class:`TransportLoss` keeps."""


def _check_laws(laws) -> None:
    """A one-line :class:`SpecError` unless ``laws`` is one of :data:`TRANSPORT_LAWS`."""
    if laws not in TRANSPORT_LAWS:
        raise SpecError(f"objective.laws: must be {', '.join(map(repr, TRANSPORT_LAWS))}, got {laws!r}")


@register_objective
@dataclasses.dataclass(frozen=True)
class TransportLoss(Objective):
    """How far the output law is from the input law: optimal transport costs under the loss,

        ``T(A) = Σ_k c_k · OT_L(λ_k, A#λ_k)``,  ``OT_L(λ, ν) = min_{γ ∈ Π(λ, ν)} Σ γ[x,y] L[x,y]``,

    ``W1(A#λ, λ)`` when the loss is a metric on one domain of inputs and outputs (|x − y| on a
    line, a distance on a grid; with the 0/1 loss, total variation). Which laws ``λ_k`` (each
    lifted through the rows of its profile, :meth:`laws`) is ``laws``:

    * ``"prior"`` — the population: ``λ[x] = Σ_s π[s,x]``, ``A#λ = Σ_{s,x} π[s,x] A[s,x,·]``.
      Beware: the designer knows ``λ``, so the table that ignores its input and reports
      ``λ``'s cheapest image meets every budget with ``T = Σ_x λ[x] min_y L[x,y]`` (0 for a
      metric). Only a support mask (reports limited to a radius, say) makes budgets matter here.
    * ``"profiles"`` — each profile's own law ``π[s,·]/Σ_x π[s,x]`` through its rows, weighted by
      the profile's share: the coupling mechanisms' utility (Kawamoto & Murakami 2019, Prop. 2:
      ``W1(λ_s, μ)`` for a target ``μ``), a trade-off once profile-based privacy ties profiles.
    * ``"items"`` — each protected item's law through its profile's rows, weighted equally: the
      collector estimates each distribution it may face, which distribution privacy must blur.

    ``T`` is convex in ``A`` and at most the matching expected loss (``λ_k[x] A[s,x,y]`` is one
    coupling). The solvers minimise ``Σ_k c_k Σ λ_k[x] B_k[x,y] L[x,y]`` over ``A`` and plan
    tables ``B_k`` (row-stochastic ``[X, Y]``; the plan is ``γ_k = λ_k ⊙ B_k``) with
    ``λ_kᵀ B_k = A#λ_k``: a linear program. The value here is computed exactly (POT's network
    simplex; each plan's cost)."""

    kind: ClassVar[str] = "transport"
    text: ClassVar[str] = "transport loss"
    epigraph: ClassVar[str] = ""
    transport: ClassVar[bool] = True
    laws: Literal["prior", "profiles", "items"] = "prior"

    def __post_init__(self):
        _check_laws(self.laws)

    def to_json(self) -> str | dict[str, Any]:
        return self.kind if self.laws == "prior" else {"kind": self.kind, "laws": self.laws}

    def transport_laws(self, problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rows [K, S, X], inputs [K, X], shares [K])``: law ``k`` lifts the table as
        ``A#λ_k = Σ_{s,x} rows[k,s,x] A[s,x,·]`` and is compared with ``inputs[k]`` (both weights
        sum to 1), with weight ``shares[k]`` (summing to 1). A one-line :class:`SpecError` for
        ``"items"`` on a problem without items."""
        ns, nx, _ = problem.shape
        prior = problem.prior
        if self.laws == "prior":
            return prior[None], prior.sum(axis=0)[None], np.ones(1)
        if self.laws == "profiles":
            mass = prior.sum(axis=1)
            keep = np.flatnonzero(mass > 0)
            rows = np.zeros((keep.size, ns, nx))
            rows[np.arange(keep.size), keep] = prior[keep] / mass[keep, None]
            return rows, rows.sum(axis=1), mass[keep] / mass[keep].sum()
        if not problem.items:
            raise SpecError("objective.laws: 'items' needs protected items; the problem has none")
        rows = np.zeros((len(problem.items), ns, nx))
        for k, item in enumerate(problem.items):
            rows[k, item.profile] = item.dist / item.dist.sum()
        return rows, rows.sum(axis=1), np.full(len(problem.items), 1.0 / len(problem.items))

    def value(self, problem, table: np.ndarray) -> float:
        from diffpriv.measures._transport import wasserstein

        table = np.asarray(table, dtype=np.float64)
        rows, inputs, shares = self.transport_laws(problem)
        total = 0.0
        for w, lam, share in zip(rows, inputs, shares, strict=True):
            nu = np.einsum("sx,sxy->y", w, table)
            total += share * wasserstein(lam / lam.sum(), nu / nu.sum(), problem.loss, 1.0).value
        return float(total)


@register_objective
@dataclasses.dataclass(frozen=True)
class EstimationError(Objective):
    """The mean squared error of the least-squares estimate of the population's input law
    ``λ[x] = Σ_s π[s,x]`` from ``reports`` independent reports,
    ``MSE(A) = (Σ_y q_y ‖B_y‖² − ‖λ‖²) / reports`` with ``q = λĀ``, ``B = Āᵀ(ĀĀᵀ)⁻¹`` and ``Ā`` the
    profiles' tables mixed as the population mixes them
    (:func:`diffpriv.measures._utilities.estimation_mse`; ``inf`` where ``ĀĀᵀ`` is singular): the
    frequency-estimation utility of local DP. With more outputs than inputs (subsets, unary
    encodings) the table can beat randomised response. Not convex in the table."""

    kind: ClassVar[str] = "estimation"
    text: ClassVar[str] = "estimation MSE"
    epigraph: ClassVar[str] = ""
    smooth: ClassVar[bool] = True
    convex: ClassVar[bool] = False
    reports: int = 1000

    def __post_init__(self):
        if isinstance(self.reports, bool) or not isinstance(self.reports, int) or self.reports < 1:
            raise SpecError(f"objective.reports: must be a positive integer, got {self.reports!r}")

    def value(self, problem, table: np.ndarray) -> float:
        from diffpriv.measures._utilities import estimation_mse

        return estimation_mse(problem.prior, table, self.reports)


@register_objective
@dataclasses.dataclass(frozen=True)
class InformationLoss(Objective):
    """Minus the mutual information ``I(X; Y)`` in nats between the true value and the report
    under the joint prior (:func:`diffpriv.measures._utilities.mutual_information`): the table
    that keeps the most information about the inputs. Concave in the table, so its minimum lies
    at a vertex and no bound is stated."""

    kind: ClassVar[str] = "information"
    text: ClassVar[str] = "minus mutual information (nats)"
    epigraph: ClassVar[str] = ""
    smooth: ClassVar[bool] = True
    convex: ClassVar[bool] = False

    def value(self, problem, table: np.ndarray) -> float:
        from diffpriv.measures._utilities import mutual_information

        return -mutual_information(problem.prior, table)


SINKHORN_SCALE = 0.05
"""A :class:`SinkhornLoss` without ``epsilon`` regularises by this share of the loss's mean entry
(ott-jax's own default scale for a cost matrix)."""


@register_objective
@dataclasses.dataclass(frozen=True)
class SinkhornLoss(Objective):
    """The entropic transport cost between each input law and its output law,

        ``T_ε(A) = Σ_k c_k · S_ε(λ_k, A#λ_k)``,
        ``S_ε(λ, ν) = min_{γ ∈ Π(λ, ν)} Σ γ[x,y] L[x,y] + ε·KL(γ ‖ λ⊗ν)``,

    the laws ``λ_k`` and weights ``c_k`` as :class:`TransportLoss` takes them (``laws``: here
    ``"profiles"`` unless told, each profile's own law; ``"items"``; ``"prior"``). Cuturi's (2013)
    entropic regularisation of the transport loss: smooth in the table and convex (``S_ε`` is
    jointly convex in its two laws, and ``A#λ`` is linear in ``A``), at least the transport cost
    and at most it plus ``ε·ln min(X, Y)`` (the transport plan's mutual information). Simplicial
    decomposition (:mod:`diffpriv.solvers._simplicial`) and the gradient search run it, by ott-jax's
    Sinkhorn on the loss as a cost matrix (ott's grid geometry needs a cost that adds up over the
    axes, which the Euclidean distance does not).
    ``epsilon`` is in the loss's units; unset, :data:`SINKHORN_SCALE` of the loss's mean entry.
    The value here is computed in float64 numpy by POT's log-domain Sinkhorn
    (:func:`diffpriv.measures._utilities.entropic_transport`), and a summary also gives the
    certified table's exact transport cost (:meth:`exact`)."""

    kind: ClassVar[str] = "sinkhorn"
    text: ClassVar[str] = "entropic transport loss"
    epigraph: ClassVar[str] = ""
    smooth: ClassVar[bool] = True
    laws: Literal["prior", "profiles", "items"] = "profiles"
    epsilon: float | None = None

    def __post_init__(self):
        _check_laws(self.laws)
        e = self.epsilon
        if e is not None and (isinstance(e, bool) or not isinstance(e, int | float) or not math.isfinite(e)
                              or e <= 0):
            raise SpecError(f"objective.epsilon: must be a positive number (the entropic "
                            f"regularisation, in the loss's units), got {e!r}")

    def to_json(self) -> str | dict[str, Any]:
        return {"kind": self.kind, "laws": self.laws,
                **({} if self.epsilon is None else {"epsilon": float(self.epsilon)})}

    def check(self, problem) -> None:
        self.transport_laws(problem)  # 'items' without items: one line
        if not np.all(np.isfinite(problem.loss)):
            raise SpecError("objective: the entropic transport cost needs a finite loss everywhere")

    def regularisation(self, problem) -> float:
        """``ε`` in the loss's units (``epsilon``, or :data:`SINKHORN_SCALE` of the mean loss)."""
        if self.epsilon is not None:
            return float(self.epsilon)
        mean = float(np.mean(problem.loss))
        return SINKHORN_SCALE * mean if mean > 0 else 1.0

    def transport_laws(self, problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`TransportLoss.transport_laws` of the same ``laws``."""
        return TransportLoss(self.laws).transport_laws(problem)

    def output_laws(self, problem, table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(inputs [K, X], outputs [K, Y], shares [K])``: each law and its image through ``table``."""
        rows, inputs, shares = self.transport_laws(problem)
        return inputs, np.einsum("ksx,sxy->ky", rows, np.asarray(table, np.float64)), shares

    def value(self, problem, table: np.ndarray) -> float:
        from diffpriv.measures._utilities import entropic_transport

        eps = self.regularisation(problem)
        inputs, outputs, shares = self.output_laws(problem, table)
        return float(sum(c * entropic_transport(a / a.sum(), b / b.sum(), problem.loss, eps)
                         for a, b, c in zip(inputs, outputs, shares, strict=True)))

    def exact(self, problem, table: np.ndarray) -> float:
        """The exact transport cost of ``table`` under the same laws (:class:`TransportLoss`)."""
        return TransportLoss(self.laws).value(problem, table)


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
    (PDHG, the LP reference) handle — :class:`ExpectedLoss`, :class:`WorstCaseLoss`,
    :class:`LargestEntry` or :class:`TransportLoss` — and (with ``blocks``) every comparison
    block is linear."""
    if not isinstance(problem.objective, LINEAR):
        raise SpecError(f"objective: the {solver} handles 'expected', 'worst', 'entry' and "
                        f"'transport', not {problem.objective.kind!r}")
    if blocks:
        require_linear_blocks(problem, solver)


def require_linear_blocks(problem, solver: str) -> None:
    """A one-line :class:`SpecError` unless every comparison block of ``problem`` is linear."""
    for block in problem.blocks():
        if not block.linear:
            c = problem.constraints[block.constraint]
            raise SpecError(f"constraints[{block.constraint}]: the {solver} handles linear constraints "
                            f"(max-divergence, hockey-stick), not the {block.divergence!r} divergence of "
                            f"{c.kind} {c.name!r}")


LINEAR = (ExpectedLoss, WorstCaseLoss, LargestEntry, TransportLoss)
"""The objectives the linear solvers handle (a linear cost, an epigraph over rows or entries, or
a transport cost through a plan table)."""
