"""The smooth objectives against the classic mechanisms: categorical local DP (k values, ε per pair,
a skewed Dirichlet prior), the gradient search's certified table (``dp.design``, ``method =
"auto"``) against k-ary randomized response at the largest ε its certificate allows
(``calibrate``), both scored by the certifier's float64 value: the estimation error of the input
law from ``--reports`` reports, and minus the mutual information.

    python benchmarks/utilities.py --k 4 8 12 20 --eps 0.5 1 2 4 --out benchmarks/results/utilities.json
    python benchmarks/utilities.py --table benchmarks/results/utilities.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import diffpriv as dp  # noqa: E402
from diffpriv.mechanisms import calibrate  # noqa: E402
from diffpriv.problems import EstimationError, InformationLoss  # noqa: E402


def problem(k: int, eps: float, objective, seed: int):
    x = dp.Domain(tuple(f"v{i}" for i in range(k)))
    prior = np.random.default_rng(seed).dirichlet(np.full(k, 0.7))
    return dp.Problem(x, x, 1.0 - np.eye(k), prior, constraints=(dp.LocalDP(epsilon=eps),),
                      objective=objective)


def run(k: int, eps: float, objective, seed: int) -> dict:
    p = problem(k, eps, objective, seed)
    start = time.perf_counter()
    d = dp.design(p)
    seconds = time.perf_counter() - start
    krr = calibrate(p, "krr")
    base = p.objective_value(krr.certificate.table)
    return {"k": k, "eps": eps, "objective": objective.kind, "seed": seed, "certified": d.certificate.loss,
            "ok": bool(d.certificate.ok), "krr": base, "ratio": d.certificate.loss / base,
            "start": d.result.history["start"], "restarts": d.result.history["restarts"],
            "steps": int(d.result.steps), "status": d.result.status, "seconds": seconds,
            "compile_seconds": d.seconds["compile"]}


def table(rows: list[dict]) -> str:
    lines = ["| objective | k | ε | certified | k-RR (same ε) | ratio | best start | seconds |",
             "|---|---:|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        lines.append(f"| {r['objective']} | {r['k']} | {r['eps']:g} | {r['certified']:.6g} | "
                     f"{r['krr']:.6g} | {r['ratio']:.4f} | {r['start']} | {r['seconds']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, nargs="+", default=[4, 8, 12, 20])
    ap.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    ap.add_argument("--reports", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--table", type=Path, help="print this file's rows as a Markdown table")
    args = ap.parse_args()
    if args.table:
        print(table(json.loads(args.table.read_text())["rows"]))
        return
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    rows = []
    for objective in (EstimationError(reports=args.reports), InformationLoss()):
        for k in args.k:
            for eps in args.eps:
                row = run(k, eps, objective, args.seed)
                rows.append(row)
                print(f"{row['objective']:11s} k={k:2d} eps={eps:g}: {row['certified']:.6g} vs k-RR "
                      f"{row['krr']:.6g} (ratio {row['ratio']:.4f}, {row['start']}, {row['seconds']:.1f} s)",
                      flush=True)
                if args.out:
                    args.out.write_text(json.dumps({"commit": commit, "rows": rows}, indent=1))
    print(table(rows))


if __name__ == "__main__":
    main()
