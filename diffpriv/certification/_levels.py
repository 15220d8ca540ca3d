"""Exact privacy levels of pairs of output laws (float64, vectorised over comparisons).

All functions take laws ``P``, ``Q`` of shape ``[..., n_out]`` (``[K, n_out]`` for ``K``
comparisons) and reduce the last axis. Nothing is smoothed: these are the quantities the
certificate states.

* Pure level: ``max_y |ln P[y] − ln Q[y]|``; an output with exactly one side 0 gives ``+∞``,
  outputs with both sides 0 are ignored. ``(ε, 0)``-DistP holds iff the level is ``≤ ε``.
* Hockey-stick: ``H_ε(P‖Q) = Σ_y max(0, P[y] − e^ε Q[y]) = max_{R⊆Y} P(R) − e^ε Q(R)``, the
  least δ with ``P(R) ≤ e^ε Q(R) + δ`` for every output set ``R`` — the seeds' approximate max
  divergence condition ``D∞^δ(P‖Q) ≤ ε``. :func:`delta_level` takes both directions.
* Tight ε for a given δ: the least ``ε ≥ 0`` with ``delta_level(P, Q, ε) ≤ δ``
  (:func:`tight_epsilon`), found exactly from the sorted likelihood ratios.
* Divergence level of a block measured in another divergence (KL, χ², Rényi, …):
  :func:`divergence_level`, a certified upper bound (both directions unless the block is
  ``directed``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from diffpriv.certification._laws import Laws, law_error
from diffpriv.measures._divergences import divergence
from diffpriv.problems._blocks import Block, budgets
from diffpriv.problems._problem import Problem

__all__ = [
    "pure_level",
    "hockey_stick",
    "delta_level",
    "tight_epsilon",
    "divergence_level",
    "wasserstein_level",
    "ComparisonLevels",
    "comparison_levels",
]


def pure_level(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """``max_y |ln P[y] − ln Q[y]|`` over the last axis; ``[..., n] -> [...]``.

    A ``y`` with exactly one of ``P[y]``, ``Q[y]`` equal to 0 gives ``+∞``; a ``y`` with both 0
    is ignored (an all-zero pair has level 0).
    """
    P, Q = np.asarray(P, np.float64), np.asarray(Q, np.float64)
    both = (P > 0) & (Q > 0)
    gap = np.abs(np.log(np.where(both, P, 1.0)) - np.log(np.where(both, Q, 1.0)))
    gap = np.where((P > 0) != (Q > 0), np.inf, gap)
    return gap.max(axis=-1, initial=0.0)


def hockey_stick(P: np.ndarray, Q: np.ndarray, eps) -> np.ndarray:
    """One direction: ``Σ_y max(0, P[y] − e^ε Q[y])``; ``eps`` broadcasts against ``[...]``.

    ``e^ε Q[y]`` is formed as ``h·(h·Q[y])`` with ``h = e^{ε/2}``: whenever ``e^ε Q[y] ≤ 1``
    (the only outputs that can contribute, ``P[y] ≤ 1``), ``h ≤ Q[y]^{-1/2} ≤ 2^537`` and
    ``h·Q[y] ≤ 1``, so nothing overflows although ``e^ε`` alone does for ``ε > 709.78`` (a
    subnormal ``Q[y]`` then still counts: ``e^720 · 1e-320 ≈ 1e-7``). Where the true product
    exceeds float64 the computed one is ``+∞`` and the term 0, as it should be. ``Q[y] = 0``
    gives ``e^ε Q[y] = 0`` for every ``ε``.
    """
    P, Q = np.asarray(P, np.float64), np.asarray(Q, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to +∞ is right; ∞ · 0 is masked
        h = np.exp(0.5 * np.asarray(eps, np.float64))[..., None]
        scaled = np.where(Q > 0, h * (h * Q), 0.0)
    return np.maximum(P - scaled, 0.0).sum(axis=-1)


def delta_level(P: np.ndarray, Q: np.ndarray, eps) -> np.ndarray:
    """The tight δ at ``ε``: ``max(H_ε(P‖Q), H_ε(Q‖P))``; ``[..., n] -> [...]``."""
    return np.maximum(hockey_stick(P, Q, eps), hockey_stick(Q, P, eps))


def _tight_one_way(P: np.ndarray, Q: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """``ln`` of the least ``c ≥ 0`` with ``D(c) = Σ_y max(0, P − cQ) ≤ δ``, for ``[K, n]`` laws.

    ``D`` is non-increasing, convex and piecewise linear in ``c`` with breakpoints at the
    likelihood ratios ``r_y = P_y / Q_y``. Sort them decreasingly; at ``c = r_i`` the active
    outputs are those ranked before ``i``, so ``D(r_i) = M + SP_i − r_i SQ_i`` with exclusive
    prefix sums ``SP``, ``SQ`` and ``M`` the mass of ``P`` where ``Q = 0`` (never removable).
    If ``M > δ`` no ``c`` works (``+∞``). Otherwise let ``i`` be the first breakpoint with
    ``D(r_i) > δ``; the answer lies on the segment left of it, where ``D`` is linear:
    ``c = (M + SP_i − δ) / SQ_i``.

    Ratios are kept as logarithms: ``r_y`` reaches ``2^1074`` (beyond float64) for a subnormal
    ``Q_y``, while ``r_i SQ_i ≤ SP_i ≤ 1`` always (every ``j < i`` has ``r_i Q_j ≤ P_j``).
    """
    K, n = P.shape
    finite = Q > 0
    used = finite & (P > 0)
    mass_inf = np.where(finite, 0.0, P).sum(axis=1)
    log_r = np.where(used, np.log(np.where(used, P, 1.0)) - np.log(np.where(used, Q, 1.0)), -np.inf)
    order = np.argsort(-log_r, axis=1, kind="stable")
    lr = np.take_along_axis(log_r, order, axis=1)
    p = np.take_along_axis(np.where(finite, P, 0.0), order, axis=1)
    q = np.take_along_axis(np.where(finite, Q, 0.0), order, axis=1)
    zero = np.zeros((K, 1))
    sp = np.concatenate([zero, np.cumsum(p, axis=1)], axis=1)  # [K, n+1], sp[:, i] = Σ_{j<i}
    sq = np.concatenate([zero, np.cumsum(q, axis=1)], axis=1)
    with np.errstate(divide="ignore"):  # ln 0 = −∞: an empty prefix, a zero numerator
        active_q = np.exp(lr + np.log(sq[:, :n]))  # r_i · SQ_i; −∞ (no ratio or prefix) gives 0
        d_at = mass_inf[:, None] + sp[:, :n] - active_q  # D(r_i), non-decreasing in i
        above = d_at > delta[:, None]
        first = np.where(above.any(axis=1), np.argmax(above, axis=1), n)
        rows = np.arange(K)
        sp_i, sq_i = sp[rows, first], sq[rows, first]
        top = mass_inf + sp_i - delta
        log_c = np.log(np.where(top > 0, top, 0.0)) - np.log(np.where(sq_i > 0, sq_i, 1.0))
    log_c = np.where(sq_i > 0, log_c, -np.inf)
    return np.where(mass_inf > delta, np.inf, log_c)


def tight_epsilon(P: np.ndarray, Q: np.ndarray, delta) -> np.ndarray:
    """Least ``ε ≥ 0`` with ``delta_level(P, Q, ε) ≤ δ``; ``[K, n] -> [K]``.

    Exact at the breakpoints (up to float64 rounding): the hockey-stick is linear in ``e^ε``
    between consecutive likelihood ratios, so the crossing is solved, not bisected. ``δ = 0``
    gives the pure level; ``+∞`` when mass on outputs the other law never emits exceeds δ.
    """
    P, Q = np.atleast_2d(np.asarray(P, np.float64)), np.atleast_2d(np.asarray(Q, np.float64))
    delta = np.broadcast_to(np.asarray(delta, np.float64), P.shape[:1])
    return np.maximum(np.maximum(_tight_one_way(P, Q, delta), _tight_one_way(Q, P, delta)), 0.0)


def divergence_level(block: Block, P: np.ndarray, Q: np.ndarray, law_error: float) -> np.ndarray:
    """A certified upper bound of ``max(D(P‖Q), D(Q‖P))`` (``D(P‖Q)`` for a ``directed`` block)
    for the exact laws, from float64 laws ``[k, n_out]`` whose entries are within relative
    ``law_error`` of them: the formula's rounding bound plus the laws' (``[k]``)."""
    if block.divergence == "wasserstein":
        return wasserstein_level(P, Q, block.ground, block.alpha, law_error)
    div = divergence(block.divergence, block.alpha)

    def one_way(p, q):
        up = div.upper(p, q)
        return up + div.law_error(up, law_error)

    if block.directed or div.symmetric:
        return one_way(P, Q)
    return np.maximum(one_way(P, Q), one_way(Q, P))


def wasserstein_level(P: np.ndarray, Q: np.ndarray, ground: np.ndarray, order: float,
                      law_error: float) -> np.ndarray:
    """A certified upper bound of ``W_μ`` between the exact laws, ``[k]``, from float64 laws
    ``[k, n_out]`` within relative ``law_error`` of them; ``+∞`` where none can be had.

    Per comparison: an optimal coupling of the normalised float laws ``P̂``, ``Q̂`` (POT's network
    simplex, :func:`._transport.wasserstein`), certified by :func:`._transport.check_coupling`
    (outward-rounded, in units of the largest distance ``D`` between the supports, so that no
    ``d^μ`` underflows or overflows; marginal defects charged). The exact laws differ from ``P̂``,
    ``Q̂`` by at most ``e = 2·law_error + 4u`` each in ℓ1 (an entrywise relative error, and the
    float normalisation), so the same coupling is a coupling of the exact laws up to a further
    marginal defect ``e``, charged at ``D^μ``: ``W_μ ≤ D·(Σ π (d/D)^μ + η + e)^{1/μ}``. For a
    large ``μ`` this is loose (``e^{1/μ}`` is not small: 0.96 of ``D`` at ``μ = 1000``); the exact
    mode (:mod:`._exact_transport`) has no law error. A solver failure gives ``+∞`` (the claim
    fails), never an exception.
    """
    from diffpriv.measures._transport import TransportError, check_coupling, wasserstein

    P, Q = np.atleast_2d(P), np.atleast_2d(Q)
    defect = 2.0 * law_error + 4.0 * 2.0**-53
    out = np.empty(P.shape[0])
    for k in range(P.shape[0]):
        p, q = P[k] / P[k].sum(), Q[k] / Q[k].sum()
        try:
            plan = wasserstein(p, q, ground, order).plan
            out[k] = check_coupling(p, q, ground, plan, order, defect=defect)
        except TransportError:
            out[k] = np.inf
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class ComparisonLevels:
    """Every level of every comparison of a table (``K`` comparisons, ``n_out`` outputs).

    Attributes:
      laws: the comparisons' output laws (:class:`._laws.Laws`; ``laws.at(k)`` gives the
        ``[n_out]`` laws ``P_k``, ``Q_k`` the levels of comparison ``k`` were computed from).
      pure: ``[K]`` pure level ``max_y |ln P − ln Q|``.
      delta: ``[K]`` tight δ at the comparison's ε, ``max(H_ε(P‖Q), H_ε(Q‖P))``.
      eps_at_delta: ``[K]`` least ε with ``delta_level ≤ δ_k`` (the pure level when ``δ_k = 0``).
      divergence: ``[K]`` certified divergence level (:func:`divergence_level`) of the
        comparisons of blocks measured in another divergence; NaN for the others.
      identical: ``[K]`` ``P = Q`` exactly (the same weights on equal rows, or every row
        entering the comparison is the same vector): every level is exactly 0.
      underflow: ``[K]`` a dense law entry is too close to underflow for float64 bounds.
    """

    laws: Laws
    pure: np.ndarray
    delta: np.ndarray
    eps_at_delta: np.ndarray
    identical: np.ndarray
    underflow: np.ndarray
    divergence: np.ndarray


def comparison_levels(
    problem: Problem, table: np.ndarray, blocks: tuple[Block, ...] | None = None
) -> ComparisonLevels:
    """Computes :class:`ComparisonLevels` for ``table`` (shape ``problem.shape``).

    ``blocks`` defaults to ``problem.blocks()``; the ``K`` comparisons are numbered block by
    block, in block order (as :func:`diffpriv.problems._blocks.budgets` numbers them). The laws
    are built a chunk of comparisons at a time (:class:`._laws.Laws`): memory is the table's
    plus a few chunks, and every level is the same as from all the laws at once.

    Where :func:`._laws.identical_rows` proves ``P_k = Q_k`` exactly, the levels are set to
    exactly 0 and ``Q_k`` to ``P_k`` (float rounding could otherwise tell the two apart).
    """
    blocks = problem.blocks() if blocks is None else tuple(blocks)
    laws = Laws(table, blocks)
    bud = budgets(blocks)
    pure, delta, eps_at_delta = np.empty(bud.size), np.empty(bud.size), np.empty(bud.size)
    div = np.full(bud.size, np.nan)
    error = law_error(*problem.shape[1:])
    for lo, hi, P, Q in laws.chunks():
        k, same = slice(lo, hi), laws.identical[lo:hi]
        if bud.divergent[lo]:  # a chunk lies in one block
            block = blocks[int(bud.block[lo])]
            div[k] = np.where(same, 0.0, divergence_level(block, P, Q, error))
        pure[k] = np.where(same, 0.0, pure_level(P, Q))
        delta[k] = np.where(same, 0.0, delta_level(P, Q, bud.eps[k]))
        at_delta = pure[k].copy()
        approx = bud.delta[k] > 0
        if approx.any():
            at_delta[approx] = tight_epsilon(P[approx], Q[approx], bud.delta[k][approx])
        eps_at_delta[k] = np.where(same, 0.0, at_delta)
    return ComparisonLevels(laws=laws, pure=pure, delta=delta, eps_at_delta=eps_at_delta,
                            identical=laws.identical, underflow=laws.underflow, divergence=div)
