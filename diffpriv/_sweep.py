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
``frontier.csv`` and its certificate, ``certificates/budget-NNN.json``, verifies for the sweep's
problem at that budget, so none is lost or solved twice. Nothing else of the row is trusted: its
numbers are read from the certificate and the baselines calibrated again, and a budget whose
certificate is missing, unreadable, of another problem or budget, or fails verification is
solved again (and reported). Every file is written atomically (a temporary file, then a
rename). A folder that holds another sweep, or a ``frontier.csv`` that is not a sweep's (a
column missing or unknown, a budget that is not a number or not the sweep's), is refused. With
several processes (``jax.distributed.initialize``, one per host, each running the same sweep) a
batch runs over all their devices and process 0 alone reads and writes the folder.
Budgets run in the order given, each warm-started from the previous budget's run
where the same solver runs both: HiGHS from its last basis (the dual simplex then takes a few
pivots), PDHG from its iterates, the interior point from its outputs and (where the budget grows)
its last iterate; the other solvers start cold.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from diffpriv._files import FileFormatError, json_number, read_text, write_csv
from diffpriv._gap import relative_gap
from diffpriv.io._export import jsonable, write_json
from diffpriv.problems._json import hash_matches, problem_hash
from diffpriv.problems._problem import Problem
from diffpriv.problems._user import runs_utilities

__all__ = ["Frontier", "at_budget", "budget_grid", "constraint_index", "sweep"]

FORMAT = "diffpriv-sweep/1"
FIELDS = ("epsilon", "delta")
"""The budgets a sweep can vary."""
COLUMNS = ("budget", "certified_loss", "lower_bound", "gap", "price", "status", "method", "ok", "seconds",
           "certificate")
"""``frontier.csv``'s columns, then ``<baseline>_loss`` and ``<baseline>_param`` per baseline."""
OPTIONAL = ("price",)
"""Columns a ``frontier.csv`` written before them lacks: it resumes all the same (the rows are
rebuilt from the certificates)."""
MAX_FRONTIER_BYTES = 2**26
"""Largest ``frontier.csv`` read back to resume, in bytes (a row takes about 200 bytes, and 40
more per baseline)."""


@dataclasses.dataclass(frozen=True)
class Frontier:
    """A finished sweep.

    Attributes:
      constraint: the name of the constraint whose budget varied; ``field`` which budget
        (``"epsilon"`` or ``"delta"``).
      budgets: the values, in the order given.
      rows: one dict per budget, in that order, with the keys of :data:`COLUMNS` (``certificate``
        is the file's path relative to ``out``, or ``""`` without one; ``price`` the rate at which
        the optimum falls as the budget grows, from the multipliers where HiGHS solved the LP, NaN
        elsewhere: :attr:`~diffpriv.solvers.OptimizeResult.prices`) and, per baseline,
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

    def to_pandas(self):
        """The rows as a pandas ``DataFrame``, one per budget in the order given (pandas is not a
        dependency of diffpriv: ``pip install pandas``)."""
        try:
            import pandas
        except ImportError:
            raise ImportError("Frontier.to_pandas needs pandas (pip install pandas)") from None
        return pandas.DataFrame(list(self.rows))

    def plot(self, path: str | Path | None = None, *, ylabel: str = "certified loss",
             title: str | None = None, log_loss: bool = False, paper: bool = False):
        """The frontier as a matplotlib ``Figure`` (the certified losses and bounds over the
        budgets, each baseline beside them; the loss axis logarithmic with ``log_loss``; one
        panel a column of a paper wide with ``paper``), also written to ``path`` where given
        (PNG, PDF or SVG by its suffix; a PDF is always drawn for a paper)."""
        from diffpriv.io._frontier import frontier_figure, plot_frontier

        if path is None:
            return frontier_figure(self, ylabel, title=title, log_loss=log_loss, paper=paper)
        return plot_frontier(self, ylabel, [Path(path)], title=title, log_loss=log_loss)


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
    if field not in FIELDS:
        raise ValueError(f"a sweep varies one of {', '.join(FIELDS)}, not {field!r}")
    return problem.with_budget(problem.constraints[index].name, value, field)


def _spec(problem, name, field, budgets, baselines, seed, quantize, options) -> dict[str, Any]:
    return jsonable({"format": FORMAT, "problem_hash": problem_hash(problem), "constraint": name,
                     "field": field, "budgets": list(budgets), "baselines": list(baselines),
                     "seed": seed, "quantize": quantize, "options": dict(sorted(options.items()))})


def _resume(out: Path, spec: dict[str, Any], problems: Sequence[Problem], baselines: Sequence[str],
            on_redo: Callable[[int, str], None] | None, problem: Problem | None = None
            ) -> dict[int, dict[str, Any]]:
    """The finished rows in ``out`` by budget index (none for a new folder); writes
    ``sweep.json`` for a new sweep. A row of ``frontier.csv`` says only which budgets were
    finished: each is kept when its certificate verifies for ``problems[i]`` (:func:`_kept`), else
    ``on_redo(i, why)`` is called and the budget is solved again.

    Raises:
      ValueError: a folder that holds another sweep, or a ``frontier.csv`` that is not one a sweep
        writes (:func:`_finished`), as one line naming the file.
    """
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
    old = stored.get("problem_hash") if isinstance(stored, dict) else None
    if problem is not None and old != spec["problem_hash"] and hash_matches(problem, old):
        spec = dict(spec, problem_hash=old)  # a folder written with the legacy hash
    if stored != spec:
        differ = sorted(k for k in {*spec, *stored} if stored.get(k) != spec.get(k)) \
            if isinstance(stored, dict) else ["format"]
        raise ValueError(f"out: {out} holds another sweep ({', '.join(differ)} differ); "
                         "use another folder, or delete it to start over")
    if not (out / "frontier.csv").exists():
        return {}
    budgets = tuple(float(b) for b in spec["budgets"])
    columns = [*COLUMNS, *(f"{b}_{k}" for b in baselines for k in ("loss", "param"))]
    done: dict[int, dict[str, Any]] = {}
    for i, row in _finished(out / "frontier.csv", budgets, columns):
        kept, why = _kept(out, i, row, problems[i], budgets[i], baselines, spec)
        if kept is not None:
            done[i] = kept
        elif on_redo is not None:
            on_redo(i, why)
    return done


def _finished(path: Path, budgets: tuple[float, ...], columns: list[str]) -> list[tuple[int, dict[str, str]]]:
    """``(budget index, row)`` of each row of the ``frontier.csv`` at ``path``, read within
    :data:`MAX_FRONTIER_BYTES`: a file this sweep wrote has exactly ``columns``, as many fields
    in each row, and each of ``budgets`` at most once.

    Raises:
      ValueError: ``"out: <path>: <what is wrong>; ..."``, naming the line and the column.
    """
    def bad(what: str) -> ValueError:
        return ValueError(f"out: {path}: {what}; use another folder, or delete it to start over")

    try:
        text = read_text(path, limit=MAX_FRONTIER_BYTES, what="a frontier.csv")
    except FileFormatError as e:
        raise bad(e.reason) from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    index = {b: i for i, b in enumerate(budgets)}
    found: dict[int, dict[str, str]] = {}
    try:
        header = reader.fieldnames
        if not header:
            raise bad("empty (no header line)")
        names = ", ".join(_short(h) for h in header)
        for name in columns:
            if name not in header and name not in OPTIONAL:
                raise bad(f"no column {name!r} (columns: {names})")
        for name in header:
            if name not in columns:
                raise bad(f"unknown column {_short(name)} (columns: {names})")
            if header.count(name) > 1:
                raise bad(f"column {name!r} appears twice")
        for row in reader:
            line = reader.line_num
            if None in row or any(v is None for v in row.values()):
                raise bad(f"line {line}: not as many fields as the header's {len(header)}")
            try:
                i = index.get(float(row["budget"]))
            except ValueError:
                raise bad(f"line {line}: budget: not a number: {_short(row['budget'])}") from None
            if i is None:
                raise bad(f"line {line}: budget: {_short(row['budget'])} is not one of the sweep's budgets")
            if i in found:
                raise bad(f"line {line}: budget: {_short(row['budget'])} appears twice")
            found[i] = row
    except csv.Error as e:
        raise bad(f"line {reader.line_num}: not CSV ({e})") from None
    return list(found.items())


def _short(value: str, width: int = 40) -> str:
    """``repr(value)`` cut to ``width`` characters: a message stays one short line."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _price(prices: Any, name: str, field: str) -> float:
    """The price of ``name``'s ``field`` in ``prices`` (``OptimizeResult.prices``, or as a
    certificate's meta keeps it), NaN where there is none."""
    try:
        return float(prices[name][field])
    except (TypeError, KeyError, ValueError):
        return math.nan


def _kept(out: Path, i: int, row: dict[str, str], problem: Problem, budget: float,
          baselines: Sequence[str], spec: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """``(row, "")``: budget ``i``'s row rebuilt from its certificate
    ``out/certificates/budget-NNN.json`` (the only file a row may name: another path, such as
    ``/etc/passwd``, is never opened) once it is read within the certifier's limits and
    verifies for ``problem`` (the sweep's, at that budget): the loss, ``ok``, and the optimizer's
    lower bound, status and method from the certificate, the baselines calibrated again, and
    only ``seconds`` (informational) from the row. ``(None, why)`` when the budget must be solved
    again: also for a certificate whose table misses a budget (``ok`` false), which a new run
    may improve on."""
    from diffpriv.certification import Certificate, verify
    from diffpriv.certification._schema import CertificateFormatError, read_certificate
    from diffpriv.problems._size import SizeError

    name = f"certificates/budget-{i:03d}.json"
    path = out / name
    if row["certificate"] != name:
        return None, (f"{out / 'frontier.csv'}: budget {budget!r} names {_short(row['certificate'])} "
                      f"as its certificate, not {name}")
    try:
        data = read_certificate(path)
        report = verify(data, problem=problem)
    except FileFormatError as e:
        return None, f"{path}: {e.reason}"
    except (CertificateFormatError, SizeError) as e:
        return None, f"{path}: {e}"
    if not report.ok:  # one line a failure: name the first
        more = f" (and {len(report.failures) - 1} more)" if len(report.failures) > 1 else ""
        return None, f"{path}: does not verify: {report.failures[0]}{more}"
    cert = Certificate.from_dict(data)
    info = cert.meta.get("optimizer")
    if not isinstance(info, Mapping) or not isinstance(info.get("method"), str):
        return None, f"{path}: meta.optimizer: no method (not a certificate a sweep writes)"
    bound = math.nan if info.get("lower_bound") is None else float(info["lower_bound"])
    gap = relative_gap(cert.loss, bound)
    status = info.get("status")
    if status is None and info.get("batched") is True:  # a batch's status, as _certify_batched says it
        tol = (info.get("options") or {}).get("gap_tol")
        if isinstance(tol, int | float) and not isinstance(tol, bool):
            status = "converged" if gap <= tol else "step limit"
    if not isinstance(status, str):
        return None, f"{path}: meta.optimizer: no status (not a certificate a sweep writes)"
    try:
        seconds = float(row["seconds"])
    except ValueError:
        seconds = math.nan
    kept: dict[str, Any] = {"budget": budget, "certified_loss": float(cert.loss),
                            "lower_bound": bound, "gap": float(gap),
                            "price": _price(info.get("prices"), spec["constraint"], spec["field"]),
                            "status": status,
                            "method": info["method"], "ok": bool(cert.ok),
                            "seconds": seconds if 0 <= seconds < math.inf else math.nan,
                            "certificate": name}
    for base in baselines:
        kept[f"{base}_loss"], kept[f"{base}_param"] = _baseline(problem, base)
    return kept, ""


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
    ``jax.distributed.initialize`` (one per host), where process 0 alone reads and writes ``out``.
    One process where JAX is not loaded (a sweep whose runs need none)."""
    jax = sys.modules.get("jax")
    if jax is None:
        return True, 1
    return jax.process_index() == 0, jax.process_count()


def _elsewhere(budget: float) -> dict[str, Any]:
    """The row, on a process other than 0, of a budget that process 0 read back from its folder."""
    return {"budget": budget, "certified_loss": math.nan, "lower_bound": math.nan, "gap": math.nan,
            "price": math.nan, "status": "read back by process 0", "method": "", "ok": True,
            "seconds": math.nan,
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
    from diffpriv.solvers._methods import route
    from diffpriv.solvers._optimizer import Optimizer

    opt = Optimizer(**options)
    if not problem.linear or route(problem, opt.method, gap_tol=opt.gap_tol)[0] != "pdhg":
        return False
    import jax  # (PDHG runs: JAX loads with it anyway)

    return jax.device_count() > 1 or jax.default_backend() != "cpu"


def _solve_batch(problems, index, options, seed, shard):
    """The tables and bounds of ``problems[i]`` for ``i`` in ``index``, as one program."""
    from diffpriv.solvers._optimizer import Optimizer, solve_budgets

    opt = Optimizer(**options)
    rest = {k: v for k, v in options.items() if k != "steps"}
    return solve_budgets([problems[i] for i in index], steps=opt.steps, seed=seed, shard=shard, **rest)


@runs_utilities  # the caller's own problem: a utility it names is theirs to run
def sweep(problem: Problem, budgets: Sequence[float], *, constraint: str | None = None,
          field: str = "epsilon", out: str | Path | None = None, baselines: Sequence[str] = (),
          seed: int = 0, quantize: int | None = None, meta: dict[str, Any] | None = None,
          on_point: Callable[[int, dict[str, Any]], None] | None = None,
          on_redo: Callable[[int, str], None] | None = None, batch: bool | None = None,
          shard: bool = True, log_loss: bool = False, **options) -> Frontier:
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
      on_redo: called with ``(index, why)``, before anything is solved, for each budget that
        ``out``'s ``frontier.csv`` lists as finished but whose certificate is not kept (missing,
        unreadable, of another problem or budget, failing verification: ``why`` says which, in
        one line); that budget is solved again.
      batch: solve every budget not yet done as one ``vmap``-ed PDHG program
        (:func:`~diffpriv.solvers.solve_budgets`; linear constraints only), then certify them one
        by one; None: where PDHG would run and there are several devices or an accelerator.
        A batched budget's ``status`` is ``"converged"`` when its certified gap is within
        ``gap_tol``, else ``"step limit"``.
      shard: a batch is split over every local device (``jax.sharding``).
      log_loss: ``out``'s figures with a logarithmic loss axis.
      **options: the optimizer's settings (:class:`~diffpriv.solvers.Optimizer`).

    Raises:
      ValueError: a bad budget list, constraint, field, baseline, an ``out`` holding another
        sweep or a ``frontier.csv`` that is not a sweep's (one line naming it); ``SpecError``
        for a budget the constraint refuses; what :func:`~diffpriv.design` raises at a budget.

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
    from diffpriv.solvers._methods import declares

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
    done = {} if out is None or not lead else _resume(out, spec, problems, baselines, on_redo, problem)
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
            price = math.nan
            start -= batched[i][2]
        else:
            resumes = previous is not None and previous.state is not None  # Clarabel's has none
            warm = previous if resumes and declares(previous.method, "resumable") else None
            d = design(p, seed=seed, quantize=quantize, init=warm, meta={**(meta or {}), "sweep": point},
                       **options)
            if d.result.status == "interrupted":  # Ctrl-C: this budget is not done (the caller says so)
                raise KeyboardInterrupt
            previous = d.result
            cert, bound, status, method = d.certificate, float(d.result.lower_bound), d.result.status, \
                d.result.method
            price = _price(d.result.prices, name, field)
        gap = relative_gap(cert.loss, bound)
        row: dict[str, Any] = {"budget": b, "certified_loss": float(cert.loss), "lower_bound": bound,
                               "gap": float(gap), "price": price, "status": status, "method": method,
                               "ok": bool(cert.ok),
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

        if resumed:  # the rows read back, as rebuilt from their certificates, replace the file's
            write_csv(out / "frontier.csv", list(ordered))
        from diffpriv.io._frontier import loss_label

        plot_frontier(frontier, loss_label(problem), [out / "frontier.png", out / "frontier.pdf"],
                      log_loss=log_loss)
    return frontier
