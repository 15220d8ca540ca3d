"""The augmented Lagrangian's run on problems with divergence constraints (KL, χ², Hellinger,
Rényi, Wasserstein, …) that no other solver takes (:func:`._methods.first_order`).

PDHG's steps are built for linear constraints; such a problem runs the augmented Lagrangian of
:mod:`diffpriv.solvers._al` instead (:class:`ALRun`): rounds of L-BFGS steps (with an Adam fallback) on the
softmax logits and a multiplier update, in jit-compiled chunks; the divergences are the
residuals of :mod:`diffpriv.solvers._divergence`, and the certified lower bound linearises them
(Frank–Wolfe on the Lagrangian at each chunk's multipliers). The settings below were measured on
the 6×6 benchmark problems (``benchmarks/divergence_optimality.py``, ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from diffpriv.problems._blocks import divergence_kinds
from diffpriv.problems._problem import Problem
from diffpriv.solvers._al import al_init, al_output, al_run
from diffpriv.solvers._divergence import (
    divergence_data,
    divergence_violation,
    frank_wolfe_bound,
    transport_dual_bound,
)
from diffpriv.solvers._driver import Chunk, Declared, Outcome, Status, check_finite, relative_gap
from diffpriv.solvers._linear import (
    epigraph_weights,
    linear_data,
    lower_bound,
    operator,
    proves_infeasible,
    smallest_objective,
    the_table,
    tighten,
)

__all__ = ["ALRun", "batch_nonlinear"]

NONLINEAR_TIGHTEN = 1e-6
"""Divergence budgets are solved for at ``ε·(1 − 10^-6)``."""

NONLINEAR_VIOL_TOL = 1e-6
"""A nonlinear table counts as feasible when its normalised residuals are at most this (the
certifier's repair then costs about as much)."""

STALL = 0.01
"""The nonlinear run stops when a chunk moves the objective by less than ``STALL · gap_tol``."""

NONLINEAR_INNER, NONLINEAR_CHUNK = 100, 10
"""L-BFGS steps per augmented-Lagrangian round, rounds per compiled call."""

NONLINEAR_RHO, NONLINEAR_GROWTH, NONLINEAR_RHO_MAX = 10.0, 1.5, 1e4
"""The penalty starts at 10 and grows 1.5× a round, up to 10^4 (larger penalties made the
L-BFGS rounds fail and the multipliers collapse)."""

FRANK_WOLFE_STEPS, BOUND_MIX = 500, 1e-6
"""The bound's Frank–Wolfe steps, from the table mixed with this much of the uniform table on
the support (a point where every allowed entry is positive, so the linearisation is valid)."""


TRANSPORT_DUAL_STEPS = 1000
"""Adam steps on the Wasserstein constraints' free marginal multipliers in the bound
(:func:`._divergence.transport_dual_bound`)."""


REMIX = 1e-4
"""Each chunk starts from the table mixed with this much of the uniform table on the support:
entries the logits drove to ~0 get mass back (their logit gradients vanish with them)."""


@jax.jit
def _remix(data, state, weight):
    table = jax.nn.softmax(jnp.where(data.mask, state.params[0], -jnp.inf), axis=-1)
    mixed = (1.0 - weight) * table + weight * data.mask / jnp.sum(data.mask, axis=1, keepdims=True)
    theta = jnp.where(data.mask, jnp.log(jnp.where(data.mask, mixed, 1.0)), 0.0)
    return state._replace(params=(theta, *state.params[1:]))


@jax.jit
def _al_init_jit(data, key, nonlinear):
    return al_init(data, key, rho=NONLINEAR_RHO, init_scale=1.0, nonlinear=nonlinear)


@jax.jit(static_argnums=(2, 4), donate_argnums=(1,))
def _al_chunk_jit(data, state, worst, nonlinear, kinds):
    return al_run(data, state, outer=NONLINEAR_CHUNK, inner=NONLINEAR_INNER, worst=worst,
                  nonlinear=nonlinear, kinds=kinds, solver="lbfgs", growth=NONLINEAR_GROWTH,
                  rho_max=NONLINEAR_RHO_MAX)


@jax.jit(static_argnums=(3, 5))
def _nonlinear_bound_jit(data, u, nu, worst, nonlinear, kinds, table, lam):
    op = operator(data)
    if worst:
        nu = jnp.where(data.row_active, jnp.maximum(nu, 0.0), 0.0)
    base = (epigraph_weights(data, nu) if worst else data.cost) + op.transpose(u, positive=True)
    uniform = data.mask / jnp.sum(data.mask, axis=1, keepdims=True)
    start = (1.0 - BOUND_MIX) * table + BOUND_MIX * uniform

    def bound_of(lin):
        return lower_bound(data, u, nu, worst=worst, op=op, linearized=lin)

    fw = frank_wolfe_bound(base, data.mask, bound_of, nonlinear, kinds, start, lam, FRANK_WOLFE_STEPS)
    return jnp.maximum(fw, transport_dual_bound(bound_of, nonlinear, kinds, start, lam, TRANSPORT_DUAL_STEPS))


class ALRun(Declared):
    """The augmented Lagrangian (:mod:`._al`) on a problem with divergence constraints, under the
    settings of ``opt`` (an :class:`~diffpriv.solvers._optimizer.Optimizer`), as a
    :class:`._driver.Run`; :func:`._methods.route` sends it the problems no other solver takes.

    Budgets are tightened by ``NONLINEAR_TIGHTEN`` (relative) so that little repair is needed.
    Rounds of ``NONLINEAR_INNER`` steps run in compiled chunks of ``NONLINEAR_CHUNK`` rounds,
    each chunk from the table remixed with ``REMIX`` of the uniform one; after each chunk the
    lower bound is certified at its multipliers (Frank–Wolfe on the Lagrangian,
    :func:`._divergence.frank_wolfe_bound`; the best is kept) and the best table kept (lowest
    objective among those with normalised residuals at most ``NONLINEAR_VIOL_TOL``). The run
    stops when that table's gap to the bound is at most ``gap_tol`` (``"converged"``), when a
    chunk moved the objective by less than ``STALL · gap_tol`` or threw the table off
    (``"stalled"``: the bound is looser than the table), or when ``steps`` ran out.
    """

    name, labels = "al", ("al",)
    lean = False

    @classmethod
    def accepts(cls, problem) -> bool:
        from diffpriv.solvers import _transport_pdhg

        kinds = divergence_kinds(problem.blocks())
        return not problem.linear and not _transport_pdhg.applies(problem, kinds)

    def __init__(self, opt, problem: Problem, seed: int):
        self.opt, self.problem = opt, problem
        self.worst = problem.objective.epigraph
        self.true_data = linear_data(problem, nonlinear=True)
        self.data = tighten(self.true_data)
        self.true_nl, self.kinds = divergence_data(problem, self.true_data.cost.shape[0])
        self.nl = self.true_nl._replace(eps=tuple(e * (1.0 - NONLINEAR_TIGHTEN) for e in self.true_nl.eps))
        self.state = _al_init_jit(self.data, jax.random.PRNGKey(seed), self.nl)
        self.total = opt.steps
        self.done, self.bound, self.best, self.last = 0, smallest_objective(problem), None, None

    def chunk(self) -> Chunk:
        data, true_data, kinds, problem = self.data, self.true_data, self.kinds, self.problem
        gap_tol = self.opt.gap_tol
        self.state = _al_chunk_jit(data, _remix(data, self.state, REMIX), self.worst, self.nl, kinds)
        self.done += NONLINEAR_CHUNK * NONLINEAR_INNER
        table, mu, nu, lam = al_output(data, self.state, self.worst)
        self.bound = max(self.bound, float(_nonlinear_bound_jit(true_data, mu, nu, self.worst, self.true_nl,
                                                                kinds, table, lam)))
        table = np.asarray(table, np.float64)
        if not np.all(np.isfinite(table)):  # diverged: the best table so far, if any
            if self.best is None:
                return Chunk(self.done, np.inf, Status.DIVERGED)
            return Chunk(self.done, relative_gap(self.best[0][1], self.bound), Status.STALLED)
        key = (divergence_violation(true_data, self.true_nl, kinds, table) > NONLINEAR_VIOL_TOL,
               problem.objective_value(the_table(problem, table)))
        if self.best is None or key < self.best[0]:
            self.best = (key, table)
        gap = relative_gap(self.best[0][1], self.bound)
        if not self.best[0][0] and gap <= gap_tol:
            return Chunk(self.done, gap, Status.CONVERGED)
        last, self.last = self.last, key
        thrown = last is not None and not last[0] and key[1] > last[1] * (1 + gap_tol)
        still = last is not None and not key[0] and abs(last[1] - key[1]) <= STALL * gap_tol * key[1]
        # no progress, or a round threw the table off: keep the best
        return Chunk(self.done, gap, Status.STALLED if thrown or still else None)

    def finish(self, status: Status) -> Outcome:
        if self.best is None:
            raise FloatingPointError("optimizer: the iterates became non-finite (diverged); "
                                     "try a smaller optimizer.omega or another method")
        rows = np.array(self.best[1], dtype=np.float64)
        rows /= rows.sum(axis=-1, keepdims=True)
        check_finite(rows)
        if bool(proves_infeasible(self.true_data, self.bound)):
            status = Status.INFEASIBLE
        return Outcome(the_table(self.problem, rows), self.bound, status,
                       divergence_violation(self.true_data, self.true_nl, self.kinds, rows), method="al")


def batch_nonlinear(opt, problem: Problem, scales, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``solve_batch`` by the augmented Lagrangian: every budget ``ε`` (linear and divergence)
    times each of ``scales``, as one ``vmap``-ed compiled program of
    ``ceil(steps / (NONLINEAR_CHUNK · NONLINEAR_INNER))`` chunks of rounds (no early stop: a
    batch runs its chunks in lockstep), then each element's bound. Returns ``(tables [B, S, X,
    Y], lower_bounds [B])``; the tables are the last chunk's (not certified)."""
    worst = problem.objective.epigraph
    base = linear_data(problem, nonlinear=True)
    nl, kinds = divergence_data(problem, base.cost.shape[0])
    scales = jnp.asarray(scales, dtype=base.cost.dtype)
    chunks = max(1, -(-opt.steps // (NONLINEAR_CHUNK * NONLINEAR_INNER)))
    tables, bounds = _batch_jit(base, nl, scales, jax.random.PRNGKey(seed), worst, kinds, chunks)
    tables = np.array(tables, dtype=np.float64)
    tables = np.stack([the_table(problem, t) for t in tables / tables.sum(axis=-1, keepdims=True)])
    return tables, np.maximum(np.asarray(bounds), smallest_objective(problem))


@jax.jit(static_argnums=(4, 5, 6))
def _batch_jit(base, nl, scales, key, worst, kinds, chunks):
    def one(scale):
        true_data = base._replace(pair_eps=scale * base.pair_eps, mix_eps=scale * base.mix_eps)
        true_nl = nl._replace(eps=tuple(scale * e for e in nl.eps))
        data = tighten(true_data)
        tight = true_nl._replace(eps=tuple(e * (1.0 - NONLINEAR_TIGHTEN) for e in true_nl.eps))
        state = al_init(data, key, rho=NONLINEAR_RHO, init_scale=1.0, nonlinear=tight)

        def chunk(st, _):
            st = al_run(data, _remix(data, st, REMIX), outer=NONLINEAR_CHUNK, inner=NONLINEAR_INNER,
                        worst=worst, nonlinear=tight, kinds=kinds, solver="lbfgs",
                        growth=NONLINEAR_GROWTH, rho_max=NONLINEAR_RHO_MAX)
            return st, None

        state, _ = jax.lax.scan(chunk, state, None, length=chunks)
        table, mu, nu, lam = al_output(data, state, worst)
        return table, _nonlinear_bound_jit(true_data, mu, nu, worst, true_nl, kinds, table, lam)

    return jax.vmap(one)(scales)


ALRun.batch = staticmethod(batch_nonlinear)
