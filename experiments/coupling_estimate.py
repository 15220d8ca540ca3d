"""The coupling mechanism as its knowledge improves (seed 000, Thm. 3), on real data: the
Sacramento home sales, expensive against cheap homes, each group a profile.

The "true" law ``λ_s`` of each group is its histogram of all 932 sales on an ``n × n`` grid with a
pseudo-count per cell (``--pseudo``: every cell positive, so that the divergences below are
finite); the mechanism knows only ``λ̂_s``, the same histogram of a random subsample of ``m``
sales of the group (the same pseudo-count). For growing ``m`` (several draws each) the
utility-optimal coupling mechanism is built from ``λ̂`` (target: the barycenter of the ``λ̂_s``,
``dp.mechanisms.barycenter``), and certified against the true ``λ``: its pure DistP level and
its KL-DistP level between the groups' output laws (exact, by ``dp.certify``), against Thm. 3's
bounds ``2ε`` and ``2ε·e^ε`` where ``ε = max_s max(D∞(λ̂_s‖λ_s), D∞(λ_s‖λ̂_s))``, and its loss
under the true ``λ`` beside the one it expects under ``λ̂``.

    python experiments/coupling_estimate.py --out out/coupling_estimate

Writes ``coupling.csv`` and ``coupling.pdf/.png``. Exit 1 if a certified level exceeds its
bound.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np
from matplotlib.figure import Figure

import diffpriv as dp
from diffpriv.io import write_csv

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from sacramento import binning, load_sales  # noqa: E402

SLACK = 1e-9
"""A certified level counts as within its bound up to this (relative)."""


def histogram(cells: np.ndarray, n: int, pseudo: float) -> np.ndarray:
    counts = np.bincount(cells, minlength=n * n).astype(float) + pseudo
    return counts / counts.sum()


def d_inf(p: np.ndarray, q: np.ndarray) -> float:
    """``D∞(p‖q) = max_x ln(p[x] / q[x])`` (both positive everywhere here)."""
    return float(np.max(np.log(p) - np.log(q)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/coupling_estimate", help="output folder")
    ap.add_argument("--grid", type=int, default=8, help="cells per side")
    ap.add_argument("--pseudo", type=float, default=1.0, help="pseudo-count of sales per cell")
    ap.add_argument("--draws", type=int, default=5, help="subsamples per size")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    n = args.grid
    x, y, price = load_sales()
    cell, _, _, idx = binning(x, y, n)
    expensive = price > np.median(price)
    groups = [idx[expensive], idx[~expensive]]
    lam = np.stack([histogram(g, n, args.pseudo) for g in groups])
    dom = dp.Domain.grid(n, n, cell)
    loss = dom.distances(dom)
    problem = dp.Problem(
        dom, dom, loss, prior=lam / 2, profiles=("expensive", "cheap"),
        items=(dp.Item("expensive", lam[0], profile=0), dp.Item("cheap", lam[1], profile=1)),
        constraints=(dp.DistP(pairs=((0, 1),), epsilon=50.0, name="pure"),
                     dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=50.0, name="kl")))
    rng = np.random.default_rng(args.seed)
    sizes = [m for m in (25, 50, 100, 200, 400) if m <= min(len(g) for g in groups)]
    rows = []
    for m in [*sizes, "all"]:
        for draw in range(1 if m == "all" else args.draws):
            subs = groups if m == "all" else [rng.choice(g, size=m, replace=False) for g in groups]
            lam_hat = np.stack([histogram(s, n, args.pseudo) for s in subs])
            eps = max(max(d_inf(a, b), d_inf(b, a)) for a, b in zip(lam_hat, lam, strict=True))
            mu = dp.mechanisms.barycenter(lam_hat, np.array([0.5, 0.5]), loss)
            table = dp.mechanisms.coupling_mechanism(lam_hat, mu, loss)
            cert = dp.certify(problem, table, repair=False)
            pure, kl = (c.level for c in cert.constraints)
            known = float(np.einsum("sx,sxy,xy->", lam_hat / 2, table, loss))
            rows.append({"sales_per_group": m, "draw": draw, "epsilon_estimate": eps,
                         "distp_level": pure, "thm3_distp_bound": 2 * eps,
                         "kl_level": kl, "thm3_kl_bound": 2 * eps * np.exp(eps),
                         "loss_true_km": cert.loss, "loss_expected_km": known})
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "coupling.csv", rows)
    _plot(rows, [out / "coupling.pdf", out / "coupling.png"], n)
    bad = [r for r in rows if r["distp_level"] > r["thm3_distp_bound"] * (1 + SLACK) + SLACK
           or r["kl_level"] > r["thm3_kl_bound"] * (1 + SLACK) + SLACK]
    print(f"{'sales/group':>11} {'ε of λ̂':>8} {'DistP level':>11} {'2ε':>7} {'KL level':>9} "
          f"{'2ε·e^ε':>8} {'loss (km)':>9} {'under λ̂':>8}   (medians over draws)")
    for m in [*sizes, "all"]:
        sel = [r for r in rows if r["sales_per_group"] == m]
        med = {k: float(np.median([r[k] for r in sel])) for k in sel[0]
               if k not in ("sales_per_group", "draw")}
        print(f"{m!s:>11} {med['epsilon_estimate']:8.3f} {med['distp_level']:11.4f} "
              f"{med['thm3_distp_bound']:7.3f} {med['kl_level']:9.5f} {med['thm3_kl_bound']:8.3f} "
              f"{med['loss_true_km']:9.3f} {med['loss_expected_km']:8.3f}")
    print(f"wrote {out}/coupling.csv and coupling.pdf/.png")
    if bad:
        print(f"{len(bad)} levels above Thm. 3's bound: {bad[:2]}")
    return 1 if bad else 0


def _plot(rows, paths, n: int) -> None:
    fig = Figure(figsize=(10, 4))
    left, right = fig.subplots(1, 2)
    sub = [r for r in rows if r["sales_per_group"] != "all"]
    e = [r["epsilon_estimate"] for r in sub]
    left.scatter(e, [r["distp_level"] for r in sub], s=14, label="certified DistP level")
    left.scatter(e, [r["kl_level"] for r in sub], s=14, marker="s", label="certified KL-DistP level")
    grid = np.linspace(0, max(e) * 1.05, 50)
    left.plot(grid, 2 * grid, "k--", lw=1, label="Thm. 3: 2ε")
    left.plot(grid, 2 * grid * np.exp(grid), "k:", lw=1, label="Thm. 3: 2ε·e^ε")
    left.set_yscale("symlog", linthresh=1e-3)
    left.set_xlabel("ε: max D∞ between the estimate λ̂ and the true λ")
    left.set_ylabel("level between the groups' output laws")
    left.set_title(f"Coupling mechanism, Sacramento {n}×{n}", fontsize=10)
    left.grid(alpha=0.3)
    left.legend(fontsize="x-small")
    m = [r["sales_per_group"] for r in sub]
    right.scatter(m, [r["loss_true_km"] for r in sub], s=14, label="loss under the true λ")
    right.scatter(m, [r["loss_expected_km"] for r in sub], s=14, marker="x",
                  label="loss it expects (under λ̂)")
    right.set_xscale("log")
    right.set_xticks(sorted(set(m)), [str(v) for v in sorted(set(m))])
    right.minorticks_off()
    right.set_xlabel("sales per group in the subsample")
    right.set_ylabel("expected loss (km)")
    right.set_title("What the estimate costs", fontsize=10)
    right.grid(alpha=0.3)
    right.legend(fontsize="x-small")
    fig.tight_layout()
    for path in paths:
        fig.savefig(path, dpi=150)


if __name__ == "__main__":
    raise SystemExit(main())
