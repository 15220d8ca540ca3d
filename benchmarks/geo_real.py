"""Geo-indistinguishability on real location data: diffpriv's CLI against HiGHS's three LP algorithms.

Each case is a data set of :mod:`benchmarks.geo_data` binned on an ``n × n`` grid, its own
(concentrated) prior or the uniform one, 4- or 8-neighbour cells, and ``ε`` per km. For
Sacramento ``ε`` is as given (``--eps``); the other data sets cover larger areas, so their ``ε``
per km is scaled by the ratio of the bounding boxes, to give the same ``ε`` per cell side as
Sacramento's on the same grid (the table states both).

For each case, one after another on the same machine:

* **diffpriv** as a user runs it: the points written to a CSV file, a config binning them on the
  grid (``prior.points_file``), ``diffpriv optimize`` with ``gap_tol = 1e-2`` and then
  ``diffpriv certify`` on its certificate, each in its own process under ``/usr/bin/time -v``
  (wall time, peak memory); the certified loss, the certificate's stated bound, the certified gap
  and the run that ran are read from ``summary.json``;
* **HiGHS** on the same LP (``dp.solvers.write_lp``, an MPS file; the timing covers the
  solve only): its dual simplex, its interior point (IPX, no crossover), its new interior point
  HiPO (no crossover; where the interpreter of ``--highs-python`` has ``highspy`` with
  ``highspy-extras``) and PDLP (relative tolerance 10⁻⁴), each in its own process with
  HiGHS's time limit ``--highs-limit``.

Checks: the certificate verifies (``diffpriv certify`` exit 0), and where a HiGHS algorithm
reached an optimum, diffpriv's bound is below it and its certified loss above it (to 10⁻⁷ relative:
HiGHS's tolerances).

    python benchmarks/geo_real.py --datasets sacramento --sizes 16 --neighbours grid4 grid8 \\
        --eps 0.1 0.5 2 --out benchmarks/results/geo_real_16.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import diffpriv as dp  # noqa: E402
from benchmarks.geo_data import DATASETS, binned, geo_problem, points_km  # noqa: E402

CLI = [sys.executable, "-m", "diffpriv.cli"]
HIGHS_ALGORITHMS = ("simplex", "ipx", "hipo", "pdlp")
HIGHS_OPTIONS = {"simplex": {"solver": "simplex"},
                 "ipx": {"solver": "ipm", "run_crossover": "off"},
                 "hipo": {"solver": "hipo", "run_crossover": "off"},
                 "pdlp": {"solver": "pdlp", "pdlp_optimality_tolerance": 1e-4}}
HIGHS_SCRIPT = """
import json, sys, time, highspy
path, options, limit = sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3])
h = highspy.Highs()
h.setOptionValue("output_flag", False)
h.readModel(path)
for key, value in options.items():
    if h.setOptionValue(key, value) != highspy.HighsStatus.kOk:
        print(json.dumps({"status": "unavailable"})); sys.exit(0)
h.setOptionValue("time_limit", limit)
start = time.perf_counter()
h.run()
seconds = time.perf_counter() - start
status = h.modelStatusToString(h.getModelStatus())
print(json.dumps({"status": status, "seconds": seconds, "objective": h.getInfo().objective_function_value}))
"""


def _timed(cmd: list[str], timeout: float, cwd: Path | None = None) -> dict:
    """Runs ``cmd`` under ``/usr/bin/time -v``: exit code, wall seconds, peak MB, stdout."""
    start = time.perf_counter()
    try:
        proc = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True,
                              timeout=timeout, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired:
        return {"rc": None, "seconds": time.perf_counter() - start, "peak_mb": None, "stdout": ""}
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    return {"rc": proc.returncode, "seconds": time.perf_counter() - start,
            "peak_mb": int(peak.group(1)) / 1024 if peak else None, "stdout": proc.stdout,
            "stderr": proc.stderr.split("\tCommand being timed")[0][-2000:]}


def eps_for(name: str, n: int, eps_sacramento: float) -> float:
    """``ε`` per km for ``name`` giving Sacramento's ``ε`` per cell side on the ``n × n`` grid."""
    return eps_sacramento * binned("sacramento", n)[0] / binned(name, n)[0]


def _config(name: str, n: int, eps_km: float, neighbours: str, prior: str, folder: Path) -> Path:
    """Writes the points (shifted so that the config's grid bins them as :func:`binned` does) and
    the config; returns the config's path."""
    cell, _ = binned(name, n)
    x, y = points_km(name)
    ox, oy = (n * cell - x.max()) / 2, (n * cell - y.max()) / 2
    if prior == "data":
        np.savetxt(folder / "points.csv", np.c_[x + ox, y + oy], delimiter=",", header="x_km,y_km",
                   comments="")
        prior_line = 'prior = { points_file = "points.csv" }'
    else:
        prior_line = "prior = { uniform = true }"
    text = f"""description = "geo-indistinguishability on {name}, {n}x{n} cells, {prior} prior"
[inputs]
grid = {{ rows = {n}, cols = {n}, cell = {float(cell)!r} }}
units = "km"

[loss]
kind = "euclidean"

[[profiles]]
name = "users"
{prior_line}

[[constraints]]
kind = "xdp"
name = "geo"
epsilon = {float(eps_km)!r}
neighbours = "{neighbours}"

[optimizer]
gap_tol = 1e-2
"""
    path = folder / "config.toml"
    path.write_text(text)
    return path


def run_diffpriv(name: str, n: int, eps_km: float, neighbours: str, prior: str, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = _config(name, n, eps_km, neighbours, prior, folder)
        opt = _timed([*CLI, "optimize", str(config), "--out", str(folder / "out")], timeout)
        out = {"optimize_rc": opt["rc"], "seconds": opt["seconds"], "peak_mb": opt["peak_mb"]}
        summary = folder / "out" / "summary.json"
        if opt["rc"] != 0 or not summary.exists():
            out["error"] = (opt.get("stderr") or "")[-500:]
            return out
        s = json.loads(summary.read_text())
        cert = _timed([*CLI, "certify", str(folder / "out" / "certificate.json")], timeout)
        out.update(certified=s["certified"], bound=s["lower_bound"], method=s["method"], stop=s["stop"],
                   steps=s["steps"], certify_rc=cert["rc"], certify_seconds=cert["seconds"],
                   gap=(s["certified"] - s["lower_bound"]) / max(abs(s["lower_bound"]), 1e-12))
        return out


def run_highs(problem, algorithms, limit: float, python: str, pdlp_limit: float) -> dict:
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "geo.mps"
        out["lp"] = dp.solvers.write_lp(problem, path)
        for algorithm in algorithms:
            cap = pdlp_limit if algorithm == "pdlp" else limit
            run = _timed([python, "-c", HIGHS_SCRIPT, str(path), json.dumps(HIGHS_OPTIONS[algorithm]),
                          str(cap)], cap + 600)
            try:
                res = json.loads(run["stdout"].strip().splitlines()[-1])
            except (IndexError, json.JSONDecodeError):
                res = {"status": "no answer" if run["rc"] is None else f"exit {run['rc']}"}
            res["peak_mb"] = run["peak_mb"]
            out[algorithm] = res
            print(f"    highs {algorithm:8s} {res.get('status')} {res.get('seconds', float('nan')):.1f} s "
                  f"{res.get('objective', float('nan')):.8g}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["sacramento"], choices=DATASETS)
    ap.add_argument("--sizes", type=int, nargs="+", default=[16])
    ap.add_argument("--neighbours", nargs="+", default=["grid4", "grid8"], choices=["grid4", "grid8"])
    ap.add_argument("--eps", type=float, nargs="+", default=[0.1, 0.5, 2.0],
                    help="epsilon per km on Sacramento (scaled for the others: module docstring)")
    ap.add_argument("--priors", nargs="+", default=["data"], choices=["data", "uniform"])
    ap.add_argument("--highs", nargs="*", default=list(HIGHS_ALGORITHMS), choices=HIGHS_ALGORITHMS)
    ap.add_argument("--highs-limit", type=float, default=600.0, help="HiGHS's time limit per algorithm (s)")
    ap.add_argument("--pdlp-limit", type=float, default=120.0, help="PDLP's time limit (s)")
    ap.add_argument("--highs-python", default=sys.executable,
                    help="interpreter whose highspy runs HiGHS (with highspy-extras for HiPO)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="diffpriv's limit per command (s)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--table", action="store_true", help="print --out's rows as a Markdown table")
    args = ap.parse_args()
    if args.table:
        print(table(json.loads(args.out.read_text())))
        return
    rows = json.loads(args.out.read_text()) if args.out.exists() else []
    done = {(r["dataset"], r["n"], r["neighbours"], r["eps_sacramento"], r["prior"]) for r in rows}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    for name in args.datasets:
        for n in args.sizes:
            for neighbours in args.neighbours:
                for eps in args.eps:
                    for prior in args.priors:
                        key = (name, n, neighbours, eps, prior)
                        if key in done:
                            continue
                        eps_km = eps_for(name, n, eps)
                        cell = binned(name, n)[0]
                        print(f"{name} {n}x{n} {neighbours} eps {eps_km:.4g}/km "
                              f"({eps_km * cell:.3g} per side) {prior} prior", flush=True)
                        row = {"dataset": name, "n": n, "neighbours": neighbours, "eps_sacramento": eps,
                               "eps_km": eps_km, "eps_side": eps_km * cell, "prior": prior,
                               "cells_with_data": int((binned(name, n)[1] > 0).sum()), "commit": commit}
                        row["diffpriv"] = run_diffpriv(name, n, eps_km, neighbours, prior, args.timeout)
                        d = row["diffpriv"]
                        print(f"    diffpriv {d.get('method')} {d.get('stop')} {d['seconds']:.1f} s "
                              f"gap {d.get('gap', float('nan')):.4f} certify rc {d.get('certify_rc')} "
                              f"{d['peak_mb'] or 0:.0f} MB", flush=True)
                        if args.highs:
                            problem = geo_problem(name, n, eps_km, neighbours, prior)
                            row["highs"] = run_highs(problem, args.highs, args.highs_limit, args.highs_python,
                                                    args.pdlp_limit)
                            _check(row)
                        rows.append(row)
                        args.out.write_text(json.dumps(rows, indent=1))


def table(rows: list[dict]) -> str:
    """The rows as the Markdown table of ``benchmarks/RESULTS.md`` (without HiGHS's columns where
    no row ran HiGHS)."""
    if not any(r.get("highs") for r in rows):
        return _alone(rows)
    def secs(res: dict) -> str:
        if res.get("status") == "Optimal":
            return f"{res['seconds']:.1f}"
        if res.get("status") in ("Time limit reached", "no answer"):
            return f"> {res.get('seconds', 0):.0f} (time limit)"
        return f"{res.get('seconds', float('nan')):.1f} ({res.get('status')})"

    lines = ["| data | grid | neighbours | ε per km (per side) | cells with data | diffpriv s (CLI) | run | "
             "certified gap | peak MB | HiGHS simplex s | IPX s | HiPO s | PDLP s | × best HiGHS | "
             "bound ≤ LP ≤ loss |", "|---|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        d, h = r["diffpriv"], r.get("highs", {})
        solved = [v["seconds"] for k, v in h.items() if k != "lp" and v.get("status") == "Optimal"]
        ratio = f"{d['seconds'] / min(solved):.3f}" if solved and "gap" in d else "–"
        checks = [v["brackets"] for k, v in h.items() if k != "lp" and "brackets" in v]
        check = ("yes" if all(checks) else "**no**") if checks else "–"
        gap = f"{100 * d['gap']:.2f} %" if "gap" in d else d.get("error", "")[:40]
        name = r["dataset"] + ("" if r["prior"] == "data" else " (uniform prior)")
        lines.append(f"| {name} | {r['n']}×{r['n']} | {r['neighbours']} | "
                     f"{r['eps_km']:.3g} ({r['eps_side']:.2f}) | {r['cells_with_data']} | "
                     f"{d['seconds']:.1f} | {d.get('method', '–')} | {gap} | {d['peak_mb'] or 0:.0f} | "
                     + " | ".join(secs(h[a]) if a in h else "–" for a in HIGHS_ALGORITHMS)
                     + f" | {ratio} | {check} |")
    return "\n".join(lines)


def _alone(rows: list[dict]) -> str:
    """Rows of diffpriv alone: one line a case."""
    lines = ["| data | grid | neighbours | ε per km (per side) | cells with data | diffpriv s (CLI) | run | "
             "iterations | certified gap | peak MB |", "|---|---|---|---|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        d = r["diffpriv"]
        gap = f"{100 * d['gap']:.2f} %" if "gap" in d else d.get("error", "")[:40] or "–"
        name = r["dataset"] + ("" if r["prior"] == "data" else " (uniform prior)")
        late = d.get("optimize_rc") is None  # killed at the run's --timeout: no table
        seconds = f"> {d['seconds']:.0f} (time limit)" if late else f"{d['seconds']:.1f}"
        peak = "–" if late else f"{d['peak_mb'] or 0:.0f}"
        lines.append(f"| {name} | {r['n']}×{r['n']} | {r['neighbours']} | "
                     f"{r['eps_km']:.3g} ({r['eps_side']:.2f}) | "
                     f"{r['cells_with_data']} | {seconds} | {d.get('method') or '–'} | "
                     f"{d.get('steps', '–')} | {gap} | {peak} |")
    return "\n".join(lines)


def _check(row: dict) -> None:
    """Records whether diffpriv's bound and certified loss bracket each HiGHS optimum."""
    d = row["diffpriv"]
    for algorithm, res in row["highs"].items():
        if algorithm == "lp" or res.get("status") != "Optimal" or "bound" not in d:
            continue
        value, slack = res["objective"], 1e-7 * max(abs(res["objective"]), 1e-12)
        res["brackets"] = bool(d["bound"] <= value + slack and value <= d["certified"] + slack)
        if not res["brackets"]:
            print(f"    CHECK FAILED: {algorithm} optimum {value} outside [{d['bound']}, {d['certified']}]",
                  flush=True)


if __name__ == "__main__":
    main()
