"""Is entropic transport (ott-jax) the better tool for Wasserstein DP on large grids?

Wasserstein DP of order 1 on an ``n × n`` grid (Euclidean ground metric, 4-neighbour pairs)
bounds ``W_1(A[x], A[x'])`` for every pair: 1,984 pairs of laws on 1,024 points at n = 32, where
the lifted PDHG's couplings (``Y²`` per pair) need ~190 GB. An optimizer through entropic
transport would evaluate every pair's level (and its gradient) thousands of times. This measures
one such evaluation on this machine, at the table ``A[x] ∝ exp(−d(x, ·))`` (a planar-Laplace
shape, a plausible iterate):

* exact: POT's network simplex (``ot.emd2``, what the certifier runs), per pair;
* entropic: ott-jax's Sinkhorn (``ott.solvers.linear.solve`` on a ``PointCloud`` with the
  Euclidean cost, ``threshold = 1e-6``), ``jit(vmap)`` over a batch of pairs, at
  ``ε = 10⁻² · max C`` and ``10⁻³ · max C``, with its error against the exact levels.

ott-jax is not a dependency (it was dropped after this measurement); install it to rerun:
``pip install ott-jax==0.6.0``.

    python benchmarks/entropic_wdp.py            # n = 32, 16 pairs each
    python benchmarks/entropic_wdp.py --n 16 --pairs 32
"""

from __future__ import annotations

import argparse
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import ot

import diffpriv as dp

jax.config.update("jax_enable_x64", True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--pairs", type=int, default=16, help="pairs timed (then extrapolated to all)")
    args = ap.parse_args(argv)
    dom = dp.Domain.grid(args.n, args.n, 1.0)
    pairs = np.asarray(dp.problems.pairs_within(dom, 1.0))
    d = dom.distances(dom)
    table = np.exp(-d)
    table /= table.sum(1, keepdims=True)
    m = min(args.pairs, len(pairs))
    p, q = table[pairs[:m, 0]], table[pairs[:m, 1]]
    print(f"{args.n}x{args.n} grid: {len(pairs)} pairs of laws on {args.n**2} points; timing {m} pairs")

    start = time.perf_counter()
    exact = np.array([ot.emd2(p[k], q[k], d, numItermax=10**7) for k in range(m)])
    per = (time.perf_counter() - start) / m
    print(f"exact (POT network simplex): {1e3 * per:.0f} ms a pair, {per * len(pairs):.0f} s for all "
          f"pairs; mean W1 {exact.mean():.4f}")

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from ott.geometry import costs, pointcloud
            from ott.solvers import linear
    except ImportError:
        print("entropic: ott-jax is not installed (pip install ott-jax==0.6.0)")
        return 0
    points = jnp.asarray(dom.coords)
    for rel in (1e-2, 1e-3):
        eps = rel * float(d.max())

        def one(a, b, eps=eps):
            geom = pointcloud.PointCloud(points, points, cost_fn=costs.Euclidean(), epsilon=eps)
            out = linear.solve(geom, a, b, threshold=1e-6, max_iterations=20_000)
            return out.primal_cost, out.n_iters, out.converged

        solve = jax.jit(jax.vmap(one))
        start = time.perf_counter()
        jax.block_until_ready(solve(jnp.asarray(p), jnp.asarray(q)))
        first = time.perf_counter() - start
        start = time.perf_counter()
        cost, iters, converged = jax.block_until_ready(solve(jnp.asarray(p), jnp.asarray(q)))
        per = (time.perf_counter() - start) / m
        err = np.abs(np.asarray(cost) - exact) / exact
        print(f"entropic eps = {rel:g} max C: {1e3 * per:.0f} ms a pair ({first:.1f} s with compilation), "
              f"{per * len(pairs):.0f} s for all pairs, {int(np.max(iters))} iterations, "
              f"converged {int(np.sum(converged))}/{m}; relative error {err.min():.3g}-{err.max():.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
