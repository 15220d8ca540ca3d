"""The optimizer: configuration, result, and the one-call wrapper.

``Optimizer(...)`` is configuration (static); calling it on a :class:`~diffpriv.Problem`
returns an :class:`OptimizeResult`. ``optimize(problem, **options)`` does both.

The default method is restarted mirror PDHG on the softmax logits (:mod:`diffpriv._pdhg`),
which solves every constraint of this release (all linear in the table) to high accuracy, and
whose dual iterates certify a lower bound on the optimum, hence the result's own optimality gap.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from . import _pdhg, _x64  # noqa: F401  (_x64: float64 before any array is made)
from ._al import solve_al
from ._linear import LinearData, constraint_matrix, linear_data, lower_bound, tighten
from ._polish import polish, violation
from ._problem import Problem
from ._progress import progress_bar

__all__ = ["Optimizer", "OptimizeResult", "optimize", "solve_batch"]


@dataclasses.dataclass(frozen=True)
class OptimizeResult:
    """What the optimizer found.

    Attributes:
      table: ``[n_profiles, n_in, n_out]`` float64 row-stochastic table (not yet certified).
      objective: the problem's objective for ``table``.
      lower_bound: a certified lower bound on the optimal objective (weak duality).
      gap: ``(objective − lower_bound) / max(|lower_bound|, tiny)``; meaningful once the table
        is certified (a repair can only raise the objective by a little).
      max_violation: the largest constraint violation of ``table`` in the solver's units
        (ℓ1-normalised rows of G; ≤ 0 means feasible).
      steps: steps taken.
      seconds: wall time, compilation included.
      seed: the seed used.
      converged: whether the KKT tolerance was reached before ``steps``.
      infeasible: the lower bound exceeds the largest objective any table can have, which
        proves (weak duality) that no table meets the constraints.
      history: per-period traces, ``{"kkt": [...], "lower_bound": [...]}``.
      options: the optimizer's settings.
      state: the solver's final state (PDHG: logits and multipliers, before polishing), so that
        ``optimize(..., init=result)`` continues where this run stopped.
    """

    table: np.ndarray
    objective: float
    lower_bound: float
    gap: float
    max_violation: float
    steps: int
    seconds: float
    seed: int
    converged: bool
    infeasible: bool
    history: dict[str, np.ndarray]
    options: dict
    state: object = None

    @property
    def mechanism(self):
        """The table as a :class:`~diffpriv.Mechanism` (logits ``log A``, zeros masked out)."""
        from ._mechanism import Mechanism

        return Mechanism.from_table(self.table)


@dataclasses.dataclass(frozen=True)
class Optimizer:
    """Restarted mirror PDHG on softmax logits (``method="pdhg"``, the default), or the augmented
    Lagrangian with Adam (``method="al"``, :mod:`diffpriv._al`, ``steps`` split into phases of
    ``period`` steps each followed by a multiplier update).

    Args:
      method: ``"pdhg"`` or ``"al"``.
      steps: the maximum number of primal–dual steps.
      period: steps between restarts (and between convergence checks).
      omega: primal weight, relative to the problem's natural scale.
      tol: stop when the KKT error (relative duality gap + violation) falls below this.
      chunk: periods per compiled call (the progress bar advances between calls).
      jitter: scale of the seeded random perturbation of the uniform starting logits.
      polish: project the final table onto its guessed active face (:mod:`diffpriv._polish`).
    """

    method: str = "pdhg"
    steps: int = 100_000
    period: int = 500
    omega: float = 0.3
    tol: float = 1e-9
    chunk: int = 20
    jitter: float = 1e-3
    polish: bool = True

    def __post_init__(self):
        if self.method not in ("pdhg", "al"):
            raise ValueError(f"optimizer.method: must be 'pdhg' or 'al', got {self.method!r}")
        for name in ("steps", "period", "chunk"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"optimizer.{name}: must be a positive integer, got {v!r}")
        for name in ("omega", "tol"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"optimizer.{name}: must be a positive number, got {v!r}")

    def __call__(self, problem: Problem, *, seed: int = 0, init=None,
                 progress: Callable[[int, int, float], None] | None = None) -> OptimizeResult:
        """Optimizes ``problem``; ``progress(done, total, kkt)`` is called between chunks.

        ``init`` warm-starts PDHG: from an :class:`OptimizeResult` of a problem of the same
        shape (its primal and dual state: the run continues, e.g. at a neighbouring budget), or
        from a :class:`~diffpriv.Mechanism` or a table (primal only).
        """
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**32:
            raise ValueError(f"seed: must be an integer in [0, 2**32), got {seed!r}")
        start = time.perf_counter()
        worst = problem.objective == "worst"
        true_data = linear_data(problem)
        data = tighten(true_data)
        if self.method == "al":
            if init is not None:
                raise ValueError("init: warm starts need method 'pdhg'")
            return self._run_al(problem, data, true_data, seed, start)
        steps = _steps_jit(data, worst, self.omega)
        state = _pdhg.init_state(data, steps, jax.random.PRNGKey(seed), self.jitter)
        if isinstance(init, OptimizeResult) and isinstance(init.state, _pdhg.PDHGState):
            if init.state.theta.shape != state.theta.shape or init.state.u.shape != state.u.shape:
                raise ValueError("init: the result is of a problem of another shape")
            state = init.state._replace(best_lb=state.best_lb)
        elif init is not None:
            state = state._replace(theta=_initial_logits(problem, data, init))
        n_periods = -(-self.steps // self.period)  # ceil: at least the steps asked for
        chunk = _divisor_at_most(n_periods, self.chunk)  # equal chunks: one compilation
        done, kkts, lbs, converged = 0, [], [], False
        scale = _objective_scale(problem)
        while done < n_periods:
            n = chunk
            state, (kkt, lb) = _run(data, true_data, steps, state, n, self.period, worst)
            done += n
            kkts.append(np.asarray(kkt))
            lbs.append(np.asarray(lb))
            err = float(kkt[-1]) / scale
            if progress is not None:
                progress(done * self.period, n_periods * self.period, err)
            if err <= self.tol:
                converged = True
                break
        # The bound is valid for any multipliers; evaluate it against the real budgets.
        lb = float(lower_bound(true_data, state.best_u, state.best_nu / steps.row_norm, worst=worst))
        history = {"kkt": np.concatenate(kkts), "lower_bound": np.concatenate(lbs)}
        result = self._result(problem, data, true_data, jnp.exp(state.theta), state.u, lb,
                              done * self.period, start, seed, converged, history)
        return dataclasses.replace(result, state=state)

    def _run_al(self, problem, data, true_data, seed, start) -> OptimizeResult:
        outer = max(1, self.steps // self.period)
        worst = problem.objective == "worst"
        table, mu, nu = _al_jit(data, jax.random.PRNGKey(seed), outer, self.period, worst)
        lb = float(lower_bound(true_data, mu, nu, worst=worst))
        return self._result(problem, data, true_data, table, mu, lb, outer * self.period, start,
                            seed, False, {})

    def _result(self, problem, data, true_data, table, u, lb, steps, start, seed, converged,
                history):
        """Polishes ``table`` (``[R, Y]``) against the tightened budgets and packs the result."""
        table = np.asarray(table).reshape(problem.shape)
        table = table / table.sum(axis=-1, keepdims=True)
        _check_finite(table)
        g, delta = (np.asarray(a) for a in constraint_matrix(data))
        if self.polish and g.shape[0]:
            table = polish(problem, table, g, delta, np.asarray(u))
        obj = problem.objective_value(table)
        g, delta = (np.asarray(a) for a in constraint_matrix(true_data))
        viol = violation(g, delta, table.reshape(-1, table.shape[-1]))
        return OptimizeResult(
            table=table,
            objective=obj,
            lower_bound=lb,
            gap=(obj - lb) / max(abs(lb), 1e-300),
            max_violation=float(viol.max()) if viol.size else 0.0,
            steps=steps,
            seconds=time.perf_counter() - start,
            seed=seed,
            converged=converged,
            infeasible=lb > _largest_objective(problem) * (1 + 1e-9) + 1e-12,
            history=history,
            options=dataclasses.asdict(self),
        )


def _initial_logits(problem: Problem, data: LinearData, init) -> jax.Array:
    """Normalised logits ``[R, Y]`` of a warm start (a Mechanism or a table), on the support."""
    from ._mechanism import Mechanism

    if isinstance(init, OptimizeResult):
        init = init.table
    log_table = init.log_table() if isinstance(init, Mechanism) else jnp.log(jnp.asarray(init))
    if log_table.shape != problem.shape:
        raise ValueError(f"init: shape {log_table.shape}, expected {problem.shape}")
    # Entries that are exactly zero start at a tiny probability, so PDHG can still move them.
    logits = jnp.maximum(log_table.reshape(data.mask.shape), -50.0)
    return _pdhg.log_normalise(logits, data.mask)


def _divisor_at_most(n: int, k: int) -> int:
    """The largest divisor of ``n`` that is at most ``k``."""
    return max(d for d in range(1, min(n, k) + 1) if n % d == 0)


def _largest_objective(problem: Problem) -> float:
    """The largest objective any table on the support can have."""
    worst_row = np.max(np.where(problem.support_mask(), problem.loss[None], 0.0), axis=-1)  # [S, X]
    if problem.objective == "worst":
        return float(worst_row[problem.prior > 0].max())
    return float(np.sum(problem.prior * worst_row))


def _objective_scale(problem: Problem) -> float:
    if problem.objective == "worst":
        return max(float(problem.loss.max()), 1e-300)
    return max(float(np.einsum("sx,xy->", problem.prior, problem.loss)) / problem.outputs.size, 1e-300)


@jax.jit(static_argnums=(1, 2))
def _steps_jit(data, worst, omega):
    return _pdhg.step_sizes(data, worst=worst, omega_scale=omega)


@jax.jit(static_argnums=(2, 3, 4))
def _al_jit(data, key, outer, inner, worst):
    return solve_al(data, key, outer=outer, inner=inner, worst=worst)


@jax.jit(static_argnums=(4, 5, 6))
def _run(data, true_data, steps, state, n_periods, period, worst):
    return _pdhg.run_periods(data, steps, state, n_periods=n_periods, period=period, worst=worst,
                             bound_data=true_data)


def optimize(problem: Problem, *, steps: int | None = None, seed: int = 0, progress: bool = False,
             init=None, **options) -> OptimizeResult:
    """Finds a near-optimal table for ``problem`` (one call: configure and run).

    Args:
      problem: the problem.
      steps: maximum number of steps (default: :class:`Optimizer`'s).
      seed: PRNG seed of the starting jitter; results are deterministic for a seed.
      progress: show a progress bar (rich, on stderr, when it is a terminal) between chunks.
      init: warm start, a :class:`~diffpriv.Mechanism` or a table of the problem's shape.
      **options: other :class:`Optimizer` fields (``period``, ``omega``, ``tol``, ...).
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

    Uses PDHG for exactly ``ceil(steps / period)`` periods (no early stop). Returns
    ``(tables [B, S, X, Y], lower_bounds [B])``. Tables are not certified.
    """
    opt = Optimizer(steps=steps, **options)
    if opt.method != "pdhg":
        raise ValueError("optimizer.method: solve_batch runs 'pdhg' only")
    true_base = linear_data(problem)
    scales = jnp.asarray(eps_scales, dtype=true_base.eps.dtype)
    true_batch = true_base._replace(eps=scales[:, None] * true_base.eps[None, :])
    batch = tighten(true_batch)
    n_periods = -(-opt.steps // opt.period)
    tables, lbs, us = _batch(batch, true_batch, jax.random.PRNGKey(seed), n_periods, opt.period,
                             problem.objective == "worst", opt.omega, opt.jitter)
    tables = np.array(tables).reshape((len(scales), *problem.shape))
    tables = tables / tables.sum(-1, keepdims=True)
    _check_finite(tables)
    if opt.polish:
        for b in range(len(scales)):
            g, delta = (np.asarray(a) for a in constraint_matrix(batch._replace(eps=batch.eps[b])))
            if g.shape[0]:
                tables[b] = polish(problem, tables[b], g, delta, np.asarray(us[b]))
    return tables, np.asarray(lbs)


@jax.jit(static_argnums=(3, 4, 5, 6, 7))
def _batch(batch, true_batch, key, n_periods, period, worst, omega, jitter):
    """One compiled program for a batch of budgets (``eps`` has a leading batch axis)."""

    def one(data, true_data):
        st = _pdhg.step_sizes(data, worst=worst, omega_scale=omega)
        state = _pdhg.init_state(data, st, key, jitter)
        state, _ = _pdhg.run_periods(data, st, state, n_periods=n_periods, period=period,
                                     worst=worst, bound_data=true_data)
        lb = lower_bound(true_data, state.best_u, state.best_nu / st.row_norm, worst=worst)
        return jnp.exp(state.theta), lb, state.u

    axes = LinearData(*([None] * 2 + [0] + [None] * 5))
    return jax.vmap(one, in_axes=(axes, axes))(batch, true_batch)


def _check_finite(table: np.ndarray) -> None:
    if not np.all(np.isfinite(table)):
        raise FloatingPointError("optimizer: the table became non-finite (diverged); "
                                 "try a smaller optimizer.omega")
