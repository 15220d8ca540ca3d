"""Restarted mirror primal–dual hybrid gradient (PDHG) on softmax logits.

The problem (see :mod:`diffpriv.solvers._linear`) is the saddle point::

    min_{A, w, t} max_{u ≥ 0, ν ≥ 0}  f(A, t) + ⟨u, G A − δ ⊙ w⟩ + ⟨ν, ℓ(A) − t⟩

over row-stochastic ``A`` (softmax of logits), slack simplices ``w`` and, for the worst-case
objective, ``t ∈ [0, T]`` with row losses ``ℓ_r(A) = Σ_y L[x_r, y] A[r, y]``. Each step is

* a **mirror-descent step in A**: ``θ ← θ − ω τ_r ∇_A`` then ``A = softmax(θ)`` (the entropic
  prox on each row's simplex, i.e. a gradient step on the logits with the gradient in ``A``);
  the same for the slack logits and a projected step for ``t``;
* a projected **dual ascent** step at the extrapolated point ``2A⁺ − A``:
  ``u ← max(0, u + σ/ω · (G(2A⁺ − A) − δ(2w⁺ − w)))``.

Steps are diagonally preconditioned (Pock & Chambolle 2011: ``τ = 1/Σ_i |K_ij|``,
``σ = 1/Σ_j |K_ij|``, valid since the entropy is 1-strongly convex in ℓ1 ⊇ ℓ2) and balanced by a
primal weight ``ω``. Every ``period`` steps the method restarts from whichever of the current
and the averaged iterate has the smaller KKT error (duality gap + constraint violation), as
PDLP does for linear programs; this gives fast convergence on these LPs. Every dual iterate
yields a certified lower bound by weak duality; the best one is kept.

The run stops on the device (``lax.while_loop`` over periods, so under ``vmap`` every batch
element stops on its own) when the restart iterate's relative gap to the certified lower bound,
``(f(A) − LB)/|LB|``, is at most ``gap_tol`` and its largest normalised constraint violation is
at most ``viol_tol`` (the optimizer passes ``viol_factor · gap_tol``); or when the bound proves the problem infeasible, or an iterate is not
finite. Everything is a pure function of arrays (``jit``, ``vmap`` over budgets in
``LinearData``), with no Python branching on traced values.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from diffpriv.solvers import _x64  # noqa: F401  (float64 before any array is made)
from diffpriv.solvers._linear import LinearData, Operator, lower_bound, operator, proves_infeasible

__all__ = ["PDHGState", "PDHGOutput", "Steps", "step_sizes", "init_state", "log_normalise", "run",
           "CONVERGED", "STEP_LIMIT", "INFEASIBLE", "DIVERGED", "STATUS"]

CONVERGED, STEP_LIMIT, INFEASIBLE, DIVERGED, RUNNING = 0, 1, 2, 3, 4
STATUS = {CONVERGED: "converged", STEP_LIMIT: "step limit", INFEASIBLE: "infeasible",
          DIVERGED: "diverged"}
"""Status codes of a run (``RUNNING`` only inside the loop)."""


class Steps(NamedTuple):
    """Preconditioned step sizes (before the primal weight)."""

    op: Operator  # the normalised constraint operator G (tightened budgets)
    bound_op: Operator  # G at the real budgets, for the certified lower bound
    tau_a: jax.Array  # [R, 1]
    tau_w: jax.Array  # [2K, 1]
    tau_t: jax.Array  # []
    sig_u: jax.Array  # [2K, 1]
    row_norm: jax.Array  # [R] scale of each worst-case row constraint
    top: jax.Array  # [] T, the upper bound on t
    omega: jax.Array  # [] primal weight


class PDHGState(NamedTuple):
    theta: jax.Array  # [R, Y] table logits (normalised: logsumexp over y is 0)
    phi: jax.Array  # [2K, Y+1] slack logits (last entry: unused slack)
    t: jax.Array  # [] epigraph variable of the worst-case objective
    u: jax.Array  # [2K, Y] multipliers of the privacy constraints
    nu: jax.Array  # [R] multipliers of the worst-case row constraints (scaled rows)
    best_u: jax.Array
    best_nu: jax.Array
    best_lb: jax.Array  # [] best certified lower bound so far
    kkt: jax.Array  # [] KKT error at the last restart
    obj: jax.Array  # [] objective of the restart iterate
    viol: jax.Array  # [] its largest normalised constraint violation


class PDHGOutput(NamedTuple):
    """What :func:`run` returns: the state, the periods run, a status code, and per-period traces
    (entries past ``periods`` are NaN)."""

    state: PDHGState
    periods: jax.Array  # [] int
    status: jax.Array  # [] int, one of STATUS (RUNNING: the limit was reached first)
    kkt: jax.Array  # [limit]
    lower_bound: jax.Array  # [limit]
    gap: jax.Array  # [limit] relative gap of the restart iterate


def log_normalise(logits, mask=None):
    if mask is not None:
        logits = jnp.where(mask, logits, -jnp.inf)
    return logits - jax.scipy.special.logsumexp(logits, axis=-1, keepdims=True)


def step_sizes(data: LinearData, *, worst: bool, omega_scale: float,
               bound_data: LinearData | None = None) -> Steps:
    """Diagonal step sizes and the primal weight for ``data`` (traceable); ``bound_data``: the
    real budgets the lower bound is certified at (default ``data``'s)."""
    op = operator(data)
    bound_op = op if bound_data is None else operator(bound_data)
    delta = op.delta
    colsum = op.abs_column_sums()  # [R]
    row_norm = jnp.sum(jnp.where(data.mask, data.row_loss, 0.0), axis=1) + 1.0
    active = data.row_active
    if worst:
        colsum = colsum + jnp.where(active, jnp.max(data.row_loss, axis=1) / row_norm, 0.0)
    positive = colsum > 0
    floor = jnp.min(jnp.where(positive, colsum, jnp.inf))
    floor = jnp.where(jnp.isfinite(floor), floor, 1.0)
    tau_a = 1.0 / jnp.maximum(colsum, floor)
    tau_w = jnp.where(delta > 0, 1.0 / jnp.where(delta > 0, delta, 1.0), 0.0)
    sig_u = 1.0 / (1.0 + delta)
    tau_t = 1.0 / jnp.maximum(jnp.sum(jnp.where(active, 1.0 / row_norm, 0.0)), 1e-300)
    top = jnp.max(jnp.where(data.mask, data.row_loss, 0.0))
    if worst:
        scale = jnp.maximum(top, 1e-300) / tau_t
    else:
        reach = jnp.where(positive[:, None], tau_a[:, None] * data.cost, 0.0)
        scale = 1.0 / jnp.maximum(jnp.max(reach), 1e-300)
    return Steps(op, bound_op, tau_a[:, None], tau_w[:, None], tau_t, sig_u[:, None], row_norm, top,
                 omega_scale * scale)


def init_state(data: LinearData, steps: Steps, key: jax.Array, jitter: float = 1e-3) -> PDHGState:
    """Starts from (a seeded jitter of) the uniform table on the support (without a support mask
    it satisfies every constraint)."""
    r, y = data.cost.shape
    m = steps.op.delta.shape[0]
    theta = log_normalise(jitter * jax.random.normal(key, (r, y), dtype=data.cost.dtype), data.mask)
    zeros_u = jnp.zeros((m, y), dtype=data.cost.dtype)
    zeros_nu = jnp.zeros((r,), dtype=data.cost.dtype)
    return PDHGState(
        theta=theta,
        phi=jnp.zeros((m, y + 1), dtype=data.cost.dtype),
        t=steps.top,
        u=zeros_u,
        nu=zeros_nu,
        best_u=zeros_u,
        best_nu=zeros_nu,
        best_lb=jnp.asarray(-jnp.inf, dtype=data.cost.dtype),
        kkt=jnp.asarray(jnp.inf, dtype=data.cost.dtype),
        obj=jnp.asarray(jnp.inf, dtype=data.cost.dtype),
        viol=jnp.asarray(jnp.inf, dtype=data.cost.dtype),
    )


def objective(data: LinearData, table, *, worst: bool):
    """Expected loss, or the worst row loss over rows with positive prior."""
    if worst:
        rows = jnp.sum(data.row_loss * table, axis=1)
        return jnp.max(jnp.where(data.row_active, rows, -jnp.inf))
    return jnp.sum(data.cost * table)


def _certified_bound(data, steps, u, nu, worst):
    return lower_bound(data, u, nu / steps.row_norm, worst=worst, op=steps.bound_op)


def _violations(data, steps, table, w, t, worst):
    """``(sum, max)`` of the constraint violations in the balanced (normalised) units."""
    v = jax.nn.relu(steps.op.apply(table) - steps.op.delta[:, None] * w[:, :-1])
    total, top = jnp.sum(v), jnp.max(v, initial=0.0)
    if worst:
        rows = jnp.sum(data.row_loss * table, axis=1)
        r = jnp.where(data.row_active, jax.nn.relu(rows - t) / steps.row_norm, 0.0)
        total, top = total + jnp.sum(r), jnp.maximum(top, jnp.max(r))
    return total, top


def _kkt(data, bound_data, steps, table, w, t, u, nu, worst):
    """Duality gap plus violation, both in the balanced (normalised) units; the gap uses the
    lower bound at ``bound_data``'s budgets (the real ones). Also returns the bound, the
    objective and the largest violation."""
    viol, top = _violations(data, steps, table, w, t, worst)
    lb = _certified_bound(bound_data, steps, u, nu, worst)
    obj = objective(data, table, worst=worst)
    return jnp.abs(obj - lb) + viol, lb, obj, top


def _step(data: LinearData, steps: Steps, worst: bool):
    om = steps.omega

    def body(carry, _):
        theta, phi, t, u, nu, sums = carry
        table = jnp.exp(theta)
        w = jax.nn.softmax(phi, axis=-1)
        grad = steps.op.transpose(u)
        if worst:
            grad = grad + (nu / steps.row_norm)[:, None] * data.row_loss
        else:
            grad = grad + data.cost
        theta_n = log_normalise(theta - om * steps.tau_a * grad, data.mask)
        table_n = jnp.exp(theta_n)
        slack_grad = jnp.pad(steps.op.delta[:, None] * u, ((0, 0), (0, 1)))
        phi_n = phi + om * steps.tau_w * slack_grad
        phi_n = phi_n - jnp.max(phi_n, axis=-1, keepdims=True)
        w_n = jax.nn.softmax(phi_n, axis=-1)
        bar_a = 2.0 * table_n - table
        bar_w = 2.0 * w_n - w
        resid = steps.op.apply(bar_a) - steps.op.delta[:, None] * bar_w[:, :-1]
        u_n = jax.nn.relu(u + steps.sig_u / om * resid)
        if worst:
            t_n = jnp.clip(t - om * steps.tau_t * (1.0 - jnp.sum(nu / steps.row_norm)), 0.0, steps.top)
            rows = jnp.sum(data.row_loss * bar_a, axis=1) - (2.0 * t_n - t)
            nu_n = jnp.where(data.row_active, jax.nn.relu(nu + rows / steps.row_norm / om), 0.0)
        else:
            t_n, nu_n = t, nu
        sums = jax.tree_util.tree_map(jnp.add, sums, (table_n, w_n, t_n, u_n, nu_n))
        return (theta_n, phi_n, t_n, u_n, nu_n, sums), None

    return body


def _period(data: LinearData, bound_data: LinearData, steps: Steps, state: PDHGState, length: int,
            worst: bool) -> PDHGState:
    """``length`` PDHG steps, then a restart from the better of current and average."""
    zeros = (jnp.zeros_like(state.theta), jnp.zeros_like(state.phi), jnp.zeros_like(state.t),
             jnp.zeros_like(state.u), jnp.zeros_like(state.nu))
    carry = (state.theta, state.phi, state.t, state.u, state.nu, zeros)
    (theta, phi, t, u, nu, sums), _ = jax.lax.scan(_step(data, steps, worst), carry, None, length=length)
    a_avg, w_avg, t_avg, u_avg, nu_avg = jax.tree_util.tree_map(lambda s: s / length, sums)
    table = jnp.exp(theta)
    w = jax.nn.softmax(phi, axis=-1)
    k_cur, lb_cur, obj_cur, v_cur = _kkt(data, bound_data, steps, table, w, t, u, nu, worst)
    k_avg, lb_avg, obj_avg, v_avg = _kkt(data, bound_data, steps, a_avg, w_avg, t_avg, u_avg, nu_avg,
                                         worst)
    use_avg = k_avg <= k_cur
    theta_avg = log_normalise(jnp.log(a_avg), data.mask)
    phi_avg = jnp.log(w_avg)
    pick = lambda a, b: jnp.where(use_avg, a, b)  # noqa: E731
    better_cur = lb_cur >= lb_avg
    lb = jnp.maximum(lb_cur, lb_avg)
    improve = lb > state.best_lb
    best_u = jnp.where(improve, jnp.where(better_cur, u, u_avg), state.best_u)
    best_nu = jnp.where(improve, jnp.where(better_cur, nu, nu_avg), state.best_nu)
    return PDHGState(
        theta=pick(theta_avg, theta),
        phi=pick(phi_avg, phi),
        t=pick(t_avg, t),
        u=pick(u_avg, u),
        nu=pick(nu_avg, nu),
        best_u=best_u,
        best_nu=best_nu,
        best_lb=jnp.maximum(state.best_lb, lb),
        kkt=jnp.minimum(k_avg, k_cur),
        obj=pick(obj_avg, obj_cur),
        viol=pick(v_avg, v_cur),
    )


def relative_gap(state: PDHGState) -> jax.Array:
    """``(f(A) − LB) / |LB|`` of the restart iterate (``f(A) − LB`` when ``LB = 0``)."""
    lb = state.best_lb
    return (state.obj - lb) / jnp.where(lb != 0, jnp.abs(lb), 1.0)


def _status(data: LinearData, state: PDHGState, gap_tol, viol_tol) -> jax.Array:
    finite = (jnp.all(jnp.isfinite(state.u)) & jnp.isfinite(state.obj)
              & ~jnp.any(jnp.isnan(state.theta)))
    infeasible = proves_infeasible(data, state.best_lb)
    converged = (relative_gap(state) <= gap_tol) & (state.viol <= viol_tol)
    return jnp.select([~finite, infeasible, converged], [DIVERGED, INFEASIBLE, CONVERGED], RUNNING)


def run(data: LinearData, steps: Steps, state: PDHGState, limit, *, max_periods: int, period: int,
        worst: bool, gap_tol, viol_tol, bound_data: LinearData | None = None) -> PDHGOutput:
    """Runs periods of ``period`` steps until the status is decided or ``limit`` periods
    (traced, at most the static ``max_periods``) have run: a ``lax.while_loop``, so under
    ``vmap`` each batch element stops on its own. Bounds are certified at ``bound_data``'s
    budgets (default ``data``'s; pass the real budgets when ``data`` is tightened)."""
    bound_data = data if bound_data is None else bound_data
    nan = jnp.full((max_periods,), jnp.nan, dtype=data.cost.dtype)

    def cond(carry):
        _, i, status, _ = carry
        return (i < limit) & (status == RUNNING)

    def body(carry):
        st, i, _, (kkt, lb, gap) = carry
        st = _period(data, bound_data, steps, st, period, worst)
        trace = (kkt.at[i].set(st.kkt), lb.at[i].set(st.best_lb), gap.at[i].set(relative_gap(st)))
        return st, i + 1, _status(data, st, gap_tol, viol_tol), trace

    start = (state, jnp.asarray(0), jnp.asarray(RUNNING), (nan, nan, nan))
    state, i, status, (kkt, lb, gap) = jax.lax.while_loop(cond, body, start)
    return PDHGOutput(state, i, status, kkt, lb, gap)
