"""What a frontier costs against one solve: ``diffpriv sweep`` of N budgets against one
``diffpriv optimize`` of the same config, side by side on this machine, and against HiGHS solving
the N budgets' LPs one after another in one (warm) process.

Both commands run from the shell (``subprocess``: start-up, config checks, JAX's import, the
solves, certification and files included), alternately, ``--repeats`` times each; the medians and
their ratio are reported. In the same process, ``dp.design`` once against ``dp.sweep`` of N
budgets (no files), and each swept budget's certified loss against the LP optimum at that budget.

    python benchmarks/sweep.py configs/quickstart.toml --budget home-vs-out=0.25:4:32 --log
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import diffpriv as dp


def _budgets(spec: str, log: bool) -> tuple[str, list[float]]:
    name, _, rng = spec.rpartition("=")
    lo, hi, n = rng.split(":")
    grid = np.geomspace if log else np.linspace
    return name, [float(b) for b in grid(float(lo), float(hi), int(n))]


def _timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--budget", required=True, help="NAME=LO:HI:N, as for diffpriv sweep")
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/results/sweep.json")
    args = ap.parse_args()
    name, budgets = _budgets(args.budget, args.log)
    exe = str(Path(sys.executable).with_name("diffpriv"))
    times: dict[str, list[float]] = {"optimize": [], "sweep": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            times["optimize"].append(_timed([exe, "optimize", args.config, "--out", f"{tmp}/o{r}"]))
            cmd = [exe, "sweep", args.config, "--budget", args.budget, "--out", f"{tmp}/s{r}"]
            times["sweep"].append(_timed(cmd + (["--log"] if args.log else [])))
    cli = {k: statistics.median(v) for k, v in times.items()}

    problem, options = dp.load_config(args.config)
    kwargs = options.kwargs()
    seed = kwargs.pop("seed")
    start = time.perf_counter()
    one = dp.design(problem, seed=seed, **kwargs)
    one_seconds = time.perf_counter() - start
    start = time.perf_counter()
    frontier = dp.sweep(problem, budgets, constraint=name, seed=seed, **kwargs)
    sweep_seconds = time.perf_counter() - start
    index = [c.name for c in problem.constraints].index(name)
    excess, lp_seconds = [], 0.0
    for b, row in zip(budgets, frontier.rows, strict=True):
        constraints = list(problem.constraints)
        constraints[index] = dataclasses.replace(constraints[index], epsilon=b)
        start = time.perf_counter()  # HiGHS on the whole LP, in this (warm) process
        lp = dp.solvers.lp(dataclasses.replace(problem, constraints=tuple(constraints))).value
        lp_seconds += time.perf_counter() - start
        excess.append(row["certified_loss"] / lp - 1)
    result = {
        "config": args.config, "budget": args.budget, "log": args.log, "budgets": len(budgets),
        "cli_seconds": cli, "cli_ratio": cli["sweep"] / cli["optimize"], "cli_runs": times,
        "in_process_seconds": {"design": one_seconds, "sweep": sweep_seconds},
        "in_process_ratio": sweep_seconds / one_seconds, "method": one.result.method,
        "highs_seconds": lp_seconds, "cli_sweep_over_highs": cli["sweep"] / lp_seconds,
        "methods": sorted({r["method"] for r in frontier.rows}),
        "max_excess_over_lp": max(excess), "statuses": sorted({r["status"] for r in frontier.rows}),
    }
    print(json.dumps(result, indent=2))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0 if max(excess) <= 0.01 else 1


if __name__ == "__main__":
    raise SystemExit(main())
