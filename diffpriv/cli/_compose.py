"""``compose``: the privacy of K reports through a certified table (:mod:`diffpriv._compose`)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from diffpriv.cli._common import _fail, _read_certificate, _user_errors, console


def _eps(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:.6g}"


def _text(values: dict, per_unit: bool) -> str:
    """A level as ``ε=…, δ=…`` or ``D=…``."""
    if not values:
        return "–"
    if "level" in values:
        return f"{values['level']:.6g}"
    text = f"ε={_eps(values['epsilon'])}" + (" per unit d" if per_unit else "")
    if values.get("delta"):
        text += f", δ={values['delta']:.3g}"
    return text


def compose(
    file: Annotated[Path, typer.Argument(help="certificate.json whose table reports K times.")],
    reports: Annotated[int, typer.Option("--reports", "-k", help="How many reports each user makes.")],
    delta: Annotated[
        float | None,
        typer.Option(help="Also the least ε' of the K reports whose δ is at most this, for pure and (ε,δ) "
                     "claims (the optimal composition theorem)."),
    ] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")] = False,
) -> None:
    """The level of each claim of FILE for K independent reports through its certified table.

    The per-report levels are recomputed from the table (the certificate's stored numbers are not
    read). Pure levels add (K·ε, exact); an (ε,δ) claim composes by the optimal composition theorem
    (Kairouz, Oh & Viswanath 2015: the least δ any mechanism meeting the claim can give K reports,
    1 − (1 − δ)^K at K·ε). With --delta D, pure and (ε,δ) claims also get an ε' whose δ is at most
    D: the smaller of the theorem's and that of the table's own privacy-loss distributions (losses
    rounded up to a grid, composed by FFT; claims of at most 512 comparisons); KL, reverse KL,
    Rényi and max-divergence levels add, 1 + χ² and 1 − Hellinger multiply (exact), total
    variation is at most 1 − (1 − TV)^K. Reports are independent: for distribution privacy, each
    report's input is drawn afresh from the compared distribution; where all K reports come from
    the same input the last column bounds the pure level instead (K times the largest log-ratio
    between rows of the two distributions' supports). Wasserstein and extended DistP claims have no
    rule here and are listed as such. Exit 0; 2 on bad input.
    """
    from diffpriv._compose import MAX_REPORTS
    from diffpriv._compose import compose as composed
    from diffpriv.io._export import jsonable

    if not 1 <= reports <= MAX_REPORTS:
        _fail(f"--reports: must be an integer from 1 to {MAX_REPORTS:,}, got {reports}")
    if delta is not None and not 0 <= delta <= 1:
        _fail(f"--delta: must be in [0, 1], got {delta}")
    from diffpriv.problems._size import admit

    checked = _read_certificate(file)
    with _user_errors():
        admit(checked.problem, "certifier")  # the levels are the certifier's
    rows = composed(checked.problem, checked.table, reports, delta=delta)
    if json_:
        typer.echo(json.dumps(jsonable({"file": str(file), "reports": reports, "delta": delta,
                                        "constraints": [r.to_dict() for r in rows]}), allow_nan=False))
        return
    table = Table(title=escape(f"{reports} independent reports through {file}"), title_justify="left")
    for col in ("name", "kind", "one report", f"{reports} reports", *(("at δ",) if delta is not None else ()),
                "same input"):
        table.add_column(col)
    rules = []
    for r in rows:
        per_unit = r.kind == "xdp"
        at = r.composed.get("epsilon_at_delta")
        extra = ((f"ε={_eps(at)}" if at is not None else "–"),) if delta is not None else ()
        same = ("–" if r.same_input is None else
                f"ε={_eps(r.same_input)}" if r.same_input_exact else f"ε ≤ {_eps(r.same_input)}")
        table.add_row(escape(r.name), r.kind, _text(r.per_report, per_unit), _text(r.composed, per_unit),
                      *extra, same)
        rules.append(f"{r.name}: {r.rule or 'no composition rule here'}"
                     + ("" if r.exact or r.rule is None else " (an upper bound)"))
    console.print(table)
    for line in rules:
        console.print(escape(line), soft_wrap=True)
    if any(r.same_input is not None for r in rows):
        console.print("same input: the pure level where all the reports come from one input drawn from "
                      "each distribution (≤: an upper bound; exact where the output tuples are few)",
                      soft_wrap=True)
