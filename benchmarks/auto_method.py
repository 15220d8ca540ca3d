"""Does ``method = "auto"`` pick the faster solver? Both run side by side, as a user runs them.

For each problem, in this process: ``dp.design`` with ``method = "exact"`` (HiGHS, or Clarabel
for divergence constraints) and with ``method = "pdhg"`` (diffpriv's own solver: PDHG, or the
smoothed dual for divergence DistP), every other setting at its default (``gap_tol`` 10⁻⁴
unless ``--gap-tol``); then the method ``"auto"`` picks for it (``dp.solvers.exact_solver``, without
running it again). Problems on ``n × n`` grids of 1 km cells, Euclidean loss:

* ``distp``: pure DistP (ε = 1) between two Gaussian mixtures (``benchmarks/scaling.py``);
* ``geo``: geo-indistinguishability (ε = 0.5 / km on 4-neighbour pairs, uniform prior);
* ``kl``: KL DistP between two random Gaussian mixtures (``benchmarks/divergence_optimality.py``,
  seed 0).

Printed, and written to ``benchmarks/results/auto_method.json``: each method's seconds,
certified loss and status, auto's choice, and the ratio of auto's time to the faster one's.

    python benchmarks/auto_method.py                      # distp 8 16 32, geo 6 10 14, kl 8 12 16
    python benchmarks/auto_method.py --distp 24 --geo --kl
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import sys
import time

import diffpriv as dp

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from divergence_optimality import grid_problem as divergence_grid  # noqa: E402
from scaling import grid_problem  # noqa: E402


def problem(kind: str, n: int) -> dp.Problem:
    return divergence_grid("kl", n, 0) if kind == "kl" else grid_problem(kind, n)


def run(kind: str, n: int, gap_tol: float | None) -> dict:
    p = problem(kind, n)
    row = {"kind": kind, "n": n, "auto": dp.solvers.exact_solver(p, gap_tol or 1e-4) or "pdhg"}
    options = {} if gap_tol is None else {"gap_tol": gap_tol}
    for method in ("exact", "pdhg"):
        start = time.perf_counter()
        try:
            d = dp.design(p, method=method, **options)
        except Exception as e:  # noqa: BLE001  (a failed reference is a result too)
            row[method] = {"error": f"{type(e).__name__}: {e}"}
            continue
        row[method] = {"seconds": time.perf_counter() - start, "certified": d.certificate.loss,
                       "status": d.result.status, "ran": d.result.method, "gap": d.gap}
    times = {m: row[m]["seconds"] for m in ("exact", "pdhg") if "seconds" in row[m]}
    chosen = "exact" if row["auto"] != "pdhg" else "pdhg"
    if chosen in times:
        row["auto_over_best"] = times[chosen] / min(times.values())
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--distp", type=int, nargs="*", default=[8, 16, 32])
    ap.add_argument("--geo", type=int, nargs="*", default=[6, 10, 14])
    ap.add_argument("--kl", type=int, nargs="*", default=[8, 12, 16])
    ap.add_argument("--gap-tol", type=float, default=None)
    ap.add_argument("--out", type=pathlib.Path,
                    default=pathlib.Path(__file__).parent / "results" / "auto_method.json")
    args = ap.parse_args(argv)
    rows = []
    print(f"{'problem':>10} {'auto':>9} {'exact s':>9} {'pdhg s':>9} {'exact loss':>11} {'pdhg loss':>11} "
          f"{'pdhg ran':>9} {'auto/best':>9}")
    for kind in ("distp", "geo", "kl"):
        for n in getattr(args, kind):
            r = run(kind, n, args.gap_tol)
            rows.append(r)
            e, g = r["exact"], r["pdhg"]
            print(f"{kind + ' ' + str(n):>10} {r['auto']:>9} {e.get('seconds', float('nan')):>9.2f} "
                  f"{g.get('seconds', float('nan')):>9.2f} {e.get('certified', float('nan')):>11.6g} "
                  f"{g.get('certified', float('nan')):>11.6g} {g.get('ran', '-'):>9} "
                  f"{r.get('auto_over_best', float('nan')):>9.2f}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": platform.platform(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
