"""A figure of a certified mechanism, for ``diffpriv plot`` (matplotlib, no pyplot).

Two layouts, chosen by the domains:

* **plane** (inputs and outputs have 2-D coordinates, e.g. a grid), one row of maps each:
  (a) the protected item distributions ``λ_i[x]``; (b) what an observer of the reports sees,
  ``P_i[y] = Σ_x λ_i[x] A[s_i, x, y]``; (c) for a few true inputs ``x`` spread over the plane,
  the row ``A[s, x, ·]``, with an arrow from ``x`` to the mean report; (d) the expected loss of
  each input, ``ℓ[s, x] = Σ_y A[s, x, y] L[x, y]``, per profile. Values on a full rectangular
  lattice are drawn as cells, other coordinates as coloured dots. Without items, (a) shows each
  profile's prior and (b) is left out.
* **table** (otherwise, e.g. categories): (a) the table ``A[s]`` as a heatmap per profile (rows:
  true value, columns: report), then as bars (b) ``λ_i``, (c) ``P_i`` and (d) ``ℓ[s, x]``.

Each row (each chart of the table layout) is a part named in :data:`PARTS` — ``items``,
``observed``, ``reports`` (plane only), ``table`` (table only) and ``loss`` — and ``parts`` draws
only those, in that order (one alone: a figure for a slide or a paper). At most ``MAX_PANELS``
items, inputs or profiles are drawn per row; the title says how many more.
Only :class:`matplotlib.figure.Figure` is used (no pyplot): no global state, no GUI backend; the
PNG is rendered by Agg.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from diffpriv._files import atomic_open
from diffpriv.problems._problem import Problem

__all__ = ["FORMATS", "PARTS", "chosen_parts", "describe", "parts_of", "plot_certificate"]

MAX_PANELS = 4  # panels per row: items, inputs, profiles beyond this are left out (and said so)
PROB_CMAP, LOSS_CMAP = "YlGnBu", "OrRd"
PARTS = {"plane": ("items", "observed", "reports", "loss"), "table": ("table", "items", "observed", "loss")}
"""The parts of each layout, in the order drawn: the item distributions (each profile's prior
where there are no items), what an observer of the reports sees, where a few true inputs are
reported (plane), the table itself (table), the expected loss of each input."""


def parts_of(problem: Problem) -> tuple[str, ...]:
    """The parts :func:`plot_certificate` draws for ``problem`` (:data:`PARTS` of its layout; on
    the plane without items, ``observed`` is left out)."""
    if not _planar(problem):
        return PARTS["table"]
    return PARTS["plane"] if problem.items else tuple(p for p in PARTS["plane"] if p != "observed")


def _planar(problem: Problem) -> bool:
    xin, xout = problem.inputs.coords, problem.outputs.coords
    return xin is not None and xout is not None and xin.shape[1] == 2 == xout.shape[1]


def _edges(centres: np.ndarray, step: float) -> np.ndarray:
    """Cell edges around sorted cell centres (midpoints; half a step beyond the ends);
    a single centre gets a cell of width ``step``."""
    if centres.size == 1:
        return np.array([centres[0] - step / 2, centres[0] + step / 2])
    mid = (centres[1:] + centres[:-1]) / 2
    return np.concatenate([[2 * centres[0] - mid[0]], mid, [2 * centres[-1] - mid[-1]]])


def _lattice(coords: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(xs, ys, index[ny, nx])`` if the points are exactly a full rectangular lattice."""
    xs, xi = np.unique(coords[:, 0], return_inverse=True)
    ys, yi = np.unique(coords[:, 1], return_inverse=True)
    if xs.size * ys.size != len(coords):
        return None
    index = np.full((ys.size, xs.size), -1)
    index[yi, xi] = np.arange(len(coords))
    return (xs, ys, index) if np.all(index >= 0) else None


def _plane(ax, coords: np.ndarray, values: np.ndarray, cmap: str, vmax: float, units: str = ""):
    """``values[n]`` at 2-D ``coords[n]``: cells on a lattice, dots otherwise."""
    ax.set_aspect("equal")
    ax.set_xlabel(f"x ({units})" if units else "x")
    ax.set_ylabel(f"y ({units})" if units else "y")
    grid = _lattice(coords)
    if grid is not None:
        xs, ys, index = grid
        step = min([*np.diff(xs), *np.diff(ys)], default=1.0)
        return ax.pcolormesh(_edges(xs, step), _edges(ys, step), values[index], cmap=cmap,
                             vmin=0, vmax=vmax)
    return ax.scatter(coords[:, 0], coords[:, 1], c=values, cmap=cmap, vmin=0, vmax=vmax,
                      s=70, edgecolors="0.5", linewidths=0.4)


def _shown_inputs(problem: Problem, loss_per_input: np.ndarray, k: int) -> list[tuple[int, int]]:
    """``k`` (profile, input) rows worth looking at, spread over the plane.

    Each input with its most likely profile. First the input that adds most to the expected
    loss, then farthest-point sampling among the inputs that add at least 5% as much, then
    among all inputs.
    """
    owner = np.argmax(problem.prior, axis=0)
    loss = loss_per_input[owner, np.arange(problem.inputs.size)]
    weight = problem.prior.sum(axis=0) * loss
    d = problem.inputs.distances(problem.inputs)
    chosen = [int(np.argmax(weight))]
    for pool in (np.flatnonzero(weight >= 0.05 * weight.max()), np.arange(loss.size)):
        while len(chosen) < min(k, loss.size) and np.setdiff1d(pool, chosen).size:
            rest = np.setdiff1d(pool, chosen)
            chosen.append(int(rest[np.argmax(d[np.ix_(chosen, rest)].min(axis=0))]))
    return [(int(owner[x]), x) for x in chosen]


def _panels(sub, title: str, n: int) -> list:
    """Titles the subfigure row ``sub``; ``MAX_PANELS`` axes, of which the first ``n`` show."""
    sub.suptitle(title, fontsize=11, x=0.01, ha="left")
    axes = sub.subplots(1, MAX_PANELS)
    for ax in axes[n:]:
        ax.set_visible(False)
    return list(axes[:n])


def _plane_row(sub, title: str, dom, panels: list, cmap: str, label: str,
               shared: bool = True) -> list:
    """One titled row of up to ``MAX_PANELS`` maps ``(name, values[n])`` over the domain
    ``dom``'s coordinates; one colour scale for the row (``shared``), or one per panel."""
    if len(panels) > MAX_PANELS:
        title += f" ({len(panels) - MAX_PANELS} more not shown)"
    panels = panels[:MAX_PANELS]
    axes = _panels(sub, title, len(panels))
    vmax = max(float(v.max()) for _, v in panels) or 1.0
    for ax, (name, values) in zip(axes, panels, strict=True):
        im = _plane(ax, dom.coords, values, cmap, vmax if shared else float(values.max()) or 1.0, dom.units)
        ax.set_title(name, fontsize=10)
        if not shared:
            sub.colorbar(im, ax=ax, shrink=0.8, pad=0.02)
    if shared:
        sub.colorbar(im, ax=axes, label=label, shrink=0.9)
    return axes


def _name(problem: Problem, name: str, s: int) -> str:
    """``name``, with its profile where there are several (and it is not the same name)."""
    if len(problem.profiles) == 1 or problem.profiles[s] == name:
        return name
    return f"{name} [{problem.profiles[s]}]"


def _observed(problem: Problem, table: np.ndarray) -> list[np.ndarray]:
    """``P_i[y] = Σ_x λ_i[x] A[s_i, x, y]`` for each item: what an observer of reports sees."""
    return [it.dist @ table[it.profile] for it in problem.items]


def _plane_figure(problem: Problem, table: np.ndarray, loss_per_input: np.ndarray,
                  cells: list[int] | None, parts: tuple[str, ...]) -> Figure:
    xin, xout = problem.inputs.coords, problem.outputs.coords
    fig = Figure(figsize=(3.3 * MAX_PANELS + 1.4, 3.4 * len(parts) + 1.2), layout="constrained")
    subs = list(np.atleast_1d(fig.subfigures(len(parts), 1)))  # (the figure's own title: the headline)
    letters = iter("abcd")

    if "items" in parts and problem.items:
        names = [_name(problem, it.name, it.profile) for it in problem.items]
        title = f"({next(letters)}) protected item distributions λ_i[x] over the true inputs"
        panels = [(n, it.dist) for n, it in zip(names, problem.items, strict=True)]
        _plane_row(subs.pop(0), title, problem.inputs, panels, PROB_CMAP, "probability")
    elif "items" in parts:
        prior = problem.prior / np.maximum(problem.prior.sum(axis=1, keepdims=True), 1e-300)
        title = f"({next(letters)}) prior of each profile (no items to protect)"
        _plane_row(subs.pop(0), title, problem.inputs, list(zip(problem.profiles, prior, strict=True)),
                   PROB_CMAP, "probability")
    if "observed" in parts:
        names = [_name(problem, it.name, it.profile) for it in problem.items]
        _plane_row(subs.pop(0), f"({next(letters)}) what an observer of the reports sees: "
                   "P_i[y] = Σ_x λ_i[x] A[s_i, x, y] over the outputs", problem.outputs,
                   list(zip(names, _observed(problem, table), strict=True)), PROB_CMAP, "probability")

    if "reports" in parts:
        if cells is None:
            shown = _shown_inputs(problem, loss_per_input, MAX_PANELS)
        else:  # the user's cells, each with its most likely profile (the same for every certificate)
            owner = np.argmax(problem.prior, axis=0)
            shown = [(int(owner[x]), x) for x in cells[:MAX_PANELS]]
        panels = []
        for s, x in shown:
            same = x < problem.outputs.size and problem.outputs.labels[x] == problem.inputs.labels[x]
            kept = f", kept {table[s, x, x]:.2f}" if same else ""
            panels.append((f"x = {_name(problem, problem.inputs.labels[x], s)}{kept}", table[s, x]))
        title = (f"({next(letters)}) where a true input x (★) is reported (arrow: to the mean report): "
                 "probability A[s, x, y] of each output y (own colour scale per panel)")
        axes = _plane_row(subs.pop(0), title, problem.outputs, panels, PROB_CMAP, "probability of the report",
                          shared=False)
        for ax, (s, x) in zip(axes, shown, strict=True):
            mean = table[s, x] @ xout  # the average report: an arrow from x to it
            if np.linalg.norm(mean - xin[x]) > 1e-6 * (np.ptp(xout, axis=0).max() or 1.0):
                ax.annotate("", xy=mean, xytext=xin[x],
                            arrowprops={"arrowstyle": "->", "color": "crimson", "lw": 1.2})
            ax.plot(*xin[x], marker="*", ms=13, mfc="crimson", mec="white", mew=0.8, ls="none")

    if "loss" in parts:
        panels = []
        for s, name in enumerate(problem.profiles):
            mean = float(problem.prior[s] @ loss_per_input[s] / max(problem.prior[s].sum(), 1e-300))
            panels.append((f"profile {name}: mean {mean:.3g}", loss_per_input[s]))
        _plane_row(subs.pop(0), f"({next(letters)}) expected loss of each true input, "
                   "ℓ[s, x] = Σ_y A[s, x, y] L[x, y]", problem.inputs, panels, LOSS_CMAP, "expected loss")
    return fig


def _ticks(ax, axis: str, labels: tuple[str, ...]) -> None:
    step = max(1, len(labels) // 24)  # at most ~24 labels per axis
    pos = np.arange(0, len(labels), step)
    getattr(ax, f"set_{axis}ticks")(pos, [labels[i] for i in pos],
                                    **({"rotation": 45, "ha": "right"} if axis == "x" else {}))


def _bars(ax, labels: tuple[str, ...], series: list, title: str, ylabel: str, xlabel: str) -> None:
    """Grouped bars: ``series`` is a list of ``(name, values[len(labels)])``."""
    pos = np.arange(len(labels))
    width = 0.8 / max(len(series), 1)
    for k, (name, values) in enumerate(series):
        ax.bar(pos - 0.4 + (k + 0.5) * width, values, width, label=name)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)
    ax.set_xlabel(xlabel)
    _ticks(ax, "x", labels)
    if series:
        top = max(float(np.max(v)) for _, v in series) or 1.0
        ax.set_ylim(0, 1.3 * top)  # room for the legend
        ax.legend(fontsize=8, loc="upper center", ncols=min(len(series), 3), frameon=False)


def _table_figure(problem: Problem, table: np.ndarray, loss_per_input: np.ndarray,
                  cells: list[int] | None, parts: tuple[str, ...]) -> Figure:
    nx, ny = problem.inputs.size, problem.outputs.size
    n = min(len(problem.profiles), MAX_PANELS)
    cell = min(0.6, 6.0 / max(nx, ny))  # inches per table cell
    panel = ny * cell + 2.0  # inches per heatmap, labels included
    width = max(n * panel + 1.2, 13.0)
    bars = [p for p in parts if p != "table"]
    heights = ([nx * cell + 1.6] if "table" in parts else []) + ([3.6] if bars else [])
    if "table" not in parts:
        width = max(4.6 * len(bars), 6.0)
    fig = Figure(figsize=(width, sum(heights) + 0.4), layout="constrained")
    subs = list(np.atleast_1d(fig.subfigures(len(heights), 1, height_ratios=heights)))
    letters = iter("abcd")

    if "table" in parts:
        top = subs.pop(0)
        more = f" ({len(problem.profiles) - n} more profiles not shown)" if n < len(problem.profiles) else ""
        top.suptitle(f"({next(letters)}) the mechanism A[s, x, y]: probability of reporting y for the true "
                     f"value x{more}", fontsize=11, x=0.01, ha="left")
        filler = (width - 1.2) / panel - n  # an invisible last column keeps the heatmaps left
        ratios = [1.0] * n + ([filler] if filler > 0.05 else [])
        axes = top.subplots(1, len(ratios), squeeze=False, width_ratios=ratios)[0]
        for ax in axes[n:]:
            ax.set_visible(False)
        axes = axes[:n]
        for s, ax in enumerate(axes):
            im = ax.imshow(table[s], cmap=PROB_CMAP, vmin=0, vmax=1)
            ax.set_title(f"profile {problem.profiles[s]}", fontsize=10)
            _ticks(ax, "x", problem.outputs.labels)
            _ticks(ax, "y", problem.inputs.labels)
            ax.set_xlabel("reported y")
            ax.set_ylabel("true x")
            if nx * ny <= 150:
                for (x, y), p in np.ndenumerate(table[s]):
                    ax.text(y, x, f"{p:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if p > 0.6 else "black")
        top.colorbar(im, ax=axes, label="probability", shrink=0.9)
    if not bars:
        return fig

    items = problem.items[:8]
    names = [_name(problem, it.name, it.profile) for it in items]
    more = f" (first {len(items)})" if len(items) < len(problem.items) else ""
    charts = {
        "items": lambda ax, k: _bars(ax, problem.inputs.labels,
                                     [(n, it.dist) for n, it in zip(names, items, strict=True)],
                                     f"({k}) protected item distributions λ_i[x]{more}", "probability",
                                     "true x"),
        "observed": lambda ax, k: _bars(ax, problem.outputs.labels,
                                        list(zip(names, _observed(problem, table), strict=False)),
                                        f"({k}) what an observer sees: P_i[y] = Σ_x λ_i[x] A[s_i, x, y]",
                                        "probability", "reported y"),
        "loss": lambda ax, k: _bars(ax, problem.inputs.labels,
                                    [(f"profile {problem.profiles[s]}", loss_per_input[s]) for s in range(n)],
                                    f"({k}) expected loss of each true input, ℓ[s, x]", "expected loss",
                                    "true x"),
    }
    axes = subs.pop(0).subplots(1, len(bars), squeeze=False)[0]
    for ax, part in zip(axes, bars, strict=True):
        charts[part](ax, next(letters))
    return fig


def _headline(problem: Problem, cert: dict[str, Any]) -> str:
    """What the certificate records (not re-checked): loss, sizes, constraints, verdict."""
    parts = []
    for c in cert.get("constraints") or []:
        try:
            budget = f"ε={float(c['epsilon']):g}" + (f", δ={float(c['delta']):g}" if c.get("delta") else "")
            parts.append(f"{c['name']} ({c['kind']}, {budget})")
        except (KeyError, TypeError, ValueError):
            continue
    holds = {True: "all hold", False: "NOT ALL HOLD"}.get(cert.get("ok"), "unknown")
    loss = cert.get("loss")
    loss = f"{float(loss):.6g}" if isinstance(loss, (int, float)) else "?"
    s, x, y = problem.shape
    lines = [f"{problem.objective.text} {loss}  ·  {s} profile{'s' * (s > 1)}, {x} inputs, {y} outputs"]
    lines += textwrap.wrap(f"constraints ({holds} as recorded): " + ("; ".join(parts) or "none"), 110)
    return "\n".join(lines)


FORMATS = {".png": "png", ".pdf": "pdf", ".svg": "svg"}
"""The figure's format by the suffix of its path."""


def describe(cert: dict[str, Any]) -> str:
    """What made the table, as recorded in the certificate's ``meta`` (not re-checked): the
    mechanism and its parameters, or diffpriv's optimizer and the solver that ran, and the budget
    of a sweep's point."""
    meta = cert.get("meta") if isinstance(cert.get("meta"), dict) else {}
    mech, opt = meta.get("mechanism"), meta.get("optimizer")
    if isinstance(mech, dict) and isinstance(mech.get("name"), str):
        params = mech.get("params") if isinstance(mech.get("params"), dict) else {}
        shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in params.items() if not isinstance(v, dict | list))
        text = f"{mech['name']} ({shown})" if shown else mech["name"]
    elif isinstance(opt, dict) and isinstance(opt.get("method"), str):
        text = f"diffpriv optimum ({opt['method']})"
    elif isinstance(meta.get("reference"), dict):
        text = "exact optimum (reference solver)"
    else:
        text = "certified mechanism"
    point = meta.get("sweep")
    if isinstance(point, dict) and isinstance(point.get("budget"), int | float):
        symbol = {"epsilon": "ε", "delta": "δ"}.get(point.get("field"), "budget")
        text += f" at {symbol} = {point['budget']:.4g} of {point.get('constraint')}"
    return text


def chosen_parts(problem: Problem, parts: Sequence[str] | None) -> tuple[str, ...]:
    """The parts of :func:`parts_of` named in ``parts``, in the figure's order (all of them where
    ``parts`` is ``None``).

    Raises:
      ValueError: ``parts`` names one the layout lacks, or none.
    """
    known = parts_of(problem)
    if parts is None:
        return known
    unknown = [p for p in parts if p not in known]
    if unknown or not parts:
        what = f"{unknown[0]!r} is not a part of this figure" if unknown else "no part given"
        raise ValueError(f"{what} (its parts: {', '.join(known)})")
    return tuple(p for p in known if p in parts)


def plot_certificate(problem: Problem, table: np.ndarray, cert: dict[str, Any],
                     path: str | Path, title: str = "", cells: list[int] | None = None,
                     parts: tuple[str, ...] | None = None) -> Path:
    """Draws the certified ``table`` of ``problem`` and writes it atomically, as PNG, PDF or SVG
    by the suffix of ``path`` (:data:`FORMATS`).

    Args:
      problem: the certificate's problem (``problem_from_dict(cert["problem"])``).
      table: ``[n_profiles, n_in, n_out]`` the certified table.
      cert: the certificate's JSON (for the headline: loss, constraints, verdict).
      path: the file to write.
      title: first line of the figure's title (default: :func:`describe`).
      cells: the true inputs (indices) whose report distributions the plane layout draws
        (default: chosen from the table, so two certificates may differ), at most
        ``MAX_PANELS``; the table layout draws every input anyway.
      parts: the parts to draw, of :func:`parts_of` (default: all of them), in their order.

    Raises:
      ValueError: ``path``'s suffix is not a format, or ``parts`` names one the layout lacks.
    """
    try:
        chosen = chosen_parts(problem, parts)
    except ValueError as e:
        raise ValueError(f"parts: {e}") from None
    table = np.asarray(table, dtype=np.float64)
    loss_per_input = np.einsum("sxy,xy->sx", table, problem.loss)
    figure = _plane_figure if _planar(problem) else _table_figure
    fig = figure(problem, table, loss_per_input, cells, chosen)
    fig.suptitle(f"{title or describe(cert)}\n{_headline(problem, cert)}".strip(), fontsize=12)
    path = Path(path)
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"{path}: the format follows the suffix: {', '.join(FORMATS)}")
    with atomic_open(path, "wb") as f:
        fig.savefig(f, format=kind, dpi=110)
    return path
