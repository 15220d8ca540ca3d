"""Optimality benchmark: the certified optimizer against the exact LP optimum.

Runs seeded random problems (``diffpriv.problems.random_problem``: |X|, |Y| ≤ 30, one to three
protected pairs, ε in [0.1, 3], some with local or extended DP, some with 2–3 profiles, every
fourth with δ = 0.02) through each optimizer method, certifies the table, and compares the
certified loss and the reported lower bound with HiGHS's optimum (relative gaps; absolute where
the optimum is 0). No LP solver runs inside the optimizer.

    python benchmarks/optimality.py                   # 24 problems, both methods
    python benchmarks/optimality.py --n 40 --methods pdhg
    python benchmarks/optimality.py --objective transport --methods pdhg   # W1(A#λ, λ)

Prints one row per problem and a summary, and writes ``benchmarks/results/optimality.json``.
Acceptance (issue 2): every certified loss within 1 % of the LP optimum, the median within
0.2 %, and no lower bound above the optimum.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import platform
import time

import numpy as np

import diffpriv as dp
from diffpriv.problems import random_problem


def relative(value: float, reference: float) -> float:
    """``(value − reference)/reference``; the absolute difference when the optimum is 0."""
    return (value - reference) / reference if reference > 1e-12 else value - reference


def family(problem: dp.Problem) -> str:
    kinds = "+".join(sorted({c.kind for c in problem.constraints}))
    pairs = sum(len(c.pairs) for c in problem.constraints if c.kind == "distp")
    delta = any(getattr(c, "delta", 0) > 0 for c in problem.constraints)
    return f"{kinds}{' δ' if delta else ''} pairs={pairs} S={len(problem.profiles)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=24, help="number of random problems (seeds 0..n-1)")
    ap.add_argument("--methods", default="pdhg,al", help="comma-separated optimizer methods")
    ap.add_argument("--steps", type=int, default=None, help="steps per run (default: the method's)")
    ap.add_argument("--gap-tol", type=float, default=1e-5,
                    help="pdhg's stopping gap (default 1e-5, ten times tighter than the optimizer's)")
    ap.add_argument("--period", type=int, default=None,
                    help="pdhg's steps between restart checks (default: the optimizer's)")
    ap.add_argument("--omega", type=float, default=None,
                    help="pdhg's primal weight (default: the optimizer's)")
    ap.add_argument("--objective", default="expected",
                    help="the problems' objective (expected, worst, entry, transport)")
    ap.add_argument("--out", default="benchmarks/results/optimality.json")
    args = ap.parse_args()
    methods = args.methods.split(",")

    rows = []
    header = f"{'seed':>4} {'shape':>12} {'family':<28} {'LP':>10} " + " ".join(
        f"{m + ' gap %':>11} {m + ' lb %':>10} {m + ' s':>7}" for m in methods)
    print(header)
    for seed in range(args.n):
        problem = random_problem(seed, delta=0.02 if seed % 4 == 3 else 0.0)
        problem = dataclasses.replace(problem, objective=args.objective)
        t0 = time.perf_counter()
        ref = dp.solvers.lp(problem)
        lp_seconds = time.perf_counter() - t0
        row = {"seed": seed, "shape": problem.shape, "family": family(problem), "lp": ref.value,
               "lp_seconds": lp_seconds}
        for m in methods:
            opts = {} if args.steps is None else {"steps": args.steps}
            if m == "pdhg":
                opts["gap_tol"] = args.gap_tol
                if args.period is not None:
                    opts["period"] = args.period
                if args.omega is not None:
                    opts["omega"] = args.omega
            design = dp.design(problem, method=m, **opts)  # optimize, then certify
            result, cert = design.result, design.certificate
            assert cert.ok and dp.verify(cert.to_dict()).ok
            row[m] = {
                "certified": cert.loss,
                "raw": result.objective,
                "lower_bound": result.lower_bound,
                "repair_t": cert.repair_t,
                "gap": relative(cert.loss, ref.value),
                "lb_gap": -relative(result.lower_bound, ref.value),
                "seconds": result.seconds,
                "steps": result.steps,
                "status": result.status,
            }
        rows.append(row)
        print(f"{seed:>4} {str(problem.shape):>12} {row['family']:<28} {ref.value:>10.6f} " + " ".join(
            f"{100 * row[m]['gap']:>11.4f} {100 * row[m]['lb_gap']:>10.4f} {row[m]['seconds']:>7.1f}"
            for m in methods), flush=True)

    summary = {}
    for m in methods:
        gaps = np.array([r[m]["gap"] for r in rows])
        lbs = np.array([r[m]["lb_gap"] for r in rows])
        secs = np.array([r[m]["seconds"] for r in rows])
        summary[m] = {
            "median_gap_pct": 100 * float(np.median(gaps)),
            "max_gap_pct": 100 * float(gaps.max()),
            "within_1pct": int((gaps <= 0.01).sum()),
            "lower_bound_above_lp": int((lbs < -1e-9).sum()),
            "median_lb_gap_pct": 100 * float(np.median(lbs)),
            "total_seconds": float(secs.sum()),
            "median_steps": float(np.median([r[m]["steps"] for r in rows])),
            "converged": int(sum(r[m]["status"] == "converged" for r in rows)),
            "time_ratio_vs_lp": float(secs.sum() / sum(r["lp_seconds"] for r in rows)),
        }
        s = summary[m]
        print(f"{m}: certified gap median {s['median_gap_pct']:.4f} %, max {s['max_gap_pct']:.4f} %, "
              f"{s['within_1pct']}/{len(rows)} within 1 %; lower bound above LP: "
              f"{s['lower_bound_above_lp']}; median lower-bound gap {s['median_lb_gap_pct']:.4f} %; "
              f"total {s['total_seconds']:.1f} s; median steps {s['median_steps']:.0f}, "
              f"{s['converged']}/{len(rows)} stopped at gap_tol; time / LP time (same run) "
              f"{s['time_ratio_vs_lp']:.1f}")
    if len(methods) > 1:
        base = summary[methods[0]]["total_seconds"]
        for m in methods[1:]:
            print(f"time ratio {m}/{methods[0]} (same run, same machine): "
                  f"{summary[m]['total_seconds'] / base:.2f}")
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "rows": rows, "summary": summary},
                              indent=1, default=list))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
