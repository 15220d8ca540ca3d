"""What re-checking a certificate costs, against the certifier's own estimate.

For each kind of comparison (linear pairs and mixtures, KL pairs, Wasserstein pairs of order 1,
2 and 3) and a few output sizes, it builds a certificate on a line, then times ``dp.verify``
(float64, and with ``exact=True``) and measures its peak memory (``tracemalloc``, numpy's
arrays included, in a separate run), and prints both beside ``dp.certification.certify_cost``'s
estimate. The per-comparison rates in ``diffpriv/certification/_cost.py`` come from this
benchmark's output (the ``s/cmp`` columns); ``--fit`` prints them as least-squares fits.

    .venv/bin/python benchmarks/certify_cost.py [--quick] [--fit] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import math
import time
import tracemalloc

import numpy as np

import diffpriv as dp
from diffpriv.certification import certify_cost


def problem(kind: str, nx: int, ny: int) -> dp.Problem:
    inputs = dp.Domain(tuple(f"x{i}" for i in range(nx)), np.arange(nx, dtype=float)[:, None])
    outputs = dp.Domain(tuple(f"y{i}" for i in range(ny)), np.linspace(0, nx - 1, ny)[:, None])
    loss = np.abs(np.subtract.outer(inputs.coords[:, 0], outputs.coords[:, 0]))
    rng = np.random.default_rng(0)
    items = tuple(dp.Item(f"i{k}", rng.dirichlet(np.ones(nx))) for k in range(max(2, nx)))
    pairs = tuple((k, k + 1) for k in range(len(items) - 1))
    constraint = {
        "ldp": lambda: dp.LocalDP(epsilon=50.0),
        "distp": lambda: dp.DistP(pairs=pairs, epsilon=50.0),
        "kl_dp": lambda: dp.DivergenceDP(divergence="kl", epsilon=50.0),
        "wdp1": lambda: dp.WassersteinDP(epsilon=1e3, order=1.0),
        "wdp2": lambda: dp.WassersteinDP(epsilon=1e3, order=2.0),
        "wdp3": lambda: dp.WassersteinDP(epsilon=1e3, order=3.0),
    }[kind]()
    return dp.Problem(inputs, outputs, loss, np.full((1, nx), 1 / nx), items=items, constraints=(constraint,))


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def peak(fn) -> int:
    tracemalloc.start()
    fn()
    _, top = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return top


def run(kind: str, nx: int, ny: int, exact: bool) -> dict:
    p = problem(kind, nx, ny)
    table = np.random.default_rng(1).dirichlet(np.ones(ny), size=(1, nx))
    cert = dp.certify(p, table, repair=False)
    data = cert.to_dict(arrays=True)
    seconds = timed(lambda: dp.verify(data, exact=exact))
    memory = peak(lambda: dp.verify(data, exact=exact))
    est = certify_cost(p, exact=exact)
    comparisons = sum(b.size for b in p.blocks())
    return {"kind": kind, "nx": nx, "ny": ny, "exact": exact, "comparisons": comparisons,
            "seconds": seconds, "peak_bytes": memory, "estimate_seconds": est.seconds,
            "estimate_bytes": est.bytes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a minute)")
    ap.add_argument("--fit", action="store_true", help="print least-squares per-comparison rates")
    ap.add_argument("--out", help="write the rows as JSON")
    args = ap.parse_args()
    sizes = {"ldp": [(600, 8), (300, 64), (120, 256)], "distp": [(300, 8), (200, 64), (100, 256)],
             "kl_dp": [(600, 8), (300, 64), (120, 256)], "wdp1": [(60, 8), (30, 32), (16, 96)],
             "wdp2": [(60, 8), (30, 32), (16, 96)], "wdp3": [(40, 8), (20, 32), (10, 96)]}
    exact_sizes = {"ldp": [(120, 8), (60, 64), (30, 256)], "distp": [(60, 8), (40, 64), (20, 256)],
                   "kl_dp": [(120, 8), (60, 64), (30, 256)], "wdp1": [(30, 8), (20, 32), (12, 96)],
                   "wdp2": [(30, 8), (20, 32), (12, 96)], "wdp3": [(20, 8), (12, 32), (8, 96)]}
    if args.quick:
        sizes = {k: v[:2] for k, v in sizes.items()}
        exact_sizes = {k: v[:2] for k, v in exact_sizes.items()}
    rows = []
    print(f"{'kind':6} {'exact':5} {'X':>4} {'Y':>4} {'cmp':>6} {'s':>8} {'est s':>8} {'ratio':>6} "
          f"{'s/cmp':>9} {'MB':>8} {'est MB':>8} {'ratio':>6}")
    for kind in sizes:
        for exact in (False, True):
            for nx, ny in (exact_sizes if exact else sizes)[kind]:
                r = run(kind, nx, ny, exact)
                rows.append(r)
                print(f"{kind:6} {exact!s:5} {nx:4d} {ny:4d} {r['comparisons']:6d} {r['seconds']:8.3f} "
                      f"{r['estimate_seconds']:8.3f} {r['estimate_seconds'] / r['seconds']:6.2f} "
                      f"{r['seconds'] / r['comparisons']:9.2e} {r['peak_bytes'] / 2**20:8.2f} "
                      f"{r['estimate_bytes'] / 2**20:8.2f} {r['estimate_bytes'] / r['peak_bytes']:6.2f}",
                      flush=True)
    if args.fit:
        for kind in sizes:
            for exact in (False, True):
                sel = [r for r in rows if r["kind"] == kind and r["exact"] == exact]
                a = np.array([[1.0, r["ny"], r["ny"] ** 2] for r in sel])
                y = np.array([r["seconds"] / r["comparisons"] for r in sel])
                coef = np.linalg.lstsq(a, y, rcond=None)[0]
                print(f"fit {kind} exact={exact}: s/cmp ≈ {coef[0]:.3g} + {coef[1]:.3g}·Y + {coef[2]:.3g}·Y²")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "note": "dp.verify on a line, 2-core CPU"}, f, indent=1,
                      default=lambda v: None if isinstance(v, float) and math.isnan(v) else v)


if __name__ == "__main__":
    main()
