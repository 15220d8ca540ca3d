"""Categorical-Chain (Geumlek & Chaudhuri 2019, *Profile-based privacy for locally private
computations*, Sec. 6): Smooth Categorical against k-ary randomized response, and against diffpriv.

Three 4-category profiles (their Table 1) on the chain P1 − P2 − P3, ε-profile-based privacy on
its edges (pure DistP in diffpriv). Two tables, per ε:

1. The per-category costs of their eq. (8), ``cost_j = max_i |P_i[j] − (P_i A^i)[j]|``, of Smooth
   Categorical (LP (6): a matrix per profile minimising the largest off-diagonal entry) and of
   k-ary randomized response at the same ε (``dp.mechanisms.categorical_chain_report``).
2. Smooth Categorical's LP with three objectives — ``entries``, LP (6)'s own, the largest
   off-diagonal entry (diffpriv's ``entry`` objective, :class:`dp.LargestEntry`, with the 0/1
   loss); ``rows``, the largest off-diagonal row mass (diffpriv's worst-case 0/1 loss); and
   ``expected``, the expected 0/1 loss under the prior ``P_i / 3`` — next to diffpriv's exact LP
   (``dp.solvers.lp``) and its optimizer (``dp.design``: certified loss and certified lower
   bound) on ``dp.mechanisms.categorical_chain_problem(ε, objective=...)``.

    python experiments/categorical_chain.py --out out/categorical_chain/table.md

Prints both tables (markdown) and writes them atomically to ``--out``. Exit 1 if the LPs and the
optimizer do not agree (LPs within 1e-9; the optimizer's lower bound at most, and its certified
loss at least and within 0.1 % of, the LP value).
"""

from __future__ import annotations

import argparse
import math
import pathlib
from collections.abc import Sequence

import numpy as np

import diffpriv as dp
from diffpriv.io import atomic_write
from diffpriv.mechanisms import (
    CATEGORICAL_CHAIN,
    CATEGORICAL_CHAIN_EDGES,
    categorical_chain_problem,
    categorical_chain_report,
    smooth_categorical,
)

EPSILONS = "0.05,0.1,0.25,0.5,1,1.5"
OBJECTIVES = (("entries", "entry"), ("rows", "worst"), ("expected", "expected"))
"""Smooth Categorical's objective and diffpriv's that states the same LP."""
LP_TOL = 1e-9
DESIGN_RTOL = 1e-3
DESIGN_ATOL = 1e-6
"""Where the optimum is 0 (ε = 1.5: every table within budget reports its input), a certified
loss up to this counts as 0: the optimizer stops at an absolute gap there (4·10⁻⁹ for the
worst-case objective)."""


def cost_table(rows: Sequence[dp.mechanisms.ChainRow]) -> list[str]:
    """Table 1, markdown: one line per (ε, mechanism)."""
    d = len(rows[0].costs)
    lines = ["| ε | mechanism | " + " | ".join(f"cost c{j + 1}" for j in range(d))
             + " | largest off-diagonal entry |",
             "|---:|---|" + "---:|" * (d + 1)]
    for r in rows:
        lines.append(f"| {r.epsilon:g} | {r.mechanism} | " + " | ".join(f"{c:.6g}" for c in r.costs)
                     + f" | {r.max_off_diagonal:.6g} |")
    return lines


def agreement(eps: float, optimizer: bool, steps: int | None) -> list[dict]:
    """Per objective: Smooth Categorical's LP value, diffpriv's LP value and (``optimizer``) its
    optimized and certified table's loss and lower bound, and whether they agree."""
    out = []
    for ours, theirs in OBJECTIVES:
        value = smooth_categorical(CATEGORICAL_CHAIN, CATEGORICAL_CHAIN_EDGES, eps, objective=ours).value
        problem = categorical_chain_problem(eps, objective=theirs)
        lp = dp.solvers.lp(problem).value
        row = {"epsilon": eps, "objective": ours, "diffpriv": theirs, "smooth_categorical": value,
               "lp": lp, "certified": math.nan, "lower_bound": math.nan}
        ok = abs(value - lp) <= LP_TOL
        if optimizer:
            design = dp.design(problem, method="pdhg", steps=steps)
            row["certified"] = design.certificate.loss
            row["lower_bound"] = design.result.lower_bound
            ok = (ok and design.certificate.ok and row["lower_bound"] <= value + LP_TOL
                  and value - LP_TOL <= row["certified"] <= value * (1 + DESIGN_RTOL) + DESIGN_ATOL)
        out.append(row | {"ok": ok})
    return out


def lp_table(rows: Sequence[dict]) -> list[str]:
    """Table 2, markdown: one line per (ε, objective)."""
    lines = ["| ε | Smooth Categorical objective | diffpriv objective | Smooth Categorical LP "
             "| dp.solvers.lp | dp.design certified | dp.design lower bound | agree |",
             "|---:|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        design = ("| – | – " if math.isnan(r["certified"])
                  else f"| {r['certified']:.9g} | {r['lower_bound']:.9g} ")
        lines.append(f"| {r['epsilon']:g} | {r['objective']} | {r['diffpriv']} "
                     f"| {r['smooth_categorical']:.9g} | {r['lp']:.9g} {design}"
                     f"| {'yes' if r['ok'] else 'NO'} |")
    return lines


def plot_costs(rows: Sequence[dp.mechanisms.ChainRow], paths) -> None:
    """Seed 002's Fig. 2b–c: each category's cost (eq. (8)) against ε, k-ary randomized response
    and Smooth Categorical side by side, from the exact solutions."""
    from matplotlib.figure import Figure

    names = (("krr", "local DP: k-ary randomized response"),
             ("smooth_categorical", "Smooth Categorical"))
    fig = Figure(figsize=(8.0, 3.2))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, (key, title) in zip(axes, names, strict=True):
        sel = [r for r in rows if r.mechanism == key]
        eps = [r.epsilon for r in sel]
        for j in range(len(sel[0].costs)):
            ax.plot(eps, [r.costs[j] for r in sel], lw=1.2, label=f"category c{j + 1}")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("ε")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("cost_j = max_i |P_i[j] − (P_i A^i)[j]|")
    axes[1].legend(fontsize="x-small")
    fig.suptitle("Categorical-Chain, per-category cost (seed 002, Fig. 2b–c)", fontsize=10)
    fig.tight_layout()
    for path in paths:
        fig.savefig(path, dpi=150)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eps", default=EPSILONS, help=f"comma-separated budgets (default {EPSILONS})")
    ap.add_argument("--out", default="out/categorical_chain/table.md", help="markdown file to write")
    ap.add_argument("--steps", type=int, default=None, help="optimizer step limit (default: dp.design's)")
    ap.add_argument("--no-optimizer", action="store_true", help="skip dp.design (LPs only)")
    args = ap.parse_args(argv)
    epsilons = [float(e) for e in args.eps.split(",")]

    agree = [r for eps in epsilons for r in agreement(eps, not args.no_optimizer, args.steps)]
    ok = all(r["ok"] for r in agree)
    text = "\n".join([
        "# Categorical-Chain: Smooth Categorical vs k-ary randomized response",
        "",
        "Profiles (Geumlek & Chaudhuri 2019, Table 1): "
        + "; ".join(f"P{i + 1} = {list(p)}" for i, p in enumerate(CATEGORICAL_CHAIN.tolist()))
        + "; edges P1 − P2, P2 − P3.",
        "",
        "## Per-category costs, eq. (8): cost_j = max_i |P_i[j] − (P_i A^i)[j]|",
        "",
        *cost_table(categorical_chain_report(epsilons)),
        "",
        "## The Smooth Categorical LP against diffpriv's LP and optimizer",
        "",
        "entries: largest off-diagonal entry (LP (6)) = diffpriv's largest weighted entry "
        "(0/1 loss); rows: largest off-diagonal row mass = diffpriv's worst-case 0/1 loss; "
        "expected: expected 0/1 loss, prior P_i / 3.",
        "",
        *lp_table(agree),
        "",
        "all agree" if ok else "DISAGREE: see the rows marked NO",
        "",
    ])
    print(text, end="")
    out = pathlib.Path(args.out)
    atomic_write(out, text)
    curve = categorical_chain_report(tuple(float(e) for e in np.linspace(0.02, 2.0, 50)))
    figures = [out.with_name("costs.pdf"), out.with_name("costs.png")]
    plot_costs(curve, figures)
    print(f"wrote {out} and {figures[0].name} (.png)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
