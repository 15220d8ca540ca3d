"""What re-checking a certificate costs, against the certifier's own estimate.

For each kind of comparison (linear pairs and mixtures, KL pairs, Wasserstein pairs of order 1,
2 and 3) and a few output sizes, it builds a certificate on a line, then times ``dp.verify``
(float64, and with ``exact=True``) and measures its peak memory (``tracemalloc``, numpy's
arrays included, in a separate run), and prints both beside ``dp.certification.certify_cost``'s
estimate. The per-comparison rates (``dp.certification.RATES``) come from this
benchmark's output (the ``s/cmp`` columns); ``--fit`` prints them as least-squares fits.

``--stages`` times the once-per-problem stages instead (``dp.certification.cost_stages``): the
triangle check of
a metric (a line's ``|i − j|``), ``problem_hash`` of a problem with an input metric, and
extended DistP's transports (W1 and W∞ of two items, under a line's metric and under the
Euclidean distances of random points in the plane, stored; the items on 1, X/10 or X inputs),
each beside its estimate; with ``--fit`` the rates ``triangle``, ``hash``, ``w1``, ``winf``
(per point and solve charged, ``dp.certification.winf_steps``) and ``*_ground``.
The ``xdistp_w1`` and ``xdistp_winf`` kinds of the default run check whole certificates.

    .venv/bin/python benchmarks/certify_cost.py [--quick] [--fit] [--stages] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import math
import time
import tracemalloc

import numpy as np

import diffpriv as dp
from diffpriv.certification import certify_cost, check_metric, clear_caches, rate, winf_steps
from diffpriv.certification import cost_stages as stages
from diffpriv.problems import problem_hash

XDISTP_ITEMS = 8
"""Items of an ``xdistp_*`` certificate (its 7 pairs of neighbours: a W∞ of 400 inputs is ~0.3 s)."""


def problem(kind: str, nx: int, ny: int) -> dp.Problem:
    inputs = dp.Domain(tuple(f"x{i}" for i in range(nx)), np.arange(nx, dtype=float)[:, None])
    outputs = dp.Domain(tuple(f"y{i}" for i in range(ny)), np.linspace(0, nx - 1, ny)[:, None])
    loss = np.abs(np.subtract.outer(inputs.coords[:, 0], outputs.coords[:, 0]))
    rng = np.random.default_rng(0)
    n_items = XDISTP_ITEMS if kind.startswith("xdistp") else max(2, nx)
    items = tuple(dp.Item(f"i{k}", rng.dirichlet(np.ones(nx))) for k in range(n_items))
    pairs = tuple((k, k + 1) for k in range(len(items) - 1))
    constraint = {
        "ldp": lambda: dp.LocalDP(epsilon=50.0),
        "distp": lambda: dp.DistP(pairs=pairs, epsilon=50.0),
        "kl_dp": lambda: dp.DivergenceDP(divergence="kl", epsilon=50.0),
        "wdp1": lambda: dp.WassersteinDP(epsilon=1e3, order=1.0),
        "wdp2": lambda: dp.WassersteinDP(epsilon=1e3, order=2.0),
        "wdp3": lambda: dp.WassersteinDP(epsilon=1e3, order=3.0),
        "xdistp_w1": lambda: dp.ExtendedDistP(pairs=pairs, divergence="kl", epsilon=50.0),
        "xdistp_winf": lambda: dp.ExtendedDistP(pairs=pairs, divergence="kl", epsilon=50.0, transport="winf"),
    }[kind]()
    metric = line_metric(nx) if kind.startswith("xdistp") else None
    return dp.Problem(inputs, outputs, loss, np.full((1, nx), 1 / nx), items=items, constraints=(constraint,),
                      input_metric=metric)


def line_metric(n: int) -> np.ndarray:
    return np.abs(np.subtract.outer(np.arange(n), np.arange(n))).astype(float)


def plane_metric(n: int) -> np.ndarray:
    """Euclidean distances of ``n`` random points of the unit square (~n²/2 distinct ones)."""
    p = np.random.default_rng(2).random((n, 2))
    return np.sqrt(((p[:, None, :] - p[None, :, :]) ** 2).sum(-1))


def transport_problem(metric: np.ndarray, support: int, transport: str) -> dp.Problem:
    """Two items on ``support`` random inputs each, one ``xdistp`` pair, under ``metric``."""
    n = metric.shape[0]
    rng = np.random.default_rng(support)
    items = []
    for k in range(2):
        dist = np.zeros(n)
        dist[rng.choice(n, support, replace=False)] = rng.dirichlet(np.ones(support))
        items.append(dp.Item(f"i{k}", dist))
    dom = dp.Domain(tuple(f"x{i}" for i in range(n)))
    constraint = dp.ExtendedDistP(pairs=((0, 1),), divergence="kl", epsilon=1.0, transport=transport)
    return dp.Problem(dom, dp.Domain(("y0", "y1")), np.zeros((n, 2)), np.full((1, n), 1 / n),
                      items=tuple(items), constraints=(constraint,), input_metric=metric)


def stage_rows(quick: bool) -> list[dict]:
    """The triangle check, ``problem_hash`` and one transport of each kind, timed (best of 3 up
    to 400 inputs), each beside its estimate; ``steps``: the solves charged
    (``dp.certification.winf_steps``; 1 for W1), ``solved``: those W∞'s bisection ran (⌈log₂ L⌉
    + 1, ``L`` the distinct distances between the supports)."""
    rows = []
    for n in (200, 400, 800) if quick else (200, 400, 800, 1200, 1600):
        d = line_metric(n)

        def check(d=d):
            clear_caches()  # not the cache: the check
            check_metric(d)

        seconds = min(timed(check) for _ in range(2))
        rows.append({"stage": "triangle", "metric": "line", "nx": n, "support": n, "steps": 1,
                     "solved": 1, "seconds": seconds, "estimate_seconds": n * rate("triangle", n)})
    for name, metric in (("line", line_metric), ("plane", plane_metric)):
        for n in (200, 400, 800) if quick else (200, 400, 800, 1000):
            p = transport_problem(metric(n), 1, "w1")
            seconds = min(timed(lambda p=p: problem_hash(p)) for _ in range(3))
            rows.append({"stage": "hash", "metric": name, "nx": n, "support": n, "steps": 1, "solved": 1,
                         "seconds": seconds, "estimate_seconds": rate("hash", n * n)})
    for name, metric in (("line", line_metric), ("plane", plane_metric)):
        for n in (100, 200, 400) if quick else (100, 200, 400, 800, 1200):
            d = metric(n)
            for support in (1, max(1, n // 10), n):
                for transport in ("w1", "winf"):
                    p = transport_problem(d, support, transport)
                    c = p.constraints[0]

                    def solve(p=p, c=c):
                        clear_caches()
                        c.distances(p)

                    seconds = min(timed(solve) for _ in range(3 if n <= 400 else 1))
                    sa, sb = (np.flatnonzero(item.dist) for item in p.items)
                    levels = np.unique(d[np.ix_(sa, sb)]).size
                    steps = 1 if transport == "w1" else winf_steps(sa.size * sb.size, n)
                    rows.append({"stage": transport, "metric": name, "nx": n, "support": support,
                                 "steps": steps, "solved": 1 if transport == "w1" else
                                 math.ceil(math.log2(levels)) + 1, "seconds": seconds,
                                 "estimate_seconds": stages(p)[2][0][0]})
    return rows


def fit_stages(rows: list[dict]) -> None:
    """Non-negative least-squares rates of the stages, in relative error: ``triangle`` per point;
    ``hash`` per number (the plane's full-precision floats are the rate); for each transport,
    ``*_ground`` (per transport, ``n = X``) and the rate per point and solve
    charged (``n`` the support) together, ``t ≈ g(X) + steps·n·r(n)``."""
    from scipy.optimize import nnls

    def fit(features, y):
        a, y = np.asarray(features, dtype=float), np.asarray(y)
        return nnls(a / y[:, None], np.ones_like(y))[0]

    tri = [r for r in rows if r["stage"] == "triangle"]
    coef = fit([[r["nx"], r["nx"] ** 2, r["nx"] ** 3] for r in tri], [r["seconds"] for r in tri])
    print(f"fit triangle: s/point ≈ {coef[0]:.3g} + {coef[1]:.3g}·n + {coef[2]:.3g}·n²")
    for name in ("line", "plane"):
        sel = [r for r in rows if r["stage"] == "hash" and r["metric"] == name]
        coef = fit([[r["nx"] ** 2] for r in sel], [r["seconds"] for r in sel])
        print(f"fit hash ({name}): s ≈ {coef[0]:.3g}·n (n = X² numbers)")
    for kind in ("w1", "winf"):
        sel = [r for r in rows if r["stage"] == kind]
        coef = fit([[1.0, r["nx"], r["nx"] ** 2] + [r["steps"] * r["support"] ** e for e in (1, 2, 3)]
                    for r in sel], [r["seconds"] for r in sel])
        print(f"fit {kind}_ground: s/transport ≈ {coef[0]:.3g} + {coef[1]:.3g}·X + {coef[2]:.3g}·X²")
        print(f"fit {kind}: s/point/solve ≈ {coef[3]:.3g} + {coef[4]:.3g}·n + {coef[5]:.3g}·n²")


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
    seconds = timed(lambda: (clear_caches(), dp.verify(data, exact=exact)))  # the check too
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
    ap.add_argument("--stages", action="store_true",
                    help="time the triangle check and the transports instead (dp.certification.cost_stages)")
    ap.add_argument("--out", help="write the rows as JSON")
    args = ap.parse_args()
    if args.stages:
        rows = stage_rows(args.quick)
        print(f"{'stage':8} {'metric':6} {'X':>5} {'supp':>5} {'steps':>5} {'ran':>4} {'s':>9} "
              f"{'est s':>9} {'ratio':>6}")
        for r in rows:
            print(f"{r['stage']:8} {r['metric']:6} {r['nx']:5d} {r['support']:5d} {r['steps']:5d} "
                  f"{r['solved']:4d} "
                  f"{r['seconds']:9.5f} {r['estimate_seconds']:9.5f} "
                  f"{r['estimate_seconds'] / r['seconds']:6.2f}")
        if args.fit:
            fit_stages(rows)
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"rows": rows, "note": "dp.certification.cost_stages, 2-core CPU"}, f, indent=1)
        return
    sizes = {"ldp": [(600, 8), (300, 64), (120, 256)], "distp": [(300, 8), (200, 64), (100, 256)],
             "kl_dp": [(600, 8), (300, 64), (120, 256)], "wdp1": [(60, 8), (30, 32), (16, 96)],
             "wdp2": [(60, 8), (30, 32), (16, 96)], "wdp3": [(40, 8), (20, 32), (10, 96)],
             "xdistp_w1": [(200, 8), (400, 8), (800, 8)], "xdistp_winf": [(100, 8), (200, 8), (400, 8)]}
    exact_sizes = {"ldp": [(120, 8), (60, 64), (30, 256)], "distp": [(60, 8), (40, 64), (20, 256)],
                   "kl_dp": [(120, 8), (60, 64), (30, 256)], "wdp1": [(30, 8), (20, 32), (12, 96)],
                   "wdp2": [(30, 8), (20, 32), (12, 96)], "wdp3": [(20, 8), (12, 32), (8, 96)],
                   "xdistp_w1": [(100, 8), (200, 8)], "xdistp_winf": [(100, 8), (200, 8)]}
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
        for kind in (k for k in sizes if not k.startswith("xdistp")):  # their stages: --stages --fit
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
