"""The interior point's Newton systems (:mod:`._interior`): the pair rows in a band order, each
output's block factorisation, and the rows' sums' system solved by conjugate gradients.

For output ``y`` the Newton step's table part is ``H_y Δa_y = q_y + Δμ`` with ``H_y = Gᵀ diag(w_y) G +
diag(d_y)`` (``G`` the pair rows, ``w = λ/s``, ``d = z/a``): banded in the rows' order, so block
tridiagonal in blocks of the band's width ``u`` (:class:`Pairs`), and factorised so by batched
matrix products over the outputs (:class:`Factors`). The rows' sums tie the outputs together:
``Δμ`` solves ``S Δμ = r`` with ``S = Σ_y H_y⁻¹``, dense ``|rows| × |rows|``.

**The band of ``S``.** Forming ``S`` exactly takes ``2·n²·u`` operations an output (``n`` rows), the
backward recursion over every pair of block rows; a product ``S v`` takes one solve an output,
``4·n·u``. The entries of ``H_y⁻¹`` fall off fast away from its diagonal blocks (a block is a row
of the grid), so a run forms only ``P``, the part of ``S`` within ``band`` blocks of its diagonal
(``2·n·u²·(band + 1)`` an output), and solves ``S Δμ = r`` by conjugate gradients preconditioned
by ``P``'s Cholesky factor, each product ``S v`` by the outputs' solves: the step is Newton's to
the same accuracy as with the whole ``S``. On the Sacramento sales' 32×32 grid (8-neighbour
cells, 2 per km, all 1,024 outputs; ``n = 1,024``, ``u = 33``, 32 blocks) the condition number of
``P⁻¹S`` at a band of 4 blocks was ``1 + 4·10⁻⁸`` two iterations after the outputs joined, ``1.001``
eleven later and 1.55 near the end (a band of 6: 1.002, of 8: 1.0002); conjugate gradients then
need as many products as the refinement with the whole ``S`` did. Where ``P`` is not positive
definite, or the gradients do not reach the rows' accuracy in :data:`LIMIT` steps, the whole
``S`` is formed, and the run doubles its band for the iterations that follow.
"""

from __future__ import annotations

import concurrent.futures
import os
import time

import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.sparse.csgraph
import threadpoolctl

from diffpriv.problems._problem import Problem

__all__ = ["Factors", "Pairs", "band", "in_threads", "workers"]

BATCH = 64
"""Outputs factorised together (their blocks' products batched)."""
TINY = 1e-100
"""Entries below this share of the largest are flushed to 0 before a factorisation (:func:`flushed`)."""
LEAST = 3
"""Conjugate-gradient steps each Newton direction takes at least: the first, then two that refine
the rows' sums (without them the rows' sums drifted from 1 by more than the budgets' margin once
the gap fell below 10⁻⁵, and an iterate failed its certificate unrepaired)."""
MOST = 7
"""Steps with the whole ``S`` at most (the rows' sums are then as exact as its factor allows)."""
LIMIT = 30
"""Steps with the band of ``S`` before the whole of it is formed."""


def band(r: int, blocks: int) -> int:
    """The band of ``S`` to form for ``blocks`` on ``r`` block rows: all of ``S`` (``r − 1``) where
    the band would hold more than half of its blocks' work."""
    return r - 1 if 2 * (blocks + 1) >= r else blocks


class Pairs:
    """The pair rows over the flattened rows in a band-narrowing order: ``G`` (tightened
    budgets), ``M_ε`` (the real ones), and the map from ``(λ/s, z/a)`` to every ``H_y``'s band."""

    def __init__(self, problem: Problem):
        from diffpriv.solvers._column_pricing import into_rows
        from diffpriv.solvers._columns import _edges
        from diffpriv.solvers._rows import tighten_eps

        ns, nx, ny = problem.shape
        self.n = n = ns * nx
        self.edges = i, j, eps = _edges(problem, tight=False)  # the problem's row order, real budgets
        order = self._order(n, i, j)
        self.order, self.back = order, np.argsort(order)
        i, j = self.back[i], self.back[j]  # positions in the new order
        self.p = p = i.size
        self.i, self.j, self.eps = i, j, tighten_eps(eps)
        k, k_true = np.exp(self.eps), np.exp(eps)
        rows = np.r_[np.arange(p), np.arange(p)]
        self.g = scipy.sparse.csr_array((np.r_[np.ones(p), -k], (rows, np.r_[i, j])), shape=(p, n))
        self.gt = self.g.T.tocsr()
        self.true_t = scipy.sparse.csr_array((np.r_[np.ones(p), -k_true], (rows, np.r_[i, j])),
                                             shape=(p, n)).T.tocsr()
        self.into = into_rows(n, j, eps)  # the real budgets' e^ε at each pair's row j
        self.u = u = max(int(np.max(np.abs(i - j))), 1)
        self.r = r = -(-n // u)  # blocks of u rows: H_y is block tridiagonal
        # where each source (a pair's λ/s, a row's z/a) adds to the blocks A_k = H[k, k] (both
        # triangles) and C_k = H[k, k + 1], flattened: A first, then C
        heads = np.r_[i, j, i, j, np.arange(n)]
        tails = np.r_[i, j, j, i, np.arange(n)]
        src = np.r_[np.arange(p), np.arange(p), np.arange(p), np.arange(p), p + np.arange(n)]
        vals = np.r_[np.ones(p), k * k, -k, -k, np.ones(n)]
        bh, bt = heads // u, tails // u
        same, up = bh == bt, bt == bh + 1
        where = np.where(same, (bh * u + heads % u) * u + tails % u,
                         r * u * u + (bh * u + heads % u) * u + tails % u)
        keep = same | up  # C_k holds the upper block; the lower is its transpose
        block_map = scipy.sparse.csr_array((vals[keep], (where[keep], src[keep])),
                                           shape=((2 * r - 1) * u * u, p + n))
        self.filled = np.flatnonzero(np.diff(block_map.indptr))  # the blocks' entries that sources reach
        self.block_map = block_map[self.filled]
        extra = np.arange(n, r * u)
        self.pad = ((extra // u) * u + extra % u) * u + extra % u  # the rows beyond n: identity

    def blocks(self, w: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(A [m, r, u, u], C [m, r − 1, u, u])``: each of the ``m`` columns' ``H = Gᵀ diag(w) G +
        diag(d)`` as its diagonal blocks and the blocks above them (the rows padded to ``r·u``)."""
        u, r, m = self.u, self.r, w.shape[1]
        flat = np.zeros((m, (2 * r - 1) * u * u))
        flat[:, self.filled] = (self.block_map @ np.vstack([w, d])).T
        flat[:, self.pad] = 1.0
        return flat[:, :r * u * u].reshape(m, r, u, u), flat[:, r * u * u:].reshape(m, r - 1, u, u)

    @staticmethod
    def _order(n: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """The rows' order: their own where it keeps the band as narrow as reverse Cuthill–McKee's."""
        graph = scipy.sparse.csr_array((np.ones(i.size), (i, j)), shape=(n, n))
        rcm = scipy.sparse.csgraph.reverse_cuthill_mckee(graph, symmetric_mode=False).astype(np.int64)
        back = np.argsort(rcm)
        own = int(np.max(np.abs(i - j), initial=0))
        return np.arange(n) if own <= int(np.max(np.abs(back[i] - back[j]), initial=0)) else rcm


class Factors:
    """One iteration's factorisations: each output's ``H_y = L D Lᵀ`` by blocks of ``u`` rows
    (``H_y`` is block tridiagonal: ``D_k = A_k − C_{k−1}ᵀ D_{k−1}⁻¹ C_{k−1}``, kept as ``D_k⁻¹`` and
    ``P_k = D_k⁻¹ C_k``), and ``S = Σ_y H_y⁻¹`` within ``band`` blocks of its diagonal (all of it
    where ``band`` is ``None``) from the blocks' backward recursion ``X_{k,j} = −P_k X_{k+1,j}``,
    ``X_{k,k} = D_k⁻¹ − X_{k,k+1} P_kᵀ`` (the entries within the band need only those within it),
    Cholesky-factorised (``schur``). Batched matrix products over the outputs, where LAPACK's
    banded Cholesky, one output at a time, ran into subnormal numbers (9 s for one 576-row band of
    width 24). The batches are shared among one thread per CPU (:func:`workers`), BLAS held to
    one thread each: numpy runs a batch's small products on one CPU, and BLAS's own threads only
    competed (the Sacramento sales' 32×32 grid, every output, 8-neighbour cells: 5.6–6.4 s an
    iteration on the 2-core CPU, 3.0–4.0 s so)."""

    def __init__(self, pairs: Pairs, w: np.ndarray, d: np.ndarray, band: int | None = None):
        n, u, r, m = pairs.n, pairs.u, pairs.r, w.shape[1]
        self.n, self.u, self.r = n, u, r
        self.dinv = np.empty((m, r, u, u))
        self.p = np.empty((m, r - 1, u, u))
        batches = [slice(y0, min(y0 + BATCH, m)) for y0 in range(0, m, BATCH)]
        k = min(workers(), len(batches))
        self.shares = [batches[i::k] for i in range(k)]
        self.blas = 1 if k > 1 else None
        with threadpoolctl.threadpool_limits(self.blas, user_api="blas"):
            in_threads(lambda share: self._forward(pairs, w, d, share), self.shares)
        self.steps = 0  # the most conjugate-gradient steps a direction took
        self.widened = False  # whether the band gave way to all of S
        self.formed = 0.0  # seconds forming S (its band, or all of it)
        self.beyond = 0.0  # seconds of the solves beyond the LEAST steps of each direction
        self.band = r - 1 if band is None else min(band, r - 1)
        if self.band < r - 1:
            try:
                self._form(self.band)
                return
            except np.linalg.LinAlgError:  # the band is not positive definite: all of S
                self.band, self.widened = r - 1, True
        self._form(r - 1)

    @property
    def exact(self) -> bool:
        """Whether ``schur`` factorises the whole ``S``."""
        return self.band >= self.r - 1

    def _forward(self, pairs: Pairs, w: np.ndarray, d: np.ndarray, batches: list[slice]) -> None:
        """Factorises the outputs of ``batches`` into ``dinv`` and ``p``."""
        r = self.r
        for ys in batches:
            a, c = pairs.blocks(w[:, ys], d[:, ys])
            dinv, p = self.dinv[ys], self.p[ys]
            for k in range(r):
                dk = a[:, k] if k == 0 else a[:, k] - np.swapaxes(c[:, k - 1], 1, 2) @ p[:, k - 1]
                dk = flushed(dk)
                np.linalg.cholesky(dk)  # LinAlgError where the Newton system lost definiteness
                dinv[:, k] = np.linalg.inv(dk)
                if k + 1 < r:
                    p[:, k] = dinv[:, k] @ c[:, k]

    def _form(self, band: int) -> None:
        """``schur``: the Cholesky factor of ``S`` within ``band`` blocks of its diagonal."""
        n, start = self.n, time.perf_counter()
        with threadpoolctl.threadpool_limits(self.blas, user_api="blas"):
            totals = in_threads(lambda share: self._sum(share, band), self.shares)
        total = sum(totals[1:], totals[0])
        total = np.triu(total) + np.triu(total, 1).T
        self.schur = scipy.linalg.cho_factor(flushed(total[:n, :n]))
        self.band = band
        self.formed += time.perf_counter() - start

    def _sum(self, batches: list[slice], band: int) -> np.ndarray:
        """The upper triangle of the sum of the ``H_y⁻¹`` of the outputs of ``batches`` within
        ``band`` blocks of the diagonal (padded to ``r·u`` rows)."""
        u, r = self.u, self.r
        total = np.zeros((r * u, r * u))
        for ys in batches:
            dinv, p = self.dinv[ys], self.p[ys]
            # block row k of every H_y⁻¹ (its blocks k … k + band) in one of two buffers, each
            # made from the one below it in the other, from the last up
            rows = np.empty((2, dinv.shape[0], u, (band + 1) * u))
            rows[(r - 1) % 2, :, :, :u] = dinv[:, r - 1]
            total[(r - 1) * u:, (r - 1) * u:] += dinv[:, r - 1].sum(axis=0)
            for k in range(r - 2, -1, -1):
                below, row = rows[(k + 1) % 2], rows[k % 2]
                span = min(band, r - 1 - k) * u
                q = -p[:, k]  # (−P_k: no pass to negate the products)
                np.matmul(q, below[:, :, :span], out=row[:, :, u:u + span])
                row[:, :, :u] = dinv[:, k] + row[:, :, u:2 * u] @ np.swapaxes(q, 1, 2)
                total[k * u:(k + 1) * u, k * u:k * u + u + span] += row[:, :, :u + span].sum(axis=0)
        return total

    def newton(self, q: np.ndarray, sums: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
        """``(Δμ, Δa)`` with ``Δa_y = H_y⁻¹ (q_y + Δμ)`` for every output (``q`` ``[n, m]``) and
        ``Σ_y Δa_y = sums`` to ``tol`` in each row where the factors allow: conjugate gradients on
        ``S Δμ = sums − Σ_y H_y⁻¹ q_y``, preconditioned by ``schur`` (module docstring); the whole
        ``S`` is formed where the band's steps do not get there in :data:`LIMIT`."""
        da = self.solve(q)
        dmu = np.zeros(self.n)
        off = sums - da.sum(axis=1)
        step = scipy.linalg.cho_solve(self.schur, off)
        direction, rz, k, total = step, float(off @ step), 0, 0
        while True:
            start = time.perf_counter()
            t = self.solve(np.broadcast_to(direction[:, None], da.shape))
            if total >= LEAST:
                self.beyond += time.perf_counter() - start
            curve = float(direction @ t.sum(axis=1))
            if not curve > 0:  # no more to gain in floating point
                break
            alpha = rz / curve
            dmu += alpha * direction
            da += alpha * t
            off = sums - da.sum(axis=1)  # the residual itself, not its recurrence
            k, total = k + 1, total + 1
            if k >= LEAST and np.max(np.abs(off)) <= tol or self.exact and k >= MOST:
                break
            if not self.exact and k >= LIMIT:  # the band is too narrow: all of S, from here
                self._form(self.r - 1)
                self.widened, direction, k = True, None, 0
            step = scipy.linalg.cho_solve(self.schur, off)
            rz, previous = float(off @ step), rz
            direction = step if direction is None else step + (rz / previous) * direction
        self.steps = max(self.steps, total)
        return dmu, da

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """``H_y⁻¹ rhs_y`` for every output (``rhs`` ``[n, m]``), the outputs shared among one
        thread per CPU where each gets at least :data:`BATCH`."""
        m = rhs.shape[1]
        k = min(workers(), m // BATCH)
        if k <= 1:
            return self._solve(rhs, slice(0, m))
        cuts = np.linspace(0, m, k + 1).astype(int)
        parts = [slice(int(lo), int(hi)) for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)]
        return np.concatenate(in_threads(lambda ys: self._solve(rhs[:, ys], ys), parts), axis=1)

    def _solve(self, rhs: np.ndarray, ys: slice) -> np.ndarray:
        """``H_y⁻¹ rhs`` for the outputs ``ys`` (``rhs`` ``[n, len(ys)]``)."""
        n, u, r = self.n, self.u, self.r
        p, dinv = self.p[ys], self.dinv[ys]
        m = rhs.shape[1]
        z = np.zeros((m, r * u))
        z[:, :n] = rhs.T
        z = z.reshape(m, r, u, 1)
        for k in range(r - 1):  # L z = rhs
            z[:, k + 1] -= np.swapaxes(p[:, k], 1, 2) @ z[:, k]
        x = dinv @ z  # D
        for k in range(r - 2, -1, -1):  # Lᵀ x = D⁻¹ z
            x[:, k] -= p[:, k] @ x[:, k + 1]
        return x.reshape(m, r * u)[:, :n].T


def workers() -> int:
    """Threads that factorise the outputs: the CPUs this process may run on (numpy runs one
    output's small products on one of them)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # (not on every platform)
        return max(1, os.cpu_count() or 1)


def in_threads(work, items) -> list:
    """``[work(item) for item in items]``, each in a thread of its own where there are several
    (numpy's batched products and HiGHS's solves let other threads run)."""
    items = list(items)
    if len(items) <= 1:
        return [work(item) for item in items]
    with concurrent.futures.ThreadPoolExecutor(len(items)) as pool:
        return list(pool.map(work, items))


def flushed(x: np.ndarray) -> np.ndarray:
    """``x`` with entries below :data:`TINY` of its largest set to 0: products of such entries fall
    among subnormal numbers, on which the CPU's arithmetic is a hundred times slower (the 256-row
    dense system of the Sacramento sales' 16×16 grid took 0.36 s to factorise, 1 ms without)."""
    top = float(np.max(np.abs(x), initial=0.0))
    return np.where(np.abs(x) < TINY * top, 0.0, x)
