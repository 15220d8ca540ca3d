"""Column generation over output columns (``diffpriv/solvers/_columns.py``): where it converges.

Four measurements, each printed as a table and written to ``--out``:

* ``threshold``: ``dp.optimize`` with ``method="exact"`` (HiGHS on the whole LP) against
  ``method="cuts"`` (column generation) at ``gap_tol = 10⁻⁴``, best of 3 in this process, on
  geo-indistinguishability (ε = 0.5 per cell side, 4-neighbour cells, uniform prior) on n × n
  grids and k-ary randomized response (ε = 1 LDP, 0/1 loss): ``_methods.COLUMNS_FROM``;
* ``budgets``: rounds to ``gap_tol = 10⁻²`` on a uniform 12×12 grid as ε per cell side falls
  (at most 40 rounds): ``_columns.BOUNDLESS_ROUNDS``;
* ``priors``: the same on 10×10 with Dirichlet(α) priors (at most 60 rounds; the prior's
  perplexity over the rows beside; ``"auto"`` runs column generation from 0.5): ``_columns.BALANCE``;
* ``tight``: the benchmark grids of ``benchmarks/scaling.py`` at the default ``gap_tol = 10⁻⁴``.

    python benchmarks/columns.py                        # all four, about 5 minutes on 2 cores
    python benchmarks/columns.py --only budgets priors
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys
import time

import numpy as np

import diffpriv as dp

sys.path.insert(0, str(pathlib.Path(__file__).parent))
sys.path.insert(0, str(pathlib.Path(__file__).parents[1]))  # the tests' shared builders
from scaling import grid_problem  # noqa: E402

from tests._problems import geo_problem  # noqa: E402


def _best_of(f, k: int = 3):
    best, out = np.inf, None
    for _ in range(k):
        start = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - start)
    return best, out


def threshold() -> list[str]:
    rows = ["| problem | entries | HiGHS s | columns s | ratio | rounds | above HiGHS | bound ≤ HiGHS |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    cases = [(f"geo {n}×{n}", geo_problem(n, 0.5)) for n in (6, 8, 10, 12)]
    cases += [(f"k-RR k = {k}", dp.problems.k_rr_problem(k, 1.0)) for k in (20, 64)]
    for name, p in cases:
        te, exact = _best_of(lambda p=p: dp.optimize(p, method="exact", gap_tol=1e-4))
        tc, cols = _best_of(lambda p=p: dp.optimize(p, method="cuts", gap_tol=1e-4))
        rows.append(f"| {name} | {int(np.prod(p.shape)):,} | {te:.3f} | {tc:.3f} | {tc / te:.2f} | "
                    f"{cols.steps} | {(cols.objective - exact.objective) / exact.objective:.1e} | "
                    f"{cols.lower_bound <= exact.objective + 1e-12} |")
    return rows


def _rounds(p: dp.Problem, cap: int, gap_tol: float = 1e-2) -> tuple[str, int, float, float, float]:
    """Column generation (``method="cuts"``: no handover) for at most ``cap`` rounds: status,
    rounds, the table's loss, the bound, seconds."""
    start = time.perf_counter()
    r = dp.optimize(p, method="cuts", gap_tol=gap_tol, steps=cap)
    status = f"not in {cap}" if r.status == "step limit" else r.status
    return status, r.steps, r.objective, r.lower_bound, time.perf_counter() - start


def budgets() -> list[str]:
    rows = ["| ε per cell side | status | rounds | table's loss | bound | s |",
            "| ---: | --- | ---: | ---: | ---: | ---: |"]
    for eps in (2.0, 1.0, 0.5, 0.3, 0.2, 0.1):
        status, k, value, bound, secs = _rounds(geo_problem(12, eps), 40)
        rows.append(f"| {eps:g} | {status} | {k} | {value:.4f} | {bound:.4f} | {secs:.1f} |")
    return rows


def priors() -> list[str]:
    rows = ["| Dirichlet α | perplexity / rows | status | rounds | table's loss | bound | s |",
            "| ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    base = geo_problem(10, 0.5)
    for alpha in (10.0, 1.0, 0.1):
        prior = np.random.default_rng(0).dirichlet(np.full(100, alpha))
        p = dataclasses.replace(base, prior=prior.reshape(base.prior.shape))
        status, k, value, bound, secs = _rounds(p, 60)
        perplexity = np.exp(-np.sum(prior * np.log(prior))) / prior.size
        rows.append(f"| {alpha:g} | {perplexity:.2f} | {status} | {k} | {value:.4f} | {bound:.4f} | "
                    f"{secs:.1f} |")
    return rows


def tight() -> list[str]:
    rows = ["| problem | status | rounds | certified gap | s |", "| --- | --- | ---: | ---: | ---: |"]
    for n in (24, 32):
        start = time.perf_counter()
        r = dp.optimize(grid_problem("geo", n), method="cuts", gap_tol=1e-4)
        secs = time.perf_counter() - start
        rows.append(f"| geo {n}×{n} | {r.status} | {r.steps} | {r.gap:.1e} | {secs:.1f} |")
    return rows


STUDIES = {"threshold": threshold, "budgets": budgets, "priors": priors, "tight": tight}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=tuple(STUDIES), default=list(STUDIES))
    ap.add_argument("--out", default="benchmarks/results/columns.txt")
    args = ap.parse_args()
    lines = [f"# python benchmarks/columns.py --only {' '.join(args.only)}"]
    for name in args.only:
        table = STUDIES[name]()
        lines += ["", f"## {name}", "", *table]
        print("\n".join(lines[-len(table) - 3:]), flush=True)
    pathlib.Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
