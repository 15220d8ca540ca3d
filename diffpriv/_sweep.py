"""``sweep``: a privacy–utility frontier. One constraint's budget takes each value of a list; at
each the problem is optimized and certified (:func:`~diffpriv.design`), the baselines are
calibrated to it, and, with an output folder, the point is written before the next starts:

* ``OUT/sweep.json`` — what the sweep is (the problem's hash, the constraint, the budgets, the
  baselines and the optimizer's settings), written first;
* ``OUT/certificates/budget-NNN.json`` — the certificate of budget ``NNN`` (its index);
* ``OUT/frontier.csv`` — one row per finished budget, rewritten (atomically) after each;
* ``OUT/frontier.png`` and ``OUT/frontier.pdf`` — the frontier with its lower bounds and the
  baselines, once every budget is done.

A sweep that is stopped (Ctrl-C, a kill, a power cut) and run again into the same folder with the
same problem, budgets and settings resumes: a budget counts as done when its row is in
``frontier.csv`` and its certificate is on disk, so none is lost or solved twice. Every file is
written atomically (a temporary file, then a rename). A folder that holds another sweep is
refused. With several processes (``jax.distributed.initialize``, one per host, each running the
same sweep) a batch runs over all their devices and process 0 alone reads and writes the folder.
Budgets run in the order given, each warm-started from the previous budget's run
where the same solver runs both: HiGHS from its last basis (the dual simplex then takes a few
pivots), PDHG from its iterates; the other solvers start cold.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from diffpriv._files import json_number, write_csv
from diffpriv._gap import relative_gap
from diffpriv.io._export import jsonable, write_json
from diffpriv.problems._json import problem_hash
from diffpriv.problems._problem import Problem

__all__ = ["Frontier", "at_budget", "budget_grid", "constraint_index", "sweep"]

FORMAT = "diffpriv-sweep/1"
FIELDS = ("epsilon", "delta")
"""The budgets a sweep can vary."""
COLUMNS = ("budget", "certified_loss", "lower_bound", "gap", "status", "method", "ok", "seconds",
           "certificate")
"""``frontier.csv``'s columns, then ``<baseline>_loss`` and ``<baseline>_param`` per baseline."""


@dataclasses.dataclass(frozen=True)
class Frontier:
    """A finished sweep.

    Attributes:
      constraint: the name of the constraint whose budget varied; ``field`` which budget
        (``"epsilon"`` or ``"delta"``).
      budgets: the values, in the order given.
      rows: one dict per budget, in that order, with the keys of :data:`COLUMNS` (``certificate``
        is the file's path relative to ``out``, or ``""`` without one) and, per baseline,
        ``<name>_loss`` (its certified loss calibrated to the budget; NaN where no setting meets it)
        and ``<name>_param`` (the calibrated parameter).
      resumed: how many budgets were read back from ``out`` rather than solved.
      out: the output folder, or None.
    """

    constraint: str
    field: str
    budgets: tuple[float, ...]
    rows: tuple[dict[str, Any], ...]
    baselines: tuple[str, ...]
    resumed: int
    out: Path | None


def budget_grid(lo: float, hi: float, n: int, *, log: bool = False) -> np.ndarray:
    """``n`` budgets from ``lo`` to ``hi``, evenly spaced (geometrically with ``log``).

    Raises:
      ValueError: ``n < 1``, a bound that is not finite, ``lo > hi``, a negative ``lo``, or
        ``lo = 0`` with ``log``; ``n = 1`` needs ``lo = hi``.
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"the number of budgets must be a positive integer, got {n!r}")
    lo, hi = float(lo), float(hi)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"budgets must be finite, got {lo!r}:{hi!r}")
    if lo < 0 or lo > hi:
        raise ValueError(f"need 0 <= LO <= HI, got {lo!r}:{hi!r}")
    if n == 1 and lo != hi:
        raise ValueError(f"one budget needs LO = HI, got {lo!r}:{hi!r}")
    if log:
        if lo <= 0:
            raise ValueError(f"a log-spaced sweep needs LO > 0, got {lo!r}")
        return np.geomspace(lo, hi, n)
    return np.linspace(lo, hi, n)


def constraint_index(problem: Problem, name: str | None) -> int:
    """The index of the constraint called ``name`` (None: the only constraint).

    Raises:
      ValueError: no constraint or several have that name (the message lists the names).
    """
    names = [c.name for c in problem.constraints]
    if name is None:
        if len(names) != 1:
            raise ValueError(f"the problem has {len(names)} constraints ({', '.join(names)}); "
                             "name the one to sweep")
        return 0
    hits = [i for i, n in enumerate(names) if n == name]
    if len(hits) != 1:
        what = "no constraint" if not hits else f"{len(hits)} constraints"
        raise ValueError(f"{what} named {name!r} (the constraints: {', '.join(names)}); "
                         "give each a distinct name to sweep one")
    return hits[0]


def at_budget(problem: Problem, index: int, field: str, value: float) -> Problem:
    """``problem`` with constraint ``index``'s ``field`` (``"epsilon"`` or ``"delta"``) set to
    ``value`` (checked by the constraint itself: a ``SpecError`` for a value it refuses)."""
    c = problem.constraints[index]
    if field not in FIELDS:
        raise ValueError(f"a sweep varies one of {', '.join(FIELDS)}, not {field!r}")
    if field not in {f.name for f in dataclasses.fields(c)}:
        raise ValueError(f"constraint {c.name!r} ({type(c).__name__}) has no {field} budget")
    constraints = list(problem.constraints)
    constraints[index] = dataclasses.replace(c, **{field: float(value)})
    return dataclasses.replace(problem, constraints=tuple(constraints))


def _spec(problem, name, field, budgets, baselines, seed, quantize, options) -> dict[str, Any]:
    return jsonable({"format": FORMAT, "problem_hash": problem_hash(problem), "constraint": name,
                     "field": field, "budgets": list(budgets), "baselines": list(baselines),
                     "seed": seed, "quantize": quantize, "options": dict(sorted(options.items()))})


def _resume(out: Path, spec: dict[str, Any], budgets: tuple[float, ...]) -> dict[int, dict[str, Any]]:
    """The finished rows in ``out`` by budget index (none for a new folder); writes
    ``sweep.json`` for a new sweep. Raises ``ValueError`` for a folder that holds another one."""
    path = out / "sweep.json"
    if not path.exists():
        if (out / "frontier.csv").exists():
            raise ValueError(f"out: {out} holds a frontier.csv but no sweep.json; use another folder")
        write_json(path, spec)
        return {}
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"out: {path} cannot be read as a sweep ({e}); use another folder") from None
    if stored != spec:
        differ = sorted(k for k in {*spec, *stored} if stored.get(k) != spec.get(k)) \
            if isinstance(stored, dict) else ["format"]
        raise ValueError(f"out: {out} holds another sweep ({', '.join(differ)} differ); "
                         "use another folder, or delete it to start over")
    done: dict[int, dict[str, Any]] = {}
    index = {b: i for i, b in enumerate(budgets)}
    try:
        with open(out / "frontier.csv", encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        return done
    for row in rows:
        i = index.get(float(row["budget"]))
        if i is not None and row.get("certificate") and (out / row["certificate"]).is_file():
            done[i] = _typed(row)
    return done


def _typed(row: dict[str, str]) -> dict[str, Any]:
    """A row of ``frontier.csv`` with its numbers and flags parsed back."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key in ("status", "method", "certificate"):
            out[key] = value
        elif key == "ok":
            out[key] = value == "True"
        else:
            out[key] = float(value) if value not in ("", "None") else math.nan
    return out


def _baseline(problem: Problem, name: str) -> tuple[float, float]:
    """``(certified loss, parameter)`` of baseline ``name`` calibrated to ``problem``'s budgets,
    NaN where no setting meets them."""
    from diffpriv.mechanisms import MECHANISMS, calibrate

    try:
        ev = calibrate(problem, name)
    except ValueError:  # even the noisiest setting misses a budget, or it does not apply
        return math.nan, math.nan
    return float(ev.loss), float(ev.params[MECHANISMS[name].calibrate])


def _certify_batched(problem, solved, seed, quantize, meta, options):
    """``(certificate, bound, status, method)`` of a batched budget's table."""
    from diffpriv.certification import certify
    from diffpriv.solvers._optimizer import Optimizer

    table, bound, seconds = solved
    opt = Optimizer(**options)
    info = {"method": "pdhg", "batched": True, "seed": int(seed), "seconds": seconds,
            "lower_bound": json_number(bound), "options": jsonable(dataclasses.asdict(opt))}
    cert = certify(problem, table, repair=True, seed=seed,
                   meta={**meta, "optimizer": info}, quantize=quantize)
    gap = relative_gap(cert.loss, bound)
    return cert, bound, "converged" if gap <= opt.gap_tol else "step limit", "pdhg"


def _processes() -> tuple[bool, int]:
    """``(whether this is process 0, the number of processes)``: several after
    ``jax.distributed.initialize`` (one per host), where process 0 alone reads and writes ``out``."""
    import jax

    return jax.process_index() == 0, jax.process_count()


def _elsewhere(budget: float) -> dict[str, Any]:
    """The row, on a process other than 0, of a budget that process 0 read back from its folder."""
    return {"budget": budget, "certified_loss": math.nan, "lower_bound": math.nan, "gap": math.nan,
            "status": "read back by process 0", "method": "", "ok": True, "seconds": math.nan,
            "certificate": ""}


def check_baselines(names: Sequence[str]) -> tuple[str, ...]:
    """The baseline names, each a registered mechanism with a parameter to calibrate."""
    from diffpriv.mechanisms import MECHANISMS

    usable = sorted(n for n, m in MECHANISMS.items() if m.calibrate is not None)
    for name in names:
        if name not in usable:
            raise ValueError(f"baselines: {name!r} is not a mechanism that can be calibrated "
                             f"(those that can: {', '.join(usable)})")
    if len(set(names)) != len(names):
        raise ValueError("baselines: a mechanism is named twice")
    return tuple(names)


def _batch_by_default(problem: Problem, options: dict[str, Any]) -> bool:
    """Whether ``batch = None`` runs the budgets as one program: where PDHG would run each and
    the batch has more than one device, or an accelerator, to run on (one CPU runs a batch no
    faster than one budget after another, and these start warm)."""
    import jax

    from diffpriv.solvers._methods import route
    from diffpriv.solvers._optimizer import Optimizer

    opt = Optimizer(**options)
    if not problem.linear or route(problem, opt.method, gap_tol=opt.gap_tol)[0] != "pdhg":
        return False
    return jax.device_count() > 1 or jax.default_backend() != "cpu"


def _solve_batch(problems, index, options, seed, shard):
    """The tables and bounds of ``problems[i]`` for ``i`` in ``index``, as one program."""
    from diffpriv.solvers._optimizer import Optimizer, solve_budgets

    opt = Optimizer(**options)
    rest = {k: v for k, v in options.items() if k != "steps"}
    return solve_budgets([problems[i] for i in index], steps=opt.steps, seed=seed, shard=shard, **rest)


def sweep(problem: Problem, budgets: Sequence[float], *, constraint: str | None = None,
          field: str = "epsilon", out: str | Path | None = None, baselines: Sequence[str] = (),
          seed: int = 0, quantize: int | None = None, meta: dict[str, Any] | None = None,
          on_point: Callable[[int, dict[str, Any]], None] | None = None, batch: bool | None = None,
          shard: bool = True, **options) -> Frontier:
    """The privacy–utility frontier of ``problem`` over the budgets of one constraint (module
    docstring).

    Args:
      problem: the problem; its other constraints keep their budgets.
      budgets: the values of ``field``, distinct, solved in this order.
      constraint: the name of the constraint to vary (None: the only one).
      field: ``"epsilon"`` or ``"delta"``.
      out: a folder for the certificates, ``frontier.csv`` and the plots; a sweep into a folder
        that holds the same sweep resumes it.
      baselines: registered mechanisms with a parameter to calibrate (``"krr"``,
        ``"planar_laplace"``, ...), each calibrated to every budget.
      seed, quantize: as for :func:`~diffpriv.design`, at every budget.
      meta: recorded in every certificate, with ``meta["sweep"] = {"constraint", "field",
        "budget", "index"}``.
      on_point: called with ``(index, row)`` after each budget is finished (solved or read back).
      batch: solve every budget not yet done as one ``vmap``-ed PDHG program
        (:func:`~diffpriv.solvers.solve_budgets`; linear constraints only), then certify them one
        by one; None: where PDHG would run and there are several devices or an accelerator.
        A batched budget's ``status`` is ``"converged"`` when its certified gap is within
        ``gap_tol``, else ``"step limit"``.
      shard: a batch is split over every local device (``jax.sharding``).
      **options: the optimizer's settings (:class:`~diffpriv.solvers.Optimizer`).

    Raises:
      ValueError: a bad budget list, constraint, field, baseline, or an ``out`` holding another
        sweep; ``SpecError`` for a budget the constraint refuses; what :func:`~diffpriv.design`
        raises at a budget.

    Example:
      >>> import numpy as np, diffpriv as dp
      >>> X = dp.Domain(("a", "b", "c"))
      >>> problem = dp.Problem(X, X, 1 - np.eye(3), np.ones(3) / 3,
      ...                      constraints=(dp.LocalDP(epsilon=1.0),))
      >>> f = sweep(problem, [0.5, 1.0, 2.0], baselines=["krr"])
      >>> [round(r["certified_loss"], 6) for r in f.rows]  # k-RR is optimal here: (k−1)/(e^ε+k−1)
      [0.548137, 0.423883, 0.213014]
      >>> [round(r["krr_loss"], 6) for r in f.rows]
      [0.548137, 0.423883, 0.213014]
    """
    from diffpriv._design import design

    if options.get("steps", 0) is None:  # as design reads it: the optimizer's default
        del options["steps"]
    budgets = tuple(float(b) for b in budgets)
    if not budgets:
        raise ValueError("budgets: give at least one")
    if len(set(budgets)) != len(budgets):
        raise ValueError("budgets: a value appears twice")
    index = constraint_index(problem, constraint)
    name = problem.constraints[index].name
    problems = [at_budget(problem, index, field, b) for b in budgets]  # every budget checked first
    baselines = check_baselines(list(baselines))
    out = None if out is None else Path(out)
    spec = _spec(problem, name, field, budgets, baselines, seed, quantize, options)
    lead, processes = _processes()
    done = {} if out is None or not lead else _resume(out, spec, budgets)
    if processes > 1:  # every process must solve the same budgets: process 0's folder decides
        from jax.experimental import multihost_utils

        flags = multihost_utils.broadcast_one_to_all(np.asarray([i in done for i in range(len(budgets))]))
        done = done if lead else {int(i): _elsewhere(budgets[i]) for i in np.flatnonzero(flags)}
    resumed = len(done)
    rows: dict[int, dict[str, Any]] = dict(done)
    batch = _batch_by_default(problem, options) if batch is None else batch
    batched = {}
    if batch:
        if not problem.linear:
            raise ValueError("batch: a batched sweep needs linear constraints (PDHG)")
        todo = [i for i in range(len(budgets)) if i not in rows]
        if todo:
            start = time.perf_counter()
            tables, bounds = _solve_batch(problems, todo, options, seed, shard)
            share = (time.perf_counter() - start) / len(todo)
            batched = {i: (t, float(lb), share) for i, t, lb in zip(todo, tables, bounds, strict=True)}
    previous = None
    for i, (b, p) in enumerate(zip(budgets, problems, strict=True)):
        if i in rows:
            if on_point is not None:
                on_point(i, rows[i])
            continue
        start = time.perf_counter()
        point = {"constraint": name, "field": field, "budget": b, "index": i}
        if i in batched:
            cert, bound, status, method = _certify_batched(p, batched[i], seed, quantize,
                                                           {**(meta or {}), "sweep": point}, options)
            start -= batched[i][2]
        else:
            warm = previous if previous is not None and previous.method in ("pdhg", "highs") else None
            d = design(p, seed=seed, quantize=quantize, init=warm, meta={**(meta or {}), "sweep": point},
                       **options)
            previous = d.result
            cert, bound, status, method = d.certificate, float(d.result.lower_bound), d.result.status, \
                d.result.method
        gap = relative_gap(cert.loss, bound)
        row: dict[str, Any] = {"budget": b, "certified_loss": float(cert.loss), "lower_bound": bound,
                               "gap": float(gap), "status": status, "method": method, "ok": bool(cert.ok),
                               "seconds": 0.0, "certificate": ""}
        for base in baselines:
            row[f"{base}_loss"], row[f"{base}_param"] = _baseline(p, base)
        row["seconds"] = time.perf_counter() - start
        rows[i] = row
        if out is not None and lead:
            row["certificate"] = f"certificates/budget-{i:03d}.json"
            cert.save(out / row["certificate"])
            write_csv(out / "frontier.csv", [rows[k] for k in sorted(rows)])
        if on_point is not None:
            on_point(i, row)
    ordered = tuple(rows[i] for i in range(len(budgets)))
    frontier = Frontier(name, field, budgets, ordered, baselines, resumed, out)
    if out is not None and lead:
        from diffpriv.io._frontier import plot_frontier

        plot_frontier(frontier, problem.objective.text, [out / "frontier.png", out / "frontier.pdf"])
    return frontier
