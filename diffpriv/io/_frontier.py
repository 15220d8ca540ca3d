"""The figure of a privacy–utility frontier (``diffpriv sweep``): the certified loss of the
optimized table at each budget, the certified lower bound on the optimum beneath it, and each
baseline calibrated to the same budgets. matplotlib's :class:`~matplotlib.figure.Figure` only (no
pyplot, no GUI backend); the format follows each path's suffix (PNG, PDF, SVG).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

from diffpriv._files import atomic_open

__all__ = ["FORMATS", "plot_frontier"]

FORMATS = {".png": "png", ".pdf": "pdf", ".svg": "svg"}
SYMBOL = {"epsilon": "ε", "delta": "δ"}


def frontier_figure(frontier, ylabel: str, *, title: str | None = None) -> Figure:
    """``frontier`` (a :class:`diffpriv._sweep.Frontier`) drawn: the certified losses and bounds
    over the budgets, each baseline calibrated to them (its points where no setting meets the
    budget left out)."""
    rows = sorted(frontier.rows, key=lambda r: r["budget"])  # (budgets may be listed in any order)
    x = [r["budget"] for r in rows]
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    ax.plot(x, [r["certified_loss"] for r in rows], "o-", color="C0", lw=2,
            label="diffpriv: certified table", zorder=3)
    bounds = [r["lower_bound"] if math.isfinite(r["lower_bound"]) else math.nan for r in rows]
    ax.plot(x, bounds, "x--", color="C0", alpha=0.6, label="certified lower bound on the optimum")
    for k, name in enumerate(frontier.baselines):
        y = [r[f"{name}_loss"] for r in rows]
        if any(math.isfinite(v) for v in y):
            ax.plot(x, y, "s:", color=f"C{k + 1}", ms=4, label=f"{name} (calibrated)")
    symbol = SYMBOL.get(frontier.field, frontier.field)
    ax.set_xlabel(f"budget {symbol} of constraint '{frontier.constraint}'")
    ax.set_ylabel(ylabel)
    if len(x) > 2 and min(x) > 0 and max(x) / min(x) >= 20:
        ax.set_xscale("log")
    ax.set_title(title or f"Privacy–utility frontier over {symbol} of '{frontier.constraint}'")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def plot_frontier(frontier, ylabel: str, paths: Sequence[Path], *, title: str | None = None) -> Figure:
    """Draws ``frontier`` (:func:`frontier_figure`) and writes it to each path, atomically (the
    format by the suffix); returns the figure."""
    for path in paths:
        if Path(path).suffix.lower() not in FORMATS:
            raise ValueError(f"{path}: the figure's format follows the suffix: "
                             f"{', '.join(FORMATS)}")
    fig = frontier_figure(frontier, ylabel, title=title)
    for path in paths:
        with atomic_open(path, "wb") as f:
            fig.savefig(f, format=FORMATS[Path(path).suffix.lower()], dpi=150)
    return fig
