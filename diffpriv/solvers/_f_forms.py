"""The f-divergence form of each divergence the solvers take (numpy): ``D(P‖Q) ≤ ε`` as
``D_f(P‖Q) = Σ_y Q f(P/Q) ≤ b``, the f and the budget ``b``. KL (``f = t ln t``; reverse KL swaps
the laws, Rényi of order 1 is KL), χ² and Rényi of order ``α > 1`` (``f = t^α``, budget ``1 + ε``
and ``e^{(α−1)ε}``), squared Hellinger and Rényi of order ``α < 1`` (``f = −t^α``, budget
``−(1 − ε)`` and ``−e^{(α−1)ε}``), total variation (the hockey-stick at ``e^0``). The smoothed
dual (:mod:`._dual`), cut generation (:mod:`._cuts`) and column generation (:mod:`._columns`)
read them."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["Family", "f_budget", "f_divergences", "family"]

Family = tuple[str, float]
"""``("kl", 1)``, ``("power", α)`` (``f = t^α`` for α > 1, ``−t^α`` for α < 1), or ``("tv", 1)``
(linear rows, :func:`._dual.dual_data`)."""


def family(name: str, alpha: float | None) -> tuple[Family, bool]:
    """``(family, swap)`` of a divergence: its f, and whether ``P`` and ``Q`` trade places."""
    if name == "kl" or (name == "renyi" and alpha == 1.0):
        return ("kl", 1.0), False
    if name == "reverse_kl":
        return ("kl", 1.0), True
    if name == "chi2":
        return ("power", 2.0), False
    if name == "hellinger":
        return ("power", 0.5), False
    if name == "tv":
        return ("tv", 1.0), False
    if name == "renyi" and 0 < alpha < math.inf:
        return ("power", float(alpha)), False
    raise ValueError(f"optimizer: {name!r} has no f-divergence form here")


def f_budget(name: str, alpha: float | None, eps) -> tuple[np.ndarray, np.ndarray]:
    """``(b, on)``: ``D(P‖Q) ≤ ε`` as ``D_f(P‖Q) ≤ b`` (module docstring); ``on`` is False where
    the budget binds nothing (Hellinger ``ε ≥ 1``, a Rényi bound beyond float64)."""
    eps = np.asarray(eps, np.float64)
    on = np.ones(eps.shape, bool)
    if name in ("kl", "reverse_kl") or (name == "renyi" and alpha == 1.0):
        return eps, on
    if name == "chi2":
        return 1.0 + eps, on
    if name == "hellinger":
        return eps - 1.0, eps < 1.0
    with np.errstate(over="ignore"):
        level = np.exp((alpha - 1.0) * eps)
    if alpha > 1:
        return np.where(np.isfinite(level), level, 0.0), np.isfinite(level)
    return -level, on


def f_divergences(kinds) -> bool:
    """Whether every divergence of ``kinds`` (``(name, α)`` pairs) has an f-divergence form
    (:func:`family`)."""
    try:
        for name, alpha in kinds:
            family(name, alpha)
    except ValueError:
        return False
    return True
