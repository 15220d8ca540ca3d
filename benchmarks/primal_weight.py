"""Steps to a certified gap for given primal-weight settings (the adaptive-weight study).

    python benchmarks/primal_weight.py --seeds 0 1 2 --omega 0.1 --omega-range 9   # random problems
    python benchmarks/primal_weight.py --geo 12 16 --gap-tol 1e-2 --omega 0.1       # geo grids

Random problems are ``random_problem(seed)`` of the optimality benchmark (δ = 0.02 when
``seed % 4 == 3``) at ``gap_tol = 1e-5``; geo grids are ``benchmarks/scaling.py``'s
``grid_problem("geo", n)``. Prints one JSON line per run: steps, status, objective, certified
lower bound, relative gap, largest violation, the final primal weight relative to the problem's
natural scale, and seconds.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import diffpriv as dp
from diffpriv.problems import random_problem

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from scaling import grid_problem  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="*", default=[])
    ap.add_argument("--geo", type=int, nargs="*", default=[])
    ap.add_argument("--omega", type=float, default=None)
    ap.add_argument("--omega-range", type=float, default=None)
    ap.add_argument("--gap-tol", type=float, default=None)
    ap.add_argument("--steps", type=int, default=100_000)
    args = ap.parse_args()
    opts = {k: v for k, v in (("omega", args.omega), ("omega_range", args.omega_range)) if v is not None}
    runs = [(f"seed {s}", random_problem(s, delta=0.02 if s % 4 == 3 else 0.0), 1e-5) for s in args.seeds]
    runs += [(f"geo {n}x{n}", grid_problem("geo", n), 1e-2) for n in args.geo]
    for name, problem, tol in runs:
        first = dp.optimize(problem, method="pdhg", steps=1, period=1, omega=1.0, polish=False)
        scale = float(first.state.omega)
        start = time.perf_counter()
        r = dp.optimize(problem, method="pdhg", steps=args.steps, gap_tol=args.gap_tol or tol, **opts)
        print(json.dumps({"problem": name, **opts, "steps": int(r.steps), "status": r.status,
                          "objective": r.objective, "lower_bound": r.lower_bound,
                          "gap": (r.objective - r.lower_bound) / abs(r.lower_bound),
                          "violation": float(r.max_violation),
                          "final_omega": float(r.state.omega) / scale,
                          "seconds": round(time.perf_counter() - start, 1)}), flush=True)


if __name__ == "__main__":
    main()
