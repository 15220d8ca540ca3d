"""The ``diffpriv`` command line: ``optimize``, ``certify``, ``export``, ``plot``, ``reference``,
``evaluate``.

Exit codes: 0 success; 1 a certificate's claims do not hold (or a solver failed); 2 a user
error — a bad config, a bad option value, a missing, malformed or too large file, an output
location that cannot be written — reported as one line ``error: ...`` on stderr, without a
traceback and without writing any output. Every command that reads a certificate reads it
with :func:`_read_certificate`, which checks its size, keys, types and shapes
(:mod:`diffpriv.certification._schema`) before :func:`diffpriv.certification.verify` checks its
claims. Output locations are checked before anything is computed. JAX is imported only once a
config has been validated, inside ``optimize`` (and ``evaluate --compare``); matplotlib only
inside ``plot``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
import os
import re
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, NoReturn

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
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


# -- evaluate: the seeds' mechanisms and the baselines ----------------------------------------

TUPLING = "tupling"
TUPLING_BASES = ("planar_laplace", "krr")
TUPLING_PARAMS: dict[str, Any] = {"k": None, "base_epsilon": None, "base": "planar_laplace",
                                  "epsilon": None, "samples": 100_000, "confidence": 0.99, "seed": 0,
                                  "pair": 0}
"""Parameters of ``--mechanism tupling`` (``None``: required, except ``epsilon``: the DistP ε)."""
NO_TUPLING_CERTIFICATE = "no certificate: the tupling mechanism reports tuples, not one output of a table"
MAX_TUPLE_ENTRIES = 10**9
"""Largest ``samples·(k+1)`` of the tupling Monte Carlo (about 2.5 minutes on one core)."""
MAX_EXACT_MULTISETS = 200_000
"""Largest number of output multisets enumerated for the tupling mechanism's exact δ(ε)."""


def _param_value(text: str) -> float | bool | str:
    """A ``--param`` value: a float when numeric, ``true``/``false`` as a bool, else the text."""
    word = text.strip()
    if word.lower() in ("true", "false"):
        return word.lower() == "true"
    try:
        return float(word)
    except ValueError:
        return word


def _parse_params(items: list[str]) -> dict[str, Any]:
    """The ``--param KEY=VALUE`` options as a dict (a key at most once), or exit 2."""
    params: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            _fail(f"--param: expected key=value, got {item!r}")
        if key in params:
            _fail(f"--param: {key!r} is given twice")
        params[key] = _param_value(value)
    return params


def _number_text(value: Any) -> str:
    """A parameter as ``--param`` takes it: ``0.8``, ``true``, ``barycenter``."""
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:.9g}" if isinstance(value, float) else str(value)


def _mechanism_text(name: str, params: Mapping[str, Any]) -> str:
    """``krr (epsilon=0.8)``."""
    inner = ", ".join(f"{k}={_number_text(v)}" for k, v in params.items())
    return f"{name} ({inner})" if inner else name


def _mechanism_params(name: str) -> Mapping[str, Any]:
    """The parameters (with defaults; ``None``: required) of a mechanism, after checking its name."""
    from diffpriv.mechanisms import MECHANISMS

    if name == TUPLING:
        return TUPLING_PARAMS
    if name not in MECHANISMS:
        known = ", ".join(sorted([*MECHANISMS, TUPLING]))
        _fail(f"--mechanism: unknown mechanism {name!r} (known: {known})")
    return MECHANISMS[name].params


def _mechanism_failure(e: ValueError, given: Mapping[str, Any]) -> NoReturn:
    """A builder's one-line ValueError as ``error:``, exit 2; ``--param:`` first when it names a
    parameter given on the command line."""
    from diffpriv.mechanisms import ParameterError

    msg = str(e)
    named = any(re.search(rf"\b{re.escape(k)}\b", msg) for k in given)
    if not msg.startswith("--") and (isinstance(e, ParameterError) or named):
        msg = f"--param: {msg}"
    _fail(msg)


def _print_mechanisms() -> None:
    """``evaluate --list``: each mechanism, what it is, its parameters and what --calibrate finds."""
    from diffpriv.mechanisms import MECHANISMS

    def params_text(params: Mapping[str, Any]) -> str:
        text = ", ".join(f"{k} (required)" if v is None else f"{k}={_number_text(v)}"
                         for k, v in params.items())
        return text or "none"

    tupling = ("tupling (Kawamoto & Murakami 2019): the base table's report hidden among k uniform "
               "dummies; reports tuples, so no certificate: exact loss, Monte Carlo δ(ε)")
    rows = [(m.name, m.summary, m.params, m.calibrate) for m in MECHANISMS.values()]
    rows.append((TUPLING, tupling, {**TUPLING_PARAMS, "epsilon": "the DistP ε"}, None))
    for name, summary, params, key in rows:
        console.print(f"[bold]{name}[/bold]: {escape(summary)}", soft_wrap=True)
        calib = f"; --calibrate finds {key}" if key else ""
        console.print(f"    parameters: {params_text(params)}{calib}", markup=False, soft_wrap=True)


def _evaluate_table(problem: Problem, name: str, params: dict[str, Any], calibrate: bool):
    """The mechanism's :class:`~diffpriv.mechanisms.Evaluation` (calibrated or at ``params``) and
    the summary fields that describe it; every bad input is exit 2."""
    from diffpriv.certification import RepairError, TableError
    from diffpriv.mechanisms import MECHANISMS, CouplingError, ProfileLPError
    from diffpriv.mechanisms import calibrate as calibrate_mechanism
    from diffpriv.mechanisms import evaluate as evaluate_mechanism

    named = MECHANISMS[name]
    key = named.calibrate
    extra: dict[str, Any] = {}
    try:
        with np.errstate(all="ignore"):  # the certifier reports levels, not floating-point noise
            if not calibrate:
                ev = evaluate_mechanism(problem, name, **params)
            else:
                try:  # bad parameters and problems the mechanism does not apply to are exit 2 ...
                    named(problem, **params, **{key: 1.0})
                except ValueError as e:
                    _mechanism_failure(e, params)
                try:
                    ev = calibrate_mechanism(problem, name, **params)
                except ValueError as e:  # ... no value meeting the budgets is exit 1
                    _fail(str(e), code=1)
                good, bad = ev.bracket
                extra["calibrated"] = {"parameter": key, "value": good, "failing": bad}
    except (RepairError, TableError) as e:  # ValueErrors, but the mechanism's table is at fault
        _fail(f"certify: mechanism {name!r}: {e}", code=1)
    except ValueError as e:
        _mechanism_failure(e, params)
    except (CouplingError, ProfileLPError) as e:
        _fail(f"mechanism {name!r}: {e}", code=1)
    return ev, {"mechanism": name, "params": ev.params, **extra}


def _number(params: Mapping[str, Any], key: str, what: str, ok: Callable[[float], bool]) -> float:
    """``params[key]``, a float for which ``ok`` holds, or exit 2."""
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, float) or not ok(value):
        _fail(f"--param: {key} must be {what}, got {value!r}")
    return value


def _integer(params: Mapping[str, Any], key: str, low: int) -> int:
    """``params[key]``, an integer ``>= low``, or exit 2."""
    value = params[key]  # a float from --param, an int by default
    if (isinstance(value, bool) or not isinstance(value, int | float) or not float(value).is_integer()
            or value < low):
        _fail(f"--param: {key} must be an integer >= {low}, got {value!r}")
    return int(value)


def _tupling_params(given: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of ``--mechanism tupling``, checked (integers as ``int``), or exit 2."""
    params = {**TUPLING_PARAMS, **given}
    missing = [k for k in ("k", "base_epsilon") if params[k] is None]
    if missing:
        _fail(f"--param: mechanism 'tupling' needs {missing[0]!r} (e.g. --param k=3 "
              "--param base_epsilon=1)")
    for key, low in (("k", 0), ("samples", 1), ("seed", 0), ("pair", 0)):
        params[key] = _integer(params, key, low)
    if params["samples"] * (params["k"] + 1) > MAX_TUPLE_ENTRIES:
        _fail(f"--param: samples·(k+1) = {params['samples'] * (params['k'] + 1):.3g} tuple "
              f"entries, at most {MAX_TUPLE_ENTRIES:.0e}")
    if params["base"] not in TUPLING_BASES:
        _fail(f"--param: base must be one of {', '.join(TUPLING_BASES)}, got {params['base']!r}")
    _number(params, "confidence", "a number in (0, 1)", lambda v: 0 < v < 1)
    for key in ("base_epsilon", "epsilon") if params["epsilon"] is not None else ("base_epsilon",):
        _number(params, key, "a finite number >= 0", lambda v: 0 <= v < math.inf)
    return params


def _tupling(problem: Problem, params: dict[str, Any]) -> dict[str, Any]:
    """``--mechanism tupling``: :func:`~diffpriv.mechanisms.evaluate_tupling` with the base table
    ``base`` (planar Laplace or k-RR) at ``base_epsilon``, plus the exact δ(ε) where the
    multisets of outputs can be enumerated (at most :data:`MAX_EXACT_MULTISETS`)."""
    from diffpriv.mechanisms import MECHANISMS, Tupling, evaluate_tupling, tuple_delta_exact

    start = time.perf_counter()
    try:
        base = MECHANISMS[params["base"]](problem, epsilon=params["base_epsilon"])
    except ValueError as e:
        other = "krr" if params["base"] == "planar_laplace" else "planar_laplace"
        _fail(f"tupling: base table: {e}; or try --param base={other}")
    k = params["k"]
    try:
        with np.errstate(all="ignore"):
            report = evaluate_tupling(problem, k, base, params["epsilon"], samples=params["samples"],
                                      confidence=params["confidence"], rng=params["seed"],
                                      pair=params["pair"])
    except ValueError as e:
        _fail(f"tupling: {e}")
    d = report.delta
    exact = None  # where the multisets are too many to enumerate, the Monte Carlo bound decides
    if math.comb(problem.shape[2] + k, k + 1) <= MAX_EXACT_MULTISETS:
        items = {item.name: item for item in problem.items}
        laws = [Tupling(k, base[items[n].profile]).law(items[n].dist) for n in report.items]
        with np.errstate(all="ignore"):
            exact = tuple_delta_exact(*laws, d.epsilon, k, max_multisets=MAX_EXACT_MULTISETS)
    ok = (exact if exact is not None else d.upper) <= report.delta_budget
    return {
        "mechanism": TUPLING,
        "params": {**params, "epsilon": d.epsilon},
        "certificate": None,
        "items": list(report.items),
        "expected_loss": report.expected_loss,
        "base_expected_loss": report.base_loss,
        "epsilon": d.epsilon,
        "delta": {"exact": exact, "estimate": d.estimate, "forward": d.forward,
                  "backward": d.backward, "lower": d.lower, "upper": d.upper,
                  "samples": d.samples, "confidence": d.confidence},
        "delta_budget": report.delta_budget,
        "theorem3": None if report.theorem3 is None else {
            "epsilon": report.theorem3[0], "delta": report.theorem3[1], "beta": report.beta,
            "eta": 0.0},
        "ok": bool(ok),
        "seconds": {"tupling": time.perf_counter() - start},
    }


def _print_tupling(s: dict[str, Any], title: str) -> None:
    """The tupling report as a rich table (no constraints table: there is no certificate)."""
    d, thm = s["delta"], s["theorem3"]
    pct = f"{100 * d['confidence']:g} %"
    if thm is None:
        theorem = "says nothing at this ε (needs k ≥ 1 and ε > ln(1 + β|Y|/k))"
    else:
        theorem = f"δ ≤ {thm['delta']:.4g} (η = 0, β = {thm['beta']:.4g})" + (
            ", vacuous" if thm["delta"] >= 1 else "")
    if d["exact"] is not None:
        verdict = "met (exact δ ≤ budget)" if s["ok"] else "[red]NOT met[/red] (exact δ > budget)"
    else:
        verdict = ("met (upper bound ≤ budget)" if s["ok"]
                   else "[red]not shown[/red] (upper bound > budget)")
    rows = [
        ("mechanism", escape(_mechanism_text(s["mechanism"], s["params"]))),
        ("protected pair", " vs ".join(s["items"])),
        ("expected loss (least over the tuple)", f"{s['expected_loss']:.6g}"),
        ("expected loss of the base table", f"{s['base_expected_loss']:.6g}"),
        (f"exact δ(ε = {s['epsilon']:g})", "too many tuples to enumerate" if d["exact"] is None
         else f"{d['exact']:.6g}"),
        (f"δ̂(ε = {s['epsilon']:g}), Monte Carlo", f"{d['estimate']:.4g} ({d['samples']} tuples "
                                                   "per direction)"),
        (f"upper confidence bound ({pct})", f"{d['upper']:.4g}"),
        (f"lower confidence bound ({pct})", f"{d['lower']:.4g}"),
        ("δ budget", f"{s['delta_budget']:g}: {verdict}"),
        ("Theorem 3 (Kawamoto & Murakami)", theorem),
        ("time", ", ".join(f"{k} {v:.2f} s" for k, v in s["seconds"].items())),
    ]
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for row in rows:
        table.add_row(*row)
    console.print(table)


def _check_mechanism_options(mechanism: str | None, given: dict[str, Any], calibrate: bool,
                             compare: bool) -> dict[str, Any]:
    """Checks --mechanism, --param and --calibrate before the config is read (exit 2 on a bad
    one); returns the parameters (all of them, checked, for tupling)."""
    if mechanism is None:
        if not compare:
            _fail("--mechanism: missing; name a mechanism (diffpriv evaluate --list) or use --compare")
        if given or calibrate:
            _fail(f"--mechanism: missing; {'--param' if given else '--calibrate'} needs a mechanism")
        return given
    known = _mechanism_params(mechanism)
    unknown = sorted(set(given) - set(known))
    if unknown:
        _fail(f"--param: mechanism {mechanism!r} has no parameter {unknown[0]!r} "
              f"(it has {', '.join(known) or 'none'})")
    if calibrate:
        from diffpriv.mechanisms import MECHANISMS

        key = None if mechanism == TUPLING else MECHANISMS[mechanism].calibrate
        if key is None:
            _fail(f"--calibrate: mechanism {mechanism!r} has no parameter to calibrate")
        if key in given:
            _fail(f"--calibrate: finds {key!r} of mechanism {mechanism!r}; do not give it with --param")
    return _tupling_params(given) if mechanism == TUPLING else given


def _comparison(problem: Problem, options: OptimizerOptions, mechanism: str | None,
                given: Mapping[str, Any]) -> dict[str, Any]:
    """``--compare``: every registered table mechanism calibrated by
    :func:`~diffpriv.mechanisms.compare` against the optimized table (``dp.design`` with the
    config's ``[optimizer]``), printed; the named mechanism keeps its other ``--param`` values. A
    mechanism that does not apply, or cannot meet the budgets, is one ``not compared:`` line.
    Returns the summary fields ``comparison`` and ``not_compared``."""
    from diffpriv._design import InfeasibleError, design  # imports JAX
    from diffpriv.certification import RepairError, TableError
    from diffpriv.mechanisms import MECHANISMS, CouplingError, ProfileLPError, compare, format_comparison

    kwargs = options.kwargs()
    seed = kwargs.pop("seed")
    start = time.perf_counter()
    try:
        reference = design(problem, seed=seed, progress=True, **kwargs).certificate
    except InfeasibleError as e:
        _fail(f"--compare: {e}", code=1)
    except (RepairError, TableError) as e:
        _fail(f"--compare: certify: {e}", code=1)
    rows, skipped = compare(problem, [], reference=reference), []
    for name, named in MECHANISMS.items():
        fixed = {k: v for k, v in given.items() if k != named.calibrate} if name == mechanism else {}
        try:
            with np.errstate(all="ignore"):
                row = compare(problem, [(name, fixed)], reference=reference)[1]
        except (CouplingError, ProfileLPError, RepairError, TableError) as e:
            skipped.append((name, f"{type(e).__name__}: {e}"))
            continue
        if math.isnan(row.loss):
            skipped.append((name, row.note))
        else:
            rows.append(row)
    console.print(f"compared with the optimized table, each mechanism calibrated to the budgets "
                  f"({time.perf_counter() - start:.2f} s):", soft_wrap=True)
    typer.echo(format_comparison(rows))
    for name, why in skipped:
        typer.echo(" ".join(f"not compared: {name}: {why}".split()))
    return {"comparison": [dataclasses.asdict(r) for r in rows],
            "not_compared": [{"name": n, "reason": why} for n, why in skipped]}


@app.command()
def evaluate(
    config: Annotated[
        Path | None, typer.Argument(help="TOML config describing the problem (not with --list).")
    ] = None,
    mechanism: Annotated[
        str | None,
        typer.Option("--mechanism", "-m", help="A registered mechanism (see --list), or tupling."),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", "-p", help="KEY=VALUE, repeatable: a parameter of the mechanism; "
                     "numbers are floats, true/false booleans, anything else text."),
    ] = None,
    calibrate: Annotated[
        bool, typer.Option(help="Find the mechanism's privacy parameter (ε, precision) that just "
                           "meets every budget of CONFIG, by bisection on the certified levels.")
    ] = False,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Folder for certificate.json and summary.json.")
    ] = None,
    compare: Annotated[
        bool, typer.Option(help="Then compare every registered table mechanism that applies, each "
                           "calibrated to CONFIG's budgets, with the optimized table: this runs the "
                           "optimizer (dp.design, JAX) with CONFIG's \\[optimizer] settings.")
    ] = False,
    list_: Annotated[
        bool, typer.Option("--list", help="List the mechanisms with their parameters and exit.")
    ] = False,
) -> None:
    """Certify a named mechanism (a classic baseline or one of the papers') on CONFIG's problem.

    Builds the mechanism's table, certifies it as is (no repair) with the certifier that checks
    optimized tables, and prints the same summary as optimize: the objective of the table and
    each constraint's budget, certified level and margin. With --out, writes
    OUT/certificate.json (its meta records the mechanism and its parameters; certify, export
    and plot read it) and OUT/summary.json. Exit 0 when every budget holds, 1 when one is
    violated. --mechanism tupling (--param k=K --param base_epsilon=E; optionally base, which is
    planar_laplace or krr, samples, confidence, seed, epsilon, pair) reports tuples, not a
    table: it prints the exact expected loss, the exact δ(ε) where the tuples can be enumerated,
    a Monte Carlo δ(ε) with confidence bounds and Theorem 3's bound, and writes OUT/summary.json
    only (exit 1 unless δ meets the DistP budget). --list shows every mechanism's parameters.
    """
    if list_:
        _print_mechanisms()
        return
    if config is None:
        _fail("Missing argument 'CONFIG' (diffpriv evaluate --list needs none)")
    params = _check_mechanism_options(mechanism, _parse_params(param or []), calibrate, compare)
    problem, options = _load(config)
    if out is not None:
        _check_out_dir(out)
    table_mechanism = mechanism not in (None, TUPLING)
    with _user_errors():
        if table_mechanism or compare:
            admit(problem, "certifier")
        if table_mechanism and out is not None:
            admit_certificate(problem)
        if compare:
            admit(problem, "optimizer")
    title = f"diffpriv evaluate {config}"
    summary: dict[str, Any] = {"objective": problem.objective.text}
    cert = None
    if mechanism == TUPLING:
        summary = _tupling(problem, params)
        _print_tupling(summary, title)
    elif mechanism is not None:
        start = time.perf_counter()
        ev, fields = _evaluate_table(problem, mechanism, params, calibrate)
        seconds = {"calibrate" if calibrate else "build and certify": time.perf_counter() - start}
        meta = jsonable({**_meta("evaluate", config), **ev.certificate.meta})
        if calibrate:
            meta["mechanism"]["calibrated"] = jsonable(fields["calibrated"])
        cert = dataclasses.replace(ev.certificate, meta=meta)
        summary = _summary(problem, cert, seconds, **fields)
        _print_summary(summary, title=title)
    if out is not None and mechanism is not None:
        with _user_errors():
            out.mkdir(parents=True, exist_ok=True)
            if cert is not None:
                cert.save(out / "certificate.json")
            write_json(out / "summary.json", summary)
        if cert is not None:
            console.print(f"wrote {out / 'certificate.json'} and {out / 'summary.json'}")
        else:
            console.print(f"wrote {out / 'summary.json'} only: {NO_TUPLING_CERTIFICATE}",
                          soft_wrap=True)
    elif mechanism == TUPLING:
        console.print(NO_TUPLING_CERTIFICATE, soft_wrap=True)
    if compare:
        summary |= _comparison(problem, options, mechanism, params)
        if out is not None:
            with _user_errors():
                out.mkdir(parents=True, exist_ok=True)
                write_json(out / "summary.json", summary)
            console.print(f"wrote {out / 'summary.json'}" + (" (with the comparison)" if mechanism
                                                             else " (the comparison; no certificate)"))
    if mechanism is not None and not summary["ok"]:
        raise typer.Exit(1)


def main() -> None:
    """The console-script entry point."""
    app()
