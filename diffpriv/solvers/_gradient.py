"""The gradient search: a smooth objective no LP or conic solver takes (the estimation error of
the input law, minus the mutual information: :class:`~diffpriv.problems.EstimationError`,
:class:`~diffpriv.problems.InformationLoss`) under linear constraints (DistP, local and extended
DP), privacy certified exactly as everywhere.

**The method.** The augmented Lagrangian of :mod:`._al` on the softmax logits, its linear
objective replaced by the smooth one (:mod:`._utilities`, scaled by its value at the first
start), rounds of L-BFGS steps (with Adam beside, :func:`._al.al_run`) and multiplier updates,
at budgets tightened by :data:`TIGHTEN`; several starts at once (``vmap``): the feasible tables
of :func:`starts` (the expected loss's LP optimum where HiGHS takes it quickly; k-ary randomized
response and the planar Laplace mechanism where they apply, each at the largest parameter the
budgets allow: :func:`diffpriv.mechanisms.calibrate`), a caller's table (``init``), the
loss-shaped table :func:`._al.al_init` starts from, and :data:`RANDOM` random logits. After
each chunk every start's table is repaired by the certifier (:func:`diffpriv.certification._repair.repair`)
and its objective recomputed in float64 numpy (:meth:`~diffpriv.problems.Objective.value`); the
best is kept, the starts' own tables among them (repaired), so the result is never worse than
a calibrated baseline, the expected loss's optimum or the caller's table.

**No bound.** The objectives are not convex in the table, so no lower bound on the optimum is
stated (``-inf``); the run ends ``"converged"`` when a chunk improves the best certified value
by less than ``gap_tol`` of it (:data:`PATIENCE` such chunks), else at its step limit. Its
progress reports that relative improvement where the other runs report their gap.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from diffpriv.problems._objectives import ExpectedLoss
from diffpriv.problems._problem import Problem
from diffpriv.solvers._al import al_init, al_run
from diffpriv.solvers._driver import Chunk, Declared, Outcome, Status
from diffpriv.solvers._linear import linear_data, tighten
from diffpriv.solvers._utilities import static_kind, utility_data, utility_value

__all__ = ["GradientRun", "starts"]

RANDOM = 4
"""Random starts (logits ``N(0, 1)``) beside the baselines' and the loss-shaped one; none where the
objective is convex (the entropic transport cost: every start leads to the same optimum, and each
one more costs a Sinkhorn solve per evaluation)."""
INNER, ROUNDS = 100, 10
"""L-BFGS steps per augmented-Lagrangian round, rounds per compiled chunk (:mod:`._nonlinear`'s)."""
RHO, GROWTH, RHO_MAX = 10.0, 1.5, 1e4
"""The penalty: from 10, 1.5× a round, at most 10⁴ (:mod:`._nonlinear`'s)."""
TIGHTEN = 1e-6
"""The budgets the search runs at: ``ε(1 − TIGHTEN)`` (:mod:`._nonlinear`'s; the certifier's repair
mends the rest)."""
PATIENCE = 2
"""Chunks in a row that improve the best certified value by less than ``gap_tol`` end the run."""
FLOOR = -30.0
"""The least logit a start from a table gets (its zero entries)."""
BASELINES = (("krr", {}), ("planar_laplace", {}))
"""The baselines a start is calibrated from, where they apply."""


def starts(problem: Problem) -> list[tuple[str, np.ndarray]]:
    """``(name, table [S, X, Y])`` of each start at the budgets: the optimum of the expected loss
    under the same constraints where ``"auto"`` would hand that LP to HiGHS (a table of least loss
    per report, at the budgets to HiGHS's tolerance: the certifier's repair mends the rest), and
    each baseline that applies to ``problem``, calibrated to its budgets
    (:func:`diffpriv.mechanisms.calibrate`, certified; those that do not apply or meet no budget
    are left out)."""
    from diffpriv.mechanisms import calibrate
    from diffpriv.solvers._lp import solve_lp
    from diffpriv.solvers._methods import exact_solver

    out = []
    expected = dataclasses.replace(problem, objective=ExpectedLoss())
    if exact_solver(expected) == "highs":
        out.append(("expected-loss optimum", solve_lp(expected).table))
    for name, params in BASELINES:
        try:
            ev = calibrate(problem, name, **params)
        except (ValueError, ArithmeticError):  # (ParameterError is a ValueError) not this problem's
            continue
        if ev.certificate.ok:
            out.append((name, np.asarray(ev.certificate.table, np.float64)))
    return out


@jax.jit(static_argnums=(3,))
def _chunk(data, state, utility, kind):
    run = jax.vmap(lambda st: al_run(data, st, outer=ROUNDS, inner=INNER, solver="lbfgs", growth=GROWTH,
                                     rho_max=RHO_MAX, objective=(kind, utility)))
    return run(state)


@jax.jit
def _tables(data, state):
    theta = state.params[0]
    return jax.nn.softmax(jnp.where(data.mask[None], theta, -jnp.inf), axis=-1)


class GradientRun(Declared):
    """The gradient search (module docstring) as a :class:`._driver.Run`."""

    name, labels = "gradient", ("gradient",)
    takes_init = True
    lean = False
    too_large = "optimizer: this problem is too large for the gradient search's float64 tables"

    @classmethod
    def accepts(cls, problem) -> bool:
        return bool(problem.objective.smooth) and problem.linear

    def __init__(self, opt, problem: Problem, seed: int, init=None):
        from diffpriv.certification._repair import repair

        self.opt, self.problem, self.repair = opt, problem, repair
        ns, nx, ny = problem.shape
        self.data = tighten(linear_data(dataclasses.replace(problem, objective=ExpectedLoss())), TIGHTEN, 0.0)
        self.best: tuple[float, np.ndarray, str] | None = None
        named = starts(problem)
        for name, table in named:  # a start's own table is a candidate (repaired: a no-op where it holds)
            self._keep(table, name)
        if init is not None:  # the caller's table: a start, and (repaired) a candidate
            table = getattr(init, "table", init)  # a result's table, a Mechanism's table()
            table = np.asarray(table() if callable(table) else table, np.float64)
            if table.shape != problem.shape or not np.all(np.isfinite(table)) or np.any(table < 0):
                raise ValueError(f"init: the gradient search starts from a table of shape {problem.shape} "
                                 "with finite entries ≥ 0 (or a result holding one)")
            table = table / np.maximum(table.sum(axis=-1, keepdims=True), 1e-300)
            self._keep(table, "init")
            named.append(("init", table))
        key = jax.random.PRNGKey(seed)
        base = al_init(self.data, key, rho=RHO, init_scale=1.0)
        logits = [base.params[0]]
        self.names = ["loss-shaped"]
        for name, table in named:
            logits.append(jnp.maximum(jnp.log(jnp.asarray(table.reshape(ns * nx, ny))), FLOOR))
            self.names.append(name)
        for k in range(0 if problem.objective.convex else RANDOM):
            logits.append(jax.random.normal(jax.random.fold_in(key, k + 1), base.params[0].shape))
            self.names.append(f"random {k + 1}")
        k = len(logits)
        self.state = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (k, *x.shape)), base)
        self.state = self.state._replace(params=(jnp.stack(logits), *self.state.params[1:]))
        self.kind = static_kind(problem.objective)
        unscaled = utility_data(problem)
        first = float(utility_value(self.kind, unscaled, _tables(self.data, self.state)[0]))
        scale = abs(first) if math.isfinite(first) and first != 0 else 1.0
        self.utility = unscaled._replace(scale=jnp.asarray(scale))
        self.total = max(1, opt.steps // (ROUNDS * INNER)) * ROUNDS * INNER
        self.done, self.quiet = 0, 0
        self.restarts = k

    def _keep(self, table: np.ndarray, name: str) -> None:
        """Keeps ``table``, repaired, where its objective is the least so far; a table no repair
        can mend (a support mask without a data-independent channel) is passed over."""
        from diffpriv.certification import RepairError

        try:
            table = self.repair(self.problem, table).table
        except RepairError:
            return
        value = self.problem.objective_value(table)
        if math.isfinite(value) and (self.best is None or value < self.best[0]):
            self.best = (value, table, name)

    def chunk(self) -> Chunk:
        before = self.best[0] if self.best is not None else math.inf
        self.state = _chunk(self.data, self.state, self.utility, self.kind)
        self.done += ROUNDS * INNER
        tables = np.asarray(_tables(self.data, self.state), np.float64)
        for table, name in zip(tables, self.names, strict=True):
            if np.all(np.isfinite(table)):
                rows = table / table.sum(axis=-1, keepdims=True)
                self._keep(rows.reshape(self.problem.shape), name)
        after = self.best[0] if self.best is not None else math.inf
        moved = (before - after) / max(abs(after), 1e-300) if math.isfinite(after) else math.inf
        self.quiet = self.quiet + 1 if moved <= self.opt.gap_tol else 0
        status = Status.CONVERGED if self.quiet >= PATIENCE else None
        return Chunk(self.done, moved, status)  # (shown as the gap: what the stop compares with gap_tol)

    def finish(self, status: Status) -> Outcome:
        if self.best is None:
            raise FloatingPointError("optimizer: the gradient search found no table with a finite objective")
        return Outcome(self.best[1], -math.inf, status, method=self.name,
                       starts={"start": self.best[2], "restarts": self.restarts})

