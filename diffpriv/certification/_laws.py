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

Memory: the certifier never holds the laws of every comparison at once. :class:`Laws` serves
them a chunk at a time (:func:`chunks`: at most :data:`CHUNK` law entries per side), so a pass
over all comparisons costs the table plus a few chunks. Pair laws are gathered per chunk;
mixture laws are lifted once, all together (a BLAS product's rounding depends on its shape, so
lifting per chunk would make a law depend on the chunk size), and kept: ``[Km, n_out]`` per
side, the size of the mixture blocks' own ``[Km, n_in]`` weights when ``n_out = n_in``.
Nothing of size ``n_in²`` is built for pair blocks.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import numpy as np

from diffpriv.problems._blocks import Block, MixtureBlock, PairBlock
from diffpriv.problems._size import CHUNK  # defined with the sizes it sets

__all__ = ["CHUNK", "Laws", "chunks", "output_laws", "identical_rows", "underflow_risk", "offsets",
           "TINY", "law_error"]

TINY = 2.0**-1000
"""Dense law entries below this (≈ 9.3e-302) may carry absolute underflow error comparable to
their size; above it the absolute error ``n_in · 2^-1075`` is below ``2^-65`` relative."""



def law_error(n_in: int, n_out: int) -> float:
    """``e_P = (2 n_in + 2 + 17 n_out)·2^-53``: a bound on the relative error of a float64 law
    entry against the certified mechanism's exact one (derived in :mod:`._safety`)."""
    return (2.0 * n_in + 2.0 + 17.0 * n_out) * 2.0**-53


def _check_block(block) -> None:
    if not isinstance(block, (PairBlock, MixtureBlock)):
        raise TypeError(f"the certifier does not know blocks of type {type(block).__name__}")


def offsets(blocks: tuple[Block, ...]) -> np.ndarray:
    """``[len(blocks) + 1]`` where each block's comparisons start in the flat order."""
    for b in blocks:
        _check_block(b)
    return np.concatenate([[0], np.cumsum([b.size for b in blocks], dtype=np.int64)]).astype(np.int64)


def chunks(blocks: tuple[Block, ...], n_out: int) -> Iterator[tuple[int, int, int]]:
    """``(i, lo, hi)``: comparisons ``lo … hi − 1`` (flat order), all of block ``i``; consecutive
    runs of at most ``max(1, CHUNK // n_out)`` that cover every comparison once, in order."""
    off = offsets(blocks)
    step = max(1, CHUNK // max(1, n_out))
    for i in range(len(blocks)):
        for lo in range(int(off[i]), int(off[i + 1]), step):
            yield i, lo, min(lo + step, int(off[i + 1]))


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


def _lift_all(table: np.ndarray, mixtures: tuple[MixtureBlock, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``([Km, n_out], [Km, n_out])`` the laws of every comparison of ``mixtures``, in order."""
    if not mixtures:
        return np.empty((0, table.shape[-1])), np.empty((0, table.shape[-1]))
    return tuple(_lift(table, np.concatenate([getattr(b, s) for b in mixtures]),
                       np.concatenate([getattr(b, w) for b in mixtures]))
                 for s, w in (("sa", "wa"), ("sb", "wb")))


class Laws:
    """The output laws ``P_k``, ``Q_k`` of every comparison of ``blocks`` for ``table``, served a
    chunk at a time (:meth:`chunks`) or one at a time (:meth:`at`).

    A mixture block's laws are lifted once, together with every other mixture block's (one
    matrix product per profile and side), so that a law does not depend on how the comparisons
    are split into blocks or chunks; a pair block's are gathered from the table when asked for.
    The laws served are those the levels are computed from: ``Q_k = P_k`` where
    :func:`identical_rows` proves the two equal exactly (float rounding could otherwise tell
    them apart), then each mixing of :meth:`mixed` applied in turn.

    Attributes:
      table: ``[n_profiles, n_in, n_out]`` float64 (not copied).
      blocks: the comparison blocks, ``K`` comparisons in all.
      identical: ``[K]`` :func:`identical_rows`.
      underflow: ``[K]`` :func:`underflow_risk` of the table's laws.
      mixing: the ``(t, ν)`` applied in turn to every law: ``(1 − t)·P + t·ν``.
    """

    def __init__(self, table: np.ndarray, blocks: tuple[Block, ...]):
        self.table = np.asarray(table, dtype=np.float64)
        self.blocks = tuple(blocks)
        self.offsets = offsets(self.blocks)
        self.mixing: tuple[tuple[float, np.ndarray], ...] = ()
        self.identical = identical_rows(self.table, self.blocks)
        self.underflow = np.zeros(self.size, dtype=bool)
        mix = [i for i, b in enumerate(self.blocks) if isinstance(b, MixtureBlock)]
        mixtures = tuple(self.blocks[i] for i in mix)
        sizes = [b.size if isinstance(b, MixtureBlock) else 0 for b in self.blocks]
        self._lifted_at = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])  # per block
        self._lifted = _lift_all(self.table, mixtures)
        if mixtures:
            where = np.concatenate([np.arange(self.offsets[i], self.offsets[i + 1]) for i in mix])
            P, Q = self._lifted
            Q = np.where(self.identical[where][:, None], P, Q)
            self.underflow[where] = underflow_risk(self.table, mixtures, P, Q)

    @property
    def size(self) -> int:
        """``K``, the number of comparisons."""
        return int(self.offsets[-1])

    def mixed(self, t: float, nu: np.ndarray) -> Laws:
        """These laws mixed with ``ν`` (``[n_out]``) at weight ``t``: ``(1 − t)·P + t·ν``."""
        out = copy.copy(self)
        out.mixing = self.mixing + ((t, np.asarray(nu, dtype=np.float64)),)
        return out

    def raw(self, i: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Fresh ``[hi − lo, n_out]`` copies of the laws of comparisons ``lo … hi − 1`` of block
        ``i``, as computed from the table (before :attr:`identical` and :attr:`mixing`)."""
        block, first = self.blocks[i], int(self.offsets[i])
        if isinstance(block, PairBlock):  # rows copied exactly
            k = slice(lo - first, hi - first)
            return self.table[block.s[k], block.a[k]], self.table[block.s[k], block.b[k]]
        k = slice(int(self._lifted_at[i]) + lo - first, int(self._lifted_at[i]) + hi - first)
        return self._lifted[0][k].copy(), self._lifted[1][k].copy()

    def _laws(self, i: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        P, Q = self.raw(i, lo, hi)
        same = self.identical[lo:hi]
        Q[same] = P[same]
        for t, nu in self.mixing:
            P, Q = (1.0 - t) * P + t * nu, (1.0 - t) * Q + t * nu
        return P, Q

    def chunks(self) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
        """``(lo, hi, P, Q)`` over :func:`chunks`: the ``[hi − lo, n_out]`` laws of comparisons
        ``lo … hi − 1``, fresh arrays (the caller may overwrite them)."""
        for i, lo, hi in chunks(self.blocks, self.table.shape[-1]):
            yield (lo, hi, *self._laws(i, lo, hi))

    def at(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``[n_out]`` laws ``(P_k, Q_k)`` of comparison ``k``, as :meth:`chunks` serves them."""
        i = int(np.searchsorted(self.offsets, k, side="right")) - 1
        P, Q = self._laws(i, k, k + 1)
        return P[0], Q[0]


def output_laws(table: np.ndarray, blocks: tuple[Block, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The two output laws of every comparison, all at once (``O(K · n_out)``: for small problems;
    the certifier goes through :class:`Laws` a chunk at a time).

    Args:
      table: row-stochastic float64 array ``A`` of shape ``[n_profiles, n_in, n_out]``.
      blocks: the problem's comparison blocks (``problem.blocks()``), ``K`` comparisons in all.

    Returns:
      ``(P, Q)``, each of shape ``[K, n_out]``, block by block: ``P[k] = A[s_k, a_k]``,
      ``Q[k] = A[s_k, b_k]`` for a pair block; ``P[k] = (wa[k] / Σ wa[k]) @ A[sa[k]]``,
      ``Q[k] = (wb[k] / Σ wb[k]) @ A[sb[k]]`` for a mixture block (lifted as :class:`Laws` does).
    """
    laws = Laws(table, blocks)
    parts = [laws.raw(i, lo, hi) for i, lo, hi in chunks(laws.blocks, laws.table.shape[-1])]
    ny = laws.table.shape[-1]
    return tuple(np.concatenate([p[side] for p in parts]) if parts else np.empty((0, ny))
                 for side in (0, 1))


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
    pairs, so for them only the second reason applies.) Rows are compared as values
    (``−0.0 = +0.0``); pair rows a chunk at a time, without numbering the table's rows.
    """
    table = np.asarray(table, dtype=np.float64)
    ns, nx, ny = table.shape
    off = offsets(blocks)
    out = np.zeros(int(off[-1]), dtype=bool)
    if any(isinstance(b, MixtureBlock) for b in blocks):  # number the distinct rows by their bytes
        seen: dict[bytes, int] = {}  # (a sort of the rows, np.unique(axis=0), took 1.6 s at 48×48)
        rows = table.reshape(-1, ny) + 0.0  # -0.0 -> +0.0
        ids = np.fromiter((seen.setdefault(r.tobytes(), len(seen)) for r in rows), np.int64,
                          count=rows.shape[0]).reshape(ns, nx)
    none = ns * nx

    def span(s: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        used = w > 0
        row_ids = ids[s]  # [K, n_in]
        return np.where(used, row_ids, none).min(axis=1), np.where(used, row_ids, -1).max(axis=1)

    for i, lo, hi in chunks(blocks, ny):
        block, k = blocks[i], slice(lo - int(off[i]), hi - int(off[i]))
        if isinstance(block, PairBlock):
            s = block.s[k]
            same = np.all(table[s, block.a[k]] == table[s, block.b[k]], axis=1)
        else:
            sa, wa, sb, wb = block.sa[k], block.wa[k], block.sb[k], block.wb[k]
            lo_a, hi_a = span(sa, wa)
            lo_b, hi_b = span(sb, wb)
            same_weights = np.all(wa == wb, axis=1)
            same_rows = np.all((ids[sa] == ids[sb]) | (wa == 0), axis=1)
            same = (same_weights & same_rows) | ((lo_a == hi_a) & (lo_b == hi_b) & (lo_a == lo_b))
        out[lo:hi] = same
    return out


def underflow_risk(
    table: np.ndarray, blocks: tuple[Block, ...], P: np.ndarray, Q: np.ndarray
) -> np.ndarray:
    """``[K]`` bool: a dense law entry is below :data:`TINY` although some product is non-zero.

    ``P``, ``Q``: the ``[K, n_out]`` laws of ``blocks`` (:func:`output_laws`; only the mixture
    blocks' rows are read). For such an entry the computed value may be far (relatively) from
    the exact one, or even 0 when the exact value is positive, so a float64 ratio bound proves
    nothing. Pair blocks and point weights are never at risk: their laws are table entries,
    copied exactly.
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
