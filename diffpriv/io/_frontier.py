"""The figure of a privacy–utility frontier (``diffpriv sweep``): the certified loss of the
optimized table at each budget, the certified lower bound on the optimum beneath it, and each
baseline calibrated to the same budgets, the legend beside the curves rather than over them.
matplotlib's :class:`~matplotlib.figure.Figure` only (no pyplot, no GUI backend); the format follows
each path's suffix (PNG, PDF, SVG). A PDF is drawn as one panel a column of a paper wide (3.5 in,
8-point type, the legend below the axes); the other formats for a screen.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from diffpriv._files import atomic_open

__all__ = ["FORMATS", "frontier_figure", "loss_label", "plot_frontier"]

FORMATS = {".png": "png", ".pdf": "pdf", ".svg": "svg"}
SYMBOL = {"epsilon": "ε", "delta": "δ"}


def loss_label(problem) -> str:
    """The loss axis's label for ``problem``: its objective (``"expected loss"``), with the
    coordinates' unit where the loss is the distance between the inputs' and outputs' coordinates
    in that unit (a config's ``loss = "euclidean"`` on a domain with ``units``)."""
    text = problem.objective.text
    units = problem.outputs.units or problem.inputs.units
    a, b = problem.inputs.coords, problem.outputs.coords
    if not units or a is None or b is None or problem.objective.kind == "entry":
        return text
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape[1] != b.shape[1]:
        return text
    distance = np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=-1))
    return f"{text} ({units})" if np.allclose(problem.loss, distance, rtol=1e-9, atol=0.0) else text


def frontier_figure(frontier, ylabel: str, *, title: str | None = None, log_loss: bool = False,
                    paper: bool = False) -> Figure:
    """``frontier`` (a :class:`diffpriv._sweep.Frontier`) drawn: the certified losses and bounds
    over the budgets, each baseline calibrated to them (its points where no setting meets the
    budget left out); the loss axis logarithmic with ``log_loss`` (where every loss drawn is
    positive), the budget axis where the budgets span a factor of 20 or more. ``paper``: one panel
    a column wide (3.5 × 3.2 in, 8-point type, the legend below the axes); else 7.5 × 4.2 in, the
    legend right of the axes."""
    rows = sorted(frontier.rows, key=lambda r: r["budget"])  # (budgets may be listed in any order)
    x = [r["budget"] for r in rows]
    size = 8 if paper else 10
    fig = Figure(figsize=(3.5, 3.2) if paper else (7.5, 4.2))
    ax = fig.add_subplot()
    drawn = [r["certified_loss"] for r in rows]
    ax.plot(x, drawn, "o-", color="C0", lw=1.5 if paper else 2, ms=4 if paper else 6,
            label="diffpriv: certified table", zorder=3)
    bounds = [r["lower_bound"] if math.isfinite(r["lower_bound"]) else math.nan for r in rows]
    ax.plot(x, bounds, "x--", color="C0", alpha=0.6, ms=4 if paper else 6,
            label="certified lower bound on the optimum")
    drawn += [b for b in bounds if math.isfinite(b)]
    for k, name in enumerate(frontier.baselines):
        y = [r[f"{name}_loss"] for r in rows]
        if any(math.isfinite(v) for v in y):
            ax.plot(x, y, "s:", color=f"C{k + 1}", ms=3 if paper else 4, label=f"{name} (calibrated)")
            drawn += [v for v in y if math.isfinite(v)]
    symbol = SYMBOL.get(frontier.field, frontier.field)
    ax.set_xlabel(f"budget {symbol} of constraint '{frontier.constraint}'", fontsize=size)
    ax.set_ylabel(ylabel, fontsize=size)
    ax.tick_params(labelsize=size - 1)
    if len(x) > 2 and min(x) > 0 and max(x) / min(x) >= 20:
        ax.set_xscale("log")
    if log_loss and drawn and min(drawn) > 0:
        ax.set_yscale("log")
    if not paper:
        ax.set_title(title or f"Privacy–utility frontier over {symbol} of '{frontier.constraint}'",
                     fontsize=size + 1)
    elif title:
        ax.set_title(title, fontsize=size + 1)
    ax.grid(alpha=0.3)
    if paper:
        ax.legend(fontsize=size - 1, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=1, frameon=False)
    else:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    return fig


def plot_frontier(frontier, ylabel: str, paths: Sequence[Path], *, title: str | None = None,
                  log_loss: bool = False) -> Figure:
    """Draws ``frontier`` (:func:`frontier_figure`) and writes it to each path, atomically (the
    format by the suffix; a PDF as one panel for a paper); returns the last figure drawn."""
    for path in paths:
        if Path(path).suffix.lower() not in FORMATS:
            raise ValueError(f"{path}: the figure's format follows the suffix: "
                             f"{', '.join(FORMATS)}")
    figures: dict[bool, Figure] = {}
    fig = None
    for path in paths:
        kind = FORMATS[Path(path).suffix.lower()]
        paper = kind == "pdf"
        if paper not in figures:
            figures[paper] = frontier_figure(frontier, ylabel, title=title, log_loss=log_loss, paper=paper)
        fig = figures[paper]
        with atomic_open(path, "wb") as f:
            fig.savefig(f, format=kind, dpi=150, bbox_inches="tight")
    return fig
