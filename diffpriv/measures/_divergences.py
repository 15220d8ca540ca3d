"""f-divergence and Rényi levels of pairs of output laws (float64, vectorised), with error bounds.

Every level takes laws ``P``, ``Q`` of shape ``[..., n_out]`` (``[K, n_out]`` for ``K``
comparisons; entries ``≥ 0``, rows summing to 1 up to rounding) and reduces the last axis.
With ``lr = ln P − ln Q`` on the outputs where both laws are positive:

==============  =======================================  ===================  =========
name            level                                    ``P[y] > 0 = Q[y]``  range
==============  =======================================  ===================  =========
``kl``          ``Σ P·lr``  (f = t ln t)                 ``+∞``               [0, ∞]
``reverse_kl``  ``KL(Q‖P)``  (f = −ln t)                 term 0               [0, ∞]
``tv``          ``½ Σ |P − Q|``  (f = ½|t − 1|)          finite               [0, 1]
``chi2``        ``Σ (P − Q)² / Q``  (f = (t − 1)²)       ``+∞``               [0, ∞]
``hellinger``   ``½ Σ (√P − √Q)² = 1 − Σ √(PQ)``         finite               [0, 1]
``renyi(α)``    ``ln(Σ P^α Q^{1−α} / Σ P) / (α − 1)``    ``+∞`` iff α > 1     [0, ∞]
``max``         ``max_{P>0} lr``  (Rényi, α = ∞)         ``+∞``               [0, ∞]
==============  =======================================  ===================  =========

Zeros follow the f-divergence conventions ``0·f(0/0) = 0`` and ``Q·f(P/Q) → P·lim f(t)/t`` as
``Q → 0``: an output neither law emits is ignored, an output only ``P`` emits costs ``+∞``
unless ``f`` grows at most linearly (TV, Hellinger: then it costs a finite amount; for
``reverse_kl`` the ``+∞`` case is ``Q[y] > 0 = P[y]``). A Rényi term ``P^α Q^{1−α}`` with one
side 0 is ``+∞`` for ``α > 1`` and 0 for ``α < 1`` (so disjoint supports give ``+∞`` for every
α). Hellinger is normalised as in Table I of Kawamoto & Murakami 2019, *Local distribution
obfuscation via probability coupling* (``f(t) = ½(√t − 1)²``), so disjoint laws have level 1.
Rényi divides by ``Σ P`` (1 for a law) so that ``α → 1`` tends to KL; ``renyi(1)`` *is* KL and
``renyi(inf)`` the max-divergence. Equal laws give exactly 0; a level beyond float64 reads ``+∞``.

**Error bounds.** Let ``u = 2^-53``, ``n = n_out``, and assume ``np.log``, ``log1p``,
``expm1``, ``exp`` are within 4 ulp (relative ``γ = 8u``) and ``sqrt`` correctly rounded.
For the laws as given (the error of the laws themselves is the caller's), each
:class:`Divergence` states ``(r1, r0, a1, a0)`` with

    ``|computed − exact| ≤ u·((r1·n + r0)·D + a1·n + a0) + n·2^-1073``

(the last term: products rounded among subnormals). Sketch, with ``Σ|·|`` the sum of the
absolute values of the terms and ``(n − 1)·u·Σ|·|`` the error of summing them:

* ``tv``: ``|P − Q|`` is within ``u``, all terms ``≥ 0``: ``(n + 1)·u·D``. (1, 2, 0, 0)
* ``chi2``: each term as ``(P − Q)·((P − Q)/Q)`` (three roundings; it underflows only where
  the term itself is below ``2^-1022``, unlike ``(P − Q)²``), all ``≥ 0``. (1, 4, 0, 0)
* ``hellinger``: ``√P − √Q = (P − Q)/(√P + √Q)`` (no cancellation; four roundings), squared:
  nine, all terms ``≥ 0``. (1, 10, 0, 0)
* ``kl``: ``lr`` is within ``γ(|ln P| + |ln Q|) + u|lr|``; weighted by ``P`` this sums to at
  most ``γ(2H(P) + D)`` (``Σ P|ln Q|`` is the cross-entropy ``H(P) + D``, ``H(P) ≤ ln n``). The
  terms ``P·lr`` have ``Σ|·| ≤ D + 2·TV ≤ D + 2`` (``P ln(Q/P) ≤ Q − P`` where ``P < Q``), so
  the sum adds ``(n + 1)·u·(D + 2)``. (1, 9, 18, 2)
* ``max``: one ``lr``, ``|ln p| ≤ 1074 ln 2 < 745`` for float64 ``p > 0``: ``2·745·γ + u·D``.
  (0, 2, 0, 2^14)
* ``renyi(α)``, ``β = α − 1``: where every ``β·lr ≤ 50`` and ``x ≥ −½`` it computes
  ``ln S = log1p(x)``, ``x = Σ P·expm1(β·lr) / Σ P``. The terms have ``Σ|·| ≤ |x| + 2|β|``
  (the negative ones for ``β > 0`` and the positive ones for ``β < 0`` are bounded by
  ``|β|·TV``), ``|x| ≤ |β|·D·max(1, S)`` and ``S = 1 + x ≥ ½``; the error of ``ln S`` is therefore ``O(|β|)``
  and dividing by ``β`` leaves ``u·((4n + 27)·D + 4n + 13500)``: no ``1/(α − 1)`` blow-up
  near ``α = 1``. Otherwise it computes a log-sum-exp of ``z = ln P + β·lr`` (errors ``≤ 745·
  (9 + 19|β|)·u``), used only where ``|β| ≥ 50/745`` or ``D ≥ ln 2 / |β|``, which bounds the
  division by ``β``: at most ``u·((13n + 9800)·D + 134n + 114300)``. (16, 2^15, 256, 2^18)

:meth:`Divergence.upper` turns this into a number ``≥`` the exact level, for ``n < 2^45``.

**Errors of the laws themselves** (entrywise relative ``e`` in ``P`` and ``Q``) move the exact
level, to first order in ``e``, by at most ``e`` (TV), ``e`` (Hellinger), ``e·(D + 4)`` (KL),
``e·(3D + 8)`` (χ²), ``2e`` (max) and ``(α + |α − 1| + 1)·e / |α − 1|`` (Rényi: amplified near
``α = 1``, where normalising the laws exactly first avoids it).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import numpy as np

__all__ = ["DIVERGENCES", "NAMES", "Divergence", "divergence", "renyi"]

NAMES = ("kl", "reverse_kl", "tv", "chi2", "hellinger", "renyi", "max")
"""The divergences a constraint may name (``renyi`` with an order ``alpha``): each is defined
here once (level, error bound, symmetry, text); the optimizer's JAX twins
(``diffpriv/solvers/_divergence_levels.py``) and the convex reference's cones
(``diffpriv/solvers/_convex.py``) follow these names."""

U64 = 2.0**-53
"""Unit roundoff of float64."""

_SUBNORMAL = 2.0**-1073
"""Per output: an absolute error bound of a product rounded among subnormals, with room."""

_EXPM1_MAX = 50.0
"""Rényi uses the ``log1p``/``expm1`` form while every ``(α − 1)·lr`` is at most this."""


def _checked(P, Q) -> tuple[np.ndarray, np.ndarray]:
    P, Q = np.asarray(P, np.float64), np.asarray(Q, np.float64)
    if P.shape != Q.shape or P.ndim == 0:
        raise ValueError(f"laws: shapes {P.shape} and {Q.shape}, expected the same [..., n_out]")
    if not (np.all(np.isfinite(P) & (P >= 0)) and np.all(np.isfinite(Q) & (Q >= 0))):
        raise ValueError("laws: every entry must be finite and >= 0")
    return P, Q


def _logs(P: np.ndarray, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(both, ln P, ln Q)`` where both are positive; the logarithms are 0 elsewhere."""
    both = (P > 0) & (Q > 0)
    return both, np.log(np.where(both, P, 1.0)), np.log(np.where(both, Q, 1.0))


def _only(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """``[...]``: some output has ``P[y] > 0 = Q[y]``."""
    return ((P > 0) & (Q == 0)).any(axis=-1)


def _kl(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    _, lp, lq = _logs(P, Q)
    level = np.maximum((P * (lp - lq)).sum(axis=-1), 0.0)  # terms off the common support are 0
    return np.where(_only(P, Q), np.inf, level)


def _reverse_kl(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    return _kl(Q, P)


def _tv(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    return 0.5 * np.abs(P - Q).sum(axis=-1)


def _chi2(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    pos = Q > 0
    with np.errstate(over="ignore"):  # (P − Q)/Q beyond float64: the level is +∞ as computed
        ratio = np.where(pos, (P - Q) / np.where(pos, Q, 1.0), 0.0)
        level = ((P - Q) * ratio).sum(axis=-1)
    return np.where(_only(P, Q), np.inf, level)


def _hellinger(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    roots = np.sqrt(P) + np.sqrt(Q)
    gap = (P - Q) / np.where(roots > 0, roots, 1.0)  # √P − √Q without cancellation
    return 0.5 * (gap * gap).sum(axis=-1)


def _max(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    _, lp, lq = _logs(P, Q)
    return np.where(_only(P, Q), np.inf, (lp - lq).max(axis=-1, initial=0.0))


def _renyi(P: np.ndarray, Q: np.ndarray, alpha: float) -> np.ndarray:
    beta, shape = alpha - 1.0, P.shape[:-1]
    P, Q = P.reshape(-1, P.shape[-1]), Q.reshape(-1, Q.shape[-1])
    both, lp, lq = _logs(P, Q)
    scaled = beta * (lp - lq)  # β·lr, 0 off the common support
    mass = P.sum(axis=-1)
    lost = np.where((P > 0) & (Q == 0), P, 0.0).sum(axis=-1)  # terms that are 0 when α < 1
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # rows not taken below
        # Near α = 1: ln S = log1p(x) with x = Σ P·expm1(β·lr) / Σ P − (lost mass) / Σ P.
        x = (np.where(both, P * np.expm1(scaled), 0.0).sum(axis=-1) - lost) / mass
        log_s = np.log1p(x)
        far = ~((np.where(both, scaled, -np.inf).max(axis=-1, initial=-np.inf) <= _EXPM1_MAX) & (x >= -0.5))
        if far.any():  # ln S = logsumexp(ln P + β·lr) − ln Σ P (−∞ if no common support)
            z = np.where(both[far], lp[far] + scaled[far], -np.inf)
            top = z.max(axis=-1, initial=-np.inf)
            shift = np.where(np.isfinite(top), top, 0.0)
            log_s[far] = shift + np.log(np.exp(z - shift[:, None]).sum(axis=-1)) - np.log(mass[far])
        level = np.maximum(log_s / beta, 0.0)  # ln 0 / β = +∞ for α < 1
    level = np.where(mass > 0, level, 0.0)
    if beta > 0:
        level = np.where(_only(P, Q), np.inf, level)
    return level.reshape(shape)


@dataclasses.dataclass(frozen=True, eq=False)
class Divergence:
    """A divergence level ``D(P‖Q)`` of pairs of laws, with its float64 error bound.

    Attributes:
      name: the registry name (``"renyi(2.0)"`` for a Rényi divergence of order 2).
      formula: the level on validated float64 laws ``[..., n_out] -> [...]``.
      symmetric: ``D(P‖Q) = D(Q‖P)`` for all laws, so one direction settles both.
      bounded: ``D ≤ 1`` for all laws, never ``+∞`` (TV, Hellinger).
      error: ``(r1, r0, a1, a0)``: ``|computed − exact| ≤ u·((r1·n + r0)·D + a1·n + a0) +
        n·2^-1073`` for ``n`` outputs (derived in the module docstring).
      alpha: the Rényi order (``inf`` for ``max``), ``None`` for the f-divergences.
      sensitivity: ``(c1, c0)``: entrywise relative errors ``e`` in both laws move the exact
        level by at most ``e·(c1·D + c0)`` to first order (module docstring).
      text: how a summary writes it (``"χ²"``, ``"Rényi(α=2)"``).

    Example:
      >>> import numpy as np
      >>> kl = DIVERGENCES["kl"]
      >>> P, Q = np.array([[0.5, 0.5], [1.0, 0.0]]), np.array([[0.25, 0.75], [0.5, 0.5]])
      >>> kl.level(P, Q).round(6).tolist(), kl.level(Q, P).round(6).tolist()
      ([0.143841, 0.693147], [0.130812, inf])
    """

    name: str
    formula: Callable[[np.ndarray, np.ndarray], np.ndarray]
    symmetric: bool
    bounded: bool
    error: tuple[float, float, float, float]
    sensitivity: tuple[float, float]
    alpha: float | None = None
    text: str = ""

    def level(self, P, Q) -> np.ndarray:
        """``D(P‖Q)`` over the last axis, ``[..., n_out] -> [...]`` (float64, as computed)."""
        return self.formula(*_checked(P, Q))

    def upper(self, P, Q) -> np.ndarray:
        """A float64 number ``≥`` the exact ``D(P‖Q)`` of the given laws, ``[...]``."""
        return self.bound(self.level(P, Q), np.shape(P)[-1])

    def bound(self, level, n_out: int) -> np.ndarray:
        """Upper bound of the exact level from a computed ``level`` over ``n_out`` outputs.

        From ``|L̂ − L| ≤ u·(a·L + b)`` with ``u·a ≤ ¼``: ``L ≤ (L̂ + u·b)/(1 − u·a) ≤ L̂ +
        2u·(a·L̂ + b)``; ``4u·L̂`` more covers the rounding of this very expression.
        """
        r1, r0, a1, a0 = self.error
        rel = (r1 * n_out + r0) * U64
        slack = (a1 * n_out + a0) * U64 + n_out * _SUBNORMAL
        return np.asarray(level, np.float64) * (1.0 + 2.0 * rel + 4.0 * U64) + 2.0 * slack

    def law_error(self, level, e: float) -> np.ndarray:
        """How far the exact level can move when each entry of both laws has relative error at
        most ``e ≤ 10^-6``: twice the first-order bound ``e·(c1·D + c0)`` (the factor 2 covers
        the higher-order terms), ``D`` the level (an upper bound of it)."""
        c1, c0 = self.sensitivity
        with np.errstate(invalid="ignore"):  # 0·∞ (an infinite level, a zero sensitivity): unbounded
            out = 2.0 * e * (c1 * np.asarray(level, np.float64) + c0)
        return np.where(np.isnan(out), np.inf, out)


_KL_ERROR = (1.0, 9.0, 18.0, 2.0)
_RENYI_ERROR = (16.0, 2.0**15, 256.0, 2.0**18)

DIVERGENCES: dict[str, Divergence] = {d.name: d for d in (
    Divergence("kl", _kl, symmetric=False, bounded=False, error=_KL_ERROR, sensitivity=(1.0, 4.0),
               text="KL"),
    Divergence("reverse_kl", _reverse_kl, symmetric=False, bounded=False, error=_KL_ERROR,
               sensitivity=(1.0, 4.0), text="reverse KL"),
    Divergence("tv", _tv, symmetric=True, bounded=True, error=(1.0, 2.0, 0.0, 0.0),
               sensitivity=(0.0, 1.0), text="TV"),
    Divergence("chi2", _chi2, symmetric=False, bounded=False, error=(1.0, 4.0, 0.0, 0.0),
               sensitivity=(3.0, 8.0), text="χ²"),
    Divergence("hellinger", _hellinger, symmetric=True, bounded=True, error=(1.0, 10.0, 0.0, 0.0),
               sensitivity=(0.0, 1.0), text="Hellinger"),
    Divergence("max", _max, symmetric=False, bounded=False, error=(0.0, 2.0, 0.0, 2.0**14),
               sensitivity=(0.0, 2.0), alpha=math.inf, text="D∞"),
)}
"""The parameter-free divergences by name; Rényi divergences come from :func:`renyi`."""


def renyi(alpha: float) -> Divergence:
    """The Rényi divergence of order ``α``: ``ln(Σ P^α Q^{1−α}) / (α − 1)``.

    ``α = 1`` gives ``DIVERGENCES["kl"]`` and ``α = inf`` ``DIVERGENCES["max"]`` (the limits);
    ``α = ½`` is symmetric (``−2 ln Σ √(PQ)``).

    Raises:
      ValueError: ``α`` is not a number in ``(0, 1e300]`` or ``inf``.
    """
    alpha = float(alpha)
    if not (alpha > 0 and (alpha <= 1e300 or alpha == math.inf)):
        raise ValueError(f"renyi: alpha must be > 0 and at most 1e300 or inf, got {alpha}")
    if alpha == 1.0:
        return DIVERGENCES["kl"]
    if alpha == math.inf:
        return DIVERGENCES["max"]
    return Divergence(f"renyi({alpha!r})", functools.partial(_renyi, alpha=alpha),
                      symmetric=alpha == 0.5, bounded=False, error=_RENYI_ERROR,
                      sensitivity=(0.0, (alpha + abs(alpha - 1.0) + 1.0) / abs(alpha - 1.0)), alpha=alpha,
                      text=f"Rényi(α={alpha:g})")


def divergence(name: str, alpha: float | None = None) -> Divergence:
    """The divergence called ``name`` (a key of :data:`DIVERGENCES`, or ``"renyi"`` with ``alpha``)."""
    if name == "renyi":
        if alpha is None:
            raise ValueError("divergence 'renyi' needs an order alpha")
        return renyi(alpha)
    if name not in DIVERGENCES:
        raise ValueError(f"unknown divergence {name!r}; expected one of {sorted(DIVERGENCES)} or 'renyi'")
    if alpha is not None:
        raise ValueError(f"divergence {name!r} takes no order alpha")
    return DIVERGENCES[name]
