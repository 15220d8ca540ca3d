"""Planar Laplace on the continuous plane, snapped to a grid, and the optimal remapping.

* ``planar_laplace_continuous`` — the geo-indistinguishability mechanism of Andrés et al. (2013)
  as deployed: the true cell's centre plus planar Laplace noise of density
  ``ε²/(2π)·e^{−ε|z|}`` on the plane, reported as the grid cell that holds the noisy point
  (points beyond the grid go to the nearest cell: each coordinate clamped). Post-processing of an
  ``ε``-geo-indistinguishable point, so every two cells at distance ``d`` have level at most
  ``ε·d``. The probability of a cell is that of a rectangle (a half-strip or a quadrant at the
  grid's border), from the tail ``P(Z₁ ≥ a, Z₂ ≥ b) = (1/2π) ∫ (1 + ε r₀(θ)) e^{−ε r₀(θ)} dθ`` over
  the directions of the quadrant, ``r₀(θ) = max(a / cos θ, b / sin θ)`` (the radial integral in
  closed form), by Gauss–Legendre quadrature on either side of the kink ``tan θ = b/a``; the rows
  are normalised after (their sums are 1 to about 10⁻¹⁴).
* ``planar_laplace_remap`` — the same followed by the optimal remapping of Chatzikokolakis,
  ElSalamouny & Palamidessi (2017, *Efficient utility improvement for location privacy*): each
  reported cell ``y`` is replaced by the output ``ŷ`` of least expected loss given ``y`` under
  the population's prior, ``argmin_ŷ Σ_x π(x) A[x, y] L[x, ŷ]``: post-processing, so no level
  grows, and the expected loss never does (:func:`remap`).

Grids only (inputs = outputs, square cells on a full lattice); numpy only.
"""

from __future__ import annotations

import numpy as np

from diffpriv.mechanisms._baselines import _parameter
from diffpriv.mechanisms._registry import register_mechanism

__all__ = ["planar_laplace_continuous", "planar_laplace_remap", "remap"]

NODES = 96
"""Gauss–Legendre nodes on each side of the kink of the tail's integrand."""


def _lattice(problem, mech: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """``(column, row)`` of each cell and the column and row centres, and the cell side, of a grid
    problem (outputs = inputs, coordinates on a full square lattice), else a ValueError."""
    xs, ys = problem.inputs, problem.outputs
    if xs.labels != ys.labels or xs.coords is None or xs.coords.shape[1] != 2:
        raise ValueError(f"mechanism {mech!r} needs outputs equal to the inputs, with 2-d coordinates "
                         "(a grid)")
    if not problem.support_mask().all():
        raise ValueError(f"mechanism {mech!r} reports any cell: it takes no support restriction")
    cx, col = np.unique(xs.coords[:, 0], return_inverse=True)
    cy, row = np.unique(xs.coords[:, 1], return_inverse=True)
    steps = np.r_[np.diff(cx), np.diff(cy)]
    side = float(steps[0]) if steps.size else 1.0
    full = cx.size * cy.size == xs.size and np.unique(row * cx.size + col).size == xs.size
    if not full or not np.allclose(steps, side, rtol=1e-9, atol=0):
        raise ValueError(f"mechanism {mech!r} needs a full grid of square cells (as grid = {{ rows, cols, "
                         "cell }} or a bbox gives)")
    return col, row, cx, cy, side


def _tail(eps: float, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``P(Z₁ ≥ a, Z₂ ≥ b)`` for ``a, b ≥ 0`` (module docstring), elementwise."""
    t, w = np.polynomial.legendre.leggauss(NODES)
    kink = np.arctan2(b, a)[..., None]  # where a/cos θ = b/sin θ
    total = 0.0
    for lo, hi in ((np.zeros_like(kink), kink), (kink, np.full_like(kink, np.pi / 2))):
        theta = 0.5 * (hi - lo) * t + 0.5 * (hi + lo)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            r0 = np.maximum(a[..., None] / np.cos(theta), b[..., None] / np.sin(theta))
            f = np.where(np.isfinite(r0), (1.0 + eps * r0) * np.exp(-eps * r0), 0.0)
        total = total + 0.5 * (hi - lo)[..., 0] * (f @ w)
    return total / (2.0 * np.pi)


def _upper(eps: float, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``P(Z₁ ≥ a, Z₂ ≥ b)`` for any ``a, b`` (``±∞`` included), by the symmetries of the plane."""
    a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
    fa, fb = np.where(np.isfinite(a), np.abs(a), 0.0), np.where(np.isfinite(b), np.abs(b), 0.0)
    both = _tail(eps, fa, fb)
    ta, tb = 2.0 * _tail(eps, fa, np.zeros_like(fa)), 2.0 * _tail(eps, fb, np.zeros_like(fb))  # P(Z ≥ |a|)
    out = np.select(
        [(a >= 0) & (b >= 0), (a < 0) & (b >= 0), (a >= 0) & (b < 0)],
        [both, tb - both, ta - both],
        1.0 - ta - tb + both)
    out = np.where(np.isneginf(a), np.where(b >= 0, tb, 1.0 - tb), out)
    out = np.where(np.isneginf(b), np.where(a >= 0, ta, 1.0 - ta), out)
    out = np.where(np.isneginf(a) & np.isneginf(b), 1.0, out)
    return np.where(np.isposinf(a) | np.isposinf(b), 0.0, out)


def _edges(centres: np.ndarray, side: float) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's interval along one axis, the outer ones reaching to ``∓∞`` (clamping)."""
    lo, hi = centres - side / 2, centres + side / 2
    lo[0], hi[-1] = -np.inf, np.inf
    return lo, hi


@register_mechanism("planar_laplace_continuous", params={"epsilon": None}, calibrate="epsilon",
                    summary="planar Laplace on the plane (ε per unit distance), snapped to the grid")
def planar_laplace_continuous(problem, *, epsilon: float) -> np.ndarray:
    """The continuous planar Laplace mechanism snapped to the grid (module docstring).

    Raises:
      ValueError: not a grid problem, a support restriction, or ``epsilon`` negative or not finite.
    """
    eps = _parameter("planar_laplace_continuous", "epsilon", epsilon)
    col, row, cx, cy, side = _lattice(problem, "planar_laplace_continuous")
    if eps == 0:
        return np.full(problem.shape, 1.0 / problem.shape[2])
    (xlo, xhi), (ylo, yhi) = _edges(cx, side), _edges(cy, side)
    # the probability that the noisy point of input i lands in output j's rectangle, offsets
    # relative to input i's centre; each axis's intervals shared by every input on a line
    dx_lo, dx_hi = xlo[None, :] - cx[:, None], xhi[None, :] - cx[:, None]  # [input col, output col]
    dy_lo, dy_hi = ylo[None, :] - cy[:, None], yhi[None, :] - cy[:, None]
    # the tails on the distinct offsets only (about 2·cols × 2·rows of them), then looked up
    ax, ix = np.unique(np.round(np.r_[dx_lo.ravel(), dx_hi.ravel()] / side * 2) / 2, return_inverse=True)
    ay, iy = np.unique(np.round(np.r_[dy_lo.ravel(), dy_hi.ravel()] / side * 2) / 2, return_inverse=True)
    q = _upper(eps, ax[:, None] * side, ay[None, :] * side)  # [offsets x, offsets y]
    (ix_lo, ix_hi), (iy_lo, iy_hi) = ix.reshape(2, *dx_lo.shape), iy.reshape(2, *dy_lo.shape)
    ci, co = col[:, None], col[None, :]
    ri, ro = row[:, None], row[None, :]
    a1, b1, a2, b2 = ix_lo[ci, co], ix_hi[ci, co], iy_lo[ri, ro], iy_hi[ri, ro]
    table = q[a1, a2] - q[b1, a2] - q[a1, b2] + q[b1, b2]
    table = np.clip(table, 0.0, None)
    table /= table.sum(axis=1, keepdims=True)
    return np.broadcast_to(table, problem.shape).copy()


def remap(problem, table: np.ndarray) -> np.ndarray:
    """``table`` followed by the optimal remapping (module docstring): each output ``y`` sent to
    ``argmin_ŷ Σ_x π(x) A[s, x, y] L[x, ŷ]`` summed over the profiles ``s`` (one map for everyone:
    it sees only the report), ties to the first. Outputs no one reports keep themselves."""
    from diffpriv.measures._leakage import best_guesses, joint

    table = np.asarray(table, np.float64)
    j = joint(problem.prior, table)  # [X, Y]
    best = best_guesses(j, problem.loss)[0]  # [Y]: the remapped output of each report
    best = np.where(j.sum(axis=0) > 0, best, np.arange(table.shape[2]))
    out = np.zeros_like(table)
    np.add.at(out, (slice(None), slice(None), best), table)
    return out


@register_mechanism("planar_laplace_remap", params={"epsilon": None}, calibrate="epsilon",
                    summary="planar Laplace on the plane, snapped to the grid, then the optimal remapping "
                            "(Chatzikokolakis et al. 2017)")
def planar_laplace_remap(problem, *, epsilon: float) -> np.ndarray:
    """:func:`planar_laplace_continuous` followed by :func:`remap` under ``problem``'s prior and loss."""
    return remap(problem, planar_laplace_continuous(problem, epsilon=epsilon))
