"""Presolve: the table rows and outputs no part of the problem sees are removed before a solver
runs, and put back exactly afterwards (no JAX).

A row (input ``x``, all profiles) can be dropped when its prior is 0 in every profile and every
compared law gives it weight 0 — real location data binned on a grid leaves most cells so
(``benchmarks/scaling.py --sacramento``). This holds only where every comparison is between item
laws (:class:`~diffpriv.problems._blocks.MixtureBlock`): a pair block (local, extended,
divergence or Wasserstein DP) bounds rows themselves. The objective then ignores the row (the
expected loss weighs it by its prior; the worst-case and largest-entry objectives range over rows
of positive prior), and so does every constraint, so the reduced problem has the same optimum,
and a lower bound of it bounds the whole problem. An output no kept row's support allows is
dropped too (not beside a Wasserstein comparison, whose ground metric spans the outputs).

The reduced problem's comparisons are the whole problem's, restricted (not rebuilt from its
constraints, whose budgets — e.g. extended DistP's ``ε·W`` — are computed once, on the whole
problem). A dropped row is put back sending all its mass to its least-loss allowed output; the
certificate is always of the whole problem.

First, a constraint every table meets (:func:`~diffpriv.problems._blocks.vacuous` on each of its
comparisons: a TV budget ``≥ 1`` (a hockey-stick at ``δ ≥ 1``), a squared-Hellinger one ``≥ 1``, a
Wasserstein budget at least the outputs' largest distance) is dropped: it leaves the feasible set
as it is, while a solver that tightens budgets to land inside them would solve another problem
(mirror-prox on TV-DP at budget 1 on the Sacramento sales stopped ``"stalled"`` 0.025 km above
the optimum of 0, with a bound of 0). Only where asked (``vacuous=True``):
:class:`._optimizer.Optimizer` asks under ``method = "auto"`` (an explicit method solves every
constraint as given); the batches of :func:`._optimizer.solve_batch` and
:func:`._optimizer.solve_budgets` do not (the first scales the budgets after presolve, the second
needs the same constraints at every budget).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from diffpriv.problems._blocks import MixtureBlock
from diffpriv.problems._blocks import vacuous as met_by_all
from diffpriv.problems._problem import Domain, Item, Problem

__all__ = ["Presolved", "presolve"]


@dataclasses.dataclass(frozen=True, eq=False)
class Presolved:
    """A problem (``full``) and its reduction (``problem``) to the inputs ``rows`` and the outputs
    ``outs`` (sorted indices into ``full``'s)."""

    full: Problem
    problem: Problem
    rows: np.ndarray
    outs: np.ndarray

    @property
    def kept(self) -> dict[str, list[int]]:
        """``{"inputs": [kept, all], "outputs": [kept, all]}`` (what a result records), and
        ``"constraints": [kept, all]`` where some were dropped."""
        kept = {"inputs": [int(self.rows.size), self.full.shape[1]],
                "outputs": [int(self.outs.size), self.full.shape[2]]}
        n, m = len(self.problem.constraints), len(self.full.constraints)
        return kept if n == m else {**kept, "constraints": [n, m]}

    def restore(self, table: np.ndarray) -> np.ndarray:
        """The whole problem's table ``[S, X, Y]`` of a reduced one: its entries in place, a
        dropped row one-hot on its least-loss allowed output."""
        full = self.full
        ns, nx, ny = full.shape
        loss = np.where(full.support_mask(), full.loss[None], np.inf)
        out = np.zeros((ns, nx, ny))
        np.put_along_axis(out, np.argmin(loss, axis=-1)[..., None], 1.0, axis=-1)
        out[:, self.rows] = 0.0
        out[np.ix_(np.arange(ns), self.rows, self.outs)] = np.asarray(table, np.float64)
        return out

    def restrict(self, table: np.ndarray) -> np.ndarray:
        """A whole problem's table (e.g. a warm start) on the reduced problem, rows renormalised."""
        part = np.asarray(table, np.float64)[np.ix_(np.arange(self.full.shape[0]), self.rows, self.outs)]
        total = part.sum(-1, keepdims=True)
        return np.where(total > 0, part / np.where(total > 0, total, 1.0), 1.0 / part.shape[-1])


def presolve(problem: Problem, *, vacuous: bool = False) -> Presolved | None:
    """The reduction of ``problem`` (module docstring), or ``None`` when nothing can be dropped
    (a comparison of rows, the transport objective or a smooth one — whose value sees every row —,
    or every row and output in use, and, with
    ``vacuous``, no constraint every table meets)."""
    loose = _without_vacuous(problem) if vacuous else problem
    reduced = _rows_and_outputs(loose)
    if reduced is not None:
        return Presolved(problem, *reduced)
    if loose is problem:
        return None
    return Presolved(problem, loose, np.arange(problem.shape[1]), np.arange(problem.shape[2]))


def _without_vacuous(problem: Problem) -> Problem:
    """``problem`` without the constraints every table meets (module docstring); ``problem``
    itself where there are none."""
    blocks = problem.blocks()
    binding = {b.constraint for b in blocks if not met_by_all(b).all()}
    gone = {b.constraint for b in blocks} - binding
    if not gone:
        return problem
    return dataclasses.replace(problem, constraints=tuple(
        c for i, c in enumerate(problem.constraints) if i not in gone))


def _rows_and_outputs(problem: Problem) -> tuple[Problem, np.ndarray, np.ndarray] | None:
    """``(reduced problem, rows, outputs)`` without the rows and outputs nothing sees (module
    docstring), or ``None`` where there are none."""
    blocks = problem.blocks()
    if problem.objective.transport or problem.objective.smooth \
            or not all(isinstance(b, MixtureBlock) for b in blocks):
        return None
    used = (problem.prior > 0).any(axis=0)
    for b in blocks:
        used |= (b.wa != 0).any(axis=0) | (b.wb != 0).any(axis=0)
    rows = np.flatnonzero(used)
    outs = np.arange(problem.shape[2])
    if not any(b.ground is not None for b in blocks):
        outs = np.flatnonzero(problem.support_mask()[:, rows].any(axis=(0, 1)))
    if rows.size == problem.shape[1] and outs.size == problem.shape[2]:
        return None
    return _reduced(problem, rows, outs), rows, outs


def _subset(domain: Domain, keep: np.ndarray) -> Domain:
    coords = None if domain.coords is None else domain.coords[keep]
    return Domain(tuple(domain.labels[i] for i in keep), coords)


def _reduced(problem: Problem, rows: np.ndarray, outs: np.ndarray) -> Problem:
    """``problem`` on ``rows`` and ``outs``, its comparisons restricted rather than rebuilt."""
    profiles = np.arange(problem.shape[0])
    support = None if problem.support is None else problem.support[np.ix_(profiles, rows, outs)]
    metric = None if problem.input_metric is None else problem.input_metric[np.ix_(rows, rows)]
    # Items keep their mass (all of it on ``rows``); the sum is rounded afresh, so renormalise.
    items = tuple(Item(it.name, it.dist[rows] / it.dist[rows].sum(), it.profile) for it in problem.items)
    reduced = dataclasses.replace(
        problem, inputs=_subset(problem.inputs, rows), outputs=_subset(problem.outputs, outs),
        loss=problem.loss[np.ix_(rows, outs)], prior=problem.prior[:, rows], items=items,
        support=support, input_metric=metric)
    blocks = tuple(dataclasses.replace(b, wa=b.wa[:, rows], wb=b.wb[:, rows],
                                       ground=None if b.ground is None else b.ground[np.ix_(outs, outs)])
                   for b in problem.blocks())
    reduced.__dict__["_blocks"] = blocks  # the cached comparisons: the whole problem's, restricted
    return reduced
