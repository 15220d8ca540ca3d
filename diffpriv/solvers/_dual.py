"""The smoothed dual of a problem with divergence constraints, maximised by L-BFGS.

**The dual.** Every divergence here is an f-divergence ``D_f(P‖Q) = Σ_y Q f(P/Q)`` of the two
lifted laws ``P = wa·A``, ``Q = wb·A`` of a comparison, or a monotone transform of one
(:func:`._f_forms.f_budget`): KL (``f = t ln t``; reverse KL swaps the laws), χ² and Rényi of order
``α > 1`` (``f = t^α``, budget ``1 + ε`` and ``e^{(α−1)ε}``), squared Hellinger and Rényi of
order ``α < 1`` (``f = −t^α``, budget ``−(1 − ε)`` and ``−e^{(α−1)ε}``); total variation,
``Σ max(0, P − Q) ≤ ε``, is the hockey-stick at ``e^0`` and joins the linear rows. Giving the
laws their own variables, with multipliers ``p``, ``q`` of ``P = wa·A``, ``Q = wb·A`` and
``λ ≥ 0`` of ``D_f(P‖Q) ≤ b``, the minimum over the laws is finite iff ``q ≤ −λ f*(p/λ)`` per
output (``f*`` the convex conjugate); the Lagrangian grows with
``q``, so ``q = −λ f*(p/λ)`` and, with the linear constraints' ``u ≥ 0`` of
:mod:`diffpriv.solvers._linear`,

    ``d(p, λ, u) = Σ_r min_y (C + Gᵀu + Σ_k wa_k ⊗ p_k + wb_k ⊗ q_k)[r, y] − Σ δ·max u⁺ − Σ_k λ_k b_k``

is a lower bound of the optimum for **every** ``p``, ``λ > 0``, ``u ≥ 0`` (weak duality), tight
at the optimum (strong duality: the uniform table is strictly feasible). It has few variables:
``|Y| + 1`` per comparison and direction (not ``|X|·|Y|``). For the epigraph objectives the
row or entry multipliers ``ν`` lie on the simplex (:mod:`diffpriv.solvers._linear`).

**Smoothing.** ``min_y`` is replaced by the soft minimum ``−τ_r ln Σ_y e^{−z_y/τ_r}`` (the dual of
the primal with ``τ_r·Σ_y A ln A`` added per row): the smoothed dual is smooth and concave, and
L-BFGS (optax) maximises it; its maximiser gives the table ``A = softmax(−z/τ_r)`` row by row,
which meets the budgets it was solved for up to the dual's gradient. The temperature falls by
4 per stage until the table, made feasible, is within ``gap_tol`` of the best exact bound ``d``:
by the certifier's mixing (:func:`~diffpriv.certification.repair`), or, when that costs too
much, by the table of every multiplier raised by the least factor that makes it hold
(:func:`_repair_by_inflation`). The budgets are
tightened by ``gap_tol / 4`` relative so the table needs little repair; the bound is always at
the real budgets.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import optax

from diffpriv.problems._blocks import divergence_kinds
from diffpriv.problems._problem import Problem
from diffpriv.solvers._driver import Chunk, Declared, Outcome, Status, relative_gap
from diffpriv.solvers._f_forms import Family, f_budget, f_divergences, family
from diffpriv.solvers._lbfgs import lbfgs_scan
from diffpriv.solvers._linear import (
    LinearData,
    epigraph_weights,
    linear_data,
    operator,
    proves_infeasible,
    smallest_objective,
    soft_min,
    the_table,
    tighten,
)

__all__ = ["DualData", "DualRun", "Group", "applies", "dual_data", "f_budget", "f_divergences", "family"]


CHUNK = 50
"""L-BFGS steps per compiled call."""

TAU0, TAU_FACTOR, TAU_MIN = 0.05, 4.0, 1e-7
"""The first temperature (relative to the objective's scale), its reduction per stage, and the
last one tried."""

STAGE_STALL = 1e-3
"""A stage ends when a chunk raised the smoothed dual by less than ``STAGE_STALL · τ`` relative."""

class Group(NamedTuple):
    """The comparisons of one divergence family (static: :data:`Family`)."""

    wa: jax.Array  # [K, R] weights of P (direction 0: D(P‖Q))
    wb: jax.Array  # [K, R] weights of Q
    budget: jax.Array  # [K, 2] f-budgets the table is solved for (tightened), per direction
    true_budget: jax.Array  # [K, 2] the real f-budgets (the bound)
    on: jax.Array  # [K, 2] bool: the direction is bounded (and binds something)


class DualData(NamedTuple):
    """A problem for the dual solver: objective scaled to order 1."""

    lin: LinearData  # tightened linear budgets, scaled cost
    true_lin: LinearData  # real linear budgets
    groups: tuple  # of Group
    tau_w: jax.Array  # [R] per-row temperature weights


def _laws(fam: Family, z, lam):
    """``(p, q)`` per output from the raw parameter ``z`` and ``λ > 0``, with ``q = −λ f*(p/λ)``."""
    name, alpha = fam
    if name == "kl":  # f* = e^{s − 1}
        return z, -lam * jnp.exp(z / lam - 1.0)
    if alpha > 1:  # f = t^α: f* = (α − 1)(s⁺/α)^{α/(α−1)}
        s = jnp.maximum(z / lam, 0.0)
        return z, -lam * (alpha - 1.0) * (s / alpha) ** (alpha / (alpha - 1.0))
    # f = −t^α, α < 1: s = −e^z < 0, f* = (1 − α)(α/(−s))^{α/(1−α)}
    c = (1.0 - alpha) * alpha ** (alpha / (1.0 - alpha))
    return -lam * jnp.exp(z), -lam * c * jnp.exp(-z * alpha / (1.0 - alpha))


def _terms(data: DualData, families, params, worst, exact: bool, tau=1.0):
    """``(z [R, Y], constant)``: the Lagrangian's reduced costs and constant at ``params``
    (``exact``: at the real budgets, for the bound; else the tightened ones, smoothed)."""
    lin = data.true_lin if exact else data.lin
    if worst:
        active = lin.row_active
        nu = jax.nn.softmax(jnp.where(active, params["eta"], -jnp.inf).reshape(-1)).reshape(active.shape)
        cost = epigraph_weights(lin, nu)
    else:
        cost = lin.cost
    const = 0.0
    if "u" in params:
        op = operator(lin)
        u = jnp.square(params["u"])  # no saturation at 0 (softplus's gradient vanishes there)
        cost = cost + op.transpose(u)
        if exact:
            const = const - jnp.sum(op.delta * jnp.max(u, axis=1))
        else:  # τ ln Σ e^{u/τ} ≥ max u: a smooth upper bound
            const = const - jnp.sum(op.delta * tau * jax.nn.logsumexp(u / tau, axis=1))
    for fam, g, (z, l) in zip(families, data.groups, params["groups"], strict=True):
        lam = jax.nn.softplus(l)
        p, q = _laws(fam, z, lam[..., None])
        on = g.on[..., None]
        p, q = jnp.where(on, p, 0.0), jnp.where(on, q, 0.0)
        cost = cost + g.wa.T @ (p[:, 0] + q[:, 1]) + g.wb.T @ (q[:, 0] + p[:, 1])
        budget = g.true_budget if exact else g.budget
        const = const - jnp.sum(jnp.where(g.on, lam * budget, 0.0))
    return cost, const


def smoothed_dual(data: DualData, families, params, worst, tau):
    """The smoothed dual at temperature ``tau`` (module docstring)."""
    z, const = _terms(data, families, params, worst, exact=False, tau=tau)
    return jnp.sum(soft_min(z, data.lin.mask, tau * data.tau_w)) + const


def exact_dual(data: DualData, families, params, worst):
    """The dual ``d`` at ``params``: a lower bound of the (scaled) optimum."""
    z, const = _terms(data, families, params, worst, exact=True)
    return jnp.sum(jnp.min(jnp.where(data.lin.mask, z, jnp.inf), axis=1)) + const


def table_of(data: DualData, families, params, worst, tau):
    """The smoothed dual's table ``[R, Y]`` at ``params``."""
    z, _ = _terms(data, families, params, worst, exact=False)
    return jax.nn.softmax(jnp.where(data.lin.mask, -z / (tau * data.tau_w[:, None]), -jnp.inf), axis=1)


def _strong(tree):
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype=jnp.result_type(x)), tree)


def init_params(data: DualData, families, worst: bool) -> dict:
    """Multipliers to start from: ``λ = 1``, ``p`` at ``λ·f'(1)`` (where the laws' terms cancel),
    ``u ≈ 0``, uniform ``ν``."""
    ny = data.lin.cost.shape[1]
    groups = []
    for fam, g in zip(families, data.groups, strict=True):
        k = g.wa.shape[0]
        # p = λ f'(1): 1 for t ln t, α for t^α; for −t^α, p = −λα (z = ln α)
        start = 1.0 if fam[0] == "kl" else (fam[1] if fam[1] > 1 else math.log(fam[1]))
        groups.append((jnp.full((k, 2, ny), start), jnp.full((k, 2), math.log(math.e - 1.0))))
    params: dict = {"groups": tuple(groups)}
    m = operator(data.lin).delta.shape[0]
    if m:
        params["u"] = jnp.full((m, ny), 1e-3)
    if worst:
        params["eta"] = jnp.zeros(data.lin.row_active.shape)
    return _strong(params)


_OPT = optax.lbfgs(memory_size=20)


@jax.jit(static_argnums=(1, 2, 3))
def _chunk(data, families, worst, freeze, tau, params, state):
    """``CHUNK`` L-BFGS steps on the negated smoothed dual (on the flattened parameters: far
    less to compile than optax's per-leaf updates); returns the last value too."""
    flat, unravel = jax.flatten_util.ravel_pytree(params)
    fixed = params["groups"]

    def fn(x):
        p = unravel(x)
        if freeze:  # the multipliers λ held: the laws' terms adapt to the table first
            p = {**p, "groups": tuple((z, jax.lax.stop_gradient(l0))
                                      for (z, _), (_, l0) in zip(p["groups"], fixed, strict=True))}
        return -smoothed_dual(data, families, p, worst, tau)

    flat, state, values = lbfgs_scan(_OPT, fn, flat, state, CHUNK)
    return _strong(unravel(flat)), _strong(state), values[-1]


def _init_state(params):
    return _strong(_OPT.init(jax.flatten_util.ravel_pytree(params)[0]))


@jax.jit(static_argnums=(1, 2))
def _look(data, families, worst, tau, params):
    """The exact bound and the table at ``params``."""
    return exact_dual(data, families, params, worst), table_of(data, families, params, worst, tau)


def _inflated(families, params, factor):
    """``params`` with every multiplier (``λ``, ``u``) times ``factor`` and the ratios ``p/λ`` kept:
    the constraint terms of the reduced costs scale by ``factor``."""
    groups = []
    for fam, (z, l) in zip(families, params["groups"], strict=True):
        lam = jax.nn.softplus(l) * factor
        l_new = lam + jnp.log(-jnp.expm1(-lam))  # softplus⁻¹
        groups.append((z * factor if fam[0] == "kl" or (fam[0] == "power" and fam[1] > 1) else z, l_new))
    out = {**params, "groups": tuple(groups)}
    if "u" in params:
        out["u"] = params["u"] * jnp.sqrt(factor)
    return out


@jax.jit(static_argnums=(1, 2))
def _inflated_table(data, families, worst, tau, params, factor):
    return table_of(data, families, _inflated(families, params, factor), worst, tau)


INFLATE_MAX, INFLATE_STEPS = 1.0, 8
"""The multipliers are inflated by at most ``1 + INFLATE_MAX``; the least factor that makes the
table hold is found to ``2^-INFLATE_STEPS`` of it (bisection, after doubling from 10⁻⁵)."""


def _repair_by_inflation(problem, data, families, worst, tau, params):
    """The table of the multipliers inflated by the least factor ``1 + κ`` that makes every
    constraint hold with the certifier's repair margin (:func:`~diffpriv.certification._repair.
    repair_holds`), or ``None``. Raising every multiplier a little moves the smoothed table along
    the prices of the constraints it violates, which costs about the multipliers times the
    violations: far less than mixing every row with a data-independent law, which a violation of
    10⁻³ of the budget made cost 0.1–1 % on 16 × 16 grids."""
    from diffpriv.certification._repair import repair_holds

    def table(kappa):
        rows = _inflated_table(data, families, worst, tau, params, jnp.asarray(1.0 + kappa))
        return the_table(problem, np.asarray(rows, np.float64))

    def holds(t):
        return bool(np.all(np.isfinite(t))) and bool(np.all(repair_holds(problem, t)))

    hi = 1e-5
    while not holds(table(hi)):
        hi *= 4.0
        if hi > INFLATE_MAX:
            return None
    lo = hi / 4.0 if hi > 1e-5 else 0.0
    for _ in range(INFLATE_STEPS):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if holds(table(mid)) else (mid, hi)
    return table(hi)


def applies(problem: Problem, kinds) -> bool:
    """Whether the dual solver runs ``problem`` (divergence groups ``kinds``): every nonlinear
    block compares lifted item laws (divergence DistP, extended DistP) in KL, reverse KL, χ²,
    Hellinger, Rényi or total variation, under the expected or worst-case objective (linear
    constraints beside are fine). Measured on 5×5 problems against the convex reference at
    ``gap_tol = 10^-3``, the rest did not converge yet and keeps the augmented Lagrangian: row
    pairs (divergence DP: Rényi 3 on three pairs stopped 2.4 % above the optimum after 100,000
    steps), the largest-entry objective (the bound within 10^-5 of the optimum, but the table
    of the smoothed dual 4–38 % above it: a max over entries is fragile to recover), and the
    transport objective (its plan rows)."""
    from diffpriv.problems._blocks import MixtureBlock

    if problem.objective.transport or problem.objective.epigraph == "entries":
        return False
    if any(not b.linear and not isinstance(b, MixtureBlock) for b in problem.blocks()):
        return False
    return f_divergences(kinds)


def dual_data(problem: Problem, tighten_rel: float) -> tuple[DualData, tuple[Family, ...], float]:
    """The :class:`DualData` of ``problem``, its families, and the objective's scale."""
    from diffpriv.solvers._convex import _support
    from diffpriv.solvers._divergence import divergence_data

    worst = problem.objective.epigraph
    true = linear_data(problem, nonlinear=True)
    mask = _support(problem, problem.blocks()).reshape(true.mask.shape)  # forced zeros removed
    true = true._replace(mask=jnp.asarray(mask))
    loss = np.where(mask, np.asarray(true.row_loss if worst else true.cost), 0.0)
    if worst:
        scale = float(loss.max())
    else:
        scale = float(np.sum(loss.sum(axis=1) / np.maximum(mask.sum(axis=1), 1)))
    scale = scale if scale > 0 else 1.0
    true = true._replace(cost=true.cost / scale, row_loss=true.row_loss / scale, largest=true.largest / scale)
    nl, kinds = divergence_data(problem)
    groups, families = [], []
    for kind, wa, wb, eps, both in zip(kinds, nl.wa, nl.wb, nl.eps, nl.both, strict=True):
        fam, swap = family(*kind)
        eps = np.asarray(eps)
        if fam[0] == "tv":  # TV(P, Q) = Σ max(0, P − Q) ≤ ε: the hockey-stick at e^0, a linear row
            true = true._replace(mix_a=jnp.concatenate([true.mix_a, wa]),
                                 mix_b=jnp.concatenate([true.mix_b, wb]),
                                 mix_eps=jnp.concatenate([true.mix_eps, jnp.zeros(eps.shape)]),
                                 mix_delta=jnp.concatenate([true.mix_delta, jnp.asarray(eps)]))
            continue
        b_true, on = f_budget(*kind, np.asarray(eps))
        b, _ = f_budget(*kind, np.asarray(eps) * (1.0 - tighten_rel))
        on2 = np.stack([on, on & np.asarray(both)], axis=1)
        if swap:
            wa, wb = wb, wa
        groups.append(Group(wa, wb, jnp.asarray(np.stack([b, b], 1)),
                            jnp.asarray(np.stack([b_true, b_true], 1)), jnp.asarray(on2)))
        families.append(fam)
    lin = tighten(true, tighten_rel, 0.0, 0.0)
    n_rows = lin.cost.shape[0]
    if worst:  # ν sums to 1 over the active rows (or entries): about 1/count each
        tau_w = np.full(n_rows, 1.0 / max(int(np.asarray(lin.row_active).sum()), 1))
    else:
        prior = np.asarray(problem.prior, np.float64).reshape(-1)
        tau_w = prior / prior.sum() + 1e-3 / n_rows
    return DualData(lin, true, tuple(groups), jnp.asarray(tau_w)), tuple(families), scale


class DualRun(Declared):
    """The smoothed dual on ``problem`` (divergence constraints, :func:`applies`) under the
    settings of ``opt``, as a :class:`._driver.Run` (module docstring); the result's ``state`` is
    the final multipliers.

    ``budget_scale``: every constraint's ε times this (``solve_batch``); ``init``: multipliers to
    start from (the ``state`` of a run of the same problem, e.g. at a neighbouring budget). The seed
    takes no part (the start is deterministic); it is recorded."""

    name, labels = "dual", ("dual",)
    hands_over = budgets = True
    lean = False

    @classmethod
    def accepts(cls, problem) -> bool:
        return not problem.linear and applies(problem, divergence_kinds(problem.blocks()))

    def __init__(self, opt, problem: Problem, seed: int, *, budget_scale: float = 1.0,
                 init: dict | None = None):
        if budget_scale != 1.0:  # a problem of its own: the repairs check the budgets it solves for
            problem = problem.scaled(budget_scale)
        self.opt, self.problem, self.warm = opt, problem, init is not None
        self.worst = bool(problem.objective.epigraph)
        rel = min(max(opt.gap_tol / 4.0, 1e-7), 1e-2)
        self.data, self.families, self.scale = dual_data(problem, rel)
        self.params = init_params(self.data, self.families, self.worst) if init is None else init
        self.state = _init_state(self.params)
        self.total = opt.steps
        self.tau, self.done = TAU0, 0
        self.bound, self.best, self.last = smallest_objective(problem), None, None

    def chunk(self) -> Chunk:
        from diffpriv.certification._repair import repair

        problem, data, families, worst = self.problem, self.data, self.families, self.worst
        gap_tol = self.opt.gap_tol
        self.params, self.state, value = _chunk(data, families, worst, self.done == 0 and not self.warm,
                                                jnp.asarray(self.tau), self.params, self.state)
        self.done += CHUNK
        value = -float(value)
        lb, rows = _look(data, families, worst, jnp.asarray(self.tau), self.params)
        self.bound = max(self.bound, float(lb) * self.scale)
        self.table = table = the_table(problem, np.asarray(rows, np.float64))
        gap = relative_gap(problem.objective_value(table), self.bound)
        if gap <= gap_tol and np.isfinite(gap):
            for mixing in (True, False):  # inflation only if the mixing falls short
                if self.best is not None and relative_gap(self.best[0], self.bound) <= gap_tol:
                    break
                fixed = (repair(problem, table).table if mixing else
                         _repair_by_inflation(problem, data, families, worst, jnp.asarray(self.tau),
                                              self.params))
                if fixed is not None:
                    loss = problem.objective_value(fixed)
                    if self.best is None or loss < self.best[0]:
                        self.best = (loss, fixed)
            if relative_gap(self.best[0], self.bound) <= gap_tol:
                return Chunk(self.done, relative_gap(self.best[0], self.bound), Status.CONVERGED)
        stalled = self.last is not None and value - self.last <= STAGE_STALL * self.tau * abs(value)
        self.last = value
        if stalled:
            if self.tau <= TAU_MIN:
                return Chunk(self.done, gap, Status.STALLED)
            self.tau, self.last = self.tau / TAU_FACTOR, None
            self.state = _init_state(self.params)
        return Chunk(self.done, gap)

    def finish(self, status: Status) -> Outcome:
        from diffpriv.certification._repair import repair

        if self.best is None:
            fixed = repair(self.problem, self.table)
            self.best = (self.problem.objective_value(fixed.table), fixed.table)
        true_lin = self.data.true_lin
        if bool(proves_infeasible(true_lin._replace(largest=true_lin.largest * self.scale), self.bound)):
            status = Status.INFEASIBLE
        return Outcome(self.best[1], self.bound, status, state=self.params, plan="dual", method="dual")
