"""Output laws of every comparison, and two exactness facts about them.

A problem's constraints expand (``Problem.blocks()``, :mod:`diffpriv.problems._blocks`) into
blocks of comparisons; the ``K`` comparisons are numbered block by block, in block order.
Comparison ``k`` compares two output laws ``P_k``, ``Q_k`` of shape ``[n_out]``:

* a :class:`~diffpriv.problems._blocks.PairBlock` compares two rows of the table,
  ``P_k = A[s_k, a_k]`` and ``Q_k = A[s_k, b_k]`` (local and extended DP). These laws are
  gathered, not multiplied, so they are the stored table entries *exactly*;
* a :class:`~diffpriv.problems._blocks.MixtureBlock` compares lifted laws
  ``P_k = Σ_x (wa[k, x] / Σ wa[k]) · A[sa[k], x]`` (and ``Q_k`` likewise with ``sb``, ``wb``).
  The weights are divided by their (float) sum: the certified item is the distribution
  *proportional to* the stored vector, which the specification keeps unnormalised when its
  sum is within ``2^-40`` of 1 (so that it reads back bit-identical), and the error analysis
  of :mod:`._safety` must not depend on how close to 1 that sum is. A weight vector with a
  single non-zero entry is a point: its law is gathered exactly too. Dense weights
  (distribution privacy) go through one matrix product per profile.

Besides the laws this module answers two questions the float64 soundness argument needs:

* :func:`identical_rows` — is ``P_k == Q_k`` guaranteed exactly (both sides put the same
  weights on equal rows, or every row entering the comparison is the same vector)? Then every
  level is exactly 0, whatever the budget.
* :func:`underflow_risk` — did a dense law entry land near the underflow range, where the
  relative error bound of float64 sums no longer holds? Such comparisons are not certified in
  float64 (use the exact mode). Gathered laws (pairs, point weights) are never at risk.

Memory: ``O(K · n_out)`` for the laws, plus ``O(K · n_in)`` for the mixture blocks' own
weights; nothing of size ``n_in²`` is built for pair blocks.
"""

from __future__ import annotations

import numpy as np

from diffpriv.problems._blocks import Block, MixtureBlock, PairBlock

__all__ = ["output_laws", "identical_rows", "underflow_risk", "offsets", "TINY"]

TINY = 2.0**-1000
"""Dense law entries below this (≈ 9.3e-302) may carry absolute underflow error comparable to
their size; above it the absolute error ``n_in · 2^-1075`` is below ``2^-65`` relative."""


def _check_block(block) -> None:
    if not isinstance(block, (PairBlock, MixtureBlock)):
        raise TypeError(f"the certifier does not know blocks of type {type(block).__name__}")


def offsets(blocks: tuple[Block, ...]) -> np.ndarray:
    """``[len(blocks) + 1]`` where each block's comparisons start in the flat order."""
    for b in blocks:
        _check_block(b)
    return np.concatenate([[0], np.cumsum([b.size for b in blocks], dtype=np.int64)]).astype(np.int64)


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


def output_laws(table: np.ndarray, blocks: tuple[Block, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The two output laws of every comparison.

    Args:
      table: row-stochastic float64 array ``A`` of shape ``[n_profiles, n_in, n_out]``.
      blocks: the problem's comparison blocks (``problem.blocks()``), ``K`` comparisons in all.

    Returns:
      ``(P, Q)``, each of shape ``[K, n_out]``, block by block: ``P[k] = A[s_k, a_k]``,
      ``Q[k] = A[s_k, b_k]`` for a pair block; ``P[k] = (wa[k] / Σ wa[k]) @ A[sa[k]]``,
      ``Q[k] = (wb[k] / Σ wb[k]) @ A[sb[k]]`` for a mixture block. The mixture blocks are lifted
      together, one matrix product per profile and side, so that a law does not depend on how
      the comparisons are split into blocks (a BLAS product's rounding may depend on its shape).
    """
    table = np.asarray(table, dtype=np.float64)
    ny = table.shape[-1]
    off = offsets(blocks)
    P, Q = np.empty((int(off[-1]), ny)), np.empty((int(off[-1]), ny))
    mixtures = []
    for i, block in enumerate(blocks):
        if isinstance(block, PairBlock):  # rows copied exactly
            P[off[i]:off[i + 1]] = table[block.s, block.a]
            Q[off[i]:off[i + 1]] = table[block.s, block.b]
        else:
            mixtures.append(i)
    if mixtures:
        where = np.concatenate([np.arange(off[i], off[i + 1]) for i in mixtures])
        for law, s, w in ((P, "sa", "wa"), (Q, "sb", "wb")):
            law[where] = _lift(table, np.concatenate([getattr(blocks[i], s) for i in mixtures]),
                               np.concatenate([getattr(blocks[i], w) for i in mixtures]))
    return P, Q


def identical_rows(table: np.ndarray, blocks: tuple[Block, ...]) -> np.ndarray:
    """``[K]`` bool: ``P_k = Q_k`` exactly, for one of two reasons.

    * Both sides put the same weights on equal rows (``wa == wb`` and ``A[sa, x] == A[sb, x]``
      wherever ``wa[x] > 0``). With ``sa == sb`` (e.g. a DistP pair of two items of one profile
      with the same distribution) this holds for every table.
    * Every row entering comparison ``k`` (both sides) is the same vector; for a pair block:
      rows ``(s_k, a_k)`` and ``(s_k, b_k)`` are equal vectors.

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

    off = offsets(blocks)
    out = np.zeros(int(off[-1]), dtype=bool)
    for i, block in enumerate(blocks):
        if isinstance(block, PairBlock):
            same = ids[block.s, block.a] == ids[block.s, block.b]
        else:
            lo_a, hi_a = span(block.sa, block.wa)
            lo_b, hi_b = span(block.sb, block.wb)
            same_weights = np.all(block.wa == block.wb, axis=1)
            same_rows = np.all((ids[block.sa] == ids[block.sb]) | (block.wa == 0), axis=1)
            same = (same_weights & same_rows) | ((lo_a == hi_a) & (lo_b == hi_b) & (lo_a == lo_b))
        out[off[i]:off[i + 1]] = same
    return out


def underflow_risk(
    table: np.ndarray, blocks: tuple[Block, ...], P: np.ndarray, Q: np.ndarray
) -> np.ndarray:
    """``[K]`` bool: a dense law entry is below :data:`TINY` although some product is non-zero.

    For such an entry the computed value may be far (relatively) from the exact one, or even 0
    when the exact value is positive, so a float64 ratio bound proves nothing. Pair blocks and
    point weights are never at risk: their laws are table entries, copied exactly.
    """
    table = np.asarray(table, dtype=np.float64)
    off = offsets(blocks)
    risk = np.zeros(int(off[-1]), dtype=bool)
    for i, block in enumerate(blocks):
        if isinstance(block, PairBlock):
            continue
        lo, hi = int(off[i]), int(off[i + 1])
        part = risk[lo:hi]  # a view: updated in place
        for s, w, law in ((block.sa, block.wa, P[lo:hi]), (block.sb, block.wb, Q[lo:hi])):
            dense = ~_is_point(w)
            for p in np.unique(s[dense]):
                rows = np.flatnonzero(dense & (s == p))
                nonzero = (w[rows] > 0).astype(np.float64) @ (table[p] > 0).astype(np.float64)
                part[rows] |= np.any((nonzero > 0) & (law[rows] < TINY), axis=1)
    return risk
