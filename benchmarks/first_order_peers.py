"""First-order LP solvers side by side on diffpriv's own LPs, in one process on one machine:
diffpriv's restarted mirror PDHG (``method = "pdhg"``), MPAX's r2HPDHG and raPDHG (PDLP in JAX,
Lu & Yang), HiGHS's PDLP, and HiGHS's dual simplex for the optimum.

The LP is the one ``diffpriv reference`` solves (``dp.solvers.write_lp``: the MPS file), read back
by HiGHS and handed to each solver as it is: pure DistP on the real-data grids of
``benchmarks/scaling.py`` (the Sacramento sales, expensive vs cheap homes, ε = 1). MPAX and HiGHS's
PDLP stop on their relative KKT tolerance (``--tol``, both); diffpriv stops on a *certified* relative
gap (``--gap-tols``: its table's loss against a lower bound it proves), a different and stricter
test, so the table reports each one's objective against the optimum beside its time and steps.
Times are the second solve of the same LP in this process (JAX compiled by the first; the first is
reported too).

MPAX is not a dependency of diffpriv: ``--mpax-path DIR`` names a folder where ``mpax`` (and its
``chex`` and ``toolz``) import with this environment's JAX.

    python benchmarks/first_order_peers.py --grid 16 32 --mpax-path /tmp/mpaxlib --out F
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from scaling import grid_problem  # noqa: E402

import diffpriv as dp  # noqa: E402


def read_lp(path: Path):
    """``(c, A_eq, b_eq, G, h, lower, upper, offset)`` of an MPS file (``G x ≥ h``), by HiGHS."""
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(path))
    lp = h.getLp()
    m, n = lp.num_row_, lp.num_col_
    a = lp.a_matrix_
    mat = scipy.sparse.csc_matrix((np.asarray(a.value_), np.asarray(a.index_), np.asarray(a.start_)),
                                  shape=(m, n)).tocsr()
    lo, hi = np.asarray(lp.row_lower_), np.asarray(lp.row_upper_)
    eq = lo == hi
    low = ~eq & np.isfinite(lo)
    up = ~eq & np.isfinite(hi)
    G = scipy.sparse.vstack([mat[low], -mat[up]]).tocsr()
    hvec = np.r_[lo[low], -hi[up]]
    return (np.asarray(lp.col_cost_), mat[eq], lo[eq], G, hvec, np.asarray(lp.col_lower_),
            np.asarray(lp.col_upper_), float(lp.offset_))


def highs(path: Path, solver: str, tol: float, limit: float) -> dict:
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(path))
    h.setOptionValue("solver", solver)
    h.setOptionValue("time_limit", float(limit))
    if solver == "pdlp":
        h.setOptionValue("pdlp_d_gap_tol", tol)
        h.setOptionValue("primal_feasibility_tolerance", tol)
        h.setOptionValue("dual_feasibility_tolerance", tol)
    start = time.perf_counter()
    h.run()
    seconds = time.perf_counter() - start
    info = h.getInfo()
    steps = info.pdlp_iteration_count if solver == "pdlp" else info.simplex_iteration_count
    return {"seconds": seconds, "objective": float(info.objective_function_value), "steps": int(steps),
            "status": h.modelStatusToString(h.getModelStatus())}


def mpax(lp_arrays, algorithm: str, tol: float, limit: int) -> dict:
    import jax
    import mpax as mp

    c, A, b, G, h, lo, up, offset = lp_arrays
    with jax.enable_x64(True):
        lp = mp.create_lp(c, A, b, G, h, lo, up, use_sparse_matrix=True)
        cls = mp.r2HPDHG if algorithm == "r2hpdhg" else mp.raPDHG
        solver = cls(eps_abs=tol, eps_rel=tol, verbose=False, iteration_limit=limit)
        out = {}
        for run in ("first", "second"):
            start = time.perf_counter()
            res = solver.optimize(lp)
            jax.block_until_ready(res.primal_solution)
            out[run] = time.perf_counter() - start
    return {"seconds": out["second"], "first_seconds": out["first"],
            "objective": float(res.primal_objective) + offset, "steps": int(res.iteration_count),
            "status": str(int(res.termination_status))}


def diffpriv_pdhg(problem: dp.Problem, gap_tol: float) -> dict:
    out = {}
    for run in ("first", "second"):
        start = time.perf_counter()
        res = dp.optimize(problem, method="pdhg", gap_tol=gap_tol)
        out[run] = time.perf_counter() - start
    return {"seconds": out["second"], "first_seconds": out["first"], "objective": float(res.objective),
            "lower_bound": float(res.lower_bound), "steps": int(res.steps), "status": res.status}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", type=int, nargs="+", default=[16, 32])
    ap.add_argument("--kind", default="sacramento", help="a problem of benchmarks/scaling.py")
    ap.add_argument("--tol", type=float, default=1e-4, help="MPAX's and HiGHS PDLP's relative tolerance")
    ap.add_argument("--gap-tols", type=float, nargs="+", default=[1e-2, 1e-3])
    ap.add_argument("--limit", type=float, default=600.0, help="seconds per HiGHS solve")
    ap.add_argument("--mpax-path", default=None)
    ap.add_argument("--mpax-steps", type=int, default=200_000)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.mpax_path:
        sys.path.insert(0, args.mpax_path)
    rows = []
    for n in args.grid:
        problem = grid_problem(args.kind, n)
        row = {"kind": args.kind, "n": n}
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "lp.mps"
            row["lp"] = dp.solvers.write_lp(problem, path)
            arrays = read_lp(path)
            row["highs simplex"] = highs(path, "simplex", args.tol, args.limit)
            row["highs pdlp"] = highs(path, "pdlp", args.tol, args.limit)
        for algorithm in ("r2hpdhg", "rapdhg"):
            try:
                row[f"mpax {algorithm}"] = mpax(arrays, algorithm, args.tol, args.mpax_steps)
            except ImportError as e:
                row[f"mpax {algorithm}"] = {"status": f"not run ({e})"}
        for gap in args.gap_tols:
            row[f"diffpriv pdhg {gap:g}"] = diffpriv_pdhg(problem, gap)
        optimum = row["highs simplex"]["objective"]
        for key, res in row.items():
            if isinstance(res, dict) and "objective" in res:
                res["rel_error"] = (res["objective"] - optimum) / abs(optimum)
                print(f"{n}x{n} {key:22s} {res.get('seconds', float('nan')):8.2f} s "
                      f"{res.get('steps', 0):8d} steps  {res['objective']:.8g}  rel {res['rel_error']:+.2e}  "
                      f"{res.get('status')}", flush=True)
        rows.append(row)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
