"""The optimizer: configuration, result, and the one-call wrapper.

``Optimizer(...)`` is configuration (static); calling it on a :class:`~diffpriv.Problem`
returns an :class:`OptimizeResult`. ``optimize(problem, **options)`` does both.

The default method, ``"auto"``, runs column-and-cut generation (``"cuts"``,
:mod:`diffpriv.solvers._cuts`) for f-divergence constraints (KL, χ², Hellinger, Rényi, TV), and
otherwise the exact reference (HiGHS, or Clarabel for Wasserstein constraints:
:mod:`diffpriv.solvers._exact`) where :mod:`diffpriv.solvers._methods` predicts it is faster than
diffpriv's own solver and fits in memory, and ``"pdhg"`` beyond.

Method ``"pdhg"`` is restarted mirror PDHG on the softmax logits (:mod:`diffpriv.solvers._pdhg`),
which solves the linear constraints (pure and approximate DistP, local and extended DP, profile
edges) to high accuracy, and whose dual iterates certify a lower bound on the optimum, hence the
result's own optimality gap. A problem with a constraint in another divergence (KL, χ²,
Hellinger, Rényi, … : divergence DistP / DP, extended DistP) runs, unless ``method="al"``, the
smoothed dual maximised by L-BFGS (:mod:`diffpriv.solvers._dual`, result plan ``"dual"``) where
it applies (:func:`._dual.applies`: item laws in extended or divergence DistP, expected or
worst-case objective), whose bound is the exact dual at its multipliers; else the augmented
Lagrangian (:mod:`diffpriv.solvers._al`, driven by :mod:`diffpriv.solvers._nonlinear`), whose
bound linearises the divergences (:mod:`diffpriv.solvers._divergence`). A problem whose only
such constraints are Wasserstein ones (expected or transport objective, linear comparisons
without δ) is an LP once each comparison's coupling is a variable: it runs a restarted mirror
PDHG on the table and the couplings (:mod:`diffpriv.solvers._transport_pdhg`, result plan ``"transport"``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from diffpriv.problems._problem import Problem
from diffpriv.problems._size import SizeError, solver_plan
from diffpriv.solvers import (
    _pdhg,
    _x64,  # noqa: F401  (float64 before any array is made)
)
from diffpriv.solvers._al import solve_al
from diffpriv.solvers._convex import ConvexSolveError
from diffpriv.solvers._cuts import CutsSolveError, run_cuts
from diffpriv.solvers._driver import OptimizeResult, Status, check_finite, compile_seconds, make_result
from diffpriv.solvers._exact import run_exact
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
from diffpriv.solvers._lp import ReferenceSolveError
from diffpriv.solvers._methods import auto_cuts, choose, cuts_apply
from diffpriv.solvers._nonlinear import batch_nonlinear, run_nonlinear
from diffpriv.solvers._options import Options
from diffpriv.solvers._polish import polish, violation
from diffpriv.solvers._progress import progress_bar

__all__ = ["Optimizer", "OptimizeResult", "optimize", "solve_batch"]

@dataclasses.dataclass(frozen=True)
class Optimizer(Options):
    """The exact reference where it is predicted faster (``method="auto"``, the default;
    ``"exact"`` always), restarted mirror PDHG on softmax logits (``method="pdhg"``), or the
    augmented Lagrangian with Adam (``method="al"``, ``steps`` split into phases of ``period``
    steps each followed by a multiplier update). The settings are those of
    :class:`diffpriv.solvers._options.Options` (one declaration, which the config reads too).

    PDHG stops on the device once the restart iterate's relative gap to its certified lower
    bound is at most ``gap_tol`` and its violation at most ``viol_factor · gap_tol`` (or infeasibility is
    proven, or an iterate is not finite), else after ``steps``.
    """

    def __call__(self, problem: Problem, *, seed: int = 0, init=None,
                 progress: Callable[[int, int, float], None] | None = None) -> OptimizeResult:
        """Optimizes ``problem``; ``progress(done, total, gap)`` is called between chunks.

        ``init`` warm-starts PDHG: from an :class:`OptimizeResult` of a problem of the same
        shape (its primal and dual state: the run continues, e.g. at a neighbouring budget), or
        from a :class:`~diffpriv.Mechanism` or a table (primal only).
        """
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**32:
            raise ValueError(f"seed: must be an integer in [0, 2**32), got {seed!r}")
        method = choose(problem, self.method, gap_tol=self.gap_tol, warm=init is not None)
        if method == "exact":
            if init is not None:
                raise ValueError("init: warm starts need method 'pdhg'")
            try:
                return run_exact(self, problem, seed)
            except (ReferenceSolveError, ConvexSolveError):
                if self.method == "exact":
                    raise
                # auto: diffpriv's solver proves infeasibility or finds a table
                method = "cuts" if auto_cuts(problem) else "pdhg"
        if method == "cuts":
            if init is not None:
                raise ValueError("init: warm starts need method 'pdhg'")
            if not cuts_apply(problem):
                raise ValueError("optimizer.method: 'cuts' needs f-divergence constraints (KL, "
                                 "reverse KL, chi2, Hellinger, Renyi, TV) and an objective other "
                                 "than the transport loss")
            try:
                return run_cuts(self, problem, seed, progress)
            except CutsSolveError:
                if self.method == "cuts":
                    raise
                method = "pdhg"  # auto: the first-order solvers (their bound can prove infeasibility)
        lean = solver_plan(problem) == "lean"
        if not problem.linear:
            if init is not None:
                raise ValueError("init: warm starts need linear constraints (method 'pdhg')")
            if lean:
                raise SizeError("optimizer: this problem is too large for the float64 solvers that "
                                "divergence and Wasserstein constraints need")
            return run_nonlinear(self, problem, seed, progress)
        if lean and problem.objective.transport:
            raise SizeError("objective: this problem is too large for the transport objective, "
                            "whose plan needs the standard (float64) run")
        if lean and method != "pdhg":
            raise SizeError(f"optimizer.method: {self.method!r} needs more memory than this "
                            "problem leaves; use 'pdhg'")
        start, compiled = time.perf_counter(), compile_seconds()
        worst = problem.objective.epigraph
        true_data = linear_data(problem, jnp.float32 if lean else jnp.float64, compact=lean)
        # float32 iterates need a wider margin than float64 ones; the certifier repairs the rest.
        data = tighten(true_data, 1e-5, 1e-6, 1e-8) if lean else tighten(true_data)
        if method == "al":
            if init is not None:
                raise ValueError("init: warm starts need method 'pdhg'")
            return self._run_al(problem, data, true_data, seed, start)
        steps = _steps_jit(data, true_data, worst, self.omega, self.omega_range)
        slack = bool(np.any(np.asarray(true_data.pair_delta) > 0)
                     or np.any(np.asarray(true_data.mix_delta) > 0))
        state = _pdhg.init_state(data, steps, jax.random.PRNGKey(seed), self.jitter, slack=slack,
                                 average=not lean, adapt=self.omega_range > 1)
        if isinstance(init, OptimizeResult) and isinstance(init.state, _pdhg.PDHGState):
            if any(getattr(init.state, f).shape != getattr(state, f).shape
                   or getattr(init.state, f).dtype != getattr(state, f).dtype
                   for f in ("theta", "phi", "u")):
                raise ValueError("init: the result is of a problem of another shape")
            # A copy (the run donates its input buffers); the bound starts afresh, since the
            # budgets may differ, and the averages and restart bookkeeping continue.
            state = jax.tree_util.tree_map(jnp.copy, init.state._replace(best_lb=state.best_lb))
        elif init is not None:
            state = state._replace(theta=_initial_logits(problem, data, init))
        n_periods = -(-self.steps // self.period)  # ceil: at least the steps asked for
        chunk = min(self.chunk, n_periods)  # one compilation: the limit is traced
        viol_tol = self.viol_factor * self.gap_tol
        done, status, traces, polished = 0, _pdhg.RUNNING, [], None
        while done < n_periods and status == _pdhg.RUNNING:
            out = _run(data, true_data, steps, state, min(chunk, n_periods - done), chunk,
                       self.period, worst, self.gap_tol, viol_tol)
            state, k, status = out.state, int(out.periods), int(out.status)
            traces.append((np.asarray(out.kkt[:k]), np.asarray(out.lower_bound[:k]),
                           np.asarray(out.gap[:k])))
            done += k
            if progress is not None:
                progress(done * self.period, n_periods * self.period, float(traces[-1][2][-1]))
            if status == _pdhg.CONVERGED:
                # Confirm on the host: the polished table must be within the gap, with violations
                # of the real budgets (in the solver's units) no larger than the device's
                # tolerance; else go on with a 10x stricter violation tolerance.
                polished = self._result(problem, data, true_data, state, lean,
                                        done * self.period, start, seed, Status.CONVERGED)
                if not (polished.max_violation <= viol_tol and polished.gap <= self.gap_tol):
                    status, viol_tol, polished = _pdhg.RUNNING, viol_tol / 10, None
        status = _pdhg.STEP_LIMIT if status == _pdhg.RUNNING else status
        if status == _pdhg.DIVERGED:
            raise FloatingPointError("optimizer: the iterates became non-finite (diverged); "
                                     "try a smaller optimizer.omega")
        history = {name: np.concatenate([t[i] for t in traces])
                   for i, name in enumerate(("kkt", "lower_bound", "gap"))}
        if polished is None:
            polished = self._result(problem, data, true_data, state, lean, done * self.period,
                                    start, seed, _pdhg.STATUS[status])
        return dataclasses.replace(polished, history=history, state=state,
                                   seconds=time.perf_counter() - start,
                                   plan="lean" if lean else "standard",
                                   compile_seconds=compile_seconds() - compiled)

    def _run_al(self, problem, data, true_data, seed, start) -> OptimizeResult:
        outer = max(1, self.steps // self.period)
        worst = problem.objective.epigraph
        table, mu, nu, _ = _al_jit(data, jax.random.PRNGKey(seed), outer, self.period, worst, None, ())
        lb = float(lower_bound(true_data, mu, nu, worst=worst))
        status = Status.INFEASIBLE if bool(proves_infeasible(true_data, lb)) else Status.STEP_LIMIT
        return self._pack(problem, data, true_data, table, mu, lb, outer * self.period, start,
                          seed, status, polishing=self.polish)

    def _result(self, problem, data, true_data, state, lean, steps, start, seed, status):
        """The result of a PDHG state: the device's best certified bound (for a lean, float32
        run: the bound of the final multipliers, computed in float64 column by column), and the
        table, polished unless the run was lean."""
        if lean:
            lb = lower_bound_by_columns(problem, state.u)
            data = true_data = linear_data(problem, outputs=slice(0, 1))  # float64 operators
        else:
            lb = float(state.best_lb)
        return self._pack(problem, data, true_data, jnp.exp(state.theta), state.u, lb, steps,
                          start, seed, status, polishing=self.polish and not lean)

    def _pack(self, problem, data, true_data, table, u, lb, steps, start, seed, status, *,
              polishing):
        """Polishes ``table`` (``[R, Y]``) against the tightened budgets and packs the result."""
        rows = np.array(table, dtype=np.float64).reshape(-1, problem.shape[-1])  # a writable copy
        rows /= rows.sum(axis=-1, keepdims=True)
        check_finite(rows)
        g, delta = sparse_matrix(operator(data))
        if polishing and g.shape[0]:
            rows = polish(problem, rows, g, delta, np.asarray(u))
        g, delta = sparse_matrix(operator(true_data))
        viol = violation(g, delta, rows)
        return make_result(problem, the_table(problem, rows), lb, status=status, steps=steps,
                           start=start, compiled=compile_seconds(), seed=seed, options=self,
                           violation=float(viol.max()) if viol.size else 0.0,
                           method="al" if self.method == "al" else "pdhg")


def _initial_logits(problem: Problem, data: LinearData, init) -> jax.Array:
    """Normalised logits ``[R, Y]`` of a warm start (a Mechanism or a table), on the support."""
    from diffpriv.mechanisms._mechanism import Mechanism

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


def optimize(problem: Problem, *, steps: int | None = None, seed: int = 0, progress: bool = False,
             init=None, **options) -> OptimizeResult:
    """Finds a near-optimal table for ``problem`` (one call: configure and run).

    Args:
      problem: the problem.
      steps: maximum number of steps (default: :class:`Optimizer`'s).
      seed: PRNG seed of the starting jitter; results are deterministic for a seed.
      progress: show a progress bar (rich, on stderr, when it is a terminal) between chunks.
      init: warm start, a :class:`~diffpriv.Mechanism` or a table of the problem's shape.
      **options: other :class:`Optimizer` fields (``period``, ``omega``, ``gap_tol``, ...).
    """
    if steps is not None:
        options["steps"] = steps
    opt = Optimizer(**options)
    with progress_bar(progress) as report:
        return opt(problem, seed=seed, init=init, progress=report)


def solve_batch(problem: Problem, eps_scales, *, steps: int = 20_000, seed: int = 0,
                **options) -> tuple[np.ndarray, np.ndarray]:
    """Solves ``problem`` with every ε multiplied by each entry of ``eps_scales``, as one
    ``vmap``-ed compiled program (a privacy–utility frontier), then polishes each table.

    Runs PDHG for at most ``ceil(steps / period)`` periods; each budget stops on its own by the
    optimizer's device-side stopping rule (``gap_tol``, ``viol_factor``). A problem with divergence
    constraints (divergence budgets are scaled too) runs, under ``method="auto"``, column-and-cut
    generation at each budget in turn on f-divergences between item laws (:mod:`._cuts`, at
    every size: ``"auto"``'s Clarabel does not batch); else the smoothed
    dual at each budget in turn, warm-started from the last, where it applies, else the augmented
    Lagrangian's chunks, all budgets in lockstep (:func:`._nonlinear.batch_nonlinear`). Returns
    ``(tables [B, S, X, Y], lower_bounds [B])``. Tables are not certified.
    """
    opt = Optimizer(steps=steps, **options)
    if opt.method not in ("auto", "pdhg"):
        raise ValueError("optimizer.method: solve_batch runs 'pdhg' only ('auto' runs it too)")
    if not problem.linear:
        if opt.method == "auto" and auto_cuts(problem):
            def at(s):
                return dataclasses.replace(problem, constraints=tuple(
                    dataclasses.replace(c, epsilon=c.epsilon * s) for c in problem.constraints))

            runs = [run_cuts(opt, at(float(s)), seed) for s in np.asarray(eps_scales, np.float64)]
            return np.stack([r.table for r in runs]), np.asarray([r.lower_bound for r in runs])
        return batch_nonlinear(opt, problem, eps_scales, seed)
    base = linear_data(problem)
    scales = jnp.asarray(eps_scales, dtype=base.cost.dtype)
    true_batch = base._replace(pair_eps=scales[:, None] * base.pair_eps[None, :],
                               mix_eps=scales[:, None] * base.mix_eps[None, :],
                               pair_delta=jnp.broadcast_to(base.pair_delta, (len(scales),
                                                                             *base.pair_delta.shape)),
                               mix_delta=jnp.broadcast_to(base.mix_delta, (len(scales),
                                                                           *base.mix_delta.shape)))
    batch = tighten(true_batch)
    n_periods = -(-opt.steps // opt.period)
    slack = bool(np.any(np.asarray(base.pair_delta) > 0) or np.any(np.asarray(base.mix_delta) > 0))
    tables, lbs, us = _batch(batch, true_batch, jax.random.PRNGKey(seed), n_periods, opt.period,
                             problem.objective.epigraph, opt.omega, opt.omega_range, opt.jitter, slack,
                             opt.gap_tol, opt.viol_factor * opt.gap_tol)
    tables = np.array(tables, dtype=np.float64)
    tables = tables / tables.sum(-1, keepdims=True)
    check_finite(tables)
    if opt.polish:
        for b in range(len(scales)):
            one = batch._replace(pair_eps=batch.pair_eps[b], mix_eps=batch.mix_eps[b],
                                 pair_delta=batch.pair_delta[b], mix_delta=batch.mix_delta[b])
            g, delta = sparse_matrix(operator(one))
            if g.shape[0]:
                tables[b] = polish(problem, tables[b], g, delta, np.asarray(us[b]))
    return np.stack([the_table(problem, t) for t in tables]), np.asarray(lbs)


@jax.jit(static_argnums=(3, 4, 5, 6, 7, 8, 9))
def _batch(batch, true_batch, key, n_periods, period, worst, omega, omega_range, jitter, slack,
           gap_tol, viol_tol):
    """One compiled program for a batch of budgets (the budgets have a leading batch axis)."""

    def one(data, true_data):
        st = _pdhg.step_sizes(data, worst=worst, omega_scale=omega, omega_range=omega_range,
                              bound_data=true_data)
        state = _pdhg.init_state(data, st, key, jitter, slack=slack, adapt=omega_range > 1)
        out = _pdhg.run(data, st, state, n_periods, max_periods=n_periods, period=period,
                        worst=worst, gap_tol=gap_tol, viol_tol=viol_tol, bound_data=true_data)
        return jnp.exp(out.state.theta), out.state.best_lb, out.state.u

    axes = batch.batch_axes
    return jax.vmap(one, in_axes=(axes, axes))(batch, true_batch)
