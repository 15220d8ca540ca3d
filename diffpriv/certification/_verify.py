"""Re-checking a certificate from scratch, trusting none of its numbers.

:func:`verify` first checks the certificate's format (:func:`._schema.check_certificate`:
every key present, of the right type and shape), rebuilds the problem from the stored dict,
recomputes its hash, validates the table (shape, finiteness, non-negativity, row sums within
``16·n_out·u`` of 1, support), recomputes every level, witness and loss with the same float64
code as :func:`certify`, and compares each stored claim with the recomputation (relative
tolerance ``1e-9``, absolute ``1e-15``). It fails if a claim disagrees, if a recomputed level
exceeds its budget minus the safety margin (:mod:`._safety`), if the optimizer's recorded
lower bound on the optimum exceeds the loss of a table that meets every budget, or — with
``exact=True`` — if exact rational arithmetic cannot prove a budget (:mod:`._exact`).
A certificate too large for this machine to check is not a failed claim: verify raises.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from diffpriv.certification._arrays import as_read
from diffpriv.certification._certificate import QUANTIZE_ROUNDS, Certificate
from diffpriv.certification._compare import problem_difference
from diffpriv.certification._cost import admit_check
from diffpriv.certification._exact import MAX_EXACT_ENTRIES, exact_holds
from diffpriv.certification._levels import comparison_levels
from diffpriv.certification._quantize import MAX_BITS, dyadic_counts
from diffpriv.certification._safety import table_problems
from diffpriv.certification._schema import (
    CertificateFormatError,
    CheckedCertificate,
    check_certificate,
    read_certificate,
)
from diffpriv.certification._summary import ConstraintLevel, summarize
from diffpriv.measures._transport import deferred_triangle_checks
from diffpriv.problems._blocks import budgets
from diffpriv.problems._checks import SpecError
from diffpriv.problems._json import hash_matches
from diffpriv.problems._problem import Problem
from diffpriv.problems._size import SizeError, admit
from diffpriv.problems._user import running_utilities

__all__ = ["VerifyReport", "verify", "RTOL", "ATOL", "UNCHECKED"]

REPAIR_STRATEGIES = ("none", "violation", "uniform")
"""The repair strategies a certificate may name (:mod:`._repair`)."""

UNCHECKED = ("versions", "seed", "meta")
"""Fields verify does not check: free information recorded as given (``meta.optimizer``'s
``lower_bound`` excepted, which must not exceed the certified loss; a mechanism's parameters
under ``meta.mechanism`` are checked by :func:`diffpriv.mechanisms.check_parameters`)."""

RTOL = 1e-9
"""Relative tolerance between a stored number and its recomputation."""
ATOL = 1e-15
"""Absolute tolerance between a stored number and its recomputation (for values near 0)."""


@dataclasses.dataclass(frozen=True, eq=False)
class VerifyReport:
    """Outcome of :func:`verify`.

    Attributes:
      ok: no failure.
      failures: one readable line per failed check.
      levels: the recomputed :class:`ConstraintLevel` of every constraint (empty when the
        problem or the table could not be read).
      exact: whether the exact check ran.
      problem: the problem rebuilt from the certificate (``None`` when it could not be read).
      mismatch: where a ``problem`` was given and the certificate is of another, the first field
        that differs (its claims were then not checked); else ``None``.
    """

    ok: bool
    failures: list[str]
    levels: tuple[ConstraintLevel, ...] = ()
    exact: bool = False
    problem: Problem | None = None
    mismatch: str | None = None


def _close(stored: Any, value: float) -> bool:
    try:
        s = float(stored)
    except (TypeError, ValueError, OverflowError):
        return False
    if math.isnan(s) or math.isnan(value):
        return False
    if math.isinf(s) or math.isinf(value):
        return s == value
    return abs(s - value) <= RTOL * max(abs(s), abs(value)) + ATOL


def _load(obj: Certificate | Mapping | str | os.PathLike) -> dict[str, Any]:
    if isinstance(obj, Certificate):  # as a reader of the saved files would get it
        return as_read(obj.to_dict(arrays=True))
    if isinstance(obj, Mapping):
        return dict(obj)
    return read_certificate(obj)  # within the size and memory limits, with its arrays file


def _check_constraint(stored: Any, c: ConstraintLevel) -> list[str]:
    """Claims about one constraint that disagree with the recomputation ``c``."""
    where = f"constraints[{c.index}] ({c.name!r})"
    if not isinstance(stored, Mapping):
        return [f"{where}: missing or malformed"]
    out = []
    for key in ("index", "kind", "name", "ok", "worst", "n_comparisons", "n_failed"):
        if stored.get(key) != getattr(c, key):
            out.append(f"{where}.{key}: stored {stored.get(key)!r}, recomputed {getattr(c, key)!r}")
    for key in ("epsilon", "delta", "level", "margin", "epsilon_at_delta"):
        value = getattr(c, key)
        if value is None:
            if stored.get(key) is not None:
                out.append(f"{where}.{key}: stored {stored.get(key)!r}, expected null")
        elif not _close(stored.get(key), value):
            out.append(f"{where}.{key}: stored {stored.get(key)!r}, recomputed {value!r}")
    witness, ref = stored.get("witness"), c.witness
    if ref is None or not isinstance(witness, Mapping):
        if witness != ref:
            out.append(f"{where}.witness: does not match the recomputation")
        return out
    if witness.get("pair") != ref["pair"]:
        out.append(f"{where}.witness.pair: stored {witness.get('pair')!r}, "
                   f"recomputed {ref['pair']!r}")
    for side in ("P", "Q"):
        got = np.asarray(witness.get(side, []), dtype=np.float64).ravel()
        want = np.asarray(ref[side])
        if got.shape != want.shape or not np.allclose(got, want, rtol=RTOL, atol=ATOL):
            out.append(f"{where}.witness.{side}: does not match the recomputed output law")
    return out


def _check_quantization(d: Mapping, table: np.ndarray) -> list[str]:
    """A certificate that says its table is dyadic over ``2^bits`` must hold such a table."""
    q = d.get("quantization")
    if q is None:
        return []
    bits = q.get("bits")
    if not (isinstance(bits, int) and 1 <= bits <= MAX_BITS):
        return [f"quantization.bits: {bits!r} is not an integer in [1, {MAX_BITS}]"]
    if dyadic_counts(table, bits) is None:
        return [f"quantization: the table is not integer counts over 2^{bits} summing to exactly "
                f"2^{bits} in every row"]
    return []


def _check_repair(d: Mapping, problem: Problem, table: np.ndarray) -> list[str]:
    """The stored repair must be a weight in [0, 1] and a ν the table can contain (a dyadic
    table may sit up to ``QUANTIZE_ROUNDS`` counts a round below ``t·ν``)."""
    rep = d.get("repair")
    if not isinstance(rep, Mapping):
        return ["repair: missing"]
    t, nu = float(rep.get("t", math.nan)), rep.get("nu")
    if not 0.0 <= t <= 1.0:
        return [f"repair.t: {t!r} is not in [0, 1]"]
    strategy = rep.get("strategy")
    if strategy not in REPAIR_STRATEGIES or (strategy == "none") != (t == 0.0):
        return [f"repair.strategy: {strategy!r} with t = {t!r}; expected 'none' exactly when t = 0, "
                f"else one of {', '.join(REPAIR_STRATEGIES[1:])}"]
    if t == 0.0:
        return [] if nu is None else ["repair.nu: given although t = 0"]
    nu = np.asarray(nu, dtype=np.float64)
    common = problem.support_mask().all(axis=(0, 1))
    if nu.shape != common.shape or np.any(nu < 0) or abs(nu.sum() - 1.0) > 1e-12:
        return ["repair.nu: not a distribution over the outputs"]
    if np.any((nu > 0) & ~common):
        return ["repair.nu: puts mass on an output some row may not use"]
    q = d.get("quantization")
    bits = q.get("bits") if isinstance(q, Mapping) else None
    slack = 2.0 * QUANTIZE_ROUNDS * 2.0**-bits if isinstance(bits, int) and 1 <= bits <= MAX_BITS else 0.0
    if np.any(table < t * nu * (1.0 - 1e-12) - slack):
        return ["repair: the table is not of the form (1 − t)·A + t·ν (an entry is below t·ν[y])"]
    return []


def _check_lower_bound(d: Mapping, loss: float) -> list[str]:
    """The optimizer's recorded lower bound on the optimum (``meta.optimizer.lower_bound``) can
    be no larger than the loss of a table that meets every budget (up to the tolerances)."""
    meta = d.get("meta")
    opt = meta.get("optimizer") if isinstance(meta, Mapping) else None
    if not isinstance(opt, Mapping) or opt.get("lower_bound") is None:
        return []
    try:
        bound = float(opt["lower_bound"])
    except (TypeError, ValueError, OverflowError):
        return [f"meta.optimizer.lower_bound: not a number: {opt['lower_bound']!r}"]
    if math.isnan(bound) or bound <= loss + RTOL * abs(loss) + ATOL:
        return []
    return [f"meta.optimizer.lower_bound: {bound!r} is above the certified loss {loss!r}, which "
            "a table meeting every budget attains: the bound is false"]


def admit_exact(table: np.ndarray) -> None:
    """Raises :class:`SizeError` when ``table`` has more entries than the exact check takes
    (:data:`._exact.MAX_EXACT_ENTRIES`)."""
    if table.size > MAX_EXACT_ENTRIES:
        raise SizeError(f"exact arithmetic: the table has {table.size:,} entries, more than the "
                        f"{MAX_EXACT_ENTRIES:,} the exact check takes (it would run for hours); "
                        "check it in float64 only")


def verify(obj: Certificate | Mapping | str | os.PathLike, *, exact: bool = False,
           max_seconds: float | None = None, max_memory: int | None = None,
           problem: Problem | None = None, run_utility: bool = False) -> VerifyReport:
    """Re-checks a certificate from scratch.

    Args:
      obj: a :class:`Certificate`, its ``to_dict()`` (or ``to_dict(arrays=True)``) form, or the
        path of a saved one (read with its arrays file, if it has one:
        :func:`._schema.read_certificate`; a missing, unreadable or mismatched arrays file is a
        failure ``certificate: cannot be read (...)``).
      exact: also prove every budget in exact rational arithmetic (slower; the gold standard
        for deployed tables).
      max_seconds: refuse (``SizeError``, before any level is computed) a certificate whose
        re-check is estimated to take longer (:func:`._cost.certify_cost`); ``None``: no limit.
        The problem's metrics are checked for the triangle inequality (``O(n³)``) only after
        this admission, which counts them.
      max_memory: likewise for its estimated peak bytes; ``None``: the machine's limit
        (:func:`diffpriv.problems.memory_limit`).
      problem: the problem the certificate must be for (a user's config, built with
        :func:`diffpriv.config.load_config`): domains, loss, prior, items, profiles,
        constraints, budgets and objective alike. A certificate for another problem fails
        with the first field that differs (``problem.constraints[0].epsilon: the certificate
        has 2.0, the config 1.0``) before anything else is checked.
      run_utility: run a user utility the certificate names (its objective ``kind = "python"``:
        code in a file) to recompute the loss; without it, that one claim fails as not checked
        (saying so) and every other is checked as always.

    Returns:
      A :class:`VerifyReport`; ``ok`` is True iff every check passed. A certificate that does
      not hold what the format says (a key missing or unknown, of the wrong type or shape)
      fails with the one line of :class:`._schema.CertificateFormatError`.

    Raises:
      SizeError: the certificate's problem is too large for this machine's memory to check
        (:func:`diffpriv.problems.admit` for the certifier), its estimated time or memory is
        above ``max_seconds`` or ``max_memory``, or, with ``exact``, its table has more than
        :data:`._exact.MAX_EXACT_ENTRIES` entries: that says nothing of its claims.
      MemoryError: the memory ran out all the same.
    """
    with running_utilities(run_utility):
        return _verified(obj, exact, max_seconds, max_memory, problem)


def _verified(obj, exact: bool, max_seconds: float | None, max_memory: int | None,
              problem: Problem | None) -> VerifyReport:
    """:func:`verify`'s checks."""
    try:
        d = _load(obj)
    except (OSError, ValueError, TypeError, RecursionError) as e:
        return VerifyReport(False, [f"certificate: cannot be read ({type(e).__name__}: {e})"])
    try:
        with deferred_triangle_checks() as triangles:  # O(n³) each: after the admission
            checked = check_certificate(d)
        if problem is not None:
            differs = problem_difference(checked.problem, problem)
            if differs:
                return VerifyReport(False, [f"not the certificate of the given problem: {differs}"],
                                    (), exact, checked.problem, mismatch=differs)
        admit_check(checked.problem, exact=exact, max_seconds=max_seconds, max_memory=max_memory)
        admit(checked.problem, "certifier")
        if exact:
            admit_exact(checked.table)
        for triangle in triangles:
            try:
                triangle()
            except ValueError as e:  # what check_certificate would have said, had it run there
                return VerifyReport(False, [f"problem.{e}"], (), exact)
        return _verify(checked, exact)
    except CertificateFormatError as e:  # the format's one line, naming the field
        return VerifyReport(False, [str(e)], (), exact)
    except SizeError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError,
            RecursionError) as e:
        return VerifyReport(False, [f"certificate: malformed ({type(e).__name__}: {e})"], (), exact)


def _verify(checked: CheckedCertificate, exact: bool) -> VerifyReport:
    d, problem, table = checked  # format, keys, types and shapes checked
    fail: list[str] = []
    if not hash_matches(problem, d.get("problem_hash")):
        fail.append("problem_hash: does not match the stored problem")
    with np.errstate(over="ignore", invalid="ignore"):  # a row sum of inf is reported as such
        bad = table_problems(problem, table)
    if bad:
        return VerifyReport(False, fail + bad, (), exact)

    blocks = problem.blocks()
    levels = summarize(problem, blocks, comparison_levels(problem, table, blocks))
    stored = d.get("constraints")
    if not isinstance(stored, list) or len(stored) != len(levels):
        fail.append(f"constraints: expected {len(levels)} entries")
    else:
        for s, c in zip(stored, levels, strict=True):
            fail += _check_constraint(s, c)
    if d.get("objective") != problem.objective.to_json():
        fail.append(f"objective: stored {d.get('objective')!r}, "
                    f"problem says {problem.objective.to_json()!r}")
    try:
        loss = problem.objective_value(table)
    except SpecError as e:  # a user utility not run (diffpriv.problems._user): the loss is not checked
        fail.append(str(e))
        loss = None
    for key, value in (("loss", loss),
                       ("expected_loss", problem.expected_loss(table)),
                       ("worst_loss", problem.worst_loss(table))):
        if value is not None and not _close(d.get(key), value):
            fail.append(f"{key}: stored {d.get(key)!r}, recomputed {value!r}")
    fail += _check_repair(d, problem, table)
    fail += _check_quantization(d, table)

    all_ok = all(c.ok for c in levels)
    if all_ok and loss is not None:
        fail += _check_lower_bound(d, loss)
    if d.get("ok") is not all_ok:
        fail.append(f"ok: stored {d.get('ok')!r}, recomputed {all_ok}")
    for c in levels:
        if not c.ok:
            fail.append(f"constraints[{c.index}] ({c.name!r}): {c.n_failed} of {c.n_comparisons} "
                        "comparisons exceed the budget minus the safety margin "
                        f"(level {c.level!r})")
    if exact:
        proven = exact_holds(problem, table)
        constraint = budgets(blocks).constraint
        for c in levels:
            n = int((~proven[constraint == c.index]).sum())
            if n:
                fail.append(f"constraints[{c.index}] ({c.name!r}): {n} of {c.n_comparisons} "
                            "comparisons are not proven by exact arithmetic")
    return VerifyReport(not fail, fail, levels, exact, problem)
