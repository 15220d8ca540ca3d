"""The linear relaxation first: divergence constraints dropped, the rest solved exactly, the table
repaired against every constraint.

A problem with f-divergence or Wasserstein constraints *and* linear ones beside (DistP, local or
extended DP, geo-indistinguishability, with δ = 0 or δ > 0) has a relaxation with the linear ones
only: an LP, which HiGHS or column generation solve with a certified bound. Its feasible set holds
the problem's, so that bound is a lower bound of the problem's optimum too. Where the divergences
are slack at the optimum (the linear constraints are the stricter), the relaxation's optimal table
is the problem's up to a boundary: its zeros can make a divergence infinite (``P > 0 = Q`` under
KL), and the certifier's least mixing (:func:`diffpriv.certification._repair.repair`) moves it
inside at a cost of ``t · (loss of the mixing law − loss)`` for a ``t`` of 10⁻¹¹–10⁻³ where the
divergence is slack. The run has converged when the repaired table is within ``gap_tol`` of the
relaxation's bound.

Where a divergence binds, the repaired table is far above the bound and the run stops
``"stalled"``: under ``method = "auto"`` the next solver of the route runs, with the relaxation's
bound as a floor of its own and its table as a candidate (:class:`._optimizer.Optimizer`).

Measured on ``benchmarks/divergence_optimality.py``'s 6×6 KL-DP and Rényi-2-DP grids with
approximate local DP (ε = 1, δ = 0.01) or geo-indistinguishability (ε = 1 per cell) beside, 5
seeds each (``benchmarks/RESULTS.md``): on 11 of the 20 runs the repaired table was within
0.25 % of the relaxation's bound (at 0 on 9), in 0.1–1 s. The 4 approximate-LDP runs on which
mirror-prox alone had stopped ``"stalled"``, its bound 1.3–21 % below its table, all converged:
3 by the relaxation, 1 by mirror-prox on the relaxation's bound.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from diffpriv.problems._problem import Problem
from diffpriv.solvers._driver import Chunk, Declared, Outcome, Status, relative_gap

__all__ = ["ROUNDS", "TIGHTER", "RelaxedRun", "relaxation"]


def relaxation(problem: Problem) -> Problem | None:
    """``problem`` with its linear constraints only (those none of whose comparison blocks is
    nonlinear), or ``None`` when it has none or nothing else."""
    nonlinear = {b.constraint for b in problem.blocks() if not b.linear}
    linear = tuple(c for i, c in enumerate(problem.constraints) if i not in nonlinear)
    if not linear or not nonlinear:
        return None
    return dataclasses.replace(problem, constraints=linear)


ROUNDS = 25
"""A relaxation of pure pair bounds only (local or extended DP) runs column generation over output
columns (:mod:`._columns`) for at most this many rounds, whatever its prior: on the 16×16 grids of
``benchmarks/divergence_optimality.py --beside geo`` (Gaussian-mixture priors, which
:func:`._columns.balanced` sends to HiGHS) it converged at ``gap_tol = 10⁻³`` in 14 and 25
rounds (6 and 15 s) on seeds 0 and 2, and was 5 % short after 60 rounds (89 s) on seed 1, where
HiGHS took 282 s on seed 0. Short of converging, its bound still holds."""


TIGHTER = 4
"""The relaxation is solved to ``gap_tol / TIGHTER``, leaving the rest of ``gap_tol`` to the
repair's mixing (6×6 grids with geo-indistinguishability beside KL-DP: at ``gap_tol`` itself the
relaxation stopped 0.5–0.97 % above its bound and the repair added 0.1 %)."""


class RelaxedRun(Declared):
    """The relaxation (:func:`relaxation`) solved by ``opt`` itself under ``method = "auto"`` (HiGHS
    or column generation, as :func:`._methods.relaxes` arranges; column generation over output
    columns for at most :data:`ROUNDS` rounds where it applies), its table repaired against the
    whole ``problem``, as a :class:`._driver.Run` of one chunk. The result's method reads
    ``"relaxation (<the relaxation's solver>)"``. ``progress`` goes to the relaxation's solver
    (its rounds, where column generation runs it)."""

    name, labels = "relaxed", ("relaxation (highs)", "relaxation (columns)")
    takes_progress = hands_over = relaxation = True

    @classmethod
    def accepts(cls, problem) -> bool:
        return relaxation(problem) is not None

    total = 1

    def __init__(self, opt, problem: Problem, seed: int, *, progress=None):
        self.opt, self.problem, self.seed, self.progress = opt, problem, seed, progress
        self.relaxed = relaxation(problem)
        if self.relaxed is None:
            raise ValueError("optimizer: the relaxation needs linear constraints beside nonlinear ones")

    def chunk(self) -> Chunk:
        from diffpriv.certification._repair import RepairError, repair
        from diffpriv.solvers import _columns

        opt = dataclasses.replace(self.opt, gap_tol=self.opt.gap_tol / TIGHTER)
        if _columns.applies(self.relaxed):  # pure pair bounds only
            opt = dataclasses.replace(opt, method="cuts", steps=ROUNDS)
        inner = opt(self.relaxed, seed=self.seed, progress=self.progress)
        self.label, self.bound, self.table = f"relaxation ({inner.method})", inner.lower_bound, inner.table
        self.violation = np.inf  # the relaxation's table, not repaired: the problem's solvers go on
        if inner.status == Status.INFEASIBLE:  # the problem's feasible set is smaller still
            return Chunk(0, np.inf, Status.INFEASIBLE)
        try:
            self.table, self.violation = repair(self.problem, inner.table).table, 0.0
        except RepairError:  # no output common to every row to mix with
            return Chunk(0, np.inf, Status.STALLED)
        gap = relative_gap(self.problem.objective_value(self.table), self.bound)
        return Chunk(0, gap, Status.CONVERGED if gap <= self.opt.gap_tol else Status.STALLED)

    def finish(self, status: Status) -> Outcome:
        return Outcome(self.table, self.bound, status, self.violation, plan="exact", method=self.label)
