"""The classic local obfuscation mechanisms, as tables: the baselines an optimized table must beat.

Every mechanism here is an *exponential mechanism* on the finite output set,

    ``A[s, x, y] = exp(−c(x, y)) / Σ_{y' allowed} exp(−c(x, y'))``  for allowed ``y``, else 0,

with a cost ``c`` that depends only on ``x`` and ``y``: the same table for every profile ``s``,
except that a problem's support mask (``problem.support_mask()``) removes outputs row by row.
Rows are normalised in log space (``logsumexp`` after subtracting the row's least cost), so a
large ε concentrates the mass on the nearest allowed outputs instead of underflowing to a row
of zeros.

* ``krr`` — k-ary randomized response (Warner 1965; Kairouz, Oh & Viswanath 2014):
  ``c = ε·[x ≠ y]``, i.e. ``A[x, x] = e^ε/(e^ε + k − 1)`` and ``1/(e^ε + k − 1)`` elsewhere.
* ``planar_laplace`` — the discrete planar Laplace mechanism of geo-indistinguishability
  (Andrés, Bordenabe, Chatzikokolakis & Palamidessi 2013), ``c = ε·d(x, y)``.
* ``planar_gaussian`` — ``c = d(x, y)² / (2σ²)``, parametrised by ``precision = 1/σ``.
* ``restricted_laplace`` — the (ε_A, r)-restricted Laplace mechanism of Kawamoto & Murakami
  2019, *Local obfuscation mechanisms for hiding probability distributions*, Def. 12: the planar
  Laplace mechanism restricted to ``{y : d(x, y) ≤ r}``.

The distance ``d`` is the problem's input metric when the outputs are the inputs (same labels,
same order) and the problem has one, else the Euclidean distance between input and output
coordinates. numpy/scipy only.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from diffpriv.mechanisms._registry import ParameterError, register_mechanism

__all__ = ["krr", "planar_gaussian", "planar_laplace", "restricted_laplace", "exponential_table"]


def _parameter(mech: str, name: str, value, *, infinite: bool = False) -> float:
    """``value`` as a non-negative float (finite unless ``infinite``), else a ValueError."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"mechanism {mech!r}: parameter {name!r} must be a number, "
                             f"got {value!r}") from None
    if math.isnan(v) or v < 0 or (math.isinf(v) and not infinite):
        kind = "a non-negative number" if infinite else "a finite non-negative number"
        raise ParameterError(f"mechanism {mech!r}: parameter {name!r} must be {kind}, got {v!r}")
    return v


def _distances(problem, mech: str) -> np.ndarray:
    """``[n_in, n_out]`` distances ``d(x, y)``: the input metric when outputs are the inputs,
    else Euclidean between coordinates."""
    if problem.input_metric is not None and problem.inputs.labels == problem.outputs.labels:
        return problem.input_metric
    if problem.inputs.coords is None or problem.outputs.coords is None:
        raise ValueError(f"mechanism {mech!r} needs coordinates for the inputs and the outputs "
                         "(or an input metric with outputs equal to the inputs)")
    return problem.inputs.distances(problem.outputs)


def _row_label(problem, s: int, x: int) -> str:
    where = f"input {problem.inputs.labels[x]!r}"
    return where if len(problem.profiles) == 1 else f"{where} of profile {problem.profiles[s]!r}"


def exponential_table(problem, d: np.ndarray, rate: float, *, power: int = 1,
                      allowed: np.ndarray | None = None) -> np.ndarray:
    """``A[s, x, y] ∝ exp(−(rate·d(x, y))^power / power)`` on the allowed outputs of each row.

    ``power = 1`` is the Laplace (exponential) kernel ``e^{−rate·d}``, ``power = 2`` the
    Gaussian kernel ``e^{−(rate·d)²/2}``. Only cost differences within a row matter, so each
    row's cost is taken relative to its nearest allowed output (``d_min``): ``rate·(d − d_min)``,
    resp. ``rate(d − d_min) · rate(d + d_min) / 2``. The nearest output has weight exactly 1,
    so no row underflows to zeros for a large ``rate``; a weight that underflows is exactly 0,
    as in the limit. Normalised with ``logsumexp``, then divided by the float row sum.

    Args:
      problem: the problem (its shape and support mask).
      d: ``[n_in, n_out]`` non-negative distances (``+∞``: never reported).
      rate: ``ε`` (``power = 1``) or ``1/σ`` (``power = 2``); 0 gives the uniform row.
      power: 1 or 2.
      allowed: optional ``[n_profiles, n_in, n_out]`` (or ``[n_in, n_out]``) mask, combined with
        the problem's support.

    Returns:
      ``[n_profiles, n_in, n_out]`` float64 row-stochastic table, 0 outside the mask.

    Raises:
      ValueError: a row has no allowed output at a finite distance.
    """
    if power not in (1, 2):
        raise ValueError(f"exponential_table: power must be 1 or 2, got {power!r}")
    d = np.broadcast_to(np.asarray(d, dtype=np.float64), problem.shape)
    mask = problem.support_mask() & (d < np.inf)
    if allowed is not None:
        mask = mask & np.broadcast_to(allowed, problem.shape)
    empty = np.argwhere(~mask.any(axis=-1))
    if empty.size:
        s, x = empty[0]
        raise ValueError(f"{_row_label(problem, s, x)} has no allowed output")
    d = np.where(mask, d, np.inf)
    dmin = d.min(axis=-1, keepdims=True)
    if rate == 0:
        cost = np.zeros(problem.shape)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            near = rate * (d - dmin)  # inf - finite = inf outside the mask
            if power == 1:
                cost = near
            else:
                cost = np.where(d == dmin, 0.0, 0.5 * near * (rate * (d + dmin)))
    logw = np.where(mask, -cost, -np.inf)
    table = np.exp(logw - logsumexp(logw, axis=-1, keepdims=True))
    table /= table.sum(axis=-1, keepdims=True)
    return table


@register_mechanism("krr", params={"epsilon": None}, calibrate="epsilon",
           summary="k-ary randomized response: e^ε/(e^ε+k−1) on the true value, 1/(e^ε+k−1) elsewhere")
def krr(problem, *, epsilon: float) -> np.ndarray:
    """k-ary randomized response (Warner 1965; Kairouz, Oh & Viswanath 2014).

    ``A[s, x, x] = e^ε / (e^ε + k − 1)`` and ``A[s, x, y] = 1 / (e^ε + k − 1)`` for the other
    allowed outputs ``y``, where ``k`` is the number of outputs row ``(s, x)`` may use (all of
    them without a support mask). It is ε-local DP on every pair of inputs with the same
    ``k``; its expected 0/1 loss is ``(k − 1)/(e^ε + k − 1)``. Computed as the exponential
    mechanism with cost ``ε·[x ≠ y]``, so ``ε → ∞`` gives the identity.

    Raises:
      ValueError: the outputs are not the inputs (the same labels, in any order), a row may not
        report its own input, or ``epsilon`` is negative or not finite.
    """
    eps = _parameter("krr", "epsilon", epsilon)
    ins, outs = problem.inputs.labels, problem.outputs.labels
    if sorted(ins) != sorted(outs):
        extra = sorted(set(outs) - set(ins))
        why = (f"output {extra[0]!r} is not an input" if extra
               else f"input {sorted(set(ins) - set(outs))[0]!r} is not an output")
        raise ValueError("mechanism 'krr' needs the outputs to be the inputs (the same labels), "
                         f"but this problem's {why} ({len(ins)} inputs, {len(outs)} outputs)")
    own = np.array([outs.index(label) for label in ins])
    nx, ny = len(ins), len(outs)
    same = np.zeros((nx, ny), dtype=bool)
    same[np.arange(nx), own] = True
    sup = problem.support_mask()
    missing = np.argwhere(~sup[:, np.arange(nx), own])
    if missing.size:
        s, x = missing[0]
        raise ValueError(f"mechanism 'krr': {_row_label(problem, s, x)} may not report itself "
                         "(the support excludes it), so randomized response is not defined")
    return exponential_table(problem, np.where(same, 0.0, 1.0), eps)


@register_mechanism("planar_laplace", params={"epsilon": None}, calibrate="epsilon",
           summary="planar Laplace (geo-indistinguishability): A[x,y] ∝ exp(−ε·d(x,y))")
def planar_laplace(problem, *, epsilon: float) -> np.ndarray:
    """The discrete planar Laplace mechanism (Andrés et al. 2013, *Geo-indistinguishability*).

    ``A[s, x, y] = exp(−ε·d(x, y)) / Σ_{y'} exp(−ε·d(x, y'))`` over the allowed outputs of the
    row. Because the row normalisers differ on a finite grid, its extended-DP level is not ε in
    general: by the triangle inequality it is at most ``2ε``, and at least ``ε`` when the outputs
    contain the inputs (``A[x,x]/A[x',x] · A[x',x']/A[x,x'] = e^{2ε·d(x,x')}``).

    Raises:
      ValueError: no coordinates (nor input metric), or ``epsilon`` negative or not finite.
    """
    eps = _parameter("planar_laplace", "epsilon", epsilon)
    d = _distances(problem, "planar_laplace")
    return exponential_table(problem, d, eps)


@register_mechanism("planar_gaussian", params={"precision": None}, calibrate="precision",
           summary="planar Gaussian: A[x,y] ∝ exp(−d(x,y)²/(2σ²)), precision = 1/σ")
def planar_gaussian(problem, *, precision: float) -> np.ndarray:
    """The discrete planar Gaussian mechanism, ``A[s, x, y] ∝ exp(−d(x, y)² / (2σ²))``.

    Parametrised by ``precision = 1/σ`` (in 1/distance units) so that, like ε for the other
    mechanisms, a larger value means less noise: ``precision = 0`` is the uniform table and
    ``precision → ∞`` reports the nearest allowed output. As Kawamoto & Murakami 2019 (*Local
    obfuscation mechanisms for hiding probability distributions*, Sec. 7.4) note, it gives
    only approximate guarantees in the continuous plane; on a finite grid every level is finite
    and the certifier computes it exactly.

    Raises:
      ValueError: no coordinates (nor input metric), or ``precision`` negative or not finite.
    """
    p = _parameter("planar_gaussian", "precision", precision)
    d = _distances(problem, "planar_gaussian")
    return exponential_table(problem, d, p, power=2)


@register_mechanism("restricted_laplace", params={"epsilon": None, "radius": None}, calibrate="epsilon",
           summary="restricted Laplace RL(ε, r): planar Laplace restricted to d(x,y) ≤ r")
def restricted_laplace(problem, *, epsilon: float, radius: float) -> np.ndarray:
    """The (ε_A, r)-restricted Laplace mechanism (Kawamoto & Murakami 2019, *Local obfuscation
    mechanisms for hiding probability distributions*, Def. 12).

    With ``Y_{x,r} = {y : d(x, y) ≤ r}`` (compared exactly in float64; further limited by the
    problem's support), ``A[s, x, y] = exp(−ε·d(x, y)) / Σ_{y' ∈ Y_{x,r}} exp(−ε·d(x, y'))``
    for ``y ∈ Y_{x,r}`` and 0 otherwise. Its worst-case loss under the distance is at most
    ``r``; it is not DP (rows have different supports), and pure DistP holds only where the
    lifted distributions keep the same support. ``radius = inf`` is the planar Laplace mechanism.
    Unlike the unrestricted mechanisms, its certified DistP level need not be monotone in ε when
    ``r`` is small (measured: a 1 % drop between neighbouring ε on a 4×4 grid with ``r = 1``), and
    it need not tend to 0 as ε → 0 (the support stays restricted), so a tight budget may be out of
    reach at every ε.

    Raises:
      ValueError: a row has no allowed output within ``radius``, no coordinates, or a
        parameter is negative (or ``epsilon`` not finite).
    """
    eps = _parameter("restricted_laplace", "epsilon", epsilon)
    r = _parameter("restricted_laplace", "radius", radius, infinite=True)
    d = _distances(problem, "restricted_laplace")
    near = np.broadcast_to(d <= r, problem.shape) & problem.support_mask()
    empty = np.argwhere(~near.any(axis=-1))
    if empty.size:
        s, x = empty[0]
        raise ValueError(f"mechanism 'restricted_laplace': {_row_label(problem, s, x)} has no "
                         f"allowed output within radius {r:g} (nearest: {d[x].min():g})")
    return exponential_table(problem, d, eps, allowed=near)

