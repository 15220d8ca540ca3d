"""The tupling mechanism on real location data (seed 003, Tables 2 and 3 analogues): the
Sacramento home sales, expensive against cheap homes, on an ``n × n`` grid (no pseudo-count).

**Table 2.** With ``k = 10`` uniform dummies and the restricted Laplace base ``RL(ε_A = 10, r)``:
for δ = 0.001, 0.01, 0.1, the ε that Theorem 3 gives (the least ε whose ``δ_α`` is at most δ,
with ``η = 0`` and the least β of the two output laws) against the empirical ε, the least ε whose
Monte Carlo ``δ̂(ε)`` is at most δ (bisection on ε, a fixed seed).

**Table 3.** With the nearly noiseless base ``RL(ε_A = 100, r)``: the least number ``k ≤ 20`` of
uniform dummies whose Monte Carlo upper confidence bound (99 %) on ``δ(ε)`` is at most 0.001, for
ε = 0.25, 0.5, 1, 1.5.

    python experiments/tupling_tables.py --out out/tupling

Writes ``table2.csv``, ``table3.csv`` and ``tables.md``.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys

import numpy as np

import diffpriv as dp
from diffpriv.io import atomic_write, write_csv

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from sacramento import binning, load_sales, sparse_problem  # noqa: E402


def _problem(n: int, pseudo: float):
    """The two groups' histograms, each cell given ``pseudo`` sales (as ``sacramento.py`` does:
    the seed's check-in data are dense, and an output only one group can produce leaks it)."""
    constraint = dp.DistP(pairs=((0, 1),), epsilon=1.0, delta=0.001)
    if pseudo == 0:
        return sparse_problem(n, constraint)
    x, y, price = load_sales()
    cell, _, _, idx = binning(x, y, n)
    expensive = price > np.median(price)
    a = np.bincount(idx[expensive], minlength=n * n) + pseudo
    b = np.bincount(idx[~expensive], minlength=n * n) + pseudo
    dom = dp.Domain.grid(n, n, cell)
    return dp.Problem(dom, dom, dom.distances(dom), (a + b) / (a + b).sum(),
                      items=(dp.Item("expensive", a / a.sum()), dp.Item("cheap", b / b.sum())),
                      constraints=(constraint,))


def _laws(problem, base, k: int):
    """The two items' output laws under ``base`` (what :func:`evaluate_tupling` compares)."""
    mech = dp.mechanisms.Tupling(k, base[0])
    return mech.law(problem.items[0].dist), mech.law(problem.items[1].dist)


def least_true(pred, lo: float, hi: float, steps: int = 30) -> float:
    """The least ε in ``[lo, hi]`` with ``pred(ε)`` (``pred`` monotone: false then true)."""
    if not pred(hi):
        return math.inf
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if pred(mid) else (mid, hi)
    return hi


DEGREE_PER_SEED_CELL = 0.0103
"""Degrees in one of the seed's 1 km regions of Manhattan (40.7° N): 0.0090° of latitude, 0.0119°
of longitude; their geometric mean. The seed's ε_A and r read in degrees are per this much."""


def table2(problem, radius: float, samples: int, seed: int, scale: float = 1.0) -> list[dict]:
    """``scale``: ε_A's unit in km (1: per km; the degrees reading: per degree, in this grid's km)."""
    eps_a = 10.0 / scale
    k, base = 10, dp.mechanisms.MECHANISMS["restricted_laplace"](problem, epsilon=eps_a, radius=radius)
    p0, p1 = _laws(problem, base, k)
    beta, n_out = float(max(p0.max(), p1.max())), problem.shape[2]  # Λ's least β with η = 0
    rows = []
    for delta in (0.001, 0.01, 0.1):
        def theorem(eps, delta=delta):
            bound = dp.mechanisms.theorem3_delta(k, n_out, eps, beta)
            return bound is not None and bound <= delta

        def measured(eps, delta=delta):
            est = dp.mechanisms.tuple_delta_monte_carlo(p0, p1, eps, k, samples=samples, rng=seed)
            return est.estimate <= delta

        rows.append({"delta": delta, "theorem3_epsilon": least_true(theorem, 0.0, 50.0),
                     "empirical_epsilon": least_true(measured, 0.0, 10.0, steps=20), "k": k,
                     "base_epsilon": eps_a, "radius_km": radius, "beta": beta, "samples": samples})
    return rows


def table3(problem, radius: float, samples: int, seed: int, max_k: int = 20,
           scale: float = 1.0) -> list[dict]:
    eps_a = 100.0 / scale
    base = dp.mechanisms.MECHANISMS["restricted_laplace"](problem, epsilon=eps_a, radius=radius)
    rows = []
    for eps in (0.25, 0.5, 1.0, 1.5):
        need = None
        for k in range(1, max_k + 1):
            p0, p1 = _laws(problem, base, k)
            est = dp.mechanisms.tuple_delta_monte_carlo(p0, p1, eps, k, samples=samples, rng=seed)
            if est.upper <= 0.001:
                need = k
                break
        rows.append({"epsilon": eps, "delta": 0.001, "dummies_needed": need if need else f">{max_k}",
                     "base_epsilon": eps_a, "radius_km": radius, "samples": samples})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/tupling", help="output folder")
    ap.add_argument("--grid", type=int, default=10, help="cells per side")
    ap.add_argument("--radius", type=float, default=1.5, help="the base's radius r, in cells")
    ap.add_argument("--units", choices=("km", "degrees"), default="km",
                    help="read the seed's ε_A (10, 100) and r = 0.020 per km (ε_A per km, --radius in "
                         "cells) or per degree (both scaled to the seed's 1 km regions: r = 0.020° ≈ 1.94 of "
                         "them, ε_A per 1/0.0103 of a region)")
    ap.add_argument("--samples", type=int, default=20_000, help="Monte Carlo tuples per direction")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pseudo", type=float, default=0.2,
                    help="pseudo-count of sales per cell (0: the raw, sparse histograms)")
    args = ap.parse_args()
    problem = _problem(args.grid, args.pseudo)
    cell = float(problem.inputs.coords[1, 0] - problem.inputs.coords[0, 0])
    radius, scale = args.radius * cell, 1.0
    if args.units == "degrees":  # the seed's cells are this grid's cells: a degree is 1/0.0103 of them
        scale = cell / DEGREE_PER_SEED_CELL  # km of this grid per degree of the seed
        radius = 0.020 * scale * (1 + 1e-9)
    t2 = table2(problem, radius, args.samples, args.seed, scale)
    t3 = table3(problem, radius, args.samples, args.seed, scale=scale)
    out = pathlib.Path(args.out)
    write_csv(out / "table2.csv", t2)
    write_csv(out / "table3.csv", t3)
    lines = [f"Sacramento {args.grid}×{args.grid} (cells of {cell:.2f} km, {args.pseudo:g} pseudo-sales per "
             "cell), expensive vs cheap homes; "
             f"restricted Laplace base with r = {radius:.2f} km; {args.samples} Monte Carlo tuples per "
             f"direction; the seed's ε_A and r read per {'degree' if args.units == 'degrees' else 'km'} "
             f"(ε_A = {t2[0]['base_epsilon']:.4g} and {t3[0]['base_epsilon']:.4g} per km here).", "",
             "Table 2 analogue (k = 10, ε_A = 10): ε of (ε, δ)-DistP", "",
             "| | δ = 0.001 | δ = 0.01 | δ = 0.1 |", "|---|---:|---:|---:|",
             "| Theorem 3 | " + " | ".join(f"{r['theorem3_epsilon']:.4g}" for r in t2) + " |",
             "| empirical (Monte Carlo) | " + " | ".join(f"{r['empirical_epsilon']:.4g}" for r in t2) + " |",
             "", "Table 3 analogue (ε_A = 100): dummies k needed for (ε, 0.001)-DistP "
             "(99 % upper confidence bound)", "",
             "| ε | 0.25 | 0.5 | 1 | 1.5 |", "|---|---:|---:|---:|---:|",
             "| k | " + " | ".join(str(r["dummies_needed"]) for r in t3) + " |"]
    atomic_write(out / "tables.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
