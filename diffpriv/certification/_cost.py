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

Each rate is ``(a, b, c)``: ``a + b·Y + c·Y²`` seconds a comparison. The machine is shared and
noisy and the rates are fits: the estimate is meant to be right within a factor of a few, which
is what a refusal up front needs (``benchmarks/RESULTS.md`` has measured against estimated).
Memory is :func:`diffpriv.problems.estimate` for the certifier (a test compares it with
measured peaks).
"""

from __future__ import annotations

import dataclasses

from diffpriv.problems._size import SizeError, estimate, human_bytes

__all__ = ["Cost", "RATES", "certify_cost", "admit_check"]

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
}
"""Seconds per comparison, ``a + b·n + c·n²``, by kind, with ``n = Y`` outputs; for
``"mixture"`` (lifting a mixture's law, beside ``"linear"``) ``n = X`` inputs, and for
``"exact_mixture_entry"`` ``n = X·Y``, a side. Fitted to ``benchmarks/certify_cost.py`` on the
2-core CPU (2026-11-25), where the estimates then came within 0.3–2× of the measured times."""

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


def certify_cost(problem, exact: bool = False) -> Cost:
    """Estimated seconds and peak bytes of :func:`diffpriv.certification.verify` on a certificate
    of ``problem`` (``exact``: with the exact check too). Builds no block: ``O(constraints)``."""
    _, nx, ny = problem.shape
    seconds, comparisons, worst = 0.0, 0, (0.0, "no constraint")
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
        if cost > worst[0]:
            worst = (cost, f"constraints[{index}] ({c.kind}, {k:,} comparisons of {ny} outputs)")
    return Cost(seconds, estimate(problem, "certifier", exact=exact), comparisons, worst[1])


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
