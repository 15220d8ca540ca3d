"""Certificates: a table with every claim about it, and the data to re-check the claims.

:func:`certify` takes a problem and a table (typically an optimizer's output), cleans the table,
repairs it if a budget is violated (:mod:`._repair`), and records the final table, the repair
``(t, ν)``, the loss, and each constraint's budget, certified level, margin and witness, with the
whole problem in JSON form, its hash and the software versions. :func:`._verify.verify`
re-checks a certificate from scratch, trusting none of its numbers.

The problem is stored as ``problem_to_dict(problem)`` and every number in the certificate is
computed on ``problem_from_dict`` of that dict as a reader of the saved file gets it — exactly
the problem a verifier rebuilds. Arrays with more than :data:`._arrays.INLINE_LIMIT` entries are
saved in an arrays file beside the JSON (:mod:`._arrays`) and never become Python lists.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from diffpriv._files import atomic_write, json_number
from diffpriv.certification._arrays import arrays_path, as_read, externalize, remove_stale, write_arrays
from diffpriv.certification._quantize import dyadic as quantize_table
from diffpriv.certification._repair import Repair, mix
from diffpriv.certification._repair import repair as repair_table
from diffpriv.certification._safety import sanitize_table
from diffpriv.certification._schema import FORMAT, read_certificate
from diffpriv.certification._summary import ConstraintLevel, constraint_levels
from diffpriv.problems._json import (
    array_to_list,
    map_arrays,
    problem_from_dict,
    problem_hash,
    problem_to_dict,
)
from diffpriv.problems._problem import Problem
from diffpriv.problems._size import admit
from diffpriv.problems._user import runs_utilities

__all__ = ["Certificate", "certify", "versions"]


VERSIONED = ("diffpriv", "scipy", "POT", "highspy", "jax", "jaxlib", "optax")
"""Distributions whose versions a certificate records besides Python and numpy: the certifier's
(scipy, POT's network simplex), the reference LP's (HiGHS, through scipy and highspy) and the
optimizer's (JAX, optax). Read from the installed metadata: nothing is imported."""


def versions() -> dict[str, str]:
    """Versions of Python, numpy and :data:`VERSIONED` (``"not installed"`` for one that is
    not); a fresh dict each call."""
    return dict(_versions())


@functools.cache
def _versions() -> tuple[tuple[str, str], ...]:
    """Read once per process: the metadata lookups take ~15 ms, and certify runs many times in a
    calibration."""
    out = {"python": platform.python_version(), "numpy": np.__version__}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return tuple(out.items())


@dataclasses.dataclass(frozen=True, eq=False)
class Certificate:
    """A certified mechanism table.

    Attributes:
      problem: the problem as ``problem_to_dict(problem, arrays=True)``: JSON-ready except its
        array fields, numpy arrays (nested lists in a certificate read from pure JSON).
      problem_hash: ``problem_hash(problem_from_dict(problem))``.
      table: ``[n_profiles, n_in, n_out]`` the certified (possibly repaired) table.
      repair_t: mixing weight ``t`` of the repair ``(1 − t)·A + t·𝟙νᵀ`` (0: none).
      repair_nu: ``[n_out]`` the mixing distribution ``ν``, ``None`` when ``t = 0``.
      repair_strategy: how ``ν`` was chosen: ``"none"``, ``"violation"`` or ``"uniform"``.
      objective: the problem's objective in its JSON form (``Objective.to_json()``: ``"expected"``,
        ``"worst"``, or a mapping with ``kind`` for an objective with parameters).
      loss: the objective's value for ``table``.
      expected_loss: ``U(A) = Σ π[s,x] A[s,x,y] L[x,y]``.
      worst_loss: largest expected loss of a row with positive prior.
      constraints: one :class:`ConstraintLevel` per constraint.
      ok: every constraint holds with the float64 safety margin.
      versions: Python, numpy and diffpriv versions.
      seed: the seed of the run that produced the table, if any.
      meta: free JSON-ready information (optimizer settings, timings, …).
      format: the certificate format tag.
      quantization_bits: ``k`` when the table is dyadic, every row integer counts over ``2^k``
        summing to exactly ``2^k`` (:mod:`._quantize`: the table a sampler draws from, exactly);
        ``None`` for a plain float64 table.
    """

    problem: dict[str, Any]
    problem_hash: str
    table: np.ndarray
    repair_t: float
    repair_nu: np.ndarray | None
    repair_strategy: str
    objective: str | dict[str, Any]
    loss: float
    expected_loss: float
    worst_loss: float
    constraints: tuple[ConstraintLevel, ...]
    ok: bool
    versions: dict[str, str]
    seed: int | None = None
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    format: str = FORMAT
    quantization_bits: int | None = None

    def to_dict(self, *, arrays: bool = False) -> dict[str, Any]:
        """JSON-ready form (floats survive a JSON round trip exactly).

        Args:
          arrays: keep the table and the problem's array fields as numpy arrays (no Python list
            of a large certificate is built); :meth:`save` writes this form.
        """
        if arrays:
            problem, table = map_arrays(self.problem, lambda f, v: v), self.table
        else:
            problem = map_arrays(self.problem, lambda f, v: array_to_list(v))
            table = np.asarray(self.table).tolist()
        out = {
            "format": self.format,
            "ok": bool(self.ok),
            "problem_hash": self.problem_hash,
            "objective": self.objective,
            "loss": json_number(self.loss),
            "expected_loss": json_number(self.expected_loss),
            "worst_loss": json_number(self.worst_loss),
            "constraints": [c.to_dict() for c in self.constraints],
            "repair": {
                "t": float(self.repair_t),
                "nu": None if self.repair_nu is None else np.asarray(self.repair_nu).tolist(),
                "strategy": self.repair_strategy,
            },
            "versions": dict(self.versions),
            "seed": self.seed,
            "meta": self.meta,
            "problem": problem,
            "table": table,
        }
        if self.quantization_bits is not None:
            out["quantization"] = {"bits": int(self.quantization_bits)}
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Certificate:
        """Reads :meth:`to_dict`'s form back. Checks nothing: use :func:`verify` for that."""
        rep = d["repair"]
        return cls(
            problem=d["problem"],
            problem_hash=d["problem_hash"],
            table=np.asarray(d["table"], dtype=np.float64),
            repair_t=float(rep["t"]),
            repair_nu=None if rep["nu"] is None else np.asarray(rep["nu"], dtype=np.float64),
            repair_strategy=rep["strategy"],
            objective=d["objective"],
            loss=float(d["loss"]),
            expected_loss=float(d["expected_loss"]),
            worst_loss=float(d["worst_loss"]),
            constraints=tuple(ConstraintLevel.from_dict(c) for c in d["constraints"]),
            ok=bool(d["ok"]),
            versions=dict(d["versions"]),
            seed=d.get("seed"),
            meta=dict(d.get("meta") or {}),
            format=d["format"],
            quantization_bits=(d.get("quantization") or {}).get("bits"),
        )

    def to_json(self) -> str:
        """The whole certificate as one JSON string, every array inline (strict JSON: no NaN or
        Infinity literals). For a large certificate use :meth:`save`."""
        return json.dumps(self.to_dict(), allow_nan=False)

    def save(self, path: str | os.PathLike) -> Path:
        """Writes the JSON atomically: a temporary file in the same folder, then ``os.replace``.

        Arrays with more than :data:`._arrays.INLINE_LIMIT` entries go to the arrays file
        ``<stem>.arrays.npz`` beside it (:mod:`._arrays`), written first, so that the JSON is
        never in place before the arrays it references; without such arrays the JSON is
        :meth:`to_json` and a stale arrays file of that name is removed. Each file gets the
        permissions of any newly created file, ``0o666 & ~umask``; missing parent folders are
        created. On any error the target is left as it was and the temporary file is removed
        (:func:`diffpriv._files.atomic_open`).
        """
        text, arrays = externalize(self.to_dict(arrays=True))
        text = json.dumps(text, allow_nan=False)  # serialise first: a failure here touches no file
        if arrays:
            write_arrays(arrays_path(path), arrays)
        saved = atomic_write(path, text)
        if not arrays:
            remove_stale(arrays_path(path))
        return saved

    @classmethod
    def load(cls, path: str | os.PathLike) -> Certificate:
        """Reads a saved certificate and its arrays file, if it has one, within the limits of
        :func:`._schema.read_certificate` (no checking of the claims: use :func:`verify`).

        Raises:
          FileFormatError: the file (or its arrays file) is missing, unreadable or too large.
          CertificateFormatError: it is not a JSON object, or a reference to the arrays file is
            malformed.
        """
        return cls.from_dict(read_certificate(path))


@runs_utilities  # the caller's own problem: a utility it names is theirs to run
def certify(
    problem: Problem,
    table: np.ndarray,
    *,
    seed: int | None = None,
    meta: dict[str, Any] | None = None,
    repair: bool = False,
    quantize: int | None = None,
) -> Certificate:
    """Certifies ``table`` for ``problem`` as it is: the certificate reports the table's own
    levels (``ok = False`` where a budget is violated); with ``repair=True`` a violating table is
    first mixed into one that holds.

    Args:
      problem: the problem.
      table: ``[n_profiles, n_in, n_out]`` row-stochastic table (tiny negatives and row-sum
        rounding are cleaned; mass outside the support is an error).
      seed: seed of the run that produced the table, recorded as is.
      meta: JSON-ready free information, recorded as is.
      repair: mix with a data-independent ``ν`` when needed (:func:`repair`); the certificate
        is then of the mixed table and records ``(t, ν)``. Off by default: a violating table
        gets a certificate with ``ok = False``.
      quantize: ``k`` (1 … 53): certify the table rounded to integer counts over ``2^k`` per
        row (:func:`._quantize.quantize`), the table a sampler draws exactly. When rounding
        breaks a budget, the rounded table is repaired and rounded again (at most
        :data:`QUANTIZE_ROUNDS` times; the recorded ``(t, ν)`` compose the mixes).

    Returns:
      A :class:`Certificate`; ``ok`` says whether every constraint holds.

    Raises:
      TableError: the table is malformed.
      RepairError: a repair is needed and impossible.
      TypeError, ValueError: ``meta`` is not strict JSON (an object, a NaN).
    """
    admit(problem, "certifier")
    meta = dict(meta or {})
    json.dumps(meta, allow_nan=False)
    spec = problem_to_dict(problem, arrays=True)
    problem = problem_from_dict(as_read({"problem": spec})["problem"])  # what a verifier rebuilds
    if repair:
        fixed = repair_table(problem, table)
    else:
        fixed = Repair(sanitize_table(problem, table), 0.0, None, "none")
    # A C-ordered copy, as a verifier reads it back: float sums depend on memory layout.
    fixed = dataclasses.replace(fixed, table=np.ascontiguousarray(fixed.table, dtype=np.float64))
    if quantize is not None:
        fixed, levels = _quantized(problem, fixed, quantize, repair)
    else:
        levels = constraint_levels(problem, fixed.table)
    return Certificate(
        problem=spec,
        problem_hash=problem_hash(problem),
        table=fixed.table,
        repair_t=float(fixed.t),
        repair_nu=fixed.nu,
        repair_strategy=fixed.strategy,
        objective=problem.objective.to_json(),
        loss=problem.objective_value(fixed.table),
        expected_loss=problem.expected_loss(fixed.table),
        worst_loss=problem.worst_loss(fixed.table),
        constraints=levels,
        ok=all(c.ok for c in levels),
        versions=versions(),
        seed=seed,
        meta=meta,
        quantization_bits=None if quantize is None else int(quantize),
    )


QUANTIZE_ROUNDS = 8
"""Most repair-and-round rounds of :func:`certify` with ``quantize``."""


LIFT_COUNTS = 2**20
"""What :func:`_quantized`'s second candidate lifts every entry to, in counts (before rounding)."""


def _quantized(problem: Problem, fixed: Repair, bits: int, repair: bool):
    """``(Repair, levels)`` of the table rounded to counts over ``2^bits``: of :func:`_rounded`
    from the table, or, where that needed a repair, from the table mixed with the uniform output
    first, at the least ``t`` that lifts every entry to :data:`LIFT_COUNTS` counts
    (:func:`_lifted`) — whichever meets every budget at the lower objective (without ``repair``,
    only where the table held before rounding, as there). Entries of a few counts move by a large
    share of themselves when rounded: the tail of a geo-indistinguishable table (``e^{−ε·d}``;
    27,220 of the 65,536 entries of column generation's table for Sacramento's 16×16 grid at 2.71
    per cell side are below 10⁻¹⁴) broke its ratios at every rounding, and the raised targets
    mixed 91 % of the uniform output in (loss 41.2 km for 1.31); lifted, every entry moves by at
    most 2⁻²⁰ of itself, which the lift's own slack in every ratio (``(e^ε − 1)·t/|Y|``) absorbs."""
    from diffpriv.certification._levels import comparison_levels
    from diffpriv.certification._safety import holds
    from diffpriv.problems._blocks import budgets

    first, levels = _rounded(problem, fixed, bits, repair)
    if first.t <= fixed.t and all(c.ok for c in levels):
        return first, levels
    blocks = problem.blocks()
    if not repair and not holds(comparison_levels(problem, fixed.table, blocks), budgets(blocks),
                                problem.shape).all():
        return first, levels  # as :func:`_rounded` left it: the table did not hold before rounding
    lift = _lifted(problem, fixed, bits)
    if lift is None:
        return first, levels
    second, second_levels = _rounded(problem, lift, bits, repair)
    ok, second_ok = all(c.ok for c in levels), all(c.ok for c in second_levels)
    if second_ok and (not ok or problem.objective_value(second.table) < problem.objective_value(first.table)):
        return second, second_levels
    return first, levels


def _lifted(problem: Problem, fixed: Repair, bits: int) -> Repair | None:
    """``fixed`` mixed with the uniform output over the outputs every row allows, at the least
    ``t`` that puts every entry at :data:`LIFT_COUNTS` counts or more (at most 1/2); None where
    no output is allowed in every row."""
    common = problem.support_mask().all(axis=(0, 1))
    if not common.any():
        return None
    nu = common / common.sum()
    t = min(0.5, LIFT_COUNTS * 2.0 ** -bits / float(nu.max()))
    total, mixed = _then(fixed.t, fixed.nu, t, nu)
    return Repair(mix(fixed.table, t, nu), total, mixed, "uniform" if fixed.t == 0 else fixed.strategy)


def _then(t1: float, nu1: np.ndarray | None, t2: float, nu2: np.ndarray) -> tuple[float, np.ndarray]:
    """One mix ``(t, ν)`` for mixing with ``(t₁, ν₁)`` then ``(t₂, ν₂)``: ``t = 1 − (1 − t₁)(1 − t₂)``,
    ``ν ∝ (1 − t₂)·t₁·ν₁ + t₂·ν₂`` (up to the rounding between them)."""
    nu = (1.0 - t2) * t1 * (nu1 if nu1 is not None else 0.0) + t2 * nu2
    return 1.0 - (1.0 - t1) * (1.0 - t2), nu / nu.sum()


def _rounded(problem: Problem, fixed: Repair, bits: int, repair: bool):
    """``(Repair, levels)`` of the table rounded to counts over ``2^bits``.

    Rounding moves each entry by less than a count, ``2^-bits``: nothing next to an entry of
    ``~10⁻¹⁴`` (k-RR at ε = 31.5, e^{-ε}) but 0.5 % of it, enough to break a ratio that held with
    the float64 margin (the level 31.5004). A rounded table that breaks a budget is therefore
    repaired *at a margin the next rounding cannot cross*: each comparison that failed aims at
    ``f + 2^{r+1}·(f − s)`` safety margins in round ``r`` (``f`` its margins so far, ``s`` what
    the rounding left it, :func:`._safety.slack`), so that the next rounding, which moves it by
    about ``f − s`` again, leaves it within budget; the others keep theirs. Then rounded again,
    at most :data:`QUANTIZE_ROUNDS` times. Without ``repair`` the same is done only where the
    table held before rounding (then it must hold after: a table that certifies in float64
    certifies quantised; the repair is recorded), and a table that did not hold is reported as
    rounded. Mixing twice, with ``(t₁, ν₁)`` then ``(t₂, ν₂)``, is one mix with
    ``t = 1 − (1 − t₁)(1 − t₂)`` and ``ν = ((1 − t₂)·t₁·ν₁ + t₂·ν₂) / t``, up to the rounding (at
    most one count an entry a round)."""
    from diffpriv.certification._levels import comparison_levels
    from diffpriv.certification._safety import REPAIR_FACTOR, holds, slack
    from diffpriv.problems._blocks import budgets

    table, t, nu, strategy = fixed.table, fixed.t, fixed.nu, fixed.strategy
    blocks = problem.blocks()
    bud = budgets(blocks)
    factor = np.full(bud.size, REPAIR_FACTOR)
    cap = np.where(bud.delta == 0, 0.5 * np.abs(bud.eps), 0.5 * bud.delta)  # aim no lower than half
    for r in range(QUANTIZE_ROUNDS):
        rounded = quantize_table(table, bits)
        levels = constraint_levels(problem, rounded)
        if all(c.ok for c in levels):
            break
        if not repair and r == 0 and not holds(comparison_levels(problem, table, blocks), bud,
                                               problem.shape).all():
            break  # as it is: the table did not hold before rounding
        left = slack(comparison_levels(problem, rounded, blocks), bud, problem.shape)
        failed = ~(left >= 1.0)
        drop = np.where(np.isfinite(left), factor - left, factor)
        raised = factor + 2.0 ** (r + 1) * np.maximum(drop, 1.0)
        factor = np.where(failed, raised, factor)
        factor = np.minimum(factor, _most_margins(problem, bud, cap))
        step = repair_table(problem, rounded, factor=factor)
        if step.t > 0:
            strategy = step.strategy if t == 0 else strategy
            t, nu = _then(t, nu, step.t, step.nu)
        table = step.table
    return Repair(rounded, t, nu, strategy), levels


def _most_margins(problem: Problem, bud, cap: np.ndarray) -> np.ndarray:
    """``[K]``: the safety margins that put each comparison's target at ``cap`` below its budget
    (so a raised target never goes below half the budget)."""
    from diffpriv.certification._safety import delta_margin, pure_margin

    _, n_in, n_out = problem.shape
    eps = np.where(np.isfinite(bud.eps), bud.eps, 0.0)
    margin = np.where(bud.delta == 0, pure_margin(eps, n_in, n_out), delta_margin(n_in, n_out))
    return np.maximum(cap / margin, 2.0)
