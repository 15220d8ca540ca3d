"""The ``diffpriv`` command line: ``optimize``, ``certify``, ``export``, ``plot``, ``reference``.

Exit codes: 0 success; 1 a certificate's claims do not hold (or a solver failed); 2 a user
error — a bad config, a bad option value, a missing, malformed or too large file, an output
location that cannot be written — reported as one line ``error: ...`` on stderr, without a
traceback and without writing any output. Every command that reads a certificate reads it
with :func:`_read_certificate`, which checks its size, keys, types and shapes
(:mod:`diffpriv.certification._schema`) before :func:`diffpriv.certification.verify` checks its
claims. Output locations are checked before anything is computed. JAX is imported only once a
config has been validated, inside ``optimize``; matplotlib only inside ``plot``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, NoReturn

import numpy as np
import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup, TyperOption

from diffpriv.certification._schema import (
    CertificateFormatError,
    CheckedCertificate,
    admit_certificate,
    check_certificate,
    read_certificate,
)
from diffpriv.config._config import MAX_CONFIG_BYTES, MAX_SEED, ConfigError, OptimizerOptions, load_config
from diffpriv.io._export import FORMATS, jsonable, write_json, write_table
from diffpriv.io._files import FileFormatError, read_bytes
from diffpriv.problems._problem import Problem, SpecError
from diffpriv.problems._size import SizeError, admit
from diffpriv.solvers._options import Options

MAX_STEPS = next(f.metadata["le"] for f in dataclasses.fields(Options) if f.name == "steps")


class _Commands(TyperGroup):
    """The command group. A bad option value or a missing argument is reported like any bad
    input, as one ``error: <option>: <problem>`` line and exit code 2 (not a usage panel)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except typer.BadParameter as e:  # a bad option value, or a missing one (a subclass)
            msg = e.format_message()  # "Missing argument 'config'."
            if isinstance(e.param, TyperOption) and e.message:  # "--seed: input should be ..."
                msg = f"{e.param.opts[0]}: {e.message[:1].lower()}{e.message[1:]}"
            _fail(msg.removesuffix("."))
        except MemoryError:  # the last line of defence: inputs are bounded before they are read
            _fail("out of memory: the input is too large for this machine")


app = typer.Typer(
    cls=_Commands,
    name="diffpriv",
    help="Optimal local obfuscation mechanisms under distribution privacy, certified exactly.\n\n"
    "Typical use: diffpriv optimize CONFIG --out DIR; diffpriv certify DIR/certificate.json;"
    " diffpriv export DIR/certificate.json --format csv; diffpriv plot DIR/certificate.json."
    " Exit codes: 0 ok, 1 a claim fails, 2 bad input.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(highlight=False)


def _fail(msg: str, code: int = 2) -> NoReturn:
    line = " ".join(str(msg).split())  # one line, whatever the message holds
    line = line.encode("utf-8", "backslashreplace").decode("utf-8")  # a lone surrogate, escaped
    typer.echo("error: " + line, err=True)
    raise typer.Exit(code)


@contextlib.contextmanager
def _user_errors() -> Iterator[None]:
    """Turns a bad config or an unwritable file into one ``error:`` line and exit code 2."""
    try:
        yield
    except (ConfigError, SpecError) as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"{e.filename or ''}: {e.strerror or e}")


def _load(config: Path) -> tuple[Problem, OptimizerOptions]:
    with _user_errors():
        try:
            return load_config(config)
        except MemoryError:
            _fail(f"{config}: out of memory while building the problem; use fewer inputs, "
                  "outputs or items")


# -- reading a certificate --------------------------------------------------------------------


def _read_certificate(path: Path) -> CheckedCertificate:
    """The one reader of certificates for every command: the JSON and its arrays file, if it
    references one (within the limits of
    :func:`diffpriv.certification._schema.read_certificate`), the problem and the table (format
    checked by :func:`diffpriv.certification._schema.check_certificate`), or exit 2 with one
    line ``error: <path>: <field>: <problem>``."""
    try:
        return check_certificate(read_certificate(path))
    except FileFormatError as e:
        _fail(str(e))
    except CertificateFormatError as e:
        _fail(f"{path}: {e}")
    except MemoryError:
        _fail(f"{path}: cannot be checked: out of memory while reading it")


def _verify(path: Path, cert: CheckedCertificate, exact: bool = False):
    """``verify`` of a checked certificate; a certificate too large to check, or a verify that
    raises all the same, is exit 2 (its claims were not checked), never a traceback."""
    from diffpriv.certification import verify

    try:
        return verify(cert.data, exact=exact)
    except SizeError as e:
        _fail(f"{path}: cannot be checked: {e}")
    except MemoryError:
        _fail(f"{path}: cannot be checked: out of memory")
    except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError, RecursionError) as e:
        _fail(f"{path}: certificate: cannot be checked ({type(e).__name__}: {e})")


def _writable_folder(option: str, folder: Path) -> None:
    """Exit 2 unless ``folder`` is, or can be made, a folder this process can write in: its
    nearest existing ancestor is a folder that a file can be created in (tried, and removed)."""
    try:
        if folder.exists() and not folder.is_dir():
            _fail(f"{option}: {folder} exists and is not a folder")
        probe = folder
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if not probe.is_dir():
            _fail(f"{option}: {probe} is not a folder")
    except ValueError:  # an embedded NUL character
        _fail(f"{option}: the path contains a NUL character")
    except OSError as e:  # a folder on the way that cannot be searched
        _fail(f"{option}: cannot write in {folder} ({e.strerror or e})")
    try:
        fd, tmp = tempfile.mkstemp(dir=probe, prefix=".diffpriv-probe-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        _fail(f"{option}: cannot write in {probe} ({e.strerror or e})")


def _check_out_dir(out: Path) -> None:
    _writable_folder("--out", out)


def _check_out_file(target: Path) -> None:
    """A file to write: not a folder, in a folder that can be written."""
    try:
        if target.is_dir():
            _fail(f"--out: {target} is a folder")
    except ValueError:
        _fail("--out: the path contains a NUL character")
    except OSError as e:
        _fail(f"--out: cannot write {target} ({e.strerror or e})")
    _writable_folder("--out", target.parent)


def _certify_and_save(problem: Problem, table: np.ndarray, out: Path, meta: dict, seed: int | None):
    """Certifies ``table`` and writes ``out/certificate.json``; returns the certificate and time."""
    from diffpriv.certification import RepairError, TableError, certify  # numpy only

    start = time.perf_counter()
    try:
        cert = certify(problem, table, seed=seed, meta=jsonable(meta))
    except (RepairError, TableError) as e:
        _fail(f"certify: {e}", code=1)
    seconds = time.perf_counter() - start
    with _user_errors():
        out.mkdir(parents=True, exist_ok=True)
        cert.save(out / "certificate.json")
    return cert, seconds


def _meta(command: str, config: Path, **extra: Any) -> dict[str, Any]:
    with _user_errors():
        try:  # read again (it was validated): the same limits, and no FIFO swapped in meanwhile
            text = read_bytes(config, limit=MAX_CONFIG_BYTES, what="a config")
        except FileFormatError as e:
            _fail(str(e))
    return {
        "command": command,
        "config": str(config),
        "config_sha256": hashlib.sha256(text).hexdigest(),
        **extra,
    }


# -- summaries --------------------------------------------------------------------------------


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
    if "optimized" in s:
        rows.append((f"{what}, optimized table", f"{s['optimized']:.6g}"))
    if "lp_optimum" in s:
        rows.append((f"{what}, LP optimum", f"{s['lp_optimum']:.6g}"))
    if "certified" in s:
        rows.append((f"{what}, certified table", f"{s['certified']:.6g}"))
    if "lower_bound" in s:
        rows += [("certified lower bound", f"{s['lower_bound']:.6g}"),
                 ("gap of the certified table", _gap(s["certified"], s["lower_bound"]))]
    if "repair_weight" in s:
        rows.append(("repair weight t", f"{s['repair_weight']:.3g}"))
    if "status" in s:
        rows.append(("solver status", s["status"]))
    if "steps" in s:
        rows.append(("steps, seed", f"{s['steps']} ({s['stop']}), seed {s['seed']}"))
    if s.get("plan") == "lean":
        rows.append(("solver plan", "lean: float32, no averages, no polishing (the standard "
                                    "plan needs more memory than the limit)"))
    rows.append(("time", ", ".join(f"{k} {v:.2f} s" for k, v in s["seconds"].items())))
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for row in rows:
        table.add_row(*row)
    console.print(table)
    if "constraints" in s:
        _print_constraints(s["constraints"])


# -- commands ---------------------------------------------------------------------------------


@app.command()
def optimize(
    config: Annotated[Path, typer.Argument(help="TOML config describing the problem.")],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Folder for certificate.json and summary.json.")
    ],
    seed: Annotated[
        int | None,
        typer.Option(help="Random seed; overrides \\[optimizer] seed.", min=0, max=MAX_SEED),
    ] = None,
    steps: Annotated[
        int | None,
        typer.Option(help="Optimizer steps; overrides \\[optimizer] steps. The optimizer runs whole "
                     "periods (\\[optimizer] period, default 500): N is rounded up to a multiple "
                     "of the period, so fewer steps than one period run one period.",
                     min=1, max=MAX_STEPS),
    ] = None,
    progress: Annotated[
        bool, typer.Option(help="Show a progress bar on stderr (only when it is a terminal).")
    ] = True,
) -> None:
    """Find the least-loss mechanism for CONFIG, certify it, and write OUT/certificate.json.

    The config is validated completely before JAX starts. The optimized table is then
    certified exactly (numpy, float64) and, if a constraint is violated, repaired by mixing with
    a data-independent channel. Prints a summary: the objective of the optimized and the
    certified table, the certified lower bound on the optimum and the gap to it, each
    constraint's budget, certified level and margin, the repair weight and the time taken.
    """
    problem, options = _load(config)
    _check_out_dir(out)
    with _user_errors():
        for stage in ("optimizer", "certifier"):
            admit(problem, stage)
        admit_certificate(problem)
    meta = jsonable(_meta("optimize", config))
    kwargs = options.kwargs()  # the [optimizer] table; the command line overrides seed, steps
    config_seed, config_steps = kwargs.pop("seed"), kwargs.pop("steps")
    seed = config_seed if seed is None else seed
    steps = config_steps if steps is None else steps
    if steps is not None:
        kwargs["steps"] = steps

    from diffpriv._design import InfeasibleError, design  # imports JAX
    from diffpriv.certification import RepairError, TableError

    try:
        d = design(problem, seed=seed, progress=progress, meta=meta, **kwargs)
    except InfeasibleError as e:
        _fail(f"{config}: {e}", code=1)
    except (RepairError, TableError) as e:
        _fail(f"certify: {e}", code=1)
    result, cert = d.result, d.certificate
    with _user_errors():
        out.mkdir(parents=True, exist_ok=True)
        cert.save(out / "certificate.json")
    summary = _summary(
        problem, cert, d.seconds,
        optimized=float(result.objective), lower_bound=float(result.lower_bound),
        steps=int(result.steps), stop=result.status, seed=int(result.seed), plan=result.plan,
    )
    with _user_errors():
        write_json(out / "summary.json", summary)
    _print_summary(summary, title=f"diffpriv optimize {config}")
    console.print(f"wrote {out / 'certificate.json'} and {out / 'summary.json'}")
    if not cert.ok:
        raise typer.Exit(1)


@app.command()
def certify(
    file: Annotated[Path, typer.Argument(help="certificate.json from optimize or reference.")],
    exact: Annotated[
        bool, typer.Option(help="Re-check in exact rational arithmetic (slow, for deployment).")
    ] = False,
) -> None:
    """Re-check every claim of a certificate from scratch; exit 0 if all hold, 1 if any fails.

    Rebuilds the problem stored in FILE, recomputes each constraint's exact level for the stored
    table and compares it with the budget and with the level the certificate claims.
    """
    report = _verify(file, _read_certificate(file), exact=exact)
    if report.problem is not None:
        _print_constraints(_constraints(report.problem, report.levels))
    if not report.ok:
        for failure in report.failures:
            typer.echo(f"FAIL {failure}", err=True)
        typer.echo(f"{file}: {len(report.failures)} claim(s) do not hold", err=True)
        raise typer.Exit(1)
    console.print(f"{file}: all claims hold" + (" (exact arithmetic)" if exact else ""))


@app.command()
def export(
    file: Annotated[Path, typer.Argument(help="certificate.json to export the table of.")],
    format: Annotated[
        str, typer.Option("--format", "-f", help="csv (long format), npz or json.")
    ] = "csv",
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Output file [default: next to FILE].")
    ] = None,
) -> None:
    """Write the certified table of FILE for deployment, after re-checking the certificate.

    csv has one row per entry: profile,input,output,probability. npz holds the arrays table,
    profiles, inputs, outputs (and coordinates); json holds the same as nested lists. A
    certificate whose claims do not hold is refused (exit 1).
    """
    if format not in FORMATS:
        _fail(f"--format: must be one of {', '.join(FORMATS)}, got {format!r}")
    target = out if out is not None else file.with_name(f"table.{format}")
    _check_out_file(target)
    cert = _read_certificate(file)
    report = _verify(file, cert)
    if not report.ok:
        typer.echo(f"error: {file}: certificate does not hold; not exporting", err=True)
        for failure in report.failures:
            typer.echo(f"FAIL {failure}", err=True)
        raise typer.Exit(1)
    with _user_errors():
        try:
            write_table(cert.problem, cert.table, format, target)
        except MemoryError:
            _fail(f"{file}: cannot be exported: out of memory")
    console.print(f"wrote {target} ({format}, table of shape {cert.problem.shape})")


@app.command()
def plot(
    file: Annotated[Path, typer.Argument(help="certificate.json to draw.")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="PNG file [default: plot.png next to FILE].")
    ] = None,
) -> None:
    """Draw the certified mechanism of FILE as a PNG (matplotlib).

    Inputs and outputs with 2-D coordinates (a grid): maps of (a) the protected item
    distributions, (b) what an observer of the reports sees for each item, (c) for a few true
    inputs the distribution of the report, (d) the expected loss of each input. Other domains
    (categories): the table as a heatmap per profile, then the item distributions, their output
    distributions and the expected loss per input as bars. The claims are not re-checked: use
    certify for that.
    """
    target = out if out is not None else file.with_name("plot.png")
    if target.suffix.lower() != ".png":
        _fail(f"--out: must be a .png file, got {str(target)!r}")
    _check_out_file(target)
    cert = _read_certificate(file)
    from diffpriv.certification._safety import table_problems

    with np.errstate(over="ignore", invalid="ignore"):  # a row sum of inf is reported as such
        bad = table_problems(cert.problem, cert.table)
    if bad:  # not a table of probabilities: nothing to draw (the claims are not checked)
        _fail(f"{file}: cannot be drawn: {bad[0]}; does certify accept it?")
    from diffpriv.io._plot import plot_certificate  # imports matplotlib

    with _user_errors(), warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning is an error line, never stderr noise
        try:
            plot_certificate(cert.problem, cert.table, cert.data, target, title=str(file))
        except (ArithmeticError, ValueError, Warning) as e:  # absurd numbers
            _fail(f"{file}: cannot be drawn ({type(e).__name__}: {e}); does certify accept it?")
        except MemoryError:
            _fail(f"{file}: cannot be drawn: out of memory")
    console.print(f"wrote {target}")


@app.command()
def reference(
    config: Annotated[Path, typer.Argument(help="TOML config describing the problem.")],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Also certify the LP table; write certificate.json here."),
    ] = None,
) -> None:
    """Solve CONFIG exactly as a linear program (HiGHS): the optimum that optimize aims at.

    Prints the optimal objective value and the solve time. With --out, the LP's table is
    certified like an optimized one and written to OUT/certificate.json and OUT/summary.json.
    """
    from diffpriv.solvers._lp import ReferenceSolveError, solve_lp

    problem, _ = _load(config)
    if out is not None:
        _check_out_dir(out)
    with _user_errors():
        admit(problem, "lp")
        if out is not None:
            admit(problem, "certifier")
            admit_certificate(problem)
    try:
        with np.errstate(over="ignore"):  # e^ε = inf: solve_lp checks it and raises ValueError
            result = solve_lp(problem)
    except (ReferenceSolveError, ValueError) as e:
        _fail(f"reference: {e}", code=1)
    solver = {"lp_optimum": result.value, "status": result.status}
    summary = {"objective": problem.objective.text, **solver, "seconds": {"LP": result.seconds}}
    if out is not None:
        meta = _meta("reference", config, reference=solver)
        cert, certify_seconds = _certify_and_save(problem, result.table, out, meta, None)
        seconds = {"LP": result.seconds, "certify": certify_seconds}
        summary = _summary(problem, cert, seconds, **solver)
        with _user_errors():
            write_json(out / "summary.json", summary)
    _print_summary(summary, title=f"diffpriv reference {config}")
    if out is not None:
        console.print(f"wrote {out / 'certificate.json'} and {out / 'summary.json'}")


def main() -> None:
    """The console-script entry point."""
    app()
