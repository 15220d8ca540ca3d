"""``sweep``: a privacy–utility frontier of a config over one constraint's budget
(:func:`diffpriv._sweep.sweep`), with a certificate per budget, ``frontier.csv``, the figure as
PNG and PDF, and a resume after an interruption.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from diffpriv.certification._schema import admit_certificate
from diffpriv.cli._common import _check_out_dir, _fail, _load, _meta, _user_errors, console
from diffpriv.config._schema import MAX_SEED
from diffpriv.io._export import jsonable
from diffpriv.problems._size import admit
from diffpriv.solvers._methods import METHODS

MAX_BUDGETS = 1000
"""The most budgets one sweep takes."""


def parse_budget(text: str, log: bool) -> tuple[str, str, list[float]]:
    """``NAME[.FIELD]=LO:HI:N`` or ``NAME[.FIELD]=a,b,c`` (the budgets themselves, in any order; a
    single value too) as ``(name, field, budgets)``; ``ValueError`` says what is wrong."""
    from diffpriv._sweep import FIELDS, budget_grid

    name, eq, spec = text.rpartition("=")
    if not eq or not name:
        raise ValueError(f"expected NAME=LO:HI:N or NAME=a,b,c (e.g. home-vs-out=0.25:4:8), got {text!r}")
    field = "epsilon"
    base, dot, tail = name.rpartition(".")
    if dot and tail in FIELDS:
        name, field = base, tail
    if ":" not in spec:
        try:
            values = [float(v) for v in spec.split(",")]
        except ValueError:
            raise ValueError(f"expected numbers separated by commas after '=', got {spec!r}") from None
        if len(values) > MAX_BUDGETS:
            raise ValueError(f"at most {MAX_BUDGETS} budgets, got {len(values)}")
        return name, field, values
    parts = spec.split(":")
    if len(parts) != 3:
        raise ValueError(f"expected LO:HI:N or a,b,c after '=', got {spec!r}")
    try:
        lo, hi, n = float(parts[0]), float(parts[1]), int(parts[2])
    except ValueError:
        raise ValueError(f"LO and HI must be numbers and N an integer, got {spec!r}") from None
    if n > MAX_BUDGETS:
        raise ValueError(f"at most {MAX_BUDGETS} budgets, got N = {n}")
    return name, field, [float(b) for b in budget_grid(lo, hi, n, log=log)]


def sweep(
    config: Annotated[Path, typer.Argument(help="TOML config describing the problem.")],
    budget: Annotated[
        str, typer.Option("--budget", "-b",
                          help="NAME=LO:HI:N: N budgets from LO to HI for the constraint called NAME "
                               "(its epsilon; NAME.delta=LO:HI:N sweeps its delta); NAME=a,b,c: those "
                               "budgets.")
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Folder for frontier.csv, frontier.png/.pdf and "
                                               "certificates/; a rerun into it resumes the sweep.")
    ],
    log: Annotated[bool, typer.Option("--log", help="Space the budgets geometrically.")] = False,
    log_loss: Annotated[bool, typer.Option("--log-loss", help="Draw the loss axis of frontier.png/.pdf "
                                                             "logarithmic.")] = False,
    baselines: Annotated[
        str, typer.Option(help="Comma-separated mechanisms calibrated to every budget "
                               "(krr, planar_laplace, planar_gaussian, restricted_laplace).")
    ] = "",
    seed: Annotated[
        int | None, typer.Option(help="Random seed; overrides \\[optimizer] seed.", min=0, max=MAX_SEED)
    ] = None,
    method: Annotated[
        str | None, typer.Option(help="Solver; overrides \\[optimizer] method (see optimize --help).")
    ] = None,
    batch: Annotated[
        bool | None, typer.Option("--batch/--no-batch",
                                  help="Solve the budgets as one vmap-ed PDHG program over every "
                                       "device [default: where PDHG runs and there are several "
                                       "devices or an accelerator].")
    ] = None,
    progress: Annotated[
        bool, typer.Option(help="Show a progress bar on stderr (only when it is a terminal).")
    ] = True,
) -> None:
    """Trace the privacy–utility frontier of CONFIG: optimize and certify at each budget.

    Writes OUT/certificates/budget-NNN.json (each verifies with diffpriv certify), OUT/frontier.csv
    (budget, certified loss, lower bound, gap, status, method, seconds, and each baseline's
    certified loss and parameter) after every budget, and OUT/frontier.png (for a screen) and .pdf
    (one panel a column of a paper wide) at the end, the loss in the coordinates' units where the
    loss is their distance. Interrupted (Ctrl-C, a kill) and run again with the same arguments, it
    resumes where it stopped: a budget is kept when its certificate verifies for the config at that
    budget (its row rebuilt from it), else solved again with a warning; a folder holding a different
    sweep, or a frontier.csv that is not a sweep's, is refused. With DIFFPRIV_COORDINATOR (host:port
    of process 0), DIFFPRIV_NUM_PROCESSES and DIFFPRIV_PROCESS_ID set, it is one of several
    processes (one per host) running the same command: a batch runs over all their devices, and
    process 0 writes OUT.
    """
    problem, options = _load(config)
    try:
        name, field, budgets = parse_budget(budget, log)
    except ValueError as e:
        _fail(f"--budget: {e}")
    names = [b.strip() for b in baselines.split(",") if b.strip()]
    if method is not None and method not in METHODS:
        _fail(f"--method: must be one of {', '.join(METHODS)}, got {method!r}")
    _check_out_dir(out)
    from diffpriv._sweep import at_budget, check_baselines, constraint_index

    try:
        check_baselines(names)
    except ValueError as e:
        _fail(f"--{e}")
    try:
        index = constraint_index(problem, name)
    except ValueError as e:
        _fail(f"--budget: {e}")
    with _user_errors():
        for b in budgets:
            try:
                p = at_budget(problem, index, field, b)
            except ValueError as e:
                _fail(f"--budget: {e}")
        for stage in ("optimizer", "certifier"):
            admit(p, stage)
        admit_certificate(p)
    kwargs = options.kwargs()
    config_seed = kwargs.pop("seed")
    seed = config_seed if seed is None else seed
    if method is not None:
        kwargs["method"] = method
    meta = jsonable(_meta("sweep", config))

    _distributed()
    from diffpriv._sweep import sweep as run_sweep  # imports JAX on the first solve
    from diffpriv.certification import DEFAULT_BITS
    from diffpriv.solvers._cache import enable_compile_cache

    enable_compile_cache()
    shown = progress and console.is_terminal
    bar = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                   TimeElapsedColumn(), console=console, transient=True, disable=not shown)
    finished = [0]
    with bar:
        task = bar.add_task("", total=len(budgets))

        def on_point(i: int, row: dict) -> None:
            finished[0] += 1
            text = f"{field} = {row['budget']:.4g}: {row['certified_loss']:.6g}"
            bar.update(task, advance=1, description=text)

        def on_redo(i: int, why: str) -> None:  # one line on stderr, as the error lines are
            line = " ".join(f"{why}; solving {field} = {budgets[i]:.4g} again".split())
            typer.echo("warning: " + line.encode("utf-8", "backslashreplace").decode("utf-8"), err=True)

        try:
            frontier = run_sweep(problem, budgets, constraint=name, field=field, out=out, baselines=names,
                                 seed=seed, quantize=DEFAULT_BITS, meta=meta, on_point=on_point,
                                 on_redo=on_redo, batch=batch, log_loss=log_loss, **kwargs)
        except KeyboardInterrupt:
            _fail(f"interrupted after {finished[0]} of {len(budgets)} budgets (each saved in {out}); "
                  "run the same command again to resume", code=130)
        except ValueError as e:  # another sweep in the folder, a budget a solver refuses
            _fail(str(e))
    from diffpriv.io._frontier import loss_label

    _print_frontier(frontier, loss_label(problem), f"diffpriv sweep {config}")
    console.print(f"wrote {out / 'frontier.csv'}, {out / 'frontier.png'}, {out / 'frontier.pdf'} and "
                  f"{len(budgets)} certificates in {out / 'certificates'}"
                  + (f" ({frontier.resumed} read back from an earlier run)" if frontier.resumed else ""))
    if not all(r["ok"] for r in frontier.rows):
        raise typer.Exit(1)


DISTRIBUTED = ("DIFFPRIV_COORDINATOR", "DIFFPRIV_NUM_PROCESSES", "DIFFPRIV_PROCESS_ID")
"""The environment that makes ``sweep`` one of several processes (hosts): the coordinator's
``host:port`` (process 0's machine), how many processes, and this one's index."""


def _distributed() -> None:
    """``jax.distributed.initialize`` from :data:`DISTRIBUTED` when ``DIFFPRIV_COORDINATOR`` is set
    (CPU devices exchange data through gloo), before any JAX computation."""
    import os

    coordinator = os.environ.get(DISTRIBUTED[0])
    if not coordinator:
        return
    values = []
    for key in DISTRIBUTED[1:]:
        text = os.environ.get(key, "")
        if not text.isdigit():
            _fail(f"{key}: must be a non-negative integer when {DISTRIBUTED[0]} is set, got {text!r}")
        values.append(int(text))
    processes, index = values
    if not 0 <= index < processes:
        _fail(f"{DISTRIBUTED[2]}: must be below {DISTRIBUTED[1]} = {processes}, got {index}")
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=processes, process_id=index)


def _print_frontier(frontier, what: str, title: str) -> None:
    """One row per budget (status and method as a column only where they differ)."""
    symbol = {"epsilon": "ε", "delta": "δ"}[frontier.field]
    rows = frontier.rows
    varying = [k for k in ("status", "method") if len({r[k] for r in rows}) > 1]
    priced = [f"d/d{symbol}"] if any(math.isfinite(r["price"]) for r in rows) else []
    table = Table(title=f"{title}: {what}", title_justify="left")
    for col in (symbol, "certified", "lower bound", "gap", *priced, *varying, *frontier.baselines, "s"):
        table.add_column(col, justify="left" if col in varying else "right")
    for r in rows:
        none = r["lower_bound"] == -math.inf  # a non-convex objective states no bound
        bound = "none" if none else f"{r['lower_bound']:.6g}"
        gap = "—" if none else f"{100 * r['gap']:.2g}%" if r["lower_bound"] > 0 else f"{r['gap']:.2g}"
        cells = [f"{r['budget']:.4g}", f"{r['certified_loss']:.6g}", bound, gap,
                 *([f"{r['price']:.4g}" if math.isfinite(r["price"]) else "—"] if priced else []),
                 *(r[k] for k in varying)]
        losses = [r[f"{b}_loss"] for b in frontier.baselines]
        cells += [f"{v:.4g}" if math.isfinite(v) else "—" for v in losses]
        table.add_row(*cells, f"{r['seconds']:.1f}")
    console.print(table)
    same = [f"{k} {rows[0][k]}" for k in ("status", "method") if k not in varying]
    if same:
        console.print("every budget: " + ", ".join(same))
