"""Dyadic tables: every row a vector of integer counts over ``2^bits`` that sum to exactly
``2^bits``, so the certified table is the sampled one.

A float64 table's certified mechanism is each row divided by its exact sum, a rational with a
denominator of up to ~1100 bits: no sampler draws that with machine integers. :func:`quantize`
rounds each row to counts ``c[y] ≥ 0`` with ``Σ_y c[y] = 2^bits`` exactly (largest-remainder
rounding: the floors, then one more count to the largest remainders until the row is full; an
entry that was positive keeps at least one count, so no support changes). With ``bits ≤ 53``
every ``c[y] / 2^bits`` is a float64 exactly and each row sums to exactly 1: the table the
certifier checks, the table a deployment samples (:mod:`diffpriv.io._sample`: uniform
``bits``-bit integers looked up in the cumulative counts, no float anywhere) and the
certificate's table are one and the same. :func:`dyadic_counts` checks that a stored table is
of that form and recovers its counts exactly.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MAX_BITS", "DEFAULT_BITS", "quantize", "dyadic", "dyadic_counts"]

MAX_BITS = 53
"""Counts below ``2^53`` are float64 integers: ``c / 2^bits`` is then exact."""

DEFAULT_BITS = 53
"""The resolution ``optimize``, ``reference`` and ``evaluate`` certify at (``2^-53 ≈ 1.1e-16``)."""

_ENTRIES = 2**21
"""Entries rounded at once (the rows of a chunk: its sort of remainders is ``[rows, n_out]``; a
few such temporaries, ~16 MB each, where 4,096 rows of a 100×100 grid's 10,000 outputs took
312 MB apiece)."""


def _chunk_rows(n_out: int) -> int:
    return max(1, _ENTRIES // max(1, n_out))


def _check_bits(bits: int) -> int:
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 1 <= bits <= MAX_BITS:
        raise ValueError(f"bits: expected an integer in [1, {MAX_BITS}], got {bits!r}")
    return int(bits)


def _round_rows(rows: np.ndarray, bits: int) -> np.ndarray:
    """``[n, Y]`` int64 counts summing to ``2^bits`` per row from non-negative ``rows``."""
    total = np.int64(1) << bits
    scaled = rows / rows.sum(axis=1, keepdims=True) * float(total)
    counts = np.floor(scaled).astype(np.int64)
    counts = np.where((rows > 0) & (counts == 0), 1, counts)  # keep the support
    remainder = np.where(counts > 0, scaled - counts, -np.inf)  # zeros stay zero
    short = total - counts.sum(axis=1)  # > 0: counts to add, < 0: counts to take
    order = np.argsort(-remainder, axis=1, kind="stable")  # largest remainder first
    for i in np.flatnonzero(short):
        need = int(short[i])
        if need > 0:
            take = order[i][np.isfinite(remainder[i, order[i]])][:need]
            if take.size < need:  # fewer positive entries than counts to add: the largest gets the rest
                counts[i, np.argmax(counts[i])] += need - take.size
            counts[i, take] += 1
        else:  # the support rule overfilled the row: take from the entries with most counts
            for j in np.argsort(-counts[i], kind="stable"):
                spare = min(-need, int(counts[i, j]) - 1)
                counts[i, j] -= spare
                need += spare
                if need == 0:
                    break
    return counts


def quantize(table, bits: int = DEFAULT_BITS) -> tuple[np.ndarray, np.ndarray]:
    """``(counts, dyadic)``: ``[S, X, Y]`` int64 counts with each row summing to ``2^bits``, and
    the float64 table ``counts / 2^bits`` (exact; rows sum to exactly 1).

    Args:
      table: ``[S, X, Y]`` non-negative, finite, every row with mass (rows are divided by their
        sums first).
      bits: ``1 … 53``; a row with more positive entries than ``2^bits`` cannot keep its support
        (``ValueError``).
    """
    bits, flat = _checked(table, bits)
    counts = np.empty(flat.shape, dtype=np.int64)
    rows = _chunk_rows(flat.shape[1])
    for lo in range(0, flat.shape[0], rows):
        counts[lo:lo + rows] = _round_rows(flat[lo:lo + rows], bits)
    counts = counts.reshape(np.shape(table))
    return counts, np.ldexp(counts.astype(np.float64), -bits)


def dyadic(table, bits: int = DEFAULT_BITS) -> np.ndarray:
    """The float64 table ``counts / 2^bits`` of :func:`quantize`, without the table of counts:
    rounded a chunk of rows at a time into one output array (the certifier's memory for a
    10⁸-entry table is then the table and its rounding, not also 800 MB of counts and a cast)."""
    bits, flat = _checked(table, bits)
    out = np.empty(flat.shape)
    rows = _chunk_rows(flat.shape[1])
    for lo in range(0, flat.shape[0], rows):
        out[lo:lo + rows] = np.ldexp(_round_rows(flat[lo:lo + rows], bits).astype(np.float64), -bits)
    return out.reshape(np.shape(table))


def _checked(table, bits: int) -> tuple[int, np.ndarray]:
    """``(bits, table as [S·X, Y] float64)`` after :func:`quantize`'s checks."""
    bits = _check_bits(bits)
    A = np.asarray(table, dtype=np.float64)
    if A.ndim != 3 or not np.all(np.isfinite(A)) or np.any(A < 0) or np.any(A.sum(axis=-1) <= 0):
        raise ValueError("table: expected [S, X, Y] finite, non-negative, every row with mass")
    if np.any((A > 0).sum(axis=-1) > 2**bits):
        raise ValueError(f"bits: a row has more positive entries than 2^{bits} counts")
    return bits, A.reshape(-1, A.shape[-1])


def dyadic_counts(table, bits: int) -> np.ndarray | None:
    """The int64 counts ``table · 2^bits`` if every entry is an integer multiple of ``2^-bits``
    and every row's counts sum to exactly ``2^bits``; None otherwise (exact: scaling by a power
    of two and the integer sums do not round)."""
    bits = _check_bits(bits)
    A = np.asarray(table, dtype=np.float64)
    if not np.all(np.isfinite(A)) or np.any(A < 0):
        return None
    rows = A.sum(axis=-1)
    if np.any(rows < 0.5) or np.any(rows > 2.0):  # then no integer sum below can overflow int64
        return None
    scaled = np.ldexp(A, bits)
    if np.any(scaled != np.floor(scaled)) or np.any(scaled > 2.0**bits):
        return None
    counts = scaled.astype(np.int64)
    if np.any(counts.sum(axis=-1) != (np.int64(1) << bits)):
        return None
    return counts
