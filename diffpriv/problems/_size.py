"""Size admission: estimate the memory a problem needs before anything large is allocated, and
refuse in one line instead of a traceback or an out-of-memory kill (numpy only).

The estimates count the float64 arrays each stage holds at its peak (measured against the
implementation, rounded up), with ``T = S·X·Y`` table entries, ``K`` comparisons (``Kp`` of
pairs, ``Km`` of mixtures) and ``U = 2K·Y`` multiplier entries:

* ``optimizer``: about 15 table-sized arrays (logits, table, gradient, extrapolation, running
  sums, the last restart point, polishing), 12 multiplier-sized ones (with the whole run's sum
  of the multipliers, whose average also bounds), 6 copies of the dense
  mixture rows ``[2Km, S·X]``; when that does not fit, the **lean** plan (expected objective,
  method ``pdhg``): float32 iterates without running averages or polishing — the multipliers
  once (4 times with slack simplices, for δ > 0; the compiled step holds no temporary of their
  size), 8 float32 and 3 float64 table-sized arrays (the problem's loss, the host table); and
  for ``Kw`` Wasserstein comparisons (``wdp``, ``wdistp``: the lifted PDHG of
  :mod:`diffpriv.solvers._transport_pdhg`) 12 coupling-sized arrays ``[Kw, Y, Y]`` (logits,
  coupling, gradient, extrapolation, running sums, restart point, candidate, average and the
  evaluation's temporaries) and 4 copies of their dense weights ``[Kw, S·X]``;
* ``certifier``: 4 table-sized arrays (the cleaned table, the repair's best and current
  candidates, a temporary), 16 chunks of comparisons' laws and their temporaries (a chunk is
  at most ``K·Y`` and :data:`CHUNK` law entries), the mixtures'
  laws, lifted all at once (``3·Km·Y``), and the certificate's JSON text and Python lists
  (about 70 bytes per table entry, for a table small enough to be stored inline; a larger one
  goes to the certificate's arrays file), 192 bytes a comparison (its levels, budgets and
  block indices), the mixture blocks' weights (6 copies of ``[Km, X]``) and the items' (2
  copies); in exact mode about 200 bytes a table entry for the rows in rationals;
* ``lp``: the HiGHS model, about 120 bytes per constraint-matrix entry
  (``nnz ≈ 2·Y·(2·Kp + Σ_mixture non-zero weights)``) and per variable.

The limit is the smaller of the machine's physical memory and the process's address-space
limit (``ulimit -v`` / ``prlimit --as``) less what JAX's runtime reserves (up to 2 GiB), or
``DIFFPRIV_MEMORY_LIMIT`` (bytes) when set.
"""

from __future__ import annotations

import os
import resource

from diffpriv.problems._checks import SpecError
from diffpriv.problems._json import DIGEST_LIMIT

__all__ = ["SizeError", "memory_limit", "estimate", "admit", "solver_plan", "human_bytes"]

CHUNK = 2**13
"""The certifier's pass (:mod:`diffpriv.certification._laws`): most law entries (comparisons ×
outputs) built at once per side, 64 KiB of float64: every pass over the comparisons goes through
them in runs of ``max(1, CHUNK // n_out)``. Small on purpose: temporaries under malloc's 128 KiB
mapping threshold are reused from the heap, while larger ones are mapped and unmapped again and
again, and a pass then spends about as long in page faults as in arithmetic (twice as long in all
for a 10⁴ × 10⁴ table at ``2^18`` entries)."""

STAGES = ("optimizer", "certifier", "lp")

TRANSPORT_KINDS = ("wdp", "wdistp")
"""Constraint kinds whose comparisons the optimizer lifts to couplings ``[Y, Y]``."""


class SizeError(SpecError):
    """A problem is too large for the memory available to a stage."""


def memory_limit() -> int:
    """Bytes this process may use: ``DIFFPRIV_MEMORY_LIMIT``, else min(physical memory,
    address-space limit less JAX's reservation)."""
    env = os.environ.get("DIFFPRIV_MEMORY_LIMIT")
    if env:
        return int(float(env))
    limit = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        # JAX's runtime and thread pools reserve address space (about 1.5 GiB measured with
        # a small jit on CPU): keep up to 2 GiB for them.
        limit = min(limit, soft - min(soft // 2, 2 * 2**30))
    return int(limit)


def _counts(problem) -> tuple[int, int, int]:
    """``(Kp, Km, mixture weight entries)`` without building any block."""
    kp = km = nnz = 0
    for c in problem.constraints:
        p, m = c.counts(problem)
        kp, km = kp + p, km + m
        if m:
            nnz += m * 2 * problem.inputs.size
    return kp, km, nnz


def _has_slack(problem) -> bool:
    return any(getattr(c, "delta", 0) for c in problem.constraints)


PER_COMPARISON = 192
"""Certifier bytes per comparison, besides its laws: its levels, budgets and block indices
(measured: 181 on 5·10⁵ local-DP pairs, ``tracemalloc``)."""


def estimate(problem, stage: str, *, lean: bool = False, exact: bool = False) -> int:
    """Estimated peak bytes of ``stage`` (``"optimizer"``, ``"certifier"`` or ``"lp"``);
    ``lean``: the optimizer's lean plan; ``exact``: the certifier's exact mode too (its rows in
    rationals, about 200 bytes a table entry) (module docstring)."""
    if stage not in STAGES:
        raise ValueError(f"stage: one of {STAGES}, got {stage!r}")
    ns, nx, ny = problem.shape
    t = ns * nx * ny
    kp, km, mix_nnz = _counts(problem)
    k = kp + km
    u = 2 * k * ny
    if stage == "optimizer" and lean:
        copies = 4 if _has_slack(problem) else 1
        return 4 * (copies * u + 6 * t + 6 * 2 * km * ns * nx) + 8 * 2 * t + 24 * kp
    if stage == "optimizer":
        kw = sum(sum(c.counts(problem)) for c in problem.constraints if c.kind in TRANSPORT_KINDS)
        return 8 * (15 * t + 12 * u + 6 * 2 * km * ns * nx + 12 * kw * ny * ny + 4 * kw * ns * nx) + 24 * kp
    if stage == "certifier":
        # the certifier's chunk, and the largest array a certificate stores inline (its
        # arrays file takes those above DIGEST_LIMIT: certification._arrays.INLINE_LIMIT)
        chunk = min(k, max(1, CHUNK // ny)) * ny
        text = 70 * t if t <= DIGEST_LIMIT else 0
        rationals = 200 * t if exact else 0
        weights = 6 * km * nx + 2 * len(getattr(problem, "items", ())) * nx  # blocks' and items'
        return 8 * (4 * t + 16 * chunk + 3 * km * ny + weights) + text + PER_COMPARISON * k + rationals
    nnz = 2 * ny * (2 * kp + mix_nnz)
    return 120 * (nnz + t)


def _lean_possible(problem) -> bool:
    """The lean plan runs the expected objective under linear constraints only."""
    return not problem.objective.epigraph and problem.linear


def _culprit(problem) -> str:
    """The constraint with the most comparisons, in words, and what to do about it."""
    worst = max(problem.constraints, key=lambda c: sum(c.counts(problem)), default=None)
    if worst is None:
        return "no constraints", "use fewer inputs or outputs"
    everywhere = getattr(worst, "pairs", ()) is None
    what = f"{worst.kind} on {'all pairs' if everywhere else f'{sum(worst.counts(problem))} pairs'}"
    hint = "use neighbours or radius" if everywhere else "use fewer inputs or outputs"
    return what, hint


def human_bytes(n: int) -> str:
    """``n`` bytes in MB or GB, one decimal."""
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.1f} MB"


def solver_plan(problem, limit: int | None = None) -> str:
    """``"standard"`` when the optimizer fits in ``limit`` bytes (default
    :func:`memory_limit`), else ``"lean"`` when its lean plan does (expected objective and
    linear constraints only);
    else raises :class:`SizeError` naming the lean plan's size."""
    limit = memory_limit() if limit is None else limit
    if estimate(problem, "optimizer") <= limit:
        return "standard"
    if _lean_possible(problem) and estimate(problem, "optimizer", lean=True) <= limit:
        return "lean"
    admit(problem, "optimizer", limit)
    return "lean"  # not reached: admit raised


def admit(problem, stage: str, limit: int | None = None) -> None:
    """Raises :class:`SizeError` (one line naming the size and the limit) when ``stage`` would
    need more than ``limit`` bytes (default :func:`memory_limit`); for the optimizer, when
    neither its standard nor its lean plan fits."""
    limit = memory_limit() if limit is None else limit
    need = estimate(problem, stage)
    if stage == "optimizer" and _lean_possible(problem):
        need = min(need, estimate(problem, stage, lean=True))
    if need > limit:
        ns, nx, ny = problem.shape
        what, hint = _culprit(problem)
        raise SizeError(
            f"inputs: {nx} inputs × {ny} outputs × {ns} profile(s) with {what} needs "
            f"~{human_bytes(need)} for the {stage}, above the {human_bytes(limit)} limit; {hint}")
