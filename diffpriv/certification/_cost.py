"""What re-checking a certificate will cost, estimated from its problem before any work.

:func:`certify_cost` counts the comparisons of every constraint without building a block
(``Constraint.counts``) and prices each by its kind, with per-comparison rates measured by
``benchmarks/certify_cost.py`` on the project's 2-core CPU (``Y`` outputs, ``X`` inputs):

* every comparison: its laws (gathered rows; a mixture's lifted law costs ``"mixture"`` more),
  the pure level, the hockey-stick and, for a δ budget, the tight ε: :data:`RATES` ``"linear"``;
* a divergence (KL, χ², Rényi, …): its outward-rounded level on top: ``"divergence"``;
* a Wasserstein level: POT's network simplex on a ``Y × Y`` plan and the coupling's check,
  ``"wasserstein"`` (three solves more for orders above 2: ``"wasserstein_high"``);
* exact mode: every law entry in rationals (a mixture lifts ``X·Y`` of them a side), and a
  Wasserstein budget's rational coupling and decimal powers.

Each rate is ``(a, b, c)``: ``a + b·Y + c·Y²`` seconds a comparison. Besides the comparisons,
the stages that run once per problem (:func:`stages`):

* the triangle inequality of every distinct metric (``O(n³)``,
  :func:`diffpriv.measures._transport.check_triangle`): the input metric of extended DistP
  (``xdistp``) and each Wasserstein constraint's stored metric, ``"triangle"`` per point;
  :func:`diffpriv.certification.verify` runs it after admission, never while reading;
* extended DistP's ``W(λ_i, λ_j)``: one transport per distinct ``(W, i, j)`` of the problem
  (:meth:`~diffpriv.problems.ExtendedDistP.distances`), on the supports of the two items
  (``n = √(|supp λ_i|·|supp λ_j|)`` points a side): W1 one network simplex, ``"w1"`` per point;
  W∞ one per step of its bisection over the distinct distances (:func:`winf_steps`), ``"winf"``
  per point; and the ``X × X`` plan and potentials around each, ``"w1_ground"`` /
  ``"winf_ground"`` per pair (``n = X``);
* the metrics' numbers in :func:`~diffpriv.problems.problem_hash`'s JSON (``"hash"``: the input
  metric up to ``DIGEST_LIMIT`` entries, above it its digest; a Wasserstein constraint's always).

The machine is shared and noisy and the rates are fits: the estimate is meant to be right
within a factor of a few, which is what a refusal up front needs (``benchmarks/RESULTS.md`` has
measured against estimated). Memory is :func:`diffpriv.problems.estimate` for the certifier
(a test compares it with measured peaks) plus the transports' ``X × X`` temporaries.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from diffpriv.problems._json import DIGEST_LIMIT
from diffpriv.problems._size import SizeError, estimate, human_bytes

__all__ = ["Cost", "RATES", "certify_cost", "admit_check", "stages", "winf_steps", "rate", "clear_caches"]

RATES: dict[str, tuple[float, float, float]] = {
    "linear": (2.2e-6, 3.0e-8, 0.0),
    "mixture": (0.0, 1.5e-6, 0.0),
    "divergence": (0.0, 4.5e-8, 0.0),
    "wasserstein": (5.0e-4, 0.0, 2.0e-7),
    "wasserstein_high": (1.5e-3, 0.0, 1.8e-6),
    "exact_linear": (1.0e-5, 7.0e-6, 0.0),
    "exact_mixture_entry": (0.0, 1.1e-5, 0.0),
    "exact_divergence": (3.0e-5, 5.0e-7, 0.0),
    "exact_wasserstein": (1.6e-3, 1.2e-4, 0.0),
    "triangle": (7.2e-6, 2.3e-8, 3.6e-10),
    "w1": (4.4e-7, 4.5e-8, 4.7e-11),
    "w1_ground": (1.6e-4, 0.0, 3.7e-9),
    "winf": (7.6e-6, 0.0, 1.6e-10),
    "winf_ground": (1.0e-4, 0.0, 1.2e-9),
    "hash": (0.0, 5.0e-7, 0.0),
}
"""Seconds per comparison, ``a + b·n + c·n²``, by kind, with ``n = Y`` outputs; for
``"mixture"`` (lifting a mixture's law, beside ``"linear"``) ``n = X`` inputs, and for
``"exact_mixture_entry"`` ``n = X·Y``, a side. Fitted to ``benchmarks/certify_cost.py`` on the
2-core CPU (2026-11-25), where the estimates then came within 0.3–2× of the measured times.
The once-per-problem stages (module docstring) are per point of a metric (``"triangle"``, ``n``
its points, so ``n³`` in all) or of a transport's side (``"w1"``; ``"winf"`` per bisection
step), per transport (``"*_ground"``, ``n = X``), and for ``n`` numbers of a metric that
``problem_hash`` writes as JSON (``"hash"``, fitted on full-precision floats: 3.5× high for a
line's small integers). Fitted by ``benchmarks/certify_cost.py --stages --fit`` (2026-12-01),
where each stage's estimate then came within 0.45–2.1× of its measured time, and whole
extended-DistP certificates (its ``xdistp_*`` kinds) within 1.0–1.6×."""

_PLANS = 4
"""``X × X`` float64 arrays a transport holds at its peak besides the ground (the full plan,
the reduced costs, the c-transforms' temporary, the Euclidean ground's), and ``6`` of its
supports' size (POT's plan and cost, the dual check's)."""

_WASSERSTEIN = ("wdp", "wdistp")


@dataclasses.dataclass(frozen=True)
class Cost:
    """An estimate: ``seconds`` and peak ``bytes`` of re-checking, over ``comparisons``;
    ``largest``: the constraint that costs the most, in words (for a refusal's one line)."""

    seconds: float
    bytes: int
    comparisons: int
    largest: str


def _rate(kind: str, n: int) -> float:
    a, b, c = RATES[kind]
    return a + b * n + c * n * n


def _kinds(constraint) -> list[str]:
    """The rates one comparison of ``constraint`` is charged (besides ``linear``)."""
    if constraint.kind in _WASSERSTEIN:
        return ["wasserstein_high" if float(constraint.order) > 2.0 else "wasserstein"]
    divergence = getattr(constraint, "divergence", None)
    if divergence is None or (divergence in ("max", "tv") and constraint.kind != "xdistp"):
        return []
    return ["divergence"]


def _support_sizes(problem) -> np.ndarray:
    """``[items]``: the non-zero entries of each item's distribution (``O(items·X)``)."""
    return np.array([np.count_nonzero(item.dist) for item in problem.items], dtype=np.int64)


def winf_steps(entries: int, nx: int) -> int:
    """The solves W∞'s bisection is charged for, on ``entries = |supp λ_i|·|supp λ_j|`` cells
    of ``X = nx`` inputs: ``⌈log₂ L⌉ + 1`` with ``L = min(entries, X(X − 1)/2 + 1)``, a bound
    on its distinct distances (it takes ``⌈log₂ L⌉ + 1`` for the true ``L``; ``"winf"`` is
    fitted per charged solve, so a metric with few distinct distances, whose solves are slower
    for its ties, such as a line's, comes out right too)."""
    return math.ceil(math.log2(max(1, min(entries, nx * (nx - 1) // 2 + 1)))) + 1


def stages(problem) -> tuple[float, int, dict[int, tuple[float, int]], list[tuple[float, str]]]:
    """What re-checking ``problem`` costs besides its comparisons (module docstring), without
    running any of it: ``(seconds, peak bytes, {constraint: (seconds, transports)},
    [(seconds, what) of each metric: its triangle check and hash])``. A transport is charged to
    the first ``xdistp`` constraint naming its ``(W, i, j)``. ``O(pairs + items·X + the stored
    metrics' sizes)``."""
    _, nx, _ = problem.shape
    seconds, peak, per, metrics, checked = 0.0, 0, {}, [], []
    xdistp = [(i, c) for i, c in enumerate(problem.constraints) if c.kind == "xdistp"]
    if problem.input_metric is not None:  # problem_hash lists it as JSON numbers up to DIGEST_LIMIT
        check = nx * _rate("triangle", nx) if xdistp else 0.0
        checked += [nx] if xdistp else []
        metrics.append((check + _rate("hash", nx * nx if nx * nx <= DIGEST_LIMIT else 0),
                        f"the input metric's {'triangle check' if xdistp else 'hash'} ({nx:,} inputs)"))
    seen = set()
    for index, c in enumerate(problem.constraints):
        metric = getattr(c, "metric", None) if c.kind in _WASSERSTEIN else None
        if metric is None:
            continue
        n, new = len(metric), metric not in seen  # checked once per distinct metric
        check = n * _rate("triangle", n) if new else 0.0
        checked += [n] if new else []
        seen.add(metric)
        metrics.append((check + _rate("hash", n * n),  # always listed: a constraint's field
                        f"constraints[{index}].metric's triangle check ({n:,} outputs)"))
    if checked:
        peak = 8 * (2**18 + 2 * 32 * max(checked))  # check_triangle's buffer and its rows' minima
    if xdistp:
        support, solved, largest = _support_sizes(problem), set(), 0
        for index, c in xdistp:
            fresh = {(c.transport, i, j) for i, j in c.pairs} - solved
            solved |= fresh
            cost = 0.0
            for _, i, j in fresh:
                m = int(support[i]) * int(support[j])
                n, largest = math.sqrt(m), max(largest, m)
                if c.transport == "w1":
                    cost += n * _rate("w1", n) + _rate("w1_ground", nx)
                else:
                    cost += winf_steps(m, nx) * n * _rate("winf", n) + _rate("winf_ground", nx)
            per[index] = (cost, len(fresh))
            seconds += cost
        peak = max(peak, 8 * (_PLANS * nx * nx + 6 * largest))
    return seconds + sum(t for t, _ in metrics), peak, per, metrics


def certify_cost(problem, exact: bool = False) -> Cost:
    """Estimated seconds and peak bytes of :func:`diffpriv.certification.verify` on a certificate
    of ``problem`` (``exact``: with the exact check too): its comparisons and its once-per-problem
    stages (:func:`stages`: metrics' triangle checks, extended DistP's transports). Builds no
    block and runs no stage: ``O(constraints + pairs + items·X)``."""
    _, nx, ny = problem.shape
    extra, extra_bytes, transports, metrics = stages(problem)
    seconds, comparisons, worst = extra, 0, max(metrics, default=(0.0, "no constraint"))
    for index, c in enumerate(problem.constraints):
        pairs, mixtures = c.counts(problem)
        k = pairs + mixtures
        kinds = _kinds(c)
        each = _rate("linear", ny) + sum(_rate(kind, ny) for kind in kinds)
        cost = k * each + mixtures * _rate("mixture", nx)
        if exact:
            cost += k * _rate("exact_linear", ny)
            cost += mixtures * 2 * _rate("exact_mixture_entry", nx * ny)
            if kinds == ["divergence"]:
                cost += k * _rate("exact_divergence", ny)
            elif kinds:
                cost += k * (_rate("exact_wasserstein", ny) + each)
        seconds += cost
        comparisons += k
        solve, solves = transports.get(index, (0.0, 0))
        if cost + solve > worst[0]:
            what = f"{c.kind}, {k:,} comparisons of {ny} outputs"
            if solves:
                what += f", {solves:,} transports of {nx} inputs"
            worst = (cost + solve, f"constraints[{index}] ({what})")
    return Cost(seconds, estimate(problem, "certifier", exact=exact) + extra_bytes, comparisons, worst[1])


def admit_check(problem, *, exact: bool = False, max_seconds: float | None = None,
                max_memory: int | None = None) -> Cost:
    """The :class:`Cost` of re-checking ``problem``'s certificate; raises :class:`SizeError`
    (one line naming the estimate and the limit) when it exceeds ``max_seconds`` or
    ``max_memory`` bytes (``None``: no limit on that side)."""
    cost = certify_cost(problem, exact)
    mode = "exact " if exact else ""
    if max_seconds is not None and cost.seconds > max_seconds:
        raise SizeError(f"{mode}certification would take ~{_duration(cost.seconds)} "
                        f"({cost.comparisons:,} comparisons; most in {cost.largest}), above the "
                        f"limit of {_duration(max_seconds)}; "
                        "raise the limit (--max-seconds) to run it anyway")
    if max_memory is not None and cost.bytes > max_memory:
        raise SizeError(f"{mode}certification would need ~{human_bytes(cost.bytes)} "
                        f"({cost.comparisons:,} comparisons; most in {cost.largest}), above the "
                        f"limit of {human_bytes(max_memory)}")
    return cost


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def rate(kind: str, n: int) -> float:
    """Seconds per comparison (or per stage) of ``kind`` at size ``n``: :data:`RATES`'s
    ``a + b·n + c·n²``."""
    return _rate(kind, n)


def clear_caches() -> None:
    """Forgets the metrics that passed their triangle check and the items' transport distances
    solved so far (both are computed once per distinct metric or pair), so that the next check
    runs them again: for timing them (``benchmarks/certify_cost.py``)."""
    from diffpriv.measures._transport import _CHECKED
    from diffpriv.problems._divergence_families import _DISTANCES

    _CHECKED.clear()
    _DISTANCES.clear()
