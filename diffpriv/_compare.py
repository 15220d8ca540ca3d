"""Comparing named mechanisms with the optimum: :func:`compare` calibrates each to the problem's
budgets (:func:`diffpriv.mechanisms.calibrate`) against an optimized (or any reference) certified
loss; :func:`format_comparison` prints the rows. Without a ``reference`` it runs the JAX optimizer
(``diffpriv.design``), so it sits above the solvers; :mod:`diffpriv.mechanisms` re-exports it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

from diffpriv.certification import Certificate
from diffpriv.mechanisms._evaluate import _json_param, _named, calibrate, evaluate
from diffpriv.mechanisms._registry import MECHANISMS

__all__ = ["ComparisonRow", "compare", "format_comparison"]


@dataclasses.dataclass(frozen=True)
class ComparisonRow:
    """One line of :func:`compare`.

    Attributes:
      name: mechanism name, or ``"optimized"`` for the reference row (``"optimized (highs)"``
        when its certificate records the method that found it, here HiGHS).
      params: its parameters (the calibrated one included); ``{}`` for the reference.
      parameter: the calibrated parameter's value (``None`` for the reference or a failure).
      loss: certified loss (``nan`` when the mechanism cannot meet the budgets).
      levels: certified level of each constraint (``()`` on failure).
      gap_percent: ``100·(loss − reference)/reference`` (``nan`` on failure).
      note: ``""`` when the row's certificate meets every budget; else why not (the calibration
        error, with ``nan`` values, or the violated constraints of an uncalibrated mechanism).
    """

    name: str
    params: dict[str, Any]
    parameter: float | None
    loss: float
    levels: tuple[float, ...]
    gap_percent: float
    note: str = ""


def _gap_percent(loss: float, reference: float) -> float:
    if math.isnan(loss):
        return math.nan
    if reference == 0:
        return 0.0 if loss == 0 else math.inf
    return 100.0 * (loss - reference) / abs(reference)


def compare(problem, names: Iterable[str | tuple[str, Mapping[str, Any]]], *,
            reference: Certificate | float | None = None, tol: float = 1e-6) -> list[ComparisonRow]:
    """Each mechanism calibrated to ``problem``'s budgets, against a reference certified loss.

    Args:
      problem: the problem.
      names: mechanism names, or ``(name, fixed_params)`` pairs, e.g.
        ``["krr", "planar_laplace", ("restricted_laplace", {"radius": 2.0})]``.
      reference: the certified loss to compare with (a :class:`~diffpriv.Certificate` or a
        number); ``None`` runs ``diffpriv.design(problem)`` (the JAX optimizer) and uses its
        certificate.
      tol: relative precision of each calibration.

    Returns:
      The reference row (name ``"optimized"``, with the method that found the table when its
      certificate records one; ``"reference"`` when a number was given) then one
      :class:`ComparisonRow` per mechanism. A mechanism with a ``calibrate`` parameter is
      calibrated (:func:`calibrate`); one without is evaluated at its given parameters, and if it
      violates a budget its row keeps its values with the failing constraints in ``note``. A
      mechanism that cannot meet the budgets at all (or does not apply) gets ``nan`` values and
      the reason in ``note``.
    """
    if reference is None:
        from diffpriv._design import design  # JAX, loaded only here

        reference = design(problem).certificate
    if isinstance(reference, Certificate):
        ref_loss = reference.loss
        method = reference.meta.get("optimizer", {}).get("method")
        label = "optimized" if method is None else f"optimized ({method})"
        rows = [ComparisonRow(label, {}, None, ref_loss,
                              tuple(c.level for c in reference.constraints), 0.0)]
    else:
        ref_loss = float(reference)
        rows = [ComparisonRow("reference", {}, None, ref_loss, (), 0.0)]
    for entry in names:
        name, fixed = (entry, {}) if isinstance(entry, str) else (entry[0], dict(entry[1]))
        try:
            if _named(name).calibrate is None:  # nothing to tune: evaluated as given
                ev = evaluate(problem, name, **fixed)
            else:
                ev = calibrate(problem, name, tol=tol, **fixed)
        except ValueError as e:
            rows.append(ComparisonRow(name, {k: _json_param(v) for k, v in fixed.items()}, None,
                                      math.nan, (), math.nan, str(e)))
            continue
        note = "" if ev.ok else "does not meet the budgets: " + ", ".join(
            f"{c.name!r} level {c.level:.6g}" for c in ev.certificate.constraints if not c.ok)
        rows.append(ComparisonRow(name, ev.params, ev.parameter, ev.loss, ev.levels,
                                  _gap_percent(ev.loss, ref_loss), note))
    return rows


def format_comparison(rows: Iterable[ComparisonRow]) -> str:
    """A plain-text table of :func:`compare`'s rows: mechanism (with its fixed parameters),
    calibrated parameter, certified loss, levels and gap to the reference in percent."""
    lines = [("mechanism", "parameter", "loss", "level", "gap %")]
    notes = []
    for r in rows:
        key = _named(r.name).calibrate if r.name in MECHANISMS else None
        extra = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in r.params.items() if k != key)
        label = f"{r.name} ({extra})" if extra else r.name
        param = "" if r.parameter is None else f"{key}={r.parameter:.6g}"
        if r.note:
            notes.append(f"{label}: {r.note}")
        if math.isnan(r.loss):
            lines.append((label, "-", "-", "-", "cannot meet the budgets"))
            continue
        level = ", ".join(f"{v:.6g}" for v in r.levels)
        gap = "not ok" if r.note else f"{r.gap_percent:+.2f}"
        lines.append((label, param, f"{r.loss:.6g}", level, gap))
    widths = [max(len(line[i]) for line in lines) for i in range(5)]
    text = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                      for i, (c, w) in enumerate(zip(line, widths, strict=True))).rstrip()
            for line in lines]
    return "\n".join(text + notes)
