"""``leakage``: what the raw data (a config) or a certified table (a certificate) leaks, before a
budget is picked: each constraint's level and the quantitative-information-flow measures
(:mod:`diffpriv.measures._leakage`)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.markup import escape

from diffpriv.cli._common import _fail, _read_certificate, _user_errors, console
from diffpriv.cli._summary import _constraints, _print_constraints, _print_rows
from diffpriv.problems._problem import Problem

RAW = "raw data"
"""The ``source`` of a config's leakage: each input reported as itself."""


def _raw(config: Path) -> tuple[Problem, np.ndarray | None]:
    """A config's problem and its ``[leakage]`` gain; exit 2 on a bad config or one whose outputs
    are not its inputs (the raw data's table, built after the size admission, is the identity)."""
    from diffpriv.config import config_from_dict, config_gain
    from diffpriv.config._toml import read_toml

    with _user_errors():
        try:
            d = read_toml(config)
            problem, _ = config_from_dict(d, base_dir=config.parent)
            gain = config_gain(d, problem)
        except MemoryError:
            _fail(f"{config}: out of memory while building the problem")
    if problem.outputs.labels != problem.inputs.labels:
        _fail(f"{config}: outputs: the raw data report each input as itself, so the outputs must be "
              "the inputs (they differ here); give a certificate to measure its table")
    return problem, gain


def _hints(problem: Problem, rows: list[dict[str, Any]], source: str) -> list[str]:
    """What an infinite level means, and what shortens it, for each such constraint."""
    out = []
    for row, c in zip(rows, problem.constraints, strict=True):
        levels = (row["level"], row["epsilon_at_delta"] or 0.0)
        if all(math.isfinite(v) for v in levels):
            continue
        what = "the raw data" if source == RAW else "the table"
        if getattr(c, "pairs_of", "") == "items":
            out.append(f"{row['name']}: level ∞: an output is possible under one distribution and impossible "
                       f"under the other, so {what} tell them apart for certain. Where the distributions are "
                       "histograms of data (points, points_file, samples), smoothing = c adds c to every "
                       "cell; a randomised table (diffpriv optimize) bounds the level whatever the data")
        else:
            out.append(f"{row['name']}: level ∞: {what} give some compared inputs outputs the other never "
                       "gives, so an observer tells them apart for certain; only a randomised table "
                       "(diffpriv optimize) has a finite level")
    return out


def _print(source: str, file: Path, rows: list[dict[str, Any]], m: dict[str, Any], units: str,
           hints: list[str]) -> None:
    unit = f" {units}" if units else ""
    title = (f"leakage of the raw data (each input reported as itself): {file}" if source == RAW
             else f"leakage of the certified table: {file}")
    out = [
        ("prior Bayes vulnerability", f"{m['prior_vulnerability']:.6g}  (max_x π(x))"),
        ("posterior Bayes vulnerability", f"{m['posterior_vulnerability']:.6g}  (Σ_y max_x π(x)A[x,y])"),
        ("multiplicative Bayes leakage", f"{m['multiplicative_leakage']:.6g}"),
        ("min-entropy leakage", f"{m['min_entropy_leakage']:.6g} bits"),
        ("adversary's expected error", f"{m['adversary_error']:.6g}{unit}  (its best guess from the report; "
                                       f"{m['prior_adversary_error']:.6g}{unit} without it)"),
    ]
    g = m["g_leakage"]
    if g is not None:
        ratio = "n/a" if math.isnan(g["multiplicative"]) else f"{g['multiplicative']:.6g}"
        out += [("g-vulnerability, prior → posterior",
                 f"{g['prior_vulnerability']:.6g} → {g['posterior_vulnerability']:.6g}"),
                ("g-leakage", f"× {ratio} (multiplicative), + {g['additive']:.6g} (additive)")]
    _print_rows([(a, escape(b)) for a, b in out], escape(title))
    if rows:
        _print_constraints(rows)
    for hint in hints:
        console.print(escape(hint), soft_wrap=True)


def leakage(
    file: Annotated[Path, typer.Argument(help="A TOML config (its raw data: each input reported as itself) "
                                         "or a certificate.json (its certified table).")],
    json_: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
    gain_within: Annotated[
        float | None,
        typer.Option(help="g-leakage of the gain 1 when the adversary's guess lies within this loss of the "
                     "true input (in place of the config's \\[leakage] gain)."),
    ] = None,
) -> None:
    """What FILE leaks about the true input: each constraint's level and the measures of
    quantitative information flow.

    For a config, the raw data (the identity channel: each input reported as itself, so the
    outputs must be the inputs); for a certificate, its table (read and format-checked; the
    levels are recomputed, never read). Prints the prior and posterior Bayes vulnerability
    (max_x π(x) and Σ_y max_x π(x) A[x,y]), the multiplicative Bayes leakage (their ratio) and
    the min-entropy leakage (its log₂), g-leakage for the config's [leakage] gain (gain = [[...]],
    one row per guess and one entry per input, or gain_within = r) or --gain-within, and the
    adversary's least expected error, in the loss's units, when it guesses the input from the
    report. Each constraint's level is the certifier's; an infinite level is explained, with
    what makes it finite. With --json one object with the keys prior_vulnerability,
    posterior_vulnerability, multiplicative_leakage, min_entropy_leakage, g_leakage (null without
    a gain), adversary_error, prior_adversary_error, constraints, hints, source. Exit 0; 2 on bad
    input.
    """
    from diffpriv.certification._summary import constraint_levels
    from diffpriv.io._export import jsonable

    if gain_within is not None and not (math.isfinite(gain_within) and gain_within >= 0):
        _fail(f"--gain-within: must be a finite number ≥ 0, got {gain_within}")
    from diffpriv.problems._size import admit

    if file.suffix.lower() == ".toml":
        (problem, gain), table, source = _raw(file), None, RAW
    else:
        checked = _read_certificate(file)
        problem, table, gain, source = checked.problem, checked.table, None, "certificate"
    with _user_errors():
        admit(problem, "certifier")  # the levels are the certifier's; before the identity is built
    if table is None:
        from diffpriv.measures._leakage import identity_table

        table = identity_table(problem.shape)
    if gain_within is not None:
        from diffpriv.measures._leakage import within_gain

        gain = within_gain(problem.loss, gain_within)
    with np.errstate(all="ignore"):  # the identity's levels are infinite, and said so
        rows = _constraints(problem, constraint_levels(problem, table))
    from diffpriv._leakage import leakage as measure

    m = measure(problem, table, gain=gain).to_dict()
    hints = _hints(problem, rows, source)
    if json_:
        out = {"source": source, "file": str(file), **m, "constraints": rows, "hints": hints}
        typer.echo(json.dumps(jsonable(out), allow_nan=False))
        return
    _print(source, file, rows, m, problem.outputs.units, hints)
