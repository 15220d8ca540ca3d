"""What a table leaks about the true input, by the measures of quantitative information flow.

The secret is the true input ``x``; the adversary knows the prior and the table and sees one
report ``y``. Profiles are summed out: everything below depends only on the joint law
``J[x, y] = Σ_s π[s, x] A[s, x, y]`` (its rows sum to the prior's marginal ``π(x)``).

* Bayes vulnerability (the chance of guessing ``x`` in one try; Smith 2009): prior
  ``V(π) = max_x π(x)``, posterior ``V[π, A] = Σ_y max_x J[x, y]``; the multiplicative Bayes
  leakage is their ratio and the min-entropy leakage its ``log₂`` (Alvim et al., *The Science of
  Quantitative Information Flow*, 2020, ch. 5 and 7). The identity channel leaks everything:
  ``V[π, I] = 1``.
* g-leakage (Alvim et al., CSF 2012): for a gain ``g[w, x]`` (the adversary's gain when it
  guesses ``w`` and the secret is ``x``), ``V_g(π) = max_w Σ_x g[w, x] π(x)`` and
  ``V_g[π, A] = Σ_y max_w Σ_x g[w, x] J[x, y]``; multiplicative (their ratio, where the gains
  are non-negative and ``V_g(π) > 0``) and additive (their difference). ``g`` the identity gives
  Bayes vulnerability.
* The adversary's expected error (Shokri et al., S&P 2011): the least expected loss of a guess
  ``ŷ`` of the input made from the report, ``Σ_y min_ŷ Σ_x J[x, y] L[x, ŷ]``, in the loss's units,
  against ``min_ŷ Σ_x π(x) L[x, ŷ]`` without the report. The guesses range over the outputs,
  where the loss is defined.

Floating point, numpy only; these are measures, not certified claims.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

__all__ = ["GLeakage", "Leakage", "best_guesses", "g_leakage", "identity_table", "joint", "leakage",
           "within_gain"]

CHUNK = 1 << 24
"""Entries of ``Jᵀ L`` formed at once for the adversary's error (``|Y|²`` in all)."""


@dataclasses.dataclass(frozen=True)
class GLeakage:
    """g-leakage of one gain matrix (module docstring)."""

    prior_vulnerability: float
    posterior_vulnerability: float
    multiplicative: float
    """``V_g[π, A] / V_g(π)``; NaN where a gain is negative or ``V_g(π) ≤ 0``."""
    additive: float


@dataclasses.dataclass(frozen=True)
class Leakage:
    """What a table leaks (module docstring)."""

    prior_vulnerability: float
    posterior_vulnerability: float
    multiplicative_leakage: float
    min_entropy_leakage: float
    """In bits."""
    prior_adversary_error: float
    adversary_error: float
    g_leakage: GLeakage | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def joint(prior: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``J[x, y] = Σ_s π[s, x] A[s, x, y]`` from ``prior [S, X]`` and ``table [S, X, Y]``."""
    return np.einsum("sx,sxy->xy", np.asarray(prior, np.float64), np.asarray(table, np.float64))


def identity_table(shape: tuple[int, int, int]) -> np.ndarray:
    """The raw data as a table: each input reported as itself (``X = Y``), every profile alike."""
    ns, nx, ny = shape
    if nx != ny:
        raise ValueError(f"the identity needs as many outputs as inputs ({ny} outputs, {nx} inputs)")
    return np.broadcast_to(np.eye(nx), (ns, nx, nx)).copy()


def within_gain(loss: np.ndarray, radius: float) -> np.ndarray:
    """The gain ``g[w, x] = 1`` where guessing the output ``w`` lands within ``radius`` of the true
    input ``x`` (``L[x, w] ≤ radius``), else 0; ``[Y, X]``. ``V_g`` is then the chance that the
    adversary's one guess falls that close (radius 0 with a metric loss: Bayes vulnerability)."""
    return (np.asarray(loss, np.float64).T <= radius).astype(np.float64)


def g_leakage(marginal: np.ndarray, j: np.ndarray, gain: np.ndarray) -> GLeakage:
    """g-leakage of ``gain [W, X]`` for the prior's marginal ``[X]`` and the joint law ``[X, Y]``."""
    gain = np.asarray(gain, np.float64)
    before = float(np.max(gain @ marginal))
    after = float(np.sum(np.max(gain @ j, axis=0)))
    ratio = after / before if before > 0 and np.all(gain >= 0) else math.nan
    return GLeakage(before, after, ratio, after - before)


def best_guesses(j: np.ndarray, loss: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each observed output ``y`` the guess ``ŷ`` of least ``Σ_x J[x, y] L[x, ŷ]`` (the first of
    ties) and that least value, ``([Y], [Y])``: the Bayes adversary's guesses and their expected
    losses; ``Jᵀ L`` formed a block of observed outputs at a time (:data:`CHUNK`)."""
    ny = j.shape[1]
    step = max(1, CHUNK // max(loss.shape[1], 1))
    guess, value = np.empty(ny, np.int64), np.empty(ny)
    for y0 in range(0, ny, step):
        block = j[:, y0:y0 + step].T @ loss
        guess[y0:y0 + step] = np.argmin(block, axis=1)
        value[y0:y0 + step] = np.take_along_axis(block, guess[y0:y0 + step, None], axis=1)[:, 0]
    return guess, value


def leakage(prior: np.ndarray, table: np.ndarray, loss: np.ndarray,
            gain: np.ndarray | None = None) -> Leakage:
    """The measures of the module docstring for ``prior [S, X]``, ``table [S, X, Y]``,
    ``loss [X, Y]`` and optionally ``gain [W, X]``."""
    j = joint(prior, table)
    marginal = np.asarray(prior, np.float64).sum(axis=0)
    loss = np.asarray(loss, np.float64)
    before = float(np.max(marginal))
    after = float(np.sum(np.max(j, axis=0)))
    ratio = after / before
    return Leakage(
        prior_vulnerability=before,
        posterior_vulnerability=after,
        multiplicative_leakage=ratio,
        min_entropy_leakage=math.log2(ratio),
        prior_adversary_error=float(np.min(marginal @ loss)),
        adversary_error=float(np.sum(best_guesses(j, loss)[1])),
        g_leakage=None if gain is None else g_leakage(marginal, j, gain),
    )
