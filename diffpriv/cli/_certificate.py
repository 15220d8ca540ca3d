"""``certify``, ``export`` and ``plot``: the commands that read a certificate (each with
:func:`~diffpriv.cli._common._read_certificate`), re-check its claims or draw its table.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from diffpriv.cli._common import (
    MAX_SECONDS,
    RUN_UTILITY,
    _check_out_file,
    _fail,
    _load,
    _read_certificate,
    _user_errors,
    _verify,
    console,
)
from diffpriv.cli._summary import _constraints, _print_constraints
from diffpriv.io._export import FORMATS, repair_floor, repair_only, write_table
from diffpriv.problems._checks import SpecError


def certify(
    file: Annotated[Path, typer.Argument(help="certificate.json from optimize or reference.")],
    exact: Annotated[
        bool, typer.Option(help="Re-check in exact rational arithmetic (slow, for deployment).")
    ] = False,
    max_seconds: Annotated[
        float, typer.Option(help="Refuse (exit 2) a certificate estimated to take longer to check.")
    ] = MAX_SECONDS,
    max_memory: Annotated[
        float | None, typer.Option(help="Refuse (exit 2) a certificate estimated to need more GB "
                                        "[default: this machine's memory].")
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="The config the certificate must be for: exit 1 naming the "
                                       "first field that differs.")
    ] = None,
    budget: Annotated[
        str | None, typer.Option("--budget", "-b",
                                 help="NAME=x (NAME.delta=x): with --config, the config's constraint "
                                      "NAME at budget x, as a sweep's certificate at x is.")
    ] = None,
    run_utility: Annotated[bool, RUN_UTILITY] = False,
) -> None:
    """Re-check every claim of a certificate from scratch; exit 0 if all hold, 1 if any fails.

    Rebuilds the problem stored in FILE, recomputes each constraint's exact level for the stored
    table and compares it with the budget and with the level the certificate claims. Before any
    level (and before a metric's triangle check or a transport), the time and memory of the
    check are estimated from the problem; above --max-seconds or --max-memory it refuses in one
    line (exit 2: nothing was checked). With --config, the certificate must be for exactly the
    problem CONFIG defines (domains, loss, prior, items, constraints and budgets; --budget sets
    one constraint's budget, for a certificate of `diffpriv sweep`): one that is not is a mismatch
    (exit 1, one line naming the first field that differs; its claims are not checked).
    """
    if not max_seconds > 0:
        _fail(f"--max-seconds: must be > 0, got {max_seconds!r}")
    if max_memory is not None and not max_memory > 0:
        _fail(f"--max-memory: must be > 0 (GB), got {max_memory!r}")
    limit = None if max_memory is None else int(max_memory * 2**30)
    from diffpriv.measures._transport import deferred_triangle_checks

    if budget is not None and config is None:
        _fail("--budget: sets a budget of --config's problem; give --config too")
    from diffpriv.problems._user import running_utilities

    with running_utilities(run_utility):
        with deferred_triangle_checks():  # the O(n³) metric checks: verify's, after its admission
            expected = None if config is None else _load(config)[0]
            if budget is not None:
                expected = _at_budget(expected, budget)
            checked = _read_certificate(file)
        report = _verify(file, checked, exact=exact, max_seconds=max_seconds, max_memory=limit,
                         problem=expected)
    if report.mismatch is not None:
        typer.echo(f"{file}: not the certificate of {config}"
                   + ("" if budget is None else f" at {budget}") + f": {report.mismatch}"
                   + _sweep_hint(checked.data, budget), err=True)
        raise typer.Exit(1)
    if report.problem is not None and report.levels:
        _print_constraints(_constraints(report.problem, report.levels))
    if not report.ok:
        for failure in report.failures:
            typer.echo(f"FAIL {failure}", err=True)
        typer.echo(f"{file}: {len(report.failures)} claim(s) do not hold", err=True)
        raise typer.Exit(1)
    from diffpriv.certification import UNCHECKED
    from diffpriv.mechanisms import check_parameters

    verified, text = check_parameters(checked.data)
    if verified is False:
        typer.echo(f"FAIL {text}", err=True)
        typer.echo(f"{file}: 1 claim(s) do not hold", err=True)
        raise typer.Exit(1)
    if verified is not None or text != "no mechanism recorded":
        console.print(f"mechanism parameters: {'verified: ' if verified else ''}{text}", markup=False)
    console.print(f"not checked (free information): {', '.join(UNCHECKED)}", markup=False)
    console.print(f"{file}: all claims hold" + (" (exact arithmetic)" if exact else ""))


def _at_budget(problem, text: str):
    """``problem`` with the budget ``NAME[.FIELD]=x`` set (exit 2 naming ``--budget`` where it is
    not one value of a constraint of the problem, or one the constraint refuses)."""
    from diffpriv._sweep import at_budget, constraint_index
    from diffpriv.cli._sweep import parse_budget

    try:
        name, field, values = parse_budget(text, False)
        if len(values) != 1:
            raise ValueError(f"expected one budget NAME=x, got {len(values)}")
        return at_budget(problem, constraint_index(problem, name), field, values[0])
    except (ValueError, SpecError) as e:
        _fail(f"--budget: {e}")


def _sweep_hint(data: dict, budget: str | None) -> str:
    """Where the certificate is one budget of a sweep and no ``--budget`` was given, what to add."""
    point = (data.get("meta") or {}).get("sweep") if isinstance(data.get("meta"), dict) else None
    if budget is not None or not isinstance(point, dict):
        return ""
    name, field, value = point.get("constraint"), point.get("field"), point.get("budget")
    if not isinstance(name, str) or field not in ("epsilon", "delta") or not isinstance(value, int | float):
        return ""
    suffix = "" if field == "epsilon" else ".delta"
    return f" (a sweep's certificate at {field} = {value:g}: add --budget {name}{suffix}={value!r})"


def export(
    file: Annotated[Path, typer.Argument(help="certificate.json to export the table of.")],
    format: Annotated[
        str, typer.Option("--format", "-f", help="csv (long format), npz, json, or csv-sparse / "
                          "npz-sparse (non-zero entries only, with integer counts for a dyadic table).")
    ] = "csv",
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Output file [default: next to FILE].")
    ] = None,
    run_utility: Annotated[bool, RUN_UTILITY] = False,
) -> None:
    """Write the certified table of FILE for deployment, after re-checking the certificate.

    csv has one row per entry: profile,input,output,probability. npz holds the arrays table,
    profiles, inputs, outputs (and coordinates); json holds the same as nested lists. A
    certificate whose claims do not hold is refused (exit 1).
    """
    if format not in FORMATS:
        _fail(f"--format: must be one of {', '.join(FORMATS)}, got {format!r}")
    name = "table-sparse" if format.endswith("-sparse") else "table"
    target = out if out is not None else file.with_name(f"{name}.{format.removesuffix('-sparse')}")
    _check_out_file(target)
    from diffpriv.problems._user import running_utilities

    with running_utilities(run_utility):
        cert = _read_certificate(file)
        report = _verify(file, cert)
    if not report.ok:
        typer.echo(f"error: {file}: certificate does not hold; not exporting", err=True)
        for failure in report.failures:
            typer.echo(f"FAIL {failure}", err=True)
        raise typer.Exit(1)
    with _user_errors():
        try:
            bits = (cert.data.get("quantization") or {}).get("bits")
            rep = cert.data["repair"]  # (checked by verify: t in [0, 1], ν a distribution)
            sparse = format.endswith("-sparse")
            floor = repair_floor(cert.table, float(rep["t"]), rep["nu"]) if sparse else None
            write_table(cert.problem, cert.table, format, target, bits=bits, floor=floor)
        except MemoryError:
            _fail(f"{file}: cannot be exported: out of memory")
    console.print(f"wrote {target} ({format}, table of shape {cert.problem.shape})")
    if floor is not None:
        console.print(f"column 'repair': the repair's mix in each entry (t = {float(rep['t']):.3g}); "
                      f"{repair_only(cert.table, floor)} of {int(np.count_nonzero(cert.table))} entries are "
                      "nothing else: keep them, dropping any can break the certificate", markup=False)


def plot(
    file: Annotated[Path, typer.Argument(help="certificate.json to draw.")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="The figure: .png, .pdf or .svg "
                                                      "[default: plot.png next to FILE].")
    ] = None,
    cells: Annotated[
        str | None, typer.Option(help="Comma-separated input labels whose report distributions to "
                                      "draw (2-D inputs; at most 4), the same for every certificate "
                                      "compared [default: chosen from the table].")
    ] = None,
    title: Annotated[
        str | None, typer.Option(help="The figure's title [default: the mechanism, or diffpriv's "
                                      "solver, and a sweep's budget, as recorded].")
    ] = None,
    parts: Annotated[
        str | None, typer.Option(help="Comma-separated parts to draw, alone (a figure of one for a slide "
                                      "or a paper): items, observed, reports, loss on a plane; table, "
                                      "items, observed, loss otherwise [default: all].")
    ] = None,
) -> None:
    """Draw the certified mechanism of FILE as PNG, PDF or SVG (by the suffix of --out).

    Inputs and outputs with 2-D coordinates (a grid): maps of (a) the protected item
    distributions, (b) what an observer of the reports sees for each item, (c) for a few true
    inputs the distribution of the report, (d) the expected loss of each input. Other domains
    (categories): the table as a heatmap per profile, then the item distributions, their output
    distributions and the expected loss per input as bars. The claims are not re-checked: use
    certify for that.
    """
    target = out if out is not None else file.with_name("plot.png")
    if target.suffix.lower() not in (".png", ".pdf", ".svg"):
        _fail(f"--out: must be a .png, .pdf or .svg file, got {str(target)!r}")
    _check_out_file(target)
    cert = _read_certificate(file)
    shown = None
    if cells is not None:
        labels = [c.strip() for c in cells.split(",") if c.strip()]
        index = {label: i for i, label in enumerate(cert.problem.inputs.labels)}
        unknown = [c for c in labels if c not in index]
        if not labels or unknown:
            _fail(f"--cells: {'no input labels given' if not labels else f'unknown input {unknown[0]!r}'} "
                  f"(inputs: {', '.join(cert.problem.inputs.labels[:6])}, …)")
        if len(labels) > 4:
            _fail(f"--cells: at most 4 inputs, got {len(labels)}")
        shown = [index[c] for c in labels]
    from diffpriv.certification._safety import table_problems
    from diffpriv.io._plot import chosen_parts  # imports matplotlib

    chosen = None
    if parts is not None:
        try:
            chosen = chosen_parts(cert.problem, [p.strip() for p in parts.split(",") if p.strip()])
        except ValueError as e:
            _fail(f"--parts: {e}")
    with np.errstate(over="ignore", invalid="ignore"):  # a row sum of inf is reported as such
        bad = table_problems(cert.problem, cert.table)
    if bad:  # not a table of probabilities: nothing to draw (the claims are not checked)
        _fail(f"{file}: cannot be drawn: {bad[0]}; does certify accept it?")
    from diffpriv.io._plot import plot_certificate  # imports matplotlib

    with _user_errors(), warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning is an error line, never stderr noise
        try:
            plot_certificate(cert.problem, cert.table, cert.data, target, title=title or "", cells=shown,
                             parts=chosen)
        except (ArithmeticError, ValueError, Warning) as e:  # absurd numbers
            _fail(f"{file}: cannot be drawn ({type(e).__name__}: {e}); does certify accept it?")
        except MemoryError:
            _fail(f"{file}: cannot be drawn: out of memory")
    console.print(f"wrote {target}")
