"""``optimize`` and ``reference``: a config solved (by the optimizer, or exactly as an LP),
certified, and written as ``certificate.json`` and ``summary.json``.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console

from diffpriv.certification._schema import admit_certificate
from diffpriv.cli._common import (
    _certify_and_save,
    _check_out_dir,
    _fail,
    _load,
    _meta,
    _save,
    _user_errors,
    console,
)
from diffpriv.cli._summary import _print_summary, _summary
from diffpriv.config._schema import MAX_SEED
from diffpriv.io._export import jsonable, write_json
from diffpriv.problems._size import admit
from diffpriv.solvers._methods import METHODS
from diffpriv.solvers._options import Options

LONG_RUN = 60.0
"""``diffpriv optimize`` says up front what it expects of a run predicted to take longer (seconds)."""
MAX_STEPS = next(f.metadata["le"] for f in dataclasses.fields(Options) if f.name == "steps")


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
                     "periods (\\[optimizer] period, default 500), at most N steps in all: a "
                     "period longer than N is cut to N.",
                     min=1, max=MAX_STEPS),
    ] = None,
    method: Annotated[
        str | None,
        typer.Option(help="Solver; overrides \\[optimizer] method: "
                     + "; ".join(f"{k}: {v}" for k, v in METHODS.items()) + "."),
    ] = None,
    progress: Annotated[
        bool | None,
        typer.Option("--progress/--no-progress",
                     help="Progress on stderr: a bar where it is a terminal (the default); with --progress, "
                     "one line every 5 s where it is not (a pipe, a log file)."),
    ] = None,
    time_limit: Annotated[
        float | None,
        typer.Option("--time-limit", help="Stop the optimizer after SECONDS with the best table so far, "
                     "certified as any other; overrides \\[optimizer] time_limit.", min=0.0, max=1e9),
    ] = None,
) -> None:
    """Find the least-loss mechanism for CONFIG, certify it, and write OUT/certificate.json.

    The config is validated completely before JAX starts. The optimized table is then
    certified exactly (numpy, float64) and, if a constraint is violated, repaired by mixing with
    a data-independent channel. Prints a summary: the objective of the optimized and the
    certified table, the certified lower bound on the optimum and the gap to it, each
    constraint's budget, certified level and margin, the repair weight and the time taken.
    Ctrl-C stops the optimizer: its best table so far is certified and written, then exit 130.
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
    if time_limit is not None:
        kwargs["time_limit"] = time_limit
    if method is not None:
        if method not in METHODS:
            _fail(f"--method: must be one of {', '.join(METHODS)}, got {method!r}", code=2)
        kwargs["method"] = method

    from diffpriv._design import InfeasibleError, design  # (JAX only once a run needs it)
    from diffpriv.certification import DEFAULT_BITS, RepairError, TableError
    from diffpriv.solvers._cache import enable_compile_cache
    from diffpriv.solvers._optimizer import SOLVER_ERRORS

    enable_compile_cache()  # $DIFFPRIV_COMPILE_CACHE, or ~/.cache/diffpriv/jax; "off" turns it off
    gap_tol = kwargs.get("gap_tol", Options().gap_tol)
    _announce(problem, kwargs.get("method", "auto"), gap_tol)
    progress = _progress(progress, gap_tol)
    try:
        with _user_errors():  # a method that does not apply, a problem too large for it: one line, exit 2
            d = design(problem, seed=seed, progress=progress, meta=meta, quantize=DEFAULT_BITS, **kwargs)
    except InfeasibleError as e:
        _fail(f"{config}: {e}", code=1)
    except (RepairError, TableError) as e:
        _fail(f"certify: {e}", code=1)
    except (*SOLVER_ERRORS, FloatingPointError) as e:  # the solver's own failure (infeasible, diverged)
        _fail(f"optimizer: {e}" if not str(e).startswith("optimizer") else str(e), code=1)
    except KeyboardInterrupt:
        _fail("interrupted before the optimizer had a table to certify; nothing written", code=130)
    result, cert = d.result, d.certificate
    _save(cert, out / "certificate.json")
    if not problem.objective.smooth or math.isfinite(result.lower_bound):  # (simplicial: a bound)
        bound = {"lower_bound": float(result.lower_bound)}
    else:  # the gradient search: no bound, the best of its starts
        starts = result.starts
        why = {"python": "a user utility, not known to be convex",
               "sinkhorn": "the gradient search states none"}.get(problem.objective.kind,
                                                                  "non-convex objective")
        bound = {"no_bound": f"no optimality bound: {why}; the best of {starts['restarts']} "
                             f"starts (from {starts['start']})",
                 "restarts": int(starts["restarts"]), "best_start": starts["start"]}
    summary = _summary(
        problem, cert, d.seconds,
        optimized=float(result.objective), **bound,
        steps=int(result.steps), stop=result.status, seed=int(result.seed), plan=result.plan,
        method=result.method, **({} if result.presolve is None else {"presolve": result.presolve}),
        **({} if not result.prices else {"prices": result.prices}),
        **({"exact_transport": problem.objective.exact(problem, cert.table)}
           if problem.objective.kind == "sinkhorn" else {}),
    )
    with _user_errors():
        write_json(out / "summary.json", summary)
    _print_summary(summary, title=f"diffpriv optimize {config}")
    console.print(f"wrote {out / 'certificate.json'} and {out / 'summary.json'}")
    if result.status in ("time limit", "interrupted"):
        why = f"the time limit of {kwargs.get('time_limit'):g} s" if result.status == "time limit" \
            else "Ctrl-C"
        console.print(f"stopped by {why} after {int(result.steps)} steps: the certificate is of the best "
                      f"table so far (certified gap {d.gap:.3g})", soft_wrap=True)
    if result.status == "interrupted":
        raise typer.Exit(130)
    if not cert.ok:
        raise typer.Exit(1)


def _progress(asked: bool | None, gap_tol: float):
    """What ``design`` shows: a bar where stderr is a terminal, unless ``--no-progress``; where it
    is not, lines (:func:`._progress.progress_lines`) with ``--progress``, else nothing."""
    if asked is False:
        return False
    if asked and not Console(stderr=True).is_terminal:
        from diffpriv.solvers._progress import progress_lines

        return progress_lines(gap_tol)
    return True


def _announce(problem, method: str, gap_tol: float) -> None:
    """Prints, before a run the size model expects to take over :data:`LONG_RUN` seconds, about how
    long and what would shorten it (the interior point's model, :attr:`._interior.Size.seconds`)."""
    from diffpriv.solvers import _interior
    from diffpriv.solvers._methods import route

    try:
        names = route(problem, method, gap_tol=gap_tol)
    except Exception:  # noqa: BLE001  (a method that does not apply: design says so in one line)
        return
    if not names or names[0] != "interior":
        return
    size = _interior.size(problem)
    seconds, steps = size.seconds, size.iterations
    if seconds < LONG_RUN:
        return
    ns, nx, _ = problem.shape
    when = f"{seconds / 60:.0f} minutes" if seconds < 5400 else f"{seconds / 3600:.1f} hours"
    console.print(f"expect a long run: about {when} for the interior point on this CPU "
                  f"({size.outputs} outputs x {ns * nx} inputs, about "
                  f"{steps} iterations of {seconds / steps:.0f} s); halving "
                  "the grid's side makes each iteration about 50x cheaper, and --time-limit stops it "
                  "with the best certified table so far", soft_wrap=True)


def reference(
    config: Annotated[Path, typer.Argument(help="TOML config describing the problem.")],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Also certify the LP table; write certificate.json here."),
    ] = None,
) -> None:
    """Solve CONFIG exactly as a linear program (HiGHS): the optimum that optimize aims at.

    A config with a divergence constraint (KL, χ², Hellinger, Rényi) is solved as a convex
    program instead (cvxpy with Clarabel; installed with the test extra). Prints the optimal
    objective value and the solve time. With --out, the reference table is certified like an
    optimized one and written to OUT/certificate.json and OUT/summary.json.
    """
    from diffpriv.solvers._convex import ConvexSolveError, solve_convex
    from diffpriv.solvers._lp import ReferenceSolveError, solve_lp

    problem, _ = _load(config)
    if out is not None:
        _check_out_dir(out)
    with _user_errors():
        admit(problem, "lp")
        if out is not None:
            admit(problem, "certifier")
            admit_certificate(problem)
    convex = not problem.linear
    name = "convex" if convex else "LP"
    try:
        with np.errstate(over="ignore"):  # e^ε = inf: solve_lp checks it and raises ReferenceSolveError
            result = solve_convex(problem) if convex else solve_lp(problem)
    except (ReferenceSolveError, ConvexSolveError, ImportError, ValueError) as e:
        _fail(f"reference: {e}", code=1)
    solver = {f"{name.lower()}_optimum": result.value, "status": result.status}
    if not convex:
        from diffpriv.solvers._price import prices

        priced = prices(problem, result.table, result.multipliers, result.delta_multipliers)
        solver.update({"prices": priced} if priced else {})
    summary = {"objective": problem.objective.text, **solver, "seconds": {name: result.seconds}}
    if out is not None:
        meta = _meta("reference", config, reference=solver)
        cert, certify_seconds = _certify_and_save(problem, result.table, out, meta, None)
        seconds = {name: result.seconds, "certify": certify_seconds}
        summary = _summary(problem, cert, seconds, **solver)
        with _user_errors():
            write_json(out / "summary.json", summary)
    _print_summary(summary, title=f"diffpriv reference {config}")
    if out is not None:
        console.print(f"wrote {out / 'certificate.json'} and {out / 'summary.json'}")
