"""Exact budget check in rational arithmetic (``fractions`` and ``decimal``, no float rounding).

The certified mechanism is the stored table with each row divided by its exact sum, applied to
the stored items divided by their exact sums (see :mod:`._safety`). Every float64 number is a
dyadic rational, so ``Fraction(x)`` is exact and so are the laws

    ``P_k = Σ_x (wa[k, x] / Σ wa[k]) · A[sa[k], x] / Σ_y A[sa[k], x, y]``  (and ``Q_k``)

for a mixture block, and ``P_k = A[s_k, a_k] / Σ_y A[s_k, a_k, y]`` (and ``Q_k`` with ``b_k``)
for a pair block.

The only irrational quantity is ``e^ε``. :func:`exp_lower` gives a rational ``c ≤ e^ε``:
the exponent is rounded down to ``digits`` significant digits (``ROUND_FLOOR``), ``Decimal.exp``
is correctly rounded (half-even) at that precision, and two ulps are subtracted; the result
is raised to 1 if below (``e^x ≥ 1`` for ``x ≥ 0``, so equal laws pass at any budget). With ``c``:

* pure: ``P[y] ≤ c·Q[y]`` and ``Q[y] ≤ c·P[y]`` for every ``y`` implies the exact level is
  ``≤ ε``. A ratio within ``~10^-digits`` below ``e^ε`` fails: ties count as failures.
* approximate: ``Σ_y max(0, P − c·Q)`` is an upper bound of the exact hockey-stick
  (``c`` only shrinks what is subtracted); it must be ``≤ δ`` in both directions.

A **Wasserstein** budget (``W_μ ≤ ε``) is decided from an exact rational coupling of the exact
laws and powers ``d^μ`` bounded in outward-rounded decimal arithmetic (:mod:`._exact_transport`).

A **divergence** (KL, χ², Rényi, …) of the exact laws is irrational in general: each exact law
entry is rounded to the nearest float64 (relative error ``≤ 2^-53``; an entry that would land
below ``2^-1000`` fails the comparison, as there the relative bound is lost), and the
divergence's outward-rounded upper bound (:func:`._levels.divergence_level`, with the law error
``2^-52``) must be at most the block's budget ``eps[k]`` as stored: ``ε``, or for extended
DistP the float64 product of ``ε`` and a certified lower bound of ``W``, rounded down.

Every other exponent is the comparison's float64 budget ``eps[k]`` (the constraint's ``ε``, or 0
for total variation, a hockey-stick at ``ε = 0``); for a scaled pair block (extended DP) it is
``ε · d(x, x')`` in exact arithmetic, never the rounded ``block.eps``: with an input metric the
exact product of the two float64 numbers; with coordinates a rational lower bound of
``ε · ‖c_x − c_x'‖``, whose square is computed exactly from the float64 coordinates (the float
distance is rounded: once ``d²`` is subnormal, by up to 41 %).
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np

from diffpriv.certification._exact_transport import wasserstein_holds
from diffpriv.certification._laws import TINY
from diffpriv.certification._levels import divergence_level
from diffpriv.problems._blocks import Block, MixtureBlock, PairBlock
from diffpriv.problems._problem import Problem

__all__ = ["exp_lower", "exact_holds", "DIGITS", "MAX_EXACT_ENTRIES"]

DIGITS = 60
"""Significant decimal digits used for ``e^ε`` (at least 50)."""

MAX_EXACT_ENTRIES = 10**7
"""Largest table (``S·X·Y`` entries) the exact check takes: it holds every row it reads as
Fractions (about 150 bytes an entry) and takes 40–90 µs an entry (measured on grids of 10⁴ and
1.6·10⁵ entries), so 10⁷ entries is about 10 minutes and 1.5 GB; a 10⁸-entry table would take
hours and more memory than the table's float check. :func:`diffpriv.certification.verify`
refuses a larger one (``SizeError``), before any work."""

_EXPONENT_CAP = Fraction(10_000)
"""Exponents are capped here: ``e^10000 ≈ 10^4343`` already exceeds every ratio of two positive
laws built from float64 numbers (``< 10^700``), so the cap changes no decision (and ``e^cap`` is
still a lower bound of ``e^x``)."""


def exp_lower(x: Fraction, digits: int = DIGITS) -> Fraction:
    """A rational lower bound of ``e^x`` for ``x ≥ 0``, within ``~3·10^(1−digits)`` relative.

    Never below 1 (``x = 0`` gives exactly 1).
    """
    if x == 0:
        return Fraction(1)
    ctx = decimal.Context(prec=digits, rounding=decimal.ROUND_FLOOR, Emax=decimal.MAX_EMAX,
                          Emin=decimal.MIN_EMIN)
    x_low = ctx.divide(decimal.Decimal(x.numerator), decimal.Decimal(x.denominator))
    e = ctx.exp(x_low)  # correctly rounded: |e − exp(x_low)| ≤ ½ ulp
    return max(Fraction(1), Fraction(ctx.next_minus(ctx.next_minus(e))))


class _ExactRows:
    """Exactly normalised rows ``A[s, x] / Σ_y A[s, x, y]`` as Fractions, built on demand."""

    def __init__(self, table: np.ndarray):
        self.table = table
        self.cache: dict[tuple[int, int], list[Fraction]] = {}

    def __call__(self, s: int, x: int) -> list[Fraction]:
        if (s, x) not in self.cache:
            row = [Fraction(float(v)) for v in self.table[s, x]]
            total = sum(row, Fraction(0))
            if total <= 0:
                raise ValueError(f"table: row ({s}, {x}) has no mass")
            self.cache[(s, x)] = [v / total for v in row]
        return self.cache[(s, x)]

    def law(self, s: int, w: np.ndarray) -> list[Fraction]:
        """``Σ_x (w[x] / Σ w) · row(s, x)`` exactly, a list of ``n_out`` Fractions."""
        used = [(int(x), Fraction(float(w[x]))) for x in np.flatnonzero(w > 0)]
        total = sum((wx for _, wx in used), Fraction(0))
        out = [Fraction(0)] * self.table.shape[-1]
        for x, wx in used:
            coef = wx / total
            out = [o + coef * v for o, v in zip(out, self(s, x), strict=True)]
        return out


def sqrt_lower(x: Fraction, bits: int = 256) -> Fraction:
    """A rational lower bound of ``√x`` for ``x ≥ 0``, within ``2^-bits`` relative (exact when
    ``x`` is the square of a rational with a power-of-two denominator, e.g. of a float)."""
    n, m = x.numerator * x.denominator, x.denominator  # √x = √n / m
    shift = max(0, bits - n.bit_length() // 2 + 1)
    return Fraction(math.isqrt(n << 2 * shift), m << shift)


def _exponent(problem: Problem, block: Block, k: int) -> Fraction:
    """A rational lower bound of the exponent of comparison ``k`` of ``block``: its budget
    ``eps[k]`` (the constraint's ``ε``; 0 for total variation), or the constraint's ``ε`` times the
    distance ``d(a_k, b_k)`` for a scaled pair block (the metric
    entry as stored, or ``√(Σ_j (c_a,j − c_b,j)²)`` from the exact coordinates)."""
    if not (isinstance(block, PairBlock) and block.scaled):
        return Fraction(float(block.eps[k]))  # the constraint's ε (0 for total variation)
    eps = Fraction(float(problem.constraints[block.constraint].epsilon))
    a, b = int(block.a[k]), int(block.b[k])
    if problem.input_metric is not None:
        return eps * Fraction(float(problem.input_metric[a, b]))
    ca, cb = problem.inputs.coords[a], problem.inputs.coords[b]
    return eps * sqrt_lower(sum(((Fraction(float(u)) - Fraction(float(v))) ** 2
                                 for u, v in zip(ca, cb, strict=True)), Fraction(0)))


def _one_way_delta(P: list[Fraction], Q: list[Fraction], c: Fraction) -> Fraction:
    return sum((max(Fraction(0), p - c * q) for p, q in zip(P, Q, strict=True)), Fraction(0))


def _laws(rows: _ExactRows, block: Block, k: int) -> tuple[list[Fraction], list[Fraction]] | None:
    """The exact laws of comparison ``k`` of ``block``; ``None`` when the two are the same law
    (the same row, or the same weights on the same profile)."""
    if isinstance(block, PairBlock):
        s, a, b = int(block.s[k]), int(block.a[k]), int(block.b[k])
        return None if a == b else (rows(s, a), rows(s, b))
    if not isinstance(block, MixtureBlock):
        raise TypeError(f"the certifier does not know blocks of type {type(block).__name__}")
    sa, sb = int(block.sa[k]), int(block.sb[k])
    if sa == sb and np.array_equal(block.wa[k], block.wb[k]):
        return None
    return rows.law(sa, block.wa[k]), rows.law(sb, block.wb[k])


def _divergence_holds(block: Block, k: int, P: list[Fraction], Q: list[Fraction]) -> bool:
    """The divergence budget of comparison ``k`` from the exact laws (module docstring); a
    Wasserstein budget by :func:`._exact_transport.wasserstein_holds`, with no float rounding."""
    if block.divergence == "wasserstein":
        return wasserstein_holds(P, Q, block.ground, block.alpha, float(block.eps[k]))
    p, q = np.array([float(v) for v in P]), np.array([float(v) for v in Q])
    if np.any((p > 0) & (p < TINY)) or np.any((q > 0) & (q < TINY)):
        return False
    if any((v > 0) != (w > 0) for v, w in zip(P, p, strict=True)) or \
            any((v > 0) != (w > 0) for v, w in zip(Q, q, strict=True)):
        return False  # an exact entry rounded to 0 (or not): its support changed
    level = divergence_level(block, p[None], q[None], 2.0**-52)[0]
    return bool(level <= block.eps[k])


def exact_holds(problem: Problem, table: np.ndarray, digits: int = DIGITS) -> np.ndarray:
    """``[K]`` bool: comparison ``k`` provably meets its budget, in exact arithmetic.

    Args:
      problem: the problem (``K`` comparisons in ``problem.blocks()``, numbered block by block).
      table: ``[n_profiles, n_in, n_out]`` non-negative float64 table, every row with mass.
      digits: decimal precision of the ``e^ε`` lower bound (``≥ 50``).

    Returns:
      ``[K]`` bool, ``True`` where the exactly normalised mechanism satisfies the comparison's
      budget (pure: every ratio ``≤`` a lower bound of ``e^ε``; approximate: an upper bound of
      the hockey-stick ``≤ δ``, both directions). A comparison of the same weights on the same
      profile holds outright (its two laws are the same).
    """
    if digits < 50:
        raise ValueError(f"digits: need at least 50, got {digits}")
    table = np.asarray(table, dtype=np.float64)
    rows = _ExactRows(table)
    out = []
    bounds: dict[Fraction, Fraction] = {}
    for block in problem.blocks():
        delta = Fraction(float(block.delta))
        for k in range(block.size):
            laws = _laws(rows, block, k)
            if laws is None:  # the same law on both sides: every level is exactly 0
                out.append(True)
                continue
            P, Q = laws
            if not block.linear:
                out.append(_divergence_holds(block, k, P, Q))
                continue
            x = min(_exponent(problem, block, k), _EXPONENT_CAP)  # a lower bound of ε (·d)
            if x not in bounds:
                bounds[x] = exp_lower(x, digits)
            c = bounds[x]
            if delta == 0:
                out.append(all(p <= c * q and q <= c * p for p, q in zip(P, Q, strict=True)))
            else:
                out.append(max(_one_way_delta(P, Q, c), _one_way_delta(Q, P, c)) <= delta)
    return np.array(out, dtype=bool)
