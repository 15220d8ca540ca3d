"""What an analyst keeps of the reports, in numpy float64: the mean squared error of the
least-squares estimate of the population's input law, the mutual information between the true
values and the reports, and the entropic transport cost between an input law and its output law.
The certifier's numbers for the non-linear objectives
(:mod:`diffpriv.problems._objectives`); the gradient search's JAX versions are
:mod:`diffpriv.solvers._utilities`.

Both see the population through one channel: ``λ[x] = Σ_s π[s,x]`` and
``Ā[x, y] = Σ_s π[s,x] A[s,x,y] / λ[x]`` (the profiles' tables mixed as the population mixes
them; where ``λ[x] = 0`` the profiles' mean), so that the law of the reports is ``q = λ Ā``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SINKHORN_ITERATIONS", "SINKHORN_TOLERANCE", "entropic_transport", "estimation_mse",
           "mutual_information", "newton_solve", "plan_value", "population_channel", "population_weights"]


def population_weights(prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(λ [X], w [S, X])`` of ``prior [S, X]``: ``Ā[x] = Σ_s w[s, x] A[s, x]`` (module docstring)."""
    prior = np.asarray(prior, np.float64)
    lam = prior.sum(axis=0)
    return lam, np.where(lam > 0, prior / np.where(lam > 0, lam, 1.0), 1.0 / prior.shape[0])


def population_channel(prior: np.ndarray, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(λ [X], Ā [X, Y])`` of ``prior [S, X]`` and ``table [S, X, Y]`` (module docstring)."""
    lam, weights = population_weights(prior)
    return lam, np.einsum("sx,sxy->xy", weights, np.asarray(table, np.float64))


def estimation_mse(prior: np.ndarray, table: np.ndarray, reports: int) -> float:
    """The mean squared error ``E‖λ̂ − λ‖²`` of the least-squares estimate ``λ̂ = q̂ B`` of the
    input law from the empirical law ``q̂`` of ``reports`` independent reports, with
    ``B = Āᵀ(ĀĀᵀ)⁻¹``: ``(Σ_y q_y ‖B_y‖² − ‖λ‖²) / reports`` (``q̂``'s covariance is
    ``(diag q − qqᵀ)/N`` and ``qB = λ``); ``inf`` where ``ĀĀᵀ`` is singular (the reports do not
    identify the law). The frequency-estimation utility of local DP (e.g. Wang et al. 2017,
    *Locally differentially private protocols for frequency estimation*)."""
    lam, channel = population_channel(prior, table)
    gram = channel @ channel.T
    try:
        factor = np.linalg.cholesky(gram)
    except np.linalg.LinAlgError:
        return float("inf")
    if np.min(np.diag(factor)) <= np.sqrt(np.finfo(np.float64).eps) * np.max(np.diag(factor)):
        return float("inf")  # singular to float64: the estimate's variance is not a number
    solved = np.linalg.solve(gram, channel)  # [X, Y]: column y is B_yᵀ
    q = lam @ channel
    return float((np.sum(q * np.sum(solved * solved, axis=0)) - np.sum(lam * lam)) / reports)


def mutual_information(prior: np.ndarray, table: np.ndarray) -> float:
    """``I(X; Y)`` in nats of the true value and the report under the joint prior,
    ``Σ_{x,y} P(x,y) ln(P(x,y) / (λ_x q_y))`` with ``P(x,y) = λ_x Ā[x,y]`` (``0 ln 0 = 0``)."""
    lam, channel = population_channel(prior, table)
    joint = lam[:, None] * channel
    q = joint.sum(axis=0)
    outer = lam[:, None] * q[None, :]
    positive = joint > 0
    ratio = np.where(positive, joint / np.where(positive, outer, 1.0), 1.0)
    return float(max(np.sum(joint * np.log(ratio)), 0.0))


SINKHORN_TOLERANCE, SINKHORN_ITERATIONS = 1e-11, 100_000
"""The largest marginal error (summed over either side) the value's plan may keep, and the
iterations POT's Sinkhorn may take to get there (where Newton's method does not run)."""

NEWTON_WORK, NEWTON_ITERATIONS, WARM, WARM_ITERATIONS = 2e9, 200, 1e-1, 10_000
"""Newton's method computes the value where its Hessian costs at most this many multiply–adds
(``X·Y²`` on the laws' supports), in at most this many steps, from Sinkhorn's iterate whose rows' law
is within :data:`WARM` (at most :data:`WARM_ITERATIONS` of its steps)."""


def entropic_transport(a: np.ndarray, b: np.ndarray, cost: np.ndarray, epsilon: float) -> float:
    """``S_ε(a, b) = min_{γ ∈ Π(a, b)} Σ γ[x,y] cost[x,y] + ε·KL(γ ‖ a⊗b)`` of two laws (each
    summing to 1), on the laws' supports: the objective ``⟨γ, cost⟩ + ε·(Σ γ ln γ − Σ a ln a −
    Σ b ln b)`` at the plan ``γ`` of the entropic problem's dual solved to
    :data:`SINKHORN_TOLERANCE` (:func:`_newton_plan`, where it is small enough; else POT's
    log-domain Sinkhorn, Cuturi 2013; Schmitzer 2019). A ``FloatingPointError`` where neither gets
    there."""
    import warnings

    from diffpriv.measures._pot import pot

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    rows, cols = np.flatnonzero(a > 0), np.flatnonzero(b > 0)
    a, b = a[rows], b[cols]
    c = np.asarray(cost, np.float64)[np.ix_(rows, cols)]
    plan = _newton_plan(a, b, c, epsilon) if a.size * b.size**2 <= NEWTON_WORK else None
    if plan is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (convergence is checked below)
            plan = pot().sinkhorn(a, b, c, epsilon, method="sinkhorn_log", numItermax=SINKHORN_ITERATIONS,
                                  stopThr=SINKHORN_TOLERANCE / 10)
    if not np.all(np.isfinite(plan)) or _error(plan, a, b) > SINKHORN_TOLERANCE:
        raise FloatingPointError(f"entropic transport: Sinkhorn did not converge at ε = {epsilon:g} "
                                 "(a larger objective.epsilon converges faster)")
    return plan_value(plan, a, b, c, epsilon)


def plan_value(plan: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray, epsilon: float) -> float:
    """``⟨γ, c⟩ + ε·(Σ γ ln γ − Σ a ln a − Σ b ln b)`` of a plan ``γ`` between the positive laws
    ``a`` and ``b`` (``0 ln 0 = 0``)."""
    positive = plan > 0
    entropy = np.sum(plan[positive] * np.log(plan[positive])) - np.sum(a * np.log(a)) - np.sum(b * np.log(b))
    return float(np.sum(plan * c) + epsilon * entropy)


def _error(plan: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """The larger of the plan's two marginal errors, each summed over its side."""
    return float(max(np.abs(plan.sum(axis=0) - b).sum(), np.abs(plan.sum(axis=1) - a).sum()))


def logsumexp(z: np.ndarray, axis: int) -> np.ndarray:
    """``ln Σ e^z`` along ``axis``, shifted by the largest entry (no overflow)."""
    top = np.max(z, axis=axis, keepdims=True)
    return np.squeeze(top, axis=axis) + np.log(np.sum(np.exp(z - top), axis=axis))


def _newton_plan(a: np.ndarray, b: np.ndarray, c: np.ndarray, epsilon: float) -> np.ndarray | None:
    """The plan of :func:`newton_solve` (None where it stops short)."""
    solved = newton_solve(a, b, c, epsilon)
    return None if solved is None else solved[0]


def newton_solve(a: np.ndarray, b: np.ndarray, c: np.ndarray, epsilon: float,
                 start: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """The entropic plan by Newton's method on the semi-dual (Cuturi & Peyré 2018, *Computational
    Optimal Transport*, §4.3): ``max_g Σ_j b_j g_j − ε Σ_i a_i ln Σ_j b_j e^{(g_j − c_ij)/ε}``,
    concave, its gradient ``b − Σ_i a_i P_i`` and Hessian ``−(diag q − Pᵀ diag(a) P)/ε`` with ``P_i``
    the softmax of row ``i`` and ``q = Σ_i a_i P_i``. ``g`` is held at 0 at the heaviest column (the
    function is flat along the constant vector), the system scaled by ``diag q^{-1/2}``, and each
    step backtracks. The plan ``a_i P_ij`` meets the rows' law exactly and the columns' to the
    gradient's size. None where the steps stop short of :data:`SINKHORN_TOLERANCE` (Sinkhorn then
    runs). Sinkhorn needs ``O(max c/ε)`` iterations (9,500 on the 4×4 city grid at ε = 0.25 km,
    3 s); this takes a few Newton steps after a few Sinkhorn ones. Returns ``(plan, g)``; ``start``:
    the ``g`` of a nearby problem to begin from (the optimizer's repeated calls)."""
    log_b = np.log(b)

    def at(g):
        z = (g - c) / epsilon + log_b
        top = z.max(axis=1, keepdims=True)
        e = np.exp(z - top)
        total = e.sum(axis=1, keepdims=True)
        return e / total, float(b @ g - epsilon * (a @ (top[:, 0] + np.log(total[:, 0]))))

    log_a, g, f = np.log(a), np.zeros(b.size) if start is None else np.array(start, np.float64), None
    for _ in range(WARM_ITERATIONS):  # Sinkhorn's alternating steps: Newton's start
        last, f = f, -epsilon * logsumexp((g - c) / epsilon + log_b, axis=1)
        if last is not None and a @ np.abs(np.expm1((last - f) / epsilon)) <= WARM:
            break  # (the rows' law's error at the last g)
        g = -epsilon * logsumexp((f[:, None] - c) / epsilon + log_a[:, None], axis=0)
    g -= g[np.argmax(b)]
    free = np.arange(b.size) != np.argmax(b)  # g at the heaviest column stays 0
    p, value = at(g)
    for _ in range(NEWTON_ITERATIONS):
        q = a @ p
        grad = b - q
        error = float(np.abs(grad).sum())
        if error <= SINKHORN_TOLERANCE / 10:
            return a[:, None] * p, g
        if not np.all(q > 0):  # a column's mass underflowed: no Newton system
            return None
        scale = 1.0 / np.sqrt(q)  # the system scaled to a unit diagonal's order (b spans decades)
        scaled = (scale[:, None] * p.T * a) @ (p * scale)
        system = (np.eye(b.size) - scaled) / epsilon
        try:
            step = np.zeros(b.size)
            step[free] = scale[free] * np.linalg.solve(system[np.ix_(free, free)], (scale * grad)[free])
        except np.linalg.LinAlgError:
            return None
        slope, t = float(grad @ step), 1.0
        while t > 1e-10:
            trial, tried = at(g + t * step)
            if tried >= value + 1e-4 * t * slope or np.abs(b - a @ trial).sum() < 0.5 * error:
                break
            t /= 2
        else:
            return None
        g, p, value = g + t * step, trial, tried
    return None
