"""Scaling benchmark: diffpriv against the exact LP reference as the grid grows.

Two families on ``n × n`` grids of 1 km cells (Euclidean loss, Y = X):

* ``distp``: pure DistP (ε = 1) between two Gaussian mixtures ("home" in three corners, "out"
  downtown), as in ``configs/quickstart.toml``;
* ``geo``: geo-indistinguishability, extended DP with ε = 0.5 per km on 4-neighbour pairs,
  uniform prior.

For each size, each stage runs in its own process (so that its peak memory is its own): the LP
(HiGHS), and ``dp.design`` (optimize, then certify) stopped at a certified gap of 1 % and of
0.1 % (``gap_tol``: the certified table is then within that of the optimum, since the lower
bound is below it). Printed and written to ``benchmarks/results/scaling.json``: wall time,
peak resident memory, steps, status, certified loss and its gap to the LP optimum.

    python benchmarks/scaling.py                              # small sizes, CPU
    python benchmarks/scaling.py --distp 10 16 24 --geo 8 16 32
    python benchmarks/scaling.py --distp 64 --geo --gap-tols 1e-2 --steps 5000   # one capped stage
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import resource
import subprocess
import sys
import time

import numpy as np

import diffpriv as dp


def grid_problem(kind: str, n: int) -> dp.Problem:
    """The benchmark problem of ``kind`` on an ``n × n`` grid of 1 km cells."""
    dom = dp.Domain.grid(n, n, 1.0)
    loss = dom.distances(dom)
    c = dom.coords

    def mixture(centres, weights, scale):
        d = sum(w * np.exp(-np.sum((c - np.asarray(m) * n) ** 2, axis=1) / (2 * (scale * n) ** 2))
                for m, w in zip(centres, weights, strict=True))
        return d / d.sum()

    if kind == "distp":
        home = mixture([(0.15, 0.15), (0.85, 0.15), (0.15, 0.85)], [0.4, 0.3, 0.3], 0.12)
        out = mixture([(0.5, 0.5), (0.75, 0.75)], [0.7, 0.3], 0.1)
        items = (dp.Item("home", home), dp.Item("out", out))
        return dp.Problem(dom, dom, loss, (home + out) / 2, items=items,
                          constraints=(dp.DistP(((0, 1),), 1.0),))
    pairs = dp.pairs_within(dom, 1.0)  # 4-neighbour cells
    return dp.Problem(dom, dom, loss, np.full(n * n, 1.0 / (n * n)),
                      constraints=(dp.ExtendedDP(0.5, pairs=pairs),))


def run_one(kind: str, n: int, stage: str, steps: int) -> dict:
    """One stage in this process: ``"lp"`` or ``"design:<gap_tol>"``."""
    problem = grid_problem(kind, n)
    start = time.perf_counter()
    if stage == "lp":
        ref = dp.solvers.lp(problem)
        out = {"value": ref.value}
    else:
        d = dp.design(problem, method="pdhg", steps=steps, gap_tol=float(stage.split(":")[1]))
        out = {"certified": d.certificate.loss, "lower_bound": d.result.lower_bound,
               "steps": d.result.steps, "status": d.result.status, "ok": d.certificate.ok,
               "repair_t": d.certificate.repair_t, "certified_gap": d.gap}
    out["seconds"] = time.perf_counter() - start
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if stage != "lp":  # on an accelerator, its own peak too
        import jax

        stats = jax.devices()[0].memory_stats() or {}
        if "peak_bytes_in_use" in stats:
            out["device_peak_mb"] = stats["peak_bytes_in_use"] / 2**20
        out["device"] = str(jax.devices()[0].device_kind)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--distp", type=int, nargs="*", default=[10, 16])
    ap.add_argument("--geo", type=int, nargs="*", default=[8, 16])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--gap-tols", type=float, nargs="+", default=[1e-2, 1e-3],
                    help="one dp.design stage for each (default: 1e-2 1e-3)")
    ap.add_argument("--no-lp-above", type=int, default=4096, help="skip the LP above this many cells")
    ap.add_argument("--out", default="benchmarks/results/scaling.json")
    ap.add_argument("--one", nargs=3, metavar=("KIND", "N", "STAGE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one[0], int(args.one[1]), args.one[2], args.steps)))
        return

    rows = []
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    designs = [f"design:{t:g}" for t in args.gap_tols]
    print(f"{'kind':<6} {'n':>4} {'cells':>6} {'LP s':>8} {'LP MB':>7} "
          + " ".join(f"{'≤' + format(100 * t, 'g') + '% s':>9} {'MB':>6} {'steps':>7} {'vs LP %':>8}"
                     for t in args.gap_tols))
    for kind, sizes in (("distp", args.distp), ("geo", args.geo)):
        for n in sizes:
            row = {"kind": kind, "n": n, "cells": n * n}
            stages = (["lp"] if n * n <= args.no_lp_above else []) + designs
            for stage in stages:
                cmd = [sys.executable, __file__, "--one", kind, str(n), stage, "--steps", str(args.steps)]
                res = subprocess.run(cmd, capture_output=True, text=True, check=False)
                row[stage] = (json.loads(res.stdout.strip().splitlines()[-1]) if res.returncode == 0
                              else {"error": res.stderr.strip().splitlines()[-1:]})
            lp = row.get("lp", {}).get("value")
            for stage in designs:
                r = row[stage]
                if lp is not None and "certified" in r:
                    r["gap_to_lp"] = (r["certified"] - lp) / lp
            rows.append(row)

            def cell(r, key, fmt):
                return format(r[key], fmt) if key in r else "-"

            lpr = row.get("lp", {})
            print(f"{kind:<6} {n:>4} {n * n:>6} {cell(lpr, 'seconds', '8.2f'):>8} "
                  f"{cell(lpr, 'peak_mb', '7.0f'):>7} " + " ".join(
                      f"{cell(row[s], 'seconds', '9.2f'):>9} {cell(row[s], 'peak_mb', '6.0f'):>6} "
                      f"{cell(row[s], 'steps', '7d'):>7} "
                      f"{(format(100 * row[s]['gap_to_lp'], '8.4f') if 'gap_to_lp' in row[s] else '-'):>8}"
                      for s in designs), flush=True)
            out.write_text(json.dumps({"machine": platform.platform(), "argv": sys.argv[1:],
                                       "rows": rows}, indent=1))  # after every row
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
