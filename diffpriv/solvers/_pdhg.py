"""Restarted mirror primal–dual hybrid gradient (PDHG) on softmax logits.

The problem (see :mod:`diffpriv.solvers._linear`) is the saddle point::

    min_{A, w, t} max_{u ≥ 0, ν ≥ 0}  f(A, t) + ⟨u, G A − δ ⊙ w⟩ + ⟨ν, ℓ(A) − t⟩

over row-stochastic ``A`` (softmax of logits), slack simplices ``w`` and, for an epigraph
objective, ``t ∈ [0, T]`` with the row losses ``ℓ_r(A) = Σ_y L[x_r, y] A[r, y]`` (worst case)
or the weighted entries ``ℓ_{r,y}(A) = L[x_r, y] A[r, y]`` (largest entry). Each step is

* a **mirror-descent step in A**: ``θ ← θ − ω τ_r ∇_A`` then ``A = softmax(θ)`` (the entropic
  prox on each row's simplex, i.e. a gradient step on the logits with the gradient in ``A``);
  the same for the slack logits and a projected step for ``t``;
* a projected **dual ascent** step at the extrapolated point ``2A⁺ − A``:
  ``u ← max(0, u + σ/ω · (G(2A⁺ − A) − δ(2w⁺ − w)))``.

Steps are diagonally preconditioned (Pock & Chambolle 2011: ``τ = 1/Σ_i |K_ij|``,
``σ = 1/Σ_j |K_ij|``, valid since the entropy is 1-strongly convex in ℓ1 ⊇ ℓ2) and balanced by a
primal weight ``ω``. Every ``period`` steps the run is evaluated: the restart candidate is
whichever of the current iterate and the average since the last restart has the smaller KKT
error (duality gap + constraint violation), and the run restarts from it when that error has
fallen enough since the last restart (PDLP's adaptive criteria, :func:`_period`); restarts give
fast convergence on these LPs. At each restart the primal weight moves towards the ratio of the
primal and dual movements since the previous restart (PDLP's update, within a bounded range).
Every evaluated dual iterate yields a certified lower bound by weak duality; the best one is
kept. The duals averaged over the whole run (never restarted) are evaluated too: restarted duals
can lag where the primal converges (12×12 geo grid, ``gap_tol`` 1e-3 at 100,000 steps: certified
gap 0.49 % without, 0.23 % with it).

The run stops on the device (``lax.while_loop`` over periods, so under ``vmap`` every batch
element stops on its own) when the restart iterate's relative gap to the certified lower bound,
``(f(A) − LB)/|LB|``, is at most ``gap_tol`` and its largest normalised constraint violation is
at most ``viol_tol`` (the optimizer passes ``viol_factor · gap_tol``); or when the bound
proves the problem infeasible, or an iterate is not finite. Everything is a pure function of
arrays (``jit``, ``vmap`` over budgets in ``LinearData``), with no Python branching on traced
values; the only Python branches are on static shapes and flags.

Memory: the multipliers ``u`` ``[2K, Y]`` dominate on large problems. Without any δ > 0 the
slack simplices are left out (``phi`` is empty); every reduction over ``G A`` is fused into
one pass and the transpose gathers rows (:class:`~diffpriv.solvers._linear.Operator`), so the
compiled step holds no temporary of the multipliers' size. With ``average=False`` (the
optimizer's lean plan, in float32) no running sums are kept either: ``u`` is held once.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from diffpriv._gap import GAP_FLOOR
from diffpriv.solvers._driver import Status
from diffpriv.solvers._linear import (
    LinearData,
    Operator,
    epigraph_norm,
    epigraph_values,
    epigraph_weights,
    lower_bound,
    operator,
    proves_infeasible,
)

__all__ = ["PDHGState", "PDHGOutput", "Steps", "step_sizes", "init_state", "log_normalise", "run",
           "CONVERGED", "STEP_LIMIT", "INFEASIBLE", "DIVERGED", "STATUS"]

CONVERGED, STEP_LIMIT, INFEASIBLE, DIVERGED, RUNNING = 0, 1, 2, 3, 4
STATUS = {CONVERGED: Status.CONVERGED, STEP_LIMIT: Status.STEP_LIMIT, INFEASIBLE: Status.INFEASIBLE,
          DIVERGED: Status.DIVERGED}
"""Status codes of a run (``RUNNING`` only inside the loop)."""


class Steps(NamedTuple):
    """Preconditioned step sizes (before the primal weight)."""

    op: Operator  # the normalised constraint operator G (tightened budgets)
    bound_op: Operator  # G at the real budgets, for the certified lower bound
    tau_a: jax.Array  # [R, 1]
    tau_w: jax.Array  # [2K, 1]
    tau_t: jax.Array  # []
    sig_u: jax.Array  # [2K, 1]
    row_norm: jax.Array  # [R] or [R, Y] scale of each epigraph constraint
    top: jax.Array  # [] T, the upper bound on t
    omega: jax.Array  # [] initial primal weight
    omega_range: jax.Array  # [] the weight adapts within [omega / range, omega · range]


class PDHGState(NamedTuple):
    theta: jax.Array  # [R, Y] table logits (normalised: logsumexp over y is 0)
    phi: jax.Array  # [2K, Y+1] slack logits (last entry: unused slack); [0, 1] without slack
    t: jax.Array  # [] epigraph variable of an epigraph objective
    u: jax.Array  # [2K, Y] multipliers of the privacy constraints
    nu: jax.Array  # [R] or [R, Y] multipliers of the epigraph constraints (scaled)
    best_lb: jax.Array  # [] best certified lower bound so far (of any dual iterate)
    kkt: jax.Array  # [] KKT error of the restart candidate at the last evaluation
    obj: jax.Array  # [] objective of the restart candidate
    viol: jax.Array  # [] its largest normalised constraint violation
    sums: tuple  # running sums of (A, w, t, u, ν) since the last restart; () without averages
    count: jax.Array  # [] steps since the last restart
    kkt_restart: jax.Array  # [] KKT error of the iterate the last restart chose
    omega: jax.Array  # [] primal weight (updated at restarts when ``adapt``)
    anchor: tuple  # (A, u) at the last restart, for the primal-weight update; () without
    duals: tuple  # (Σu, Σν, steps) over the whole run, never restarted; () without averages


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


def step_sizes(data: LinearData, *, worst: bool, omega_scale: float, omega_range: float = 1.0,
               bound_data: LinearData | None = None) -> Steps:
    """Diagonal step sizes and the primal weight for ``data`` (traceable); ``bound_data``: the
    real budgets the lower bound is certified at (default ``data``'s); ``omega_range``: how far
    the weight may adapt (:func:`_primal_weight`)."""
    op = operator(data)
    bound_op = op if bound_data is None else operator(bound_data)
    delta = op.delta
    row_norm, tau_t, top, epi_colsum = epigraph_steps(data)
    colsum = op.abs_column_sums() + (epi_colsum if worst else 0.0)  # [R]
    positive = colsum > 0
    floor = jnp.min(jnp.where(positive, colsum, jnp.inf))
    floor = jnp.where(jnp.isfinite(floor), floor, 1.0)
    tau_a = 1.0 / jnp.maximum(colsum, floor)
    tau_w = jnp.where(delta > 0, 1.0 / jnp.where(delta > 0, delta, 1.0), 0.0)
    sig_u = 1.0 / (1.0 + delta)
    if worst:
        scale = jnp.maximum(top, 1e-300) / tau_t
    else:
        reach = jnp.where(positive[:, None], tau_a[:, None] * data.cost, 0.0)
        scale = 1.0 / jnp.maximum(jnp.max(reach), 1e-300)
    return Steps(op, bound_op, tau_a[:, None], tau_w[:, None], tau_t, sig_u[:, None], row_norm, top,
                 omega_scale * scale, jnp.asarray(omega_range, dtype=scale.dtype))


def epigraph_steps(data: LinearData):
    """``(row_norm, tau_t, top, colsum)`` of an epigraph objective's constraints ``ℓ_r(A) ≤ t``,
    each scaled by its ℓ1 norm ``row_norm``: the step of ``t`` (``1 /`` the sum of its
    coefficients), the upper bound ``T`` on ``t`` (the largest allowed loss), and what the
    constraints add to each table row's column sum (its largest coefficient). Shared with the
    lifted PDHG (:mod:`._transport_pdhg`)."""
    row_norm = epigraph_norm(data)
    active = data.row_active
    weights = epigraph_weights(data, jnp.where(active, 1.0 / row_norm, 0.0))
    colsum = jnp.max(jnp.where(data.mask, weights, 0.0), axis=1)
    tau_t = 1.0 / jnp.maximum(jnp.sum(jnp.where(active, 1.0 / row_norm, 0.0)), 1e-300)
    top = jnp.max(jnp.where(data.mask, data.row_loss, 0.0))
    return row_norm, tau_t, top, colsum


def init_state(data: LinearData, steps: Steps, key: jax.Array, jitter: float = 1e-3, *,
               slack: bool = True, average: bool = True, adapt: bool = False) -> PDHGState:
    """Starts from (a seeded jitter of) the uniform table on the support (without a support mask
    it satisfies every constraint). ``slack=False`` (static; only when every δ is 0) leaves the
    slack simplices out: ``phi`` is then empty and the run skips every slack term.
    ``average=False`` (static) keeps no running sums (see :func:`run`); ``adapt=True``
    (static; only with averages) adapts the primal weight at restarts within
    ``steps.omega_range`` (:func:`_primal_weight`), keeping the last restart point for it."""
    r, y = data.cost.shape
    m = steps.op.delta.shape[0]
    dtype = data.cost.dtype
    theta = log_normalise(jitter * jax.random.normal(key, (r, y), dtype=dtype), data.mask)
    phi = jnp.zeros((m, y + 1) if slack else (0, 1), dtype=dtype)
    u = jnp.zeros((m, y), dtype=dtype)
    nu = jnp.zeros(data.row_active.shape, dtype=dtype)
    scalar = lambda v: jnp.asarray(v, dtype=dtype)  # noqa: E731
    sums = (jnp.zeros_like(theta), jnp.zeros_like(phi), scalar(0.0), jnp.zeros_like(u),
            jnp.zeros_like(nu)) if average else ()
    anchor = (jnp.exp(theta), jnp.zeros_like(u)) if average and adapt else ()
    return PDHGState(
        theta=theta,
        phi=phi,
        t=jnp.copy(steps.top),  # its own buffer: the run donates its state
        u=u,
        nu=nu,
        best_lb=scalar(-jnp.inf),
        kkt=scalar(jnp.inf),
        obj=scalar(jnp.inf),
        viol=scalar(jnp.inf),
        sums=sums,
        count=scalar(0.0),
        kkt_restart=scalar(jnp.inf),
        omega=jnp.copy(steps.omega).astype(dtype),  # its own buffer (donated)
        anchor=anchor,
        duals=(jnp.zeros_like(u), jnp.zeros_like(nu), scalar(0.0)) if average else (),
    )


def objective(data: LinearData, table, *, worst: bool):
    """Expected loss, or the largest epigraph value (row loss or weighted entry) over rows with
    positive prior."""
    if worst:
        return jnp.max(jnp.where(data.row_active, epigraph_values(data, table), -jnp.inf))
    return jnp.sum(data.cost * table)


def _certified_bound(data, steps, u, nu, worst):
    return lower_bound(data, u, nu / steps.row_norm, worst=worst, op=steps.bound_op)


def _slack_term(steps, w):
    """``δ ⊙ w`` without the unused entry (``0`` when the run has no slack: ``w`` is empty)."""
    if w.shape[0] == 0:  # static: no slack simplices
        return 0.0
    return steps.op.delta[:, None] * w[:, :-1]


def _sum_and_max(v):
    """``(Σ v, max(v, 0))`` as one variadic reduction, so that ``v`` (the size of the
    multipliers) is fused into it rather than held in memory for two passes."""
    zero = jnp.zeros((), v.dtype)
    return jax.lax.reduce((v, v), (zero, zero),
                          lambda a, b: (a[0] + b[0], jnp.maximum(a[1], b[1])), tuple(range(v.ndim)))


def _violations(data, steps, table, w, t, worst):
    """``(sum, max)`` of the constraint violations in the balanced (normalised) units."""
    v = jax.nn.relu(steps.op.apply(table) - _slack_term(steps, w))
    total, top = _sum_and_max(v)
    if worst:
        r = epigraph_violations(data, steps, table, t)
        total, top = total + jnp.sum(r), jnp.maximum(top, jnp.max(r))
    return total, top


def epigraph_violations(data: LinearData, steps, table, t):
    """``relu(ℓ_r(A) − t) / row_norm`` on rows with positive prior: the epigraph constraints'
    violations in the balanced units (``steps``: any step sizes with ``row_norm``). Shared with the
    lifted PDHG (:mod:`._transport_pdhg`)."""
    return jnp.where(data.row_active, jax.nn.relu(epigraph_values(data, table) - t) / steps.row_norm, 0.0)


def epigraph_step(data: LinearData, steps, t, nu, bar_a, om):
    """``(t, ν)`` after one PDHG step of the epigraph block ``ℓ_r(A) ≤ t`` (scaled by ``row_norm``):
    a projected primal step of ``t`` in ``[0, T]``, then the multipliers' step at the extrapolated
    ``(Ā, t̄)``. ``steps``: any step sizes with ``tau_t``, ``row_norm``, ``top``. Shared with the
    lifted PDHG (:mod:`._transport_pdhg`)."""
    t_n = jnp.clip(t - om * steps.tau_t * (1.0 - jnp.sum(nu / steps.row_norm)), 0.0, steps.top)
    rows = epigraph_values(data, bar_a) - (2.0 * t_n - t)
    return t_n, jnp.where(data.row_active, jax.nn.relu(nu + rows / steps.row_norm / om), 0.0)


def _kkt(data, bound_data, steps, table, w, t, u, nu, worst):
    """Duality gap plus violation, both in the balanced (normalised) units; the gap uses the
    lower bound at ``bound_data``'s budgets (the real ones). Also returns the bound, the
    objective and the largest violation."""
    viol, top = _violations(data, steps, table, w, t, worst)
    lb = _certified_bound(bound_data, steps, u, nu, worst)
    obj = objective(data, table, worst=worst)
    return jnp.abs(obj - lb) + viol, lb, obj, top


def _step(data: LinearData, steps: Steps, worst: bool, average: bool, om):

    def body(carry, _):
        theta, phi, t, u, nu, sums = carry
        table = jnp.exp(theta)
        grad = steps.op.transpose(u)
        if worst:
            grad = grad + epigraph_weights(data, nu / steps.row_norm)
        else:
            grad = grad + data.cost
        theta_n = log_normalise(theta - om * steps.tau_a * grad, data.mask)
        table_n = jnp.exp(theta_n)
        if phi.shape[0]:  # static: slack simplices for the δ > 0 rows
            w = jax.nn.softmax(phi, axis=-1)
            slack_grad = jnp.pad(steps.op.delta[:, None] * u, ((0, 0), (0, 1)))
            phi_n = phi + om * steps.tau_w * slack_grad
            phi_n = phi_n - jnp.max(phi_n, axis=-1, keepdims=True)
            w_n = jax.nn.softmax(phi_n, axis=-1)
            bar_w = 2.0 * w_n - w
        else:
            phi_n = w_n = bar_w = phi
        bar_a = 2.0 * table_n - table
        resid = steps.op.apply(bar_a) - _slack_term(steps, bar_w)
        u_n = jax.nn.relu(u + steps.sig_u / om * resid)
        if worst:
            t_n, nu_n = epigraph_step(data, steps, t, nu, bar_a, om)
        else:
            t_n, nu_n = t, nu
        if average:
            sums = jax.tree_util.tree_map(jnp.add, sums, (table_n, w_n, t_n, u_n, nu_n))
        return (theta_n, phi_n, t_n, u_n, nu_n, sums), None

    return body


# Adaptive restarts (PDLP, Applegate et al. 2021): restart when the candidate's KKT error fell
# below SUFFICIENT × the error at the last restart, or below NECESSARY × it while no longer
# improving. PDLP's third, "artificial" restart (after 36 % of all steps so far) is left out:
# on geo-indistinguishability grids it cut averaging windows short (10×10 grid, 10,000 steps:
# certified gap 15 % with it, 1.9 % without), and on the random benchmark problems it made no
# difference (12 seeds: median steps 34,750 with it, 34,500 without; fixed restarts every
# period: 32,250; benchmarks/RESULTS.md).
SUFFICIENT, NECESSARY = 0.2, 0.8


def _period(data: LinearData, bound_data: LinearData, steps: Steps, state: PDHGState, length: int,
            worst: bool, gap_tol, viol_tol) -> PDHGState:
    """``length`` PDHG steps, then an evaluation: the restart candidate is the better (by KKT
    error) of the current iterate and the average since the last restart, and the run
    restarts from it when an adaptive criterion holds (:data:`SUFFICIENT`, :data:`NECESSARY`)
    or when it meets the stopping rule; else it goes on from the current
    iterate with the sums kept. Without running sums (``state.sums == ()``, the lean plan)
    the candidate is the current iterate and nothing is restarted."""
    average = bool(state.sums)
    carry = (state.theta, state.phi, state.t, state.u, state.nu, state.sums)
    (theta, phi, t, u, nu, sums), _ = jax.lax.scan(
        _step(data, steps, worst, average, state.omega), carry, None, length=length)
    count = state.count + length
    table = jnp.exp(theta)
    w = jax.nn.softmax(phi, axis=-1)
    k_cur, lb_cur, obj_cur, v_cur = _kkt(data, bound_data, steps, table, w, t, u, nu, worst)
    if not average:
        return state._replace(theta=theta, phi=phi, t=t, u=u, nu=nu,
                              best_lb=jnp.maximum(state.best_lb, lb_cur), kkt=k_cur, obj=obj_cur,
                              viol=v_cur, count=count)
    a_avg, w_avg, t_avg, u_avg, nu_avg = jax.tree_util.tree_map(lambda x: x / count, sums)
    k_avg, lb_avg, obj_avg, v_avg = _kkt(data, bound_data, steps, a_avg, w_avg, t_avg, u_avg, nu_avg,
                                         worst)
    use_avg = k_avg <= k_cur
    cand = lambda a, b: jnp.where(use_avg, a, b)  # noqa: E731
    k_cand, obj, viol = jnp.minimum(k_avg, k_cur), cand(obj_avg, obj_cur), cand(v_avg, v_cur)
    # the whole run's dual average (never restarted) bounds too: restarted duals can lag
    # (the lifted PDHG of _transport_pdhg: 5.1 % below the optimum without it, 0.3 % with it)
    du, dnu = advance_duals(state.duals[:2], sums[3:], state.sums[3:])
    total = state.duals[2] + length
    lb_all = _certified_bound(bound_data, steps, du / total, dnu / total, worst)
    best_lb = jnp.maximum(jnp.maximum(state.best_lb, lb_all), jnp.maximum(lb_cur, lb_avg))
    done, restart = restart_rule(obj, viol, best_lb, k_cand, state.kkt, state.kkt_restart, gap_tol, viol_tol)
    pick = lambda avg, cur: jnp.where(restart & use_avg, avg, cur)  # noqa: E731
    new_u = pick(u_avg, u)
    omega, anchor = state.omega, state.anchor
    if anchor:  # static: adaptive primal weight
        new_a = jnp.where(use_avg, a_avg, table)
        omega = jnp.where(restart & ~done, _primal_weight(steps, anchor, new_a, new_u, omega),
                          omega)
        anchor = (jnp.where(restart, new_a, anchor[0]), jnp.where(restart, new_u, anchor[1]))
    return PDHGState(
        theta=pick(log_normalise(jnp.log(a_avg), data.mask), theta),
        phi=pick(jnp.log(w_avg), phi),
        t=pick(t_avg, t),
        u=new_u,
        nu=pick(nu_avg, nu),
        best_lb=best_lb,
        kkt=k_cand,
        obj=obj,
        viol=viol,
        sums=jax.tree_util.tree_map(lambda x: jnp.where(restart, jnp.zeros_like(x), x), sums),
        count=jnp.where(restart, 0.0, count),
        kkt_restart=jnp.where(restart, k_cand, state.kkt_restart),
        omega=omega,
        anchor=anchor,
        duals=(du, dnu, total),
    )


# PDLP's primal-weight update at each restart (Applegate et al. 2021),
# ω ← exp(θ log(Δx/Δy) + (1 − θ) log ω), with the movements since the last restart measured in
# the preconditioned norms (ours is the inverse of PDLP's weight: it multiplies the primal steps
# and divides the dual ones), kept within [ω₀, ω₀ · omega_range] of the initial weight ω₀. Left
# free it drifts too low on geo-indistinguishability grids (12×12 from ω₀ = 0.3 relative: down
# to 0.02 and a 6 % gap after 30,000 steps), where a fixed 0.1 certifies 1 % in 9,000 steps at
# 8×8, 12×12 and 16×16 alike; on random benchmark problems it moves up, and a fixed 0.1 or 0.3
# needs 2.5 to 7 times more steps. Hence the defaults: start at 0.1 and only grow, up to 0.9
# (benchmarks/RESULTS.md).
SMOOTHING = 0.5


def _primal_weight(steps: Steps, anchor, table, u, omega):
    """The primal weight after a restart from ``(table, u)``; unchanged when either side has not
    moved (or a movement is not finite)."""
    dx = jnp.sqrt(jnp.sum((table - anchor[0]) ** 2 / steps.tau_a))
    dy = jnp.sqrt(jnp.sum((u - anchor[1]) ** 2 / steps.sig_u))
    return weight_update(dx, dy, omega, steps.omega, steps.omega * steps.omega_range)


def weight_update(dx, dy, omega, lo, hi):
    """PDLP's smoothed step of the primal weight ``omega`` towards the ratio ``dx / dy`` of the
    primal and dual movements since the last restart, clipped to ``[lo, hi]``; unchanged when
    either side has not moved (or a movement is not finite). Shared with the lifted PDHG
    (:mod:`._transport_pdhg`)."""
    ok = (dx > 1e-10) & (dy > 1e-10) & jnp.isfinite(dx) & jnp.isfinite(dy)
    ratio = jnp.where(ok, dx / jnp.where(ok, dy, 1.0), 1.0)
    new = jnp.exp(SMOOTHING * jnp.log(ratio) + (1 - SMOOTHING) * jnp.log(omega))
    return jnp.where(ok, jnp.clip(new, lo, hi), omega)


def restart_rule(obj, viol, best_lb, k_cand, kkt, kkt_restart, gap_tol, viol_tol):
    """``(done, restart)`` after a period: done when the candidate (objective ``obj``, largest
    violation ``viol``) meets the stopping rule against ``best_lb``; restart when done or when
    its KKT error ``k_cand`` meets PDLP's criteria against the error at the last restart
    (:data:`SUFFICIENT`; or :data:`NECESSARY` and no longer improving on the last period's ``kkt``).
    Shared with the lifted PDHG (:mod:`._transport_pdhg`)."""
    done = (gap_to(obj, best_lb) <= gap_tol) & (viol <= viol_tol)
    restart = (done | (k_cand <= SUFFICIENT * kkt_restart)
               | ((k_cand <= NECESSARY * kkt_restart) & (k_cand > kkt)))
    return done, restart


def advance_duals(totals, sums, old_sums):
    """The whole run's multiplier totals (never restarted) after a period that moved the running
    sums (restarted at each restart) from ``old_sums`` to ``sums``."""
    return tuple(t + new - old for t, new, old in zip(totals, sums, old_sums, strict=True))


def gap_to(obj, lb):
    """``(obj − lb) / max(|lb|, GAP_FLOOR)``: the JAX twin of :func:`._driver.relative_gap`."""
    return (obj - lb) / jnp.maximum(jnp.abs(lb), GAP_FLOOR)


def relative_gap(state: PDHGState) -> jax.Array:
    """:func:`gap_to` of the restart candidate: ``(f(A) − LB) / max(|LB|, GAP_FLOOR)``."""
    return gap_to(state.obj, state.best_lb)


def _status(data: LinearData, state: PDHGState, gap_tol, viol_tol) -> jax.Array:
    finite = (jnp.isfinite(state.kkt) & jnp.isfinite(state.obj)
              & ~jnp.any(jnp.isnan(state.theta)))
    infeasible = proves_infeasible(data, state.best_lb)
    converged = (relative_gap(state) <= gap_tol) & (state.viol <= viol_tol)
    return jnp.select([~finite, infeasible, converged], [DIVERGED, INFEASIBLE, CONVERGED], RUNNING)


def run(data: LinearData, steps: Steps, state: PDHGState, limit, *, max_periods: int, period: int,
        worst: bool, gap_tol, viol_tol, bound_data: LinearData | None = None) -> PDHGOutput:
    """Runs periods of ``period`` steps until the status is decided or ``limit`` periods
    (traced, at most the static ``max_periods``) have run: a ``lax.while_loop``, so under
    ``vmap`` each batch element stops on its own. Bounds are certified at ``bound_data``'s
    budgets (default ``data``'s; pass the real budgets when ``data`` is tightened). A state
    made with ``init_state(..., average=False)`` keeps no running sums (:func:`_period`)."""
    bound_data = data if bound_data is None else bound_data
    nan = jnp.full((max_periods,), jnp.nan, dtype=data.cost.dtype)

    def cond(carry):
        _, i, status, _ = carry
        return (i < limit) & (status == RUNNING)

    def body(carry):
        st, i, _, (kkt, lb, gap) = carry
        st = _period(data, bound_data, steps, st, period, worst, gap_tol, viol_tol)
        trace = (kkt.at[i].set(st.kkt), lb.at[i].set(st.best_lb), gap.at[i].set(relative_gap(st)))
        return st, i + 1, _status(data, st, gap_tol, viol_tol), trace

    start = (state, jnp.asarray(0), jnp.asarray(RUNNING), (nan, nan, nan))
    state, i, status, (kkt, lb, gap) = jax.lax.while_loop(cond, body, start)
    return PDHGOutput(state, i, status, kkt, lb, gap)
