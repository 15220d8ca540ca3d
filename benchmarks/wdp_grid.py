"""Wasserstein DP on n×n grids with 4-neighbour pairs: Kantorovich cuts against the lifted PDHG and
Clarabel, side by side.

The problem: ``benchmarks/divergence_optimality.py``'s Gaussian-mixture grid (two items, prior
their average, Euclidean loss, outputs = inputs) under ``W_1(A[x], A[x']) ≤ ε`` for every pair of
4-neighbour cells (1,984 pairs on 32×32, where the lifted PDHG's couplings would need ~190 GB).
Each solver's table is certified exactly (``dp.design``); the gap is the certified loss against
the solver's own lower bound; Clarabel's optimum (where it runs) is the yardstick.

    python benchmarks/wdp_grid.py --grid 6 8 --methods cuts,pdhg,clarabel
    python benchmarks/wdp_grid.py --grid 32 --methods cuts --rounds 40 --gap-tol 1e-2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import resource
import sys
import time

import diffpriv as dp

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from divergence_optimality import grid_problem  # noqa: E402


def wdp_problem(n: int, epsilon: float, seed: int = 0) -> dp.Problem:
    base = grid_problem("kl", n, seed)
    pairs = dp.problems.pairs_within(base.inputs, 1.0)
    return dataclasses.replace(base, constraints=(dp.WassersteinDP(epsilon=epsilon, pairs=pairs),))


def run(n: int, epsilon: float, method: str, *, gap_tol: float, rounds: int, seed: int) -> dict:
    problem = wdp_problem(n, epsilon, seed)
    row = {"n": n, "epsilon": epsilon, "seed": seed, "method": method}
    start = time.perf_counter()
    if method == "clarabel":
        try:
            row["optimum"] = dp.solvers.convex(problem).value
        except dp.solvers.ConvexSolveError as err:
            row["error"] = str(err)
        row["seconds"] = time.perf_counter() - start
        return row
    options = {"steps": rounds} if method == "cuts" else {}
    design = dp.design(problem, method=method, gap_tol=gap_tol, **options)
    cert, result = design.certificate, design.result
    row.update(seconds=time.perf_counter() - start, certified=cert.loss, ok=cert.ok, bound=result.lower_bound,
               gap=cert.loss / result.lower_bound - 1 if result.lower_bound > 0 else float("inf"),
               status=result.status, steps=result.steps, solver_seconds=result.seconds,
               peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", type=int, nargs="+", default=[6, 8])
    ap.add_argument("--epsilon", type=float, nargs="+", default=[0.6])
    ap.add_argument("--methods", default="cuts,pdhg,clarabel")
    ap.add_argument("--gap-tol", type=float, default=1e-3)
    ap.add_argument("--rounds", type=int, default=500, help="the most LP rounds of the cuts")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=pathlib.Path)
    args = ap.parse_args(argv)
    rows = []
    for n in args.grid:
        for eps in args.epsilon:
            for method in args.methods.split(","):
                row = run(n, eps, method, gap_tol=args.gap_tol, rounds=args.rounds, seed=args.seed)
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.out:
                    args.out.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
