"""Transport utility: how far each protected distribution's reports are from the distribution.

A collector that estimates *distributions* from the reports (where people are when at home, where
when out) loses the transport cost ``W1(A#λ_i, λ_i)`` of each item's law ``λ_i``, not the
per-report distance. Distribution privacy must blur exactly those laws, so the two pull against
each other. For every budget of the config (each ε times each scale) this script designs two
tables with ``dp.design`` — one for the expected loss, one for the transport objective over the
items (``dp.TransportLoss(laws="items")``) — certifies both, and compares each objective with its
exact optimum (``dp.solvers.lp``: the transport objective is an LP with one plan per item).

    python experiments/transport_utility.py configs/quickstart.toml --out out/transport

Writes ``transport.csv`` and ``transport.png``. Exit 1 if a certified transport loss is more than
1 % above the LP optimum, a certified lower bound is above it, or a certificate fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import time

import diffpriv as dp
from diffpriv.io import write_csv


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", default="configs/quickstart.toml")
    ap.add_argument("--out", default="out/transport")
    ap.add_argument("--scales", default="0.25,0.5,1,2,4")
    ap.add_argument("--steps", type=int, default=40_000)
    args = ap.parse_args(argv)
    base, _ = dp.load_config(args.config)
    if not base.items:
        raise SystemExit(f"{args.config}: the transport objective over items needs [[items]]")
    rows, bad = [], False
    for s in (float(v) for v in args.scales.split(",")):
        expected = dataclasses.replace(base.scaled(s), objective=dp.ExpectedLoss())
        transport = dataclasses.replace(expected, objective=dp.TransportLoss(laws="items"))
        row = {"scale": s, "epsilon": expected.constraints[0].epsilon}
        for name, problem in (("expected", expected), ("transport", transport)):
            start = time.perf_counter()
            design = dp.design(problem, method="pdhg", steps=args.steps)
            cert, table = design.certificate, design.certificate.table
            row |= {f"{name}_design_seconds": time.perf_counter() - start,
                    f"{name}_design_ok": cert.ok,
                    f"{name}_design_expected": expected.objective_value(table),
                    f"{name}_design_transport": transport.objective_value(table),
                    f"{name}_lower_bound": design.result.lower_bound,
                    f"{name}_lp": dp.solvers.lp(problem).value}
        lp = row["transport_lp"]
        excess = row["transport_design_transport"] / lp - 1 if lp > 0 else row["transport_design_transport"]
        row["transport_excess"] = excess
        bad |= (not (row["expected_design_ok"] and row["transport_design_ok"]) or excess > 0.01
                or row["transport_lower_bound"] > lp * (1 + 1e-7) + 1e-12)
        rows.append(row)
        print(f"eps={row['epsilon']:.3g}: transport loss of the transport design "
              f"{row['transport_design_transport']:.6f} (LP {lp:.6f}, excess {100 * excess:.3f} %, "
              f"bound {row['transport_lower_bound']:.6f}); of the expected-loss design "
              f"{row['expected_design_transport']:.6f}. Expected loss: "
              f"{row['expected_design_expected']:.6f} (LP {row['expected_lp']:.6f}) against "
              f"{row['transport_design_expected']:.6f}", flush=True)

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "transport.csv", rows)

    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    eps = [r["epsilon"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, title, ylabel in ((axes[0], "transport", "transport loss over the items",
                                    "W₁(A#λ, λ) under the loss (the config's units)"),
                                   (axes[1], "expected", "expected loss",
                                    "expected loss (the config's units)")):
        ax.plot(eps, [r[f"{key}_lp"] for r in rows], "k-", lw=3, alpha=0.3, label="LP optimum")
        ax.plot(eps, [r[f"transport_design_{key}"] for r in rows], "o-", label="transport design")
        ax.plot(eps, [r[f"expected_design_{key}"] for r in rows], "s--", label="expected-loss design")
        ax.set_xscale("log")
        ax.set_xticks(eps, [f"{e:.3g}" for e in eps])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("ε of the first constraint (every budget scaled together)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"Which loss to optimise: {pathlib.Path(args.config).name}")
    fig.tight_layout()
    fig.savefig(out / "transport.png", dpi=120)
    fig.savefig(out / "transport.pdf")
    print(f"wrote {out / 'transport.csv'}, {out / 'transport.png'} and {out / 'transport.pdf'}")
    print("all within 1 % of the LP" if not bad else "FAILED: see above")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
