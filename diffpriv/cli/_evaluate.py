"""``evaluate``: a named mechanism (a baseline or one of the papers') built, certified as is
or calibrated to the config's budgets, and optionally compared with the optimized table.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, NoReturn

import numpy as np
import typer
from rich.markup import escape

from diffpriv.certification._schema import admit_certificate
from diffpriv.cli._common import _check_out_dir, _fail, _load, _meta, _user_errors, console
from diffpriv.cli._summary import _number_text, _print_summary, _summary
from diffpriv.cli._tupling import (
    NO_TUPLING_CERTIFICATE,
    TUPLING,
    TUPLING_PARAMS,
    _print_tupling,
    _tupling,
    _tupling_params,
)
from diffpriv.config import OptimizerOptions
from diffpriv.io._export import jsonable, write_json
from diffpriv.problems._problem import Problem
from diffpriv.problems._size import admit


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
    details = ev.certificate.meta["mechanism"].get("details") or {}
    if "loss_under_estimate" in details:  # the coupling mechanism: what it expected to lose
        extra["loss_under_estimate"] = details["loss_under_estimate"]
    return ev, {"mechanism": name, "params": ev.params, **extra}


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
    from diffpriv._compare import compare, format_comparison
    from diffpriv._design import InfeasibleError, design  # imports JAX
    from diffpriv.certification import RepairError, TableError
    from diffpriv.mechanisms import MECHANISMS, CouplingError, ProfileLPError

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
    accept_estimate: Annotated[
        bool, typer.Option(help="tupling: exit 0 on a Monte Carlo upper bound of δ that meets the "
                           "budget (an estimate at the chosen confidence, not a proof).")
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
    only. Its exit status states what was proved: 0 when the exact δ (rounded up) meets the
    DistP budget; where the tuples are too many to enumerate the Monte Carlo bound is an
    estimate, and exit 0 then needs --accept-estimate. --list shows every mechanism's parameters.
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
        summary = _tupling(problem, params, accept_estimate)
        _print_tupling(summary, title)
    elif mechanism is not None:
        start = time.perf_counter()
        ev, fields = _evaluate_table(problem, mechanism, params, calibrate)
        seconds = {"calibrate" if calibrate else "build and certify": time.perf_counter() - start}
        meta = jsonable({**_meta("evaluate", config), **ev.certificate.meta})
        if calibrate:
            meta["mechanism"]["calibrated"] = jsonable(fields["calibrated"])
        # The certificate of the table as built, rounded to counts over 2^53 (what a deployment
        # samples); not repaired: evaluate certifies a mechanism as it is.
        from diffpriv.certification import DEFAULT_BITS, certify

        table = ev.certificate.table
        cert = dataclasses.replace(certify(problem, table, repair=False, quantize=DEFAULT_BITS), meta=meta)
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
