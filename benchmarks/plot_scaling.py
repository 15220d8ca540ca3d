"""Plot of the scaling benchmark: time against grid size, diffpriv beside the exact LP.

Reads one or more JSON files written by ``benchmarks/scaling.py`` (rows of the same problem and
size in a later file replace earlier ones, stage by stage) and draws, for pure DistP and for
geo-indistinguishability, the wall time of each ``dp.design`` stage (certified gap 1 %, 0.1 %)
and of the LP against the number of cells, on log–log axes. A filled marker is a run that
stopped at its ``gap_tol``; a hollow one reached its step limit, labelled with the certified gap
it had then.

    python benchmarks/plot_scaling.py benchmarks/results/scaling_cpu_s6_*.json \\
        --out benchmarks/results/scaling_cpu.png
"""

from __future__ import annotations

import argparse
import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TITLES = {"distp": "pure DistP (ε = 1), n × n grid", "geo": "geo-indistinguishability (grid4), n × n grid"}


def merged_rows(paths) -> dict:
    """``{(kind, n): {stage: result}}`` over the files, later files winning stage by stage."""
    rows: dict = {}
    for path in paths:
        for row in json.loads(pathlib.Path(path).read_text())["rows"]:
            stages = rows.setdefault((row["kind"], row["n"]), {})
            stages.update({_key(k): v for k, v in row.items() if k == "lp" or k.startswith("design:")})
    return rows


def _key(stage: str) -> str:
    """``"design:1e-2"`` and ``"design:0.01"`` alike as ``"design:0.01"``."""
    return stage if stage == "lp" else f"design:{float(stage.split(':')[1]):g}"


def _tol(stage: str) -> str:
    return f"{100 * float(stage.split(':')[1]):g} %"


def plot(rows: dict, out: pathlib.Path, title: str) -> None:
    kinds = sorted({kind for kind, _ in rows})
    fig, axes = plt.subplots(1, len(kinds), figsize=(6.0 * len(kinds), 4.6), squeeze=False)
    for ax, kind in zip(axes[0], kinds, strict=True):
        sizes = sorted(n for k, n in rows if k == kind)
        stages = sorted({s for (k, _), st in rows.items() if k == kind for s in st if s != "lp"},
                        key=lambda s: -float(s.split(":")[1]))
        series = [("lp", "exact LP (HiGHS)", "k", "s")] + [
            (s, f"diffpriv, certified gap ≤ {_tol(s)}", c, "o")
            for s, c in zip(stages, ("tab:blue", "tab:orange", "tab:green"), strict=False)]
        for stage, label, colour, marker in series:
            pts = [(n * n, rows[(kind, n)][stage]) for n in sizes
                   if "seconds" in rows[(kind, n)].get(stage, {})]
            if not pts:
                continue
            ax.plot([c for c, _ in pts], [r["seconds"] for _, r in pts], "-", color=colour, alpha=0.5)
            for cells, r in pts:
                stopped = r.get("status", "converged") == "converged"
                ax.plot(cells, r["seconds"], marker, color=colour,
                        markerfacecolor=colour if stopped else "white")
                if not stopped:
                    ax.annotate(f"{r['steps']:,} steps: {100 * r['certified_gap']:.2g} %",
                                (cells, r["seconds"]), textcoords="offset points", xytext=(5, -10),
                                fontsize=7, color=colour)
            ax.plot([], [], marker, color=colour, label=label)
        ax.plot([], [], "o", color="grey", markerfacecolor="white", label="step limit (certified gap then)")
        ax.set(xscale="log", yscale="log", xlabel="cells n² (inputs = outputs)", ylabel="wall time, s",
               title=TITLES.get(kind, kind))
        ax.set_xticks([n * n for n in sizes], [f"{n}²" for n in sizes])
        ax.minorticks_off()
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp.png")
    fig.savefig(tmp, dpi=120)
    tmp.replace(out)
    print(f"wrote {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="JSON files from benchmarks/scaling.py")
    ap.add_argument("--out", default="benchmarks/results/scaling.png")
    ap.add_argument("--title", default="diffpriv against the exact LP")
    args = ap.parse_args()
    plot(merged_rows(args.files), pathlib.Path(args.out), args.title)


if __name__ == "__main__":
    main()
