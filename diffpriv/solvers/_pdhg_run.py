"""The runs of linear problems: restarted mirror PDHG on the softmax logits
(:class:`PDHGRun`, :mod:`._pdhg`) and the augmented-Lagrangian baseline (:class:`LinearALRun`),
as :class:`._driver.Run` s.

PDHG stops on the device once the restart iterate's relative gap to its certified lower bound
is at most ``gap_tol`` and its violation at most ``viol_factor · gap_tol`` (or infeasibility is
proven, or an iterate is not finite), else after ``steps``; a stop for convergence is confirmed
on the host on the polished table.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from diffpriv.problems._problem import Problem
from diffpriv.problems._size import SizeError, solver_plan
from diffpriv.solvers import _pdhg
from diffpriv.solvers._al import solve_al
from diffpriv.solvers._driver import (
    Chunk,
    Declared,
    OptimizeResult,
    Outcome,
    Status,
    check_finite,
    compile_seconds,
    relative_gap,
)
from diffpriv.solvers._linear import (
    LinearData,
    linear_data,
    lower_bound,
    lower_bound_by_columns,
    operator,
    proves_infeasible,
    sparse_matrix,
    the_table,
    tighten,
)
from diffpriv.solvers._polish import polish, violation
from diffpriv.solvers._x64 import float64

__all__ = ["LinearALRun", "PDHGRun"]

CHUNK_SECONDS = 10.0
"""About how long a chunk of PDHG runs once a period's time is known (:meth:`PDHGRun._limit`)."""


def _data(problem: Problem, lean: bool) -> tuple[LinearData, LinearData]:
    """``(data, true_data)``: the problem's linear data at budgets tightened for the solver, and
    at the real ones (float32 and compact for a lean run, whose iterates need a wider margin; the
    certifier repairs the rest)."""
    true_data = linear_data(problem, jnp.float32 if lean else jnp.float64, compact=lean)
    return (tighten(true_data, 1e-5, 1e-6, 1e-8) if lean else tighten(true_data)), true_data


def _pack(problem: Problem, data, true_data, table, u, *, polishing: bool) -> tuple[np.ndarray, float]:
    """``(table [S, X, Y], violation)``: ``table`` (``[R, Y]``) renormalised and, if
    ``polishing``, polished against the tightened budgets; its violation of the real ones."""
    rows = np.array(table, dtype=np.float64).reshape(-1, problem.shape[-1])  # a writable copy
    rows /= rows.sum(axis=-1, keepdims=True)
    check_finite(rows)
    g, delta = sparse_matrix(operator(data))
    if polishing and g.shape[0]:
        rows = polish(problem, rows, g, delta, np.asarray(u))
    g, delta = sparse_matrix(operator(true_data))
    viol = violation(g, delta, rows)
    return the_table(problem, rows), float(viol.max()) if viol.size else 0.0


class PDHGRun(Declared):
    """Restarted mirror PDHG (:func:`._pdhg.run`) in compiled chunks of ``opt.chunk`` periods.

    ``init`` warm-starts it: an :class:`OptimizeResult` of a problem of the same shape (its primal
    and dual state: the run continues, e.g. at a neighbouring budget), or a
    :class:`~diffpriv.mechanisms.Mechanism` or a table (primal only). A problem too large for the standard
    plan runs lean (:func:`diffpriv.problems.solver_plan`)."""

    name, labels = "pdhg", ("pdhg",)
    takes_init = resumable = True

    @classmethod
    def accepts(cls, problem) -> bool:
        return problem.linear and not problem.objective.smooth

    def __init__(self, opt, problem: Problem, seed: int, init=None):
        self.opt, self.problem = opt, problem
        self.lean = solver_plan(problem) == "lean"
        if self.lean and problem.objective.transport:
            raise SizeError("objective: this problem is too large for the transport objective, "
                            "whose plan needs the standard (float64) run")
        self.worst = problem.objective.epigraph
        self.data, self.true_data = _data(problem, self.lean)
        self.steps = _steps_jit(self.data, self.true_data, self.worst, opt.omega, opt.omega_range)
        slack = bool(np.any(np.asarray(self.true_data.pair_delta) > 0)
                     or np.any(np.asarray(self.true_data.mix_delta) > 0))
        state = _pdhg.init_state(self.data, self.steps, jax.random.PRNGKey(seed), opt.jitter, slack=slack,
                                 average=not self.lean, adapt=opt.omega_range > 1)
        if isinstance(init, OptimizeResult) and isinstance(init.state, _pdhg.PDHGState):
            if any(getattr(init.state, f).shape != getattr(state, f).shape
                   or getattr(init.state, f).dtype != getattr(state, f).dtype
                   for f in ("theta", "phi", "u")):
                raise ValueError("init: the result is of a problem of another shape")
            # A copy (the run donates its input buffers); the bound starts afresh, since the
            # budgets may differ, and the averages and restart bookkeeping continue.
            state = jax.tree_util.tree_map(jnp.copy, init.state._replace(best_lb=state.best_lb))
        elif init is not None:
            state = state._replace(theta=_initial_logits(problem, self.data, init))
        self.state = state
        self.n_periods = max(1, opt.steps // opt.period)  # whole periods, at most the steps asked for
        self.total = self.n_periods * opt.period
        self.per_chunk = min(opt.chunk, self.n_periods)  # one compilation: the limit is traced
        self.viol_tol = opt.viol_factor * opt.gap_tol
        self.periods, self.traces, self.polished, self.polish_seconds = 0, [], None, 0.0
        self.period_seconds: float | None = None

    deadline: float | None = None
    """Set by :func:`._driver.drive`: chunks are sized to end by then (the periods are traced)."""

    def _limit(self) -> int:
        """The periods of the next chunk: at most ``opt.chunk`` and what is left, about
        :data:`CHUNK_SECONDS` of them once a period's time is known (a 100×100 grid's lean period
        of 500 steps takes minutes: Ctrl-C and progress wait for the chunk), and with a deadline
        no more than fit before it (the first chunk, of unknown speed, then one period)."""
        limit = min(self.per_chunk, self.n_periods - self.periods)
        if self.period_seconds is None:
            return 1 if self.deadline is not None else limit
        limit = min(limit, max(1, int(CHUNK_SECONDS / self.period_seconds)))
        if self.deadline is not None:
            left = self.deadline - time.perf_counter()
            limit = min(limit, max(1, int(left / self.period_seconds)))
        return limit

    def chunk(self) -> Chunk:
        opt = self.opt
        begin, compiled = time.perf_counter(), compile_seconds()
        out = _run(self.data, self.true_data, self.steps, self.state, self._limit(), self.per_chunk,
                   opt.period, self.worst, opt.gap_tol, self.viol_tol)
        self.state = out.state  # stays on the device; the host sees one transfer of a few numbers
        k, code, kkt, bound, gap = jax.device_get((out.periods, out.status, out.kkt, out.lower_bound,
                                                   out.gap))
        k, code = int(k), int(code)
        spent = time.perf_counter() - begin - (compile_seconds() - compiled)
        if k:
            self.period_seconds = max(spent, 1e-6) / k
        self.traces.append((kkt[:k], bound[:k], gap[:k]))
        self.periods += k
        if code == _pdhg.CONVERGED:
            # Confirm on the host: the polished table must be within the gap, with violations
            # of the real budgets (in the solver's units) no larger than the device's
            # tolerance; else go on with a 10x stricter violation tolerance.
            table, lb, viol = self._polish()
            if viol <= self.viol_tol and relative_gap(self.problem.objective_value(table), lb) <= opt.gap_tol:
                self.polished = (table, lb, viol)
            else:
                code, self.viol_tol = _pdhg.RUNNING, self.viol_tol / 10
        status = None if code == _pdhg.RUNNING else _pdhg.STATUS[code]
        return Chunk(self.periods * opt.period, float(self.traces[-1][2][-1]), status)

    def _polish(self, polish: bool = True) -> tuple[np.ndarray, float, float]:
        """``(table, bound, violation)`` of the state: the device's best certified bound (for a
        lean, float32 run: the bound of the final multipliers, computed in float64 column by
        column), and the table, polished unless the run was lean."""
        start, compiled = time.perf_counter(), compile_seconds()
        data, true_data = self.data, self.true_data
        if self.lean:
            lb = lower_bound_by_columns(self.problem, self.state.u)
            data = true_data = linear_data(self.problem, outputs=slice(0, 1))  # float64 operators
        else:
            lb = float(self.state.best_lb)
        table, viol = _pack(self.problem, data, true_data, jnp.exp(self.state.theta), self.state.u,
                            polishing=polish and self.opt.polish and not self.lean)
        self.polish_seconds += time.perf_counter() - start - (compile_seconds() - compiled)
        return table, lb, viol

    def finish(self, status: Status) -> Outcome:
        if status == Status.DIVERGED:
            raise FloatingPointError("optimizer: the iterates became non-finite (diverged); "
                                     "try a smaller optimizer.omega")
        history = {name: np.concatenate([t[i] for t in self.traces])
                   for i, name in enumerate(("kkt", "lower_bound", "gap"))}
        stopped = status in (Status.TIME_LIMIT, Status.INTERRUPTED)  # asked to stop now: no polishing
        table, lb, viol = self._polish(polish=not stopped) if self.polished is None else self.polished
        return Outcome(table, lb, status, viol, state=self.state, history=history,
                       plan="lean" if self.lean else "standard", method="pdhg",
                       polish_seconds=self.polish_seconds)


class LinearALRun(Declared):
    """The augmented-Lagrangian baseline on a linear problem (:func:`._al.solve_al`, Adam):
    ``steps`` split into rounds of ``period`` steps, each followed by a multiplier update, in one
    compiled call; the table polished, the bound that of the final multipliers."""

    name, labels = "linear al", ("linear al",)
    warm_starts = lean = False
    too_large = "optimizer.method: 'al' needs more memory than this problem leaves; use 'pdhg'"

    @classmethod
    def accepts(cls, problem) -> bool:
        return problem.linear and not problem.objective.smooth

    def __init__(self, opt, problem: Problem, seed: int):
        self.opt, self.problem, self.seed = opt, problem, seed
        self.outer = max(1, opt.steps // opt.period)
        self.total = self.outer * opt.period
        self.data, self.true_data = _data(problem, False)

    def chunk(self) -> Chunk:
        worst = self.problem.objective.epigraph
        table, mu, nu, _ = _al_jit(self.data, jax.random.PRNGKey(self.seed), self.outer, self.opt.period,
                                   worst, None, ())
        self.bound = float(lower_bound(self.true_data, mu, nu, worst=worst))
        self.table, self.viol = _pack(self.problem, self.data, self.true_data, table, mu,
                                      polishing=self.opt.polish)
        infeasible = bool(proves_infeasible(self.true_data, self.bound))
        return Chunk(self.total, relative_gap(self.problem.objective_value(self.table), self.bound),
                     Status.INFEASIBLE if infeasible else Status.STEP_LIMIT)

    def finish(self, status: Status) -> Outcome:
        return Outcome(self.table, self.bound, status, self.viol, method=self.name)


def _initial_logits(problem: Problem, data: LinearData, init) -> jax.Array:
    """Normalised logits ``[R, Y]`` of a warm start (a Mechanism or a table), on the support."""
    from diffpriv.solvers._mechanism import Mechanism

    if isinstance(init, OptimizeResult):
        init = init.table
    log_table = init.log_table() if isinstance(init, Mechanism) else jnp.log(jnp.asarray(init))
    if log_table.shape != problem.shape:
        raise ValueError(f"init: shape {log_table.shape}, expected {problem.shape}")
    # Entries that are exactly zero start at a tiny probability, so PDHG can still move them.
    logits = jnp.maximum(log_table.reshape(-1, data.cost.shape[1]), -50.0)
    if logits.shape[0] < data.cost.shape[0]:  # the transport objective's plan starts uniform
        logits = jnp.concatenate([logits, jnp.zeros((data.cost.shape[0] - logits.shape[0],
                                                     logits.shape[1]), logits.dtype)])
    return _pdhg.log_normalise(logits, data.mask)


@jax.jit(static_argnums=(2, 3, 4))
def _steps_jit(data, true_data, worst, omega, omega_range):
    return _pdhg.step_sizes(data, worst=worst, omega_scale=omega, omega_range=omega_range,
                            bound_data=true_data)


@jax.jit(static_argnums=(2, 3, 4, 6))
def _al_jit(data, key, outer, inner, worst, nonlinear, kinds):
    return solve_al(data, key, outer=outer, inner=inner, worst=worst, nonlinear=nonlinear, kinds=kinds)


@jax.jit(static_argnums=(5, 6, 7), donate_argnums=(3,))
def _run(data, true_data, steps, state, limit, max_periods, period, worst, gap_tol, viol_tol):
    return _pdhg.run(data, steps, state, limit, max_periods=max_periods, period=period, worst=worst,
                     gap_tol=gap_tol, viol_tol=viol_tol, bound_data=true_data)


@float64
def step_bytes(problem: Problem, omega: float = 0.1, omega_range: float = 9.0) -> float:
    """XLA's count of the bytes one PDHG step reads and writes on ``problem`` as the optimizer
    runs it (presolved, in its plan's dtype, the running sums included, the periodic evaluation
    not). It counts every operand of every fused kernel, so it overstates what reaches memory
    (about 18 table-sized passes where a measured step takes the time of 4–6 at the machine's
    copy bandwidth: ``benchmarks/scaling.py`` sets both beside each other)."""
    from diffpriv.solvers._presolve import presolve

    pre = presolve(problem, vacuous=True)  # as "auto" runs it
    problem = problem if pre is None else pre.problem
    lean = solver_plan(problem) == "lean"
    data, true_data = _data(problem, lean)
    worst = problem.objective.epigraph
    steps = _steps_jit(data, true_data, worst, omega, omega_range)
    state = _pdhg.init_state(data, steps, jax.random.PRNGKey(0), 1e-3, average=not lean)
    carry = (state.theta, state.phi, state.t, state.u, state.nu, state.sums)

    def one(d, st, om, c):
        return _pdhg._step(d, st, worst, not lean, om)(c, None)[0]

    cost = jax.jit(one).lower(data, steps, state.omega, carry).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return float(cost["bytes accessed"])
