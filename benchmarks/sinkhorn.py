"""The entropic transport objective (``kind = "sinkhorn"``) against the exact transport objective.

On DistP problems on ``n × n`` grids (``sacramento``, ``gaussian``: those of
``benchmarks/scaling.py``; ``city``: ``configs/sinkhorn.toml``; pure DistP ε = 1 between two
item laws, the Euclidean loss in km, ``laws = "items"``, the entropic regularisation at its
default, 5 % of the mean distance, the city's 0.25 km):
``dp.design`` with the Sinkhorn objective (``auto``: simplicial decomposition) at ``gap_tol``,
certified, and the exact transport cost of its certified table, beside ``dp.design`` of the exact
``transport`` objective (the lifted LP, HiGHS) where it finishes within ``--timeout``. Each run in
its own process (peak memory: its maximum resident set).

    python benchmarks/sinkhorn.py --grids 16 32 --data sacramento gaussian \
        --out benchmarks/results/sinkhorn.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import resource
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))


def problem(data: str, n: int, objective):
    """``data``'s DistP problem on the ``n × n`` grid with ``objective`` (``"city"``: the quick start's
    10×10 city of ``configs/sinkhorn.toml`` with its own ``epsilon``, whatever ``n``)."""
    from scaling import grid_problem

    import diffpriv as dp

    if data == "city":
        base, _ = dp.load_config(pathlib.Path(__file__).parents[1] / "configs" / "sinkhorn.toml")
        return base if objective.kind == "sinkhorn" else dataclasses.replace(base, objective=objective)
    base = grid_problem("sacramento" if data == "sacramento" else "distp", n)
    return dataclasses.replace(base, objective=objective)


def stage(data: str, n: int, which: str, gap_tol: float) -> dict:
    import diffpriv as dp

    objective = dp.SinkhornLoss(laws="items") if which == "sinkhorn" else dp.TransportLoss(laws="items")
    p = problem(data, n, objective)
    start = time.perf_counter()
    d = dp.design(p, gap_tol=gap_tol)
    seconds = time.perf_counter() - start
    table = d.certificate.table
    row = {"data": data, "n": n, "which": which, "seconds": seconds, "method": d.result.method,
           "status": d.result.status, "rounds": int(d.result.steps), "certified": float(d.certificate.loss),
           "bound": float(d.result.lower_bound), "gap": float(d.gap), "ok": bool(d.certificate.ok),
           "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if which == "sinkhorn":
        row["exact_transport"] = float(p.objective.exact(p, table))
        row["epsilon"] = p.objective.regularisation(p)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grids", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--data", nargs="+", default=["sacramento", "gaussian"])
    parser.add_argument("--gap-tol", type=float, default=1e-2)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--no-exact-above", type=int, default=32, 
                        help="skip the transport LP above this grid")
    parser.add_argument("--stage", nargs=3, metavar=("DATA", "N", "WHICH"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=pathlib.Path)
    args = parser.parse_args()
    if args.stage:
        data, n, which = args.stage
        print(json.dumps(stage(data, int(n), which, args.gap_tol)))
        return
    rows = []
    for data in args.data:
        for n in args.grids:
            for which in ("sinkhorn", "transport"):
                if which == "transport" and n > args.no_exact_above:
                    rows.append({"data": data, "n": n, "which": which, "status": "not run"})
                    continue
                cmd = [sys.executable, __file__, "--stage", data, str(n), which,
                       "--gap-tol", str(args.gap_tol)]
                try:
                    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout,
                                         check=True)
                    rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
                except subprocess.TimeoutExpired:
                    rows.append({"data": data, "n": n, "which": which, "status": f"> {args.timeout:g} s"})
                except subprocess.CalledProcessError as e:
                    rows.append({"data": data, "n": n, "which": which, "status": "failed",
                                 "error": e.stderr.strip().splitlines()[-1] if e.stderr.strip() else ""})
                print(json.dumps(rows[-1]), flush=True)
                if args.out:
                    args.out.write_text(json.dumps(rows, indent=1))
    print("| data | grid | Sinkhorn s (rounds) | certified S_ε, gap | its exact transport | transport LP s | "
          "LP optimum | ratio | peak MB (Sinkhorn / LP) |")
    print("|---|---|---:|---|---:|---:|---:|---:|---|")
    for data in args.data:
        for n in args.grids:
            s = next(r for r in rows if r["data"] == data and r["n"] == n and r["which"] == "sinkhorn")
            t = next(r for r in rows if r["data"] == data and r["n"] == n and r["which"] == "transport")
            if "seconds" not in s:
                print(f"| {data} | {n}×{n} | {s['status']} | | | | | | |")
                continue
            lp = f"{t['seconds']:.1f}" if "seconds" in t else t["status"]
            opt = f"{t['certified']:.5g}" if "seconds" in t else "–"
            ratio = f"{s['exact_transport'] / t['certified']:.3f}" if "seconds" in t else "–"
            mem = f"{s['peak_mb']:.0f} / {t['peak_mb']:.0f}" if "seconds" in t else f"{s['peak_mb']:.0f} / –"
            print(f"| {data} | {n}×{n} | {s['seconds']:.1f} ({s['rounds']}) | {s['certified']:.5g}, "
                  f"{100 * s['gap']:.2f} % | {s['exact_transport']:.5g} | {lp} | {opt} | {ratio} | {mem} |")


if __name__ == "__main__":
    main()
