"""Linear problems that differ only in their budgets (the points of a frontier) as one ``vmap``-ed
compiled PDHG program (:func:`._optimizer.solve_budgets`, :func:`._optimizer.solve_batch`), placed
over every device along the budgets."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from diffpriv.solvers import _pdhg
from diffpriv.solvers._driver import check_finite
from diffpriv.solvers._linear import linear_data, operator, sparse_matrix, the_table, tighten
from diffpriv.solvers._polish import polish

__all__ = ["BUDGETS", "batch_linear"]

BUDGETS = ("pair_eps", "mix_eps", "pair_delta", "mix_delta")
"""The fields of :class:`._linear.LinearData` that differ between budgets of one problem."""


def _placed(tree, axes, n: int, shard: bool):
    """``tree`` (a batch, leading axis ``n`` where ``axes`` says 0) on the local devices: the batch
    axis split over a one-axis mesh of them (padded by repeating the last budget to a multiple of
    their count), the rest replicated; as it is with one device or ``shard = False``."""
    devices = jax.devices()
    if not shard or len(devices) == 1:
        return tree, n
    size = -(-n // len(devices)) * len(devices)
    mesh = jax.sharding.Mesh(np.asarray(devices), ("budgets",))
    split = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("budgets"))
    whole = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())

    def place(x, axis):  # from host data every process holds: works across hosts too
        x = np.asarray(x)
        if axis is None:
            return jax.make_array_from_callback(x.shape, whole, lambda index: x[index])
        pad = np.concatenate([x, np.repeat(x[-1:], size - n, axis=0)]) if size > n else x
        return jax.make_array_from_callback(pad.shape, split, lambda index: pad[index])

    return jax.tree_util.tree_map(place, tree, axes, is_leaf=lambda x: x is None), size


def batch_linear(opt, problems, seed: int, shard: bool) -> tuple[np.ndarray, np.ndarray]:
    """:func:`._optimizer.solve_budgets` on presolved problems (``opt`` an :class:`._optimizer.Optimizer`)."""
    problem = problems[0]
    datas = [linear_data(p) for p in problems]
    base = datas[0]
    for p, d in zip(problems, datas, strict=True):
        same = all(np.shape(getattr(d, f)) == np.shape(getattr(base, f)) for f in base._fields) and \
            p.shape == problem.shape and np.array_equal(p.loss, problem.loss) and \
            np.array_equal(p.prior, problem.prior)
        if not same:
            raise ValueError("solve_budgets: the problems must differ in their budgets only")
    true_batch = base._replace(**{f: jnp.stack([getattr(d, f) for d in datas]) for f in BUDGETS})
    batch = tighten(true_batch)
    n_periods = max(1, opt.steps // opt.period)
    slack = bool(any(np.any(np.asarray(d.pair_delta) > 0) or np.any(np.asarray(d.mix_delta) > 0)
                     for d in datas))
    n = len(problems)
    (placed, true_placed), _ = _placed((batch, true_batch), (batch.batch_axes, batch.batch_axes), n, shard)
    tables, lbs, us = _batch(placed, true_placed, jax.random.PRNGKey(seed), n_periods, opt.period,
                             problem.objective.epigraph, opt.omega, opt.omega_range, opt.jitter, slack,
                             opt.gap_tol, opt.viol_factor * opt.gap_tol)
    if jax.process_count() > 1:  # several hosts: every process gets the whole batch
        from jax.experimental import multihost_utils

        tables, lbs, us = multihost_utils.process_allgather((tables, lbs, us), tiled=True)
    tables = np.array(tables, dtype=np.float64)[:n]
    lbs, us = np.asarray(lbs)[:n], np.asarray(us)[:n]
    tables = tables / tables.sum(-1, keepdims=True)
    check_finite(tables)
    if opt.polish:
        for b in range(n):
            one = batch._replace(**{f: getattr(batch, f)[b] for f in BUDGETS})
            g, delta = sparse_matrix(operator(one))
            if g.shape[0]:
                tables[b] = polish(problems[b], tables[b], g, delta, us[b])
    return np.stack([the_table(p, t) for p, t in zip(problems, tables, strict=True)]), lbs


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
