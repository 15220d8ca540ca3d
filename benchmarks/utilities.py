"""The smooth objectives against the classic mechanisms: categorical local DP (k values, ε per pair,
a skewed Dirichlet prior), the gradient search's certified table (``dp.design``, ``method =
"auto"``) against k-ary randomized response at the largest ε its certificate allows
(``calibrate``) and the Hamming loss's LP optimum under the same budget (certified), all scored by
the certifier's float64 value: the estimation error of the input law from ``--reports`` reports,
and minus the mutual information.

With ``--subsets``, the estimation error where the reports are the C(k, d) subsets of ``d``
values (``d`` nearest ``k/(e^ε + 1)``, the best for subset selection): the search (from subset
selection's table, given as ``init``, among its starts) against subset selection (Ye & Barg 2018;
Wang et al. 2016), optimised unary encoding (Wang et al. 2017, its 2^k bit vectors as outputs) and
k-RR, each table's MSE by the same formula (the certifier's value, ``objective_value``; subset selection and
OUE are ε-LDP exactly by construction, where a float64 certificate of them reads ε + 2·10⁻¹⁶).

    python benchmarks/utilities.py --k 4 8 12 --eps 0.5 1 2 4 --out benchmarks/results/utilities.json
    python benchmarks/utilities.py --subsets --k 4 6 8 --eps 0.5 1 2 \\
        --out benchmarks/results/utilities_subsets.json
    python benchmarks/utilities.py --table benchmarks/results/utilities.json

With ``--grid CONFIG``, minus the mutual information on a location problem (a config: its grid,
prior and constraints, DistP in ``configs/quickstart.toml``): the search's certified table against
the table of least expected loss under the same constraints (``dp.design`` with the config's own
objective, certified), both scored by the certifier's value.

    python benchmarks/utilities.py --grid configs/quickstart.toml --out benchmarks/results/utilities_grid.json
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
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
    hamming = dp.design(dataclasses.replace(p, objective="expected"))  # the Hamming loss's LP optimum
    return {"k": k, "eps": eps, "objective": objective.kind, "seed": seed, "certified": d.certificate.loss,
            "ok": bool(d.certificate.ok and hamming.certificate.ok), "krr": base,
            "ratio": d.certificate.loss / base,
            "hamming_optimum": p.objective_value(hamming.certificate.table),
            "start": d.result.starts["start"], "restarts": d.result.starts["restarts"],
            "steps": int(d.result.steps), "status": d.result.status, "seconds": seconds,
            "compile_seconds": d.seconds["compile"]}


def subset_selection(k: int, d: int, eps: float) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """The d-subsets of range(k) and subset selection's table ``[k, C(k, d)]``: a subset holding
    ``x`` ``e^ε`` times as likely as one that does not (ε-LDP exactly)."""
    subsets = list(itertools.combinations(range(k), d))
    table = np.array([[math.exp(eps) if x in s else 1.0 for s in subsets] for x in range(k)])
    return subsets, table / table.sum(axis=1, keepdims=True)


def unary(k: int, eps: float) -> np.ndarray:
    """Optimised unary encoding's table ``[k, 2^k]``: bit ``x`` is 1 with probability 1/2, every
    other bit with ``1/(e^ε + 1)``, independently (ε-LDP exactly)."""
    q = 1.0 / (math.exp(eps) + 1.0)
    bits = np.array(list(itertools.product((0, 1), repeat=k)))  # [2^k, k]
    table = np.ones((k, bits.shape[0]))
    for x in range(k):
        for j in range(k):
            p = 0.5 if j == x else q
            table[x] *= np.where(bits[:, j] == 1, p, 1.0 - p)
    return table


def run_subsets(k: int, eps: float, reports: int, seed: int) -> dict:
    d = min(k - 1, max(1, round(k / (math.exp(eps) + 1.0))))
    subsets, ss = subset_selection(k, d, eps)
    x = dp.Domain(tuple(f"v{i}" for i in range(k)))
    y = dp.Domain(tuple("+".join(f"v{i}" for i in s) for s in subsets))
    prior = np.random.default_rng(seed).dirichlet(np.full(k, 0.7))
    loss = np.array([[0.0 if i in s else 1.0 for s in subsets] for i in range(k)])
    p = dp.Problem(x, y, loss, prior, constraints=(dp.LocalDP(epsilon=eps),),
                   objective=EstimationError(reports=reports))
    start = time.perf_counter()
    d_ = dp.design(p, init=ss[None])
    seconds = time.perf_counter() - start

    def mse(table):  # ε-LDP exactly by construction (a float64 certificate reads ε + 2·10⁻¹⁶)
        outs = dp.Domain(tuple(f"o{j}" for j in range(table.shape[1])))
        q = dp.Problem(x, outs, np.zeros(table.shape), prior, constraints=(dp.LocalDP(epsilon=eps),),
                       objective=EstimationError(reports=reports))
        return q.objective_value(table[None])

    krr = calibrate(problem(k, eps, EstimationError(reports=reports), seed), "krr")
    return {"k": k, "d": d, "eps": eps, "objective": "estimation (subsets)", "seed": seed,
            "certified": d_.certificate.loss, "ok": bool(d_.certificate.ok),
            "subset_selection": mse(ss), "oue": mse(unary(k, eps)),
            "krr": krr.certificate.loss, "start": d_.result.starts["start"],
            "restarts": d_.result.starts["restarts"], "seconds": seconds}


def run_grid(config: Path) -> dict:
    p, opts = dp.load_config(config)
    start = time.perf_counter()
    d = dp.design(dataclasses.replace(p, objective=InformationLoss()), seed=opts.seed)
    seconds = time.perf_counter() - start
    lp = dp.design(p, **opts.kwargs())
    score = dataclasses.replace(p, objective=InformationLoss())
    return {"config": str(config), "shape": list(p.shape), "objective": "information (grid)",
            "certified": d.certificate.loss, "ok": bool(d.certificate.ok and lp.certificate.ok),
            "expected_optimum": score.objective_value(lp.certificate.table),
            "expected_optimum_method": lp.result.method, "expected_optimum_gap": lp.gap,
            "start": d.result.starts["start"], "restarts": d.result.starts["restarts"],
            "steps": int(d.result.steps), "status": d.result.status, "seconds": seconds}


def table(rows: list[dict]) -> str:
    if rows and "expected_optimum" in rows[0]:
        lines = ["| config | S×X×Y | −I certified (gradient) | −I of the expected-loss optimum | best start "
                 "| seconds |", "|---|---|---:|---:|---|---:|"]
        for r in rows:
            lines.append(f"| {r['config']} | {'×'.join(map(str, r['shape']))} | {r['certified']:.6g} | "
                         f"{r['expected_optimum']:.6g} | {r['start']} | {r['seconds']:.1f} |")
        return "\n".join(lines)
    if rows and "subset_selection" in rows[0]:
        lines = ["| k | d | ε | certified (subset outputs) | subset selection | OUE | k-RR | best start "
                 "| seconds |",
                 "|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
        for r in rows:
            lines.append(f"| {r['k']} | {r['d']} | {r['eps']:g} | {r['certified']:.6g} | "
                         f"{r['subset_selection']:.6g} | {r['oue']:.6g} | {r['krr']:.6g} | {r['start']} | "
                         f"{r['seconds']:.1f} |")
        return "\n".join(lines)
    lines = ["| objective | k | ε | certified | k-RR (same ε) | ratio | Hamming LP optimum | best start "
             "| seconds |", "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        ham = f"{r['hamming_optimum']:.6g}" if "hamming_optimum" in r else "—"
        lines.append(f"| {r['objective']} | {r['k']} | {r['eps']:g} | {r['certified']:.6g} | "
                     f"{r['krr']:.6g} | {r['ratio']:.4f} | {ham} | {r['start']} | {r['seconds']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, nargs="+", default=[4, 8, 12, 20])
    ap.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    ap.add_argument("--reports", type=int, default=1000)
    ap.add_argument("--objectives", nargs="+", choices=("estimation", "information"),
                    default=["estimation", "information"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--subsets", action="store_true", help="reports are d-subsets (module docstring)")
    ap.add_argument("--grid", type=Path, help="a location config: mutual information against its optimum")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--table", type=Path, help="print this file's rows as a Markdown table")
    args = ap.parse_args()
    if args.table:
        print(table(json.loads(args.table.read_text())["rows"]))
        return
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    rows = []
    if args.grid:
        rows = [run_grid(args.grid)]
        if args.out:
            args.out.write_text(json.dumps({"commit": commit, "rows": rows}, indent=1))
        print(table(rows))
        return
    if args.subsets:
        for k in args.k:
            for eps in args.eps:
                row = run_subsets(k, eps, args.reports, args.seed)
                rows.append(row)
                print(f"subsets k={k} d={row['d']} eps={eps:g}: {row['certified']:.6g}, subset selection "
                      f"{row['subset_selection']:.6g}, OUE {row['oue']:.6g}, k-RR {row['krr']:.6g} "
                      f"({row['start']}, {row['seconds']:.1f} s)", flush=True)
                if args.out:
                    args.out.write_text(json.dumps({"commit": commit, "rows": rows}, indent=1))
        print(table(rows))
        return
    chosen = {"estimation": EstimationError(reports=args.reports), "information": InformationLoss()}
    for objective in (chosen[name] for name in args.objectives):
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
