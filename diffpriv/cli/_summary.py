"""The summaries that ``optimize``, ``reference`` and ``evaluate`` print and write to
``summary.json``, and the constraint rows that ``certify`` prints: each certified constraint's
budget, level, margin and verdict, as JSON and as rich tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from rich.markup import escape
from rich.table import Table

from diffpriv.cli._common import console
from diffpriv.problems._problem import Problem


def _constraints(problem: Problem, levels) -> list[dict[str, Any]]:
    """The JSON summary of each certified constraint (``ConstraintLevel`` objects), with its
    budget and level as its family writes them."""
    keys = ("name", "kind", "epsilon", "delta", "level", "epsilon_at_delta", "margin", "ok")
    rows = []
    for c in levels:
        family = problem.constraints[c.index]
        rows.append({k: getattr(c, k) for k in keys}
                    | {"budget_text": family.budget_text(),
                       "level_text": family.level_text(c.level, c.epsilon_at_delta)})
    return rows


_METHOD_TEXT = {
    "pdhg": "pdhg: restarted mirror PDHG",
    "transport pdhg": "transport pdhg: PDHG on the table and the couplings",
    "dual": "dual: smoothed dual, L-BFGS",
    "cuts": "cuts: cut generation on the divergences (HiGHS)",
    "columns": "columns: column generation over output columns (HiGHS)",
    "transport cuts": "transport cuts: Kantorovich cuts on the Wasserstein budgets (HiGHS)",
    "al": "al: augmented Lagrangian",
    "linear al": "linear al: augmented Lagrangian (Adam) on the linear constraints",
    "mirror": "mirror: mirror-prox on the Lagrangian",
    "interior point": "interior point: primal-dual, over the output columns (banded Newton systems)",
    "gradient": "gradient: augmented Lagrangian, L-BFGS on softmax logits, several starts",
    "simplicial": "simplicial decomposition: LP vertices (HiGHS), a Sinkhorn master over their weights",
    "highs": "highs: the exact LP (HiGHS)",
    "clarabel": "clarabel: the exact conic program (cvxpy, Clarabel)",
    "relaxation (highs)": "relaxation (highs): the linear constraints alone (HiGHS), repaired",
    "relaxation (columns)": ("relaxation (columns): the linear constraints alone (column generation), "
                             "repaired"),
}
"""The ``method`` row: the solver that ran (:attr:`~diffpriv.solvers.OptimizeResult.method`)."""


def _summary(problem: Problem, cert, seconds: dict[str, float], **solver: Any) -> dict[str, Any]:
    """What ``optimize`` and ``reference`` print and write to ``summary.json``."""
    return {
        "objective": problem.objective.text,
        **solver,
        "certified": cert.loss,
        "repair_weight": cert.repair_t,
        "constraints": _constraints(problem, cert.constraints),
        "seconds": seconds,
        "ok": bool(cert.ok),
    }


def _gap(value: float, bound: float) -> str:
    if not np.isfinite(bound):
        return "n/a"
    rel = f" ({100 * (value - bound) / bound:.3g}%)" if bound > 0 else ""
    return f"{value - bound:.4g}{rel}"


def _print_constraints(rows: list[dict[str, Any]]) -> None:
    """One row per constraint: budget, certified level, margin (budget − level), verdict."""
    table = Table(title="constraints", title_justify="left")
    for col in ("name", "kind", "budget", "certified level", "margin", "holds"):
        table.add_column(col, justify="right" if col == "margin" else "left")
    for r in rows:
        holds = "yes" if r["ok"] else "[red]NO[/red]"
        table.add_row(r["name"], r["kind"], r["budget_text"], r["level_text"], f"{r['margin']:.3g}",
                      holds)
    console.print(table)


def _print_summary(s: dict[str, Any], title: str) -> None:
    """The summary as two rich tables: results, then one row per constraint."""
    what = s["objective"]
    rows = []
    if "mechanism" in s:
        rows.append(("mechanism", escape(_mechanism_text(s["mechanism"], s["params"]))))
    if "calibrated" in s:
        c = s["calibrated"]
        rows.append((f"calibrated {c['parameter']}", f"{c['value']:.9g}: the largest that meets every "
                                                     f"budget (fails at {c['failing']:.9g})"))
    if "optimized" in s:
        rows.append((f"{what}, optimized table", f"{s['optimized']:.6g}"))
    if "lp_optimum" in s:
        rows.append((f"{what}, LP optimum", f"{s['lp_optimum']:.6g}"))
    if "convex_optimum" in s:
        rows.append((f"{what}, convex optimum", f"{s['convex_optimum']:.6g}"))
    if "certified" in s:
        rows.append((f"{what}, certified table", f"{s['certified']:.6g}"))
    if "exact_transport" in s:
        rows.append(("exact transport cost, certified table", f"{s['exact_transport']:.6g}"))
    if "loss_under_estimate" in s:
        rows.append((f"{what} the mechanism expects (under its estimate λ̂)",
                     f"{s['loss_under_estimate']:.6g}"))
    if "lower_bound" in s:
        rows += [("certified lower bound", f"{s['lower_bound']:.6g}"),
                 ("gap of the certified table", _gap(s["certified"], s["lower_bound"]))]
    if "no_bound" in s:
        rows.append(("lower bound", s["no_bound"]))
    for name, price in s.get("prices", {}).items():
        rates = ", ".join(f"{rate:.4g} per unit of {'ε' if field == 'epsilon' else 'δ'}"
                          for field, rate in price.items())
        rows.append((f"price of privacy, {escape(name)}", f"the optimum changes by {rates}"))
    if "repair_weight" in s:
        rows.append(("repair weight t", f"{s['repair_weight']:.3g}"))
    if "status" in s:
        rows.append(("solver status", s["status"]))
    if "method" in s:
        rows.append(("method", _METHOD_TEXT.get(s["method"], s["method"])))
    if "steps" in s and s.get("plan") == "cuts":
        rows.append(("LP rounds", f"{s['steps']} ({s['stop']})"))
    elif "steps" in s and s.get("plan") != "exact":
        rows.append(("steps, seed", f"{s['steps']} ({s['stop']}), seed {s['seed']}"))
    if "presolve" in s:
        (xi, nx), (yi, ny) = s["presolve"]["inputs"], s["presolve"]["outputs"]
        text = (f"solved on {xi} of {nx} inputs and {yi} of {ny} outputs (the rest carry no prior, law or "
                "allowed output; certified whole)")
        if "constraints" in s["presolve"]:
            kept, n = s["presolve"]["constraints"]
            text += f"; {n - kept} of {n} constraints left out, as every table meets them (certified too)"
        rows.append(("presolve", text))
    if s.get("plan") == "lean":
        rows.append(("solver plan", "lean: float32, no averages, no polishing (the standard "
                                    "plan needs more memory than the limit)"))
    rows.append(("time", ", ".join(f"{k} {v:.2f} s" for k, v in s["seconds"].items())))
    _print_rows(rows, title)
    if "constraints" in s:
        _print_constraints(s["constraints"])


def _number_text(value: Any) -> str:
    """A parameter as ``--param`` takes it: ``0.8``, ``true``, ``barycenter``."""
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:.9g}" if isinstance(value, float) else str(value)


def _mechanism_text(name: str, params: Mapping[str, Any]) -> str:
    """``krr (epsilon=0.8)``."""
    inner = ", ".join(f"{k}={_number_text(v)}" for k, v in params.items())
    return f"{name} ({inner})" if inner else name


def _print_rows(rows: list[tuple[str, str]], title: str) -> None:
    """``(what, value)`` rows as a two-column rich table, the first column bold."""
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for row in rows:
        table.add_row(*row)
    console.print(table)
