"""The privacy of ``K`` independent reports through one table, from its per-report levels.

Each comparison of a claim is a pair of output laws ``(P, Q)``; ``K`` reports drawn independently
(each from its own input, drawn afresh from the compared law, or, for pairs of inputs, from the
same input) have the product laws ``(P^⊗K, Q^⊗K)``. What the product's level is, given only the
per-report level:

* pure ``ε`` (``δ = 0``): exactly ``K·ε`` (the log-ratios add; the worst output, repeated, attains it).
* ``(ε, δ)``: the optimal composition theorem (Kairouz, Oh & Viswanath, ICML 2015, Thm. 3.3): every
  ``(ε, δ)`` pair is dominated by ``P̃ = (δ, (1−δ)p, (1−δ)q, 0)``, ``Q̃ = (0, (1−δ)q, (1−δ)p, δ)``
  (``p = e^ε/(1+e^ε)``, ``q = 1 − p``), so the ``K``-fold product meets ``(ε', δ_K(ε'))`` with

      ``δ_K(ε') = 1 − (1−δ)^K + (1−δ)^K Σ_l C(K, l) (p^{K−l} q^l − e^{ε'} p^l q^{K−l})₊``,

  and no better bound holds for every such pair (randomised response attains it). At ``ε' = K·ε``
  this is ``1 − (1−δ)^K ≤ K·δ``; at a smaller ``ε'`` it is what ``δ`` buys (:func:`dp_epsilon`).
* divergences of products: KL, reverse KL, Rényi and the max-divergence add (``K·D``, exact);
  ``1 + χ²`` and the Bhattacharyya coefficient ``1 − H`` multiply (``(1 + D)^K − 1`` and
  ``1 − (1 − D)^K``, exact); total variation is at most ``1 − (1 − D)^K`` (the product of the
  maximal couplings; an upper bound).

Floating point: :func:`dp_delta` sums its terms with ``math.fsum`` in logarithms and is rounded up by
:data:`SLACK`; :func:`dp_epsilon` returns the upper end of a bisection. Everything here is a
function of the certified per-report levels only.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["ADDITIVE", "SLACK", "divergence_level", "dp_delta", "dp_epsilon", "pld_epsilon"]

SLACK = 1e-12
"""Relative amount :func:`dp_delta` is raised by (its float64 rounding, with room)."""
ADDITIVE = ("kl", "reverse_kl", "renyi", "max")
"""Divergences whose level of a product is the sum of its factors' levels."""


def _binomial_logs(eps: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ln C(K, l)·p^{K−l} q^l, ln C(K, l)·p^l q^{K−l})`` for ``l = 0 … K`` (the dominating
    pair's K-fold laws, :func:`dp_delta`), each binomial coefficient by ``math.lgamma``."""
    log_p, log_q = -math.log1p(math.exp(-eps)), -math.log1p(math.exp(eps))  # ln p, ln q
    top = math.lgamma(k + 1)
    log_c = np.array([top - math.lgamma(l + 1) - math.lgamma(k - l + 1) for l in range(k + 1)])
    l = np.arange(k + 1)
    return log_c + (k - l) * log_p + l * log_q, log_c + l * log_p + (k - l) * log_q


def _delta(logs: tuple[np.ndarray, np.ndarray], delta: float, k: int, eps_out: float) -> float:
    """:func:`dp_delta` from the laws' logarithms."""
    a, b = logs[0], logs[1] + eps_out
    on = a > b
    terms = np.exp(a[on]) * -np.expm1(b[on] - a[on])
    kept = math.exp(k * math.log1p(-delta)) if delta < 1 else 0.0  # (1 − δ)^K
    out = (1.0 - kept) + kept * math.fsum(terms)
    return min(1.0, out * (1.0 + SLACK) + 1e-300)


def _checked(eps: float, delta: float, k: int) -> None:
    if k < 1 or eps < 0 or not 0 <= delta <= 1:
        raise ValueError(f"dp_delta: needs k ≥ 1, ε ≥ 0, 0 ≤ δ ≤ 1 (k={k}, ε={eps}, δ={delta})")


def dp_delta(eps: float, delta: float, k: int, eps_out: float) -> float:
    """``δ_K(ε')`` of the module docstring: an upper bound on the hockey-stick divergence at
    ``eps_out`` of ``k`` independent reports through any pair meeting ``(eps, delta)``."""
    _checked(eps, delta, k)
    if math.isnan(eps_out):
        raise ValueError("dp_delta: ε' is NaN")
    if math.isinf(eps):
        return 1.0
    return _delta(_binomial_logs(eps, k), delta, k, eps_out)


def dp_epsilon(eps: float, delta: float, k: int, delta_out: float) -> float:
    """The least ``ε'`` with :func:`dp_delta` ``≤ delta_out`` (rounded up), ``+∞`` where
    ``delta_out`` is below ``1 − (1 − δ)^K`` (no ``ε'`` reaches it)."""
    if not 0 <= delta_out <= 1:
        raise ValueError(f"dp_epsilon: δ' must be in [0, 1], got {delta_out}")
    _checked(eps, delta, k)
    if math.isinf(eps):
        return math.inf if delta_out < 1 else 0.0
    logs = _binomial_logs(eps, k)  # once: each bisection step is one pass over them
    top = k * eps
    if _delta(logs, delta, k, top) > delta_out:
        return math.inf
    lo, hi = 0.0, top
    if _delta(logs, delta, k, lo) <= delta_out:
        return 0.0
    for _ in range(200):  # δ_K decreases in ε': bisect to the float64 grid
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if _delta(logs, delta, k, mid) <= delta_out:
            hi = mid
        else:
            lo = mid
    return hi


def divergence_level(name: str, level: float, k: int) -> tuple[float, bool]:
    """``(level of k independent reports, exact)`` for a divergence ``name`` (the names of
    :data:`diffpriv.measures._divergences.NAMES`) at per-report ``level`` (module docstring);
    ``exact`` is False for total variation, whose figure is an upper bound."""
    if name in ADDITIVE:
        return k * level, True
    if name == "chi2":
        return (math.inf if math.isinf(level) else math.expm1(k * math.log1p(level))), True
    if name in ("hellinger", "tv"):
        return -math.expm1(k * math.log1p(-min(level, 1.0))) if level < 1 else 1.0, name == "hellinger"
    raise ValueError(f"divergence_level: no composition rule for divergence {name!r}")


PLD_BINS = 1 << 20
"""Most bins of a K-fold privacy-loss distribution (:func:`pld_epsilon`); the grid step grows to fit."""
PLD_WORK = 1 << 25
"""Most bins of all the pairs' K-fold distributions of one call together (about a minute of FFTs
on the 2-core CPU at the most): the step grows with the pairs' count beyond it."""
PLD_STEP = 1e-3
"""The finest step of the privacy-loss grid (nats)."""
FFT_SLACK = 1e-12
"""Added to every δ of :func:`pld_epsilon`: the FFT's rounding on the composed distribution."""


def pld_epsilon(P, Q, k: int, delta_out: float) -> float:
    """The least ``ε'`` (on the grid, rounded up) whose δ of ``k`` independent reports is at most
    ``delta_out`` for the pairs of laws ``P``, ``Q`` (``[n, Y]``; both directions), from their own
    privacy-loss distributions: the loss ``ln(P(y)/Q(y))`` of each output (``+∞`` where only ``P``
    emits it) rounded *up* to a grid (so every δ is an upper bound, Meiser & Mohammadi 2018;
    Koskela et al. 2020), convolved ``k`` times by FFT, and
    ``δ(ε') = E[(1 − e^{ε' − L})₊] + 1 − (1 − p_∞)^k`` (``+`` :data:`FFT_SLACK`). At most the
    dominating pair's :func:`dp_epsilon` for the same levels, often far below it: a table whose
    worst ratio is rare leaks little on average."""
    P, Q = np.atleast_2d(np.asarray(P, np.float64)), np.atleast_2d(np.asarray(Q, np.float64))
    bins = max(1 << 12, min(PLD_BINS, PLD_WORK // (2 * P.shape[0])))
    worst = 0.0
    for p, q in ((P, Q), (Q, P)):
        for a, b in zip(p, q, strict=True):
            worst = max(worst, _pld_one(a, b, k, delta_out, bins))
            if math.isinf(worst):
                return worst
    return worst


def _pld_one(p: np.ndarray, q: np.ndarray, k: int, delta_out: float, bins: int = PLD_BINS) -> float:
    """:func:`pld_epsilon` for one direction of one pair."""
    both, only = (p > 0) & (q > 0), (p > 0) & (q == 0)
    p_inf = float(p[only].sum())
    floor = -math.expm1(k * math.log1p(-min(p_inf, 1.0))) if p_inf < 1 else 1.0  # 1 − (1 − p_∞)^k
    if floor + FFT_SLACK > delta_out:
        return math.inf
    loss = np.log(p[both]) - np.log(q[both])
    if loss.size == 0:
        return 0.0
    span = float(loss.max() - loss.min()) if loss.size else 0.0
    step = max(PLD_STEP, (k * span + 2.0) / bins)
    idx = np.ceil(loss / step).astype(np.int64)  # rounded up: pessimistic
    lo = int(idx.min())
    pmf = np.bincount(idx - lo, weights=p[both])
    n = k * (pmf.size - 1) + 1
    size = 1 << max(1, (n - 1).bit_length())
    composed = np.fft.irfft(np.fft.rfft(pmf, size) ** k, size)[:n]
    composed = np.clip(composed, 0.0, None)
    grid = (np.arange(n) + k * lo) * step  # the composed losses
    keep = grid > 0
    if not keep.any():
        return 0.0
    g, w = grid[keep], composed[keep]
    tail = np.cumsum(w[::-1])[::-1]  # Σ_{S ≥ i} pmf(S)
    with np.errstate(divide="ignore"):
        log_scaled = np.logaddexp.accumulate((np.log(w) - g)[::-1])[::-1]  # ln Σ_{S ≥ i} pmf(S) e^{−S}
    # δ at ε' = g[i − 1] (the grid point below g[i]; ε' = 0 before the first): the terms S > ε'
    eps_at = np.r_[0.0, g[:-1]]
    delta = tail - np.exp(np.minimum(eps_at + log_scaled, 0.0)) + floor + FFT_SLACK
    ok = np.flatnonzero(delta <= delta_out)
    return float(eps_at[ok[0]]) if ok.size else float(g[-1])
