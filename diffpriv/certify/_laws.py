"""Output laws of every comparison, and two exactness facts about them.

A problem's constraints expand (``Problem.comparisons()``) into ``K`` comparisons; comparison
``k`` compares the output laws

    ``P_k = Σ_x (wa[k, x] / Σ wa[k]) · A[sa[k], x]``  and  ``Q_k`` likewise with ``sb``, ``wb``,

both of shape ``[n_out]``. The weights are divided by their (float) sum: the certified item
is the distribution *proportional to* the stored vector, which the specification keeps
unnormalised when its sum is within ``2^-40`` of 1 (so that it reads back bit-identical), and
the error analysis of :mod:`._safety` must not depend on how close to 1 that sum is. Local and
extended DP compare two rows (one non-zero weight); those laws are gathered, not multiplied,
so they are the stored table entries *exactly*. Dense weights (distribution privacy) go
through one matrix product per profile.

Besides the laws this module answers two questions the float64 soundness argument needs:

* :func:`identical_rows` — is ``P_k == Q_k`` guaranteed exactly (both sides put the same
  weights on equal rows, or every row entering the comparison is the same vector)? Then every
  level is exactly 0, whatever the budget.
* :func:`underflow_risk` — did a dense law entry land near the underflow range, where the
  relative error bound of float64 sums no longer holds? Such comparisons are not certified in
  float64 (use the exact mode).
"""

from __future__ import annotations

import numpy as np

from .._problem import Comparisons

__all__ = ["output_laws", "identical_rows", "underflow_risk", "TINY"]

TINY = 2.0**-1000
"""Dense law entries below this (≈ 9.3e-302) may carry absolute underflow error comparable to
their size; above it the absolute error ``n_in · 2^-1075`` is below ``2^-65`` relative."""


def _is_point(w: np.ndarray) -> np.ndarray:
    """``[K]`` — weights with a single non-zero entry (a point distribution once normalised)."""
    return np.count_nonzero(w, axis=1) == 1


def _normalised(w: np.ndarray) -> np.ndarray:
    """``[K, n_in]`` weights divided by their float sum (all-zero rows are left as they are)."""
    total = w.sum(axis=1, keepdims=True)
    return w / np.where(total > 0, total, 1.0)


def _lift(table: np.ndarray, s: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``[K, n_out]`` laws ``(w[k] / Σ w[k]) @ table[s[k]]``; point weights are gathered exactly."""
    out = np.empty((w.shape[0], table.shape[-1]))
    point = _is_point(w)
    if point.any():
        out[point] = table[s[point], np.argmax(w[point], axis=1)]
    w = _normalised(w)
    for p in np.unique(s[~point]):
        rows = np.flatnonzero(~point & (s == p))
        out[rows] = w[rows] @ table[p]
    return out


def output_laws(table: np.ndarray, comps: Comparisons) -> tuple[np.ndarray, np.ndarray]:
    """The two output laws of every comparison.

    Args:
      table: row-stochastic float64 array ``A`` of shape ``[n_profiles, n_in, n_out]``.
      comps: the problem's comparisons (``problem.comparisons()``), ``K`` of them.

    Returns:
      ``(P, Q)``, each of shape ``[K, n_out]``: ``P[k] = (wa[k] / Σ wa[k]) @ A[sa[k]]``,
      ``Q[k] = (wb[k] / Σ wb[k]) @ A[sb[k]]``.
    """
    table = np.asarray(table, dtype=np.float64)
    return _lift(table, comps.sa, comps.wa), _lift(table, comps.sb, comps.wb)


def identical_rows(table: np.ndarray, comps: Comparisons) -> np.ndarray:
    """``[K]`` bool: ``P_k = Q_k`` exactly, for one of two reasons.

    * Both sides put the same weights on equal rows (``wa == wb`` and ``A[sa, x] == A[sb, x]``
      wherever ``wa[x] > 0``). With ``sa == sb`` (e.g. a DistP pair of two items of one profile
      with the same distribution) this holds for every table.
    * Every row entering comparison ``k`` (both sides) is the same vector.

    Either way ``P_k = Q_k`` also after normalising the rows and the weights exactly, so every
    level of the comparison is exactly 0. This is how a zero budget (``ε = 0``, or an
    extended-DP pair at distance 0) can be certified in float64, where a margin cannot help.
    (Local and extended DP never compare an input with itself: the specification rejects such
    pairs, so for them only the second reason applies.)
    """
    table = np.asarray(table, dtype=np.float64) + 0.0  # -0.0 -> +0.0: compare values, not bits
    ns, nx, ny = table.shape
    _, ids = np.unique(table.reshape(-1, ny), axis=0, return_inverse=True)
    ids = np.asarray(ids).reshape(ns, nx)
    none = ns * nx

    def span(s: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        used = w > 0
        row_ids = ids[s]  # [K, n_in]
        return np.where(used, row_ids, none).min(axis=1), np.where(used, row_ids, -1).max(axis=1)

    lo_a, hi_a = span(comps.sa, comps.wa)
    lo_b, hi_b = span(comps.sb, comps.wb)
    same_weights = np.all(comps.wa == comps.wb, axis=1)
    same_rows = np.all((ids[comps.sa] == ids[comps.sb]) | (comps.wa == 0), axis=1)
    return (same_weights & same_rows) | ((lo_a == hi_a) & (lo_b == hi_b) & (lo_a == lo_b))


def underflow_risk(
    table: np.ndarray, comps: Comparisons, P: np.ndarray, Q: np.ndarray
) -> np.ndarray:
    """``[K]`` bool: a dense law entry is below :data:`TINY` although some product is non-zero.

    For such an entry the computed value may be far (relatively) from the exact one, or even 0
    when the exact value is positive, so a float64 ratio bound proves nothing. Point weights are
    never at risk: their laws are table entries, copied exactly.
    """
    table = np.asarray(table, dtype=np.float64)
    risk = np.zeros(comps.size, dtype=bool)
    for s, w, law in ((comps.sa, comps.wa, P), (comps.sb, comps.wb, Q)):
        dense = ~_is_point(w)
        for p in np.unique(s[dense]):
            rows = np.flatnonzero(dense & (s == p))
            nonzero = (w[rows] > 0).astype(np.float64) @ (table[p] > 0).astype(np.float64)
            risk[rows] |= np.any((nonzero > 0) & (law[rows] < TINY), axis=1)
    return risk
