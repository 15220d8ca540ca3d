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
           "mutual_information", "population_channel", "population_weights"]


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
"""The largest marginal error (summed over either side) the value's Sinkhorn plan may keep, and the
iterations it may take to get there."""


def entropic_transport(a: np.ndarray, b: np.ndarray, cost: np.ndarray, epsilon: float) -> float:
    """``S_ε(a, b) = min_{γ ∈ Π(a, b)} Σ γ[x,y] cost[x,y] + ε·KL(γ ‖ a⊗b)`` of two laws (each
    summing to 1): the plan of POT's log-domain Sinkhorn (Cuturi 2013; Schmitzer 2019) on the
    laws' supports, to :data:`SINKHORN_TOLERANCE`, and the objective at that plan,
    ``⟨γ, cost⟩ + ε·(Σ γ ln γ − Σ a ln a − Σ b ln b)``. A ``FloatingPointError`` where Sinkhorn
    does not get there in :data:`SINKHORN_ITERATIONS`."""
    import warnings

    from diffpriv.measures._pot import pot

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    rows, cols = np.flatnonzero(a > 0), np.flatnonzero(b > 0)
    a, b = a[rows], b[cols]
    c = np.asarray(cost, np.float64)[np.ix_(rows, cols)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (convergence is checked below)
        plan = pot().sinkhorn(a, b, c, epsilon, method="sinkhorn_log", numItermax=SINKHORN_ITERATIONS,
                              stopThr=SINKHORN_TOLERANCE / 10)
    if not np.all(np.isfinite(plan)) or np.abs(plan.sum(axis=0) - b).sum() > SINKHORN_TOLERANCE \
            or np.abs(plan.sum(axis=1) - a).sum() > SINKHORN_TOLERANCE:
        raise FloatingPointError(f"entropic transport: Sinkhorn did not converge at ε = {epsilon:g} "
                                 "(a larger objective.epsilon converges faster)")
    positive = plan > 0
    entropy = np.sum(plan[positive] * np.log(plan[positive])) - np.sum(a * np.log(a)) - np.sum(b * np.log(b))
    return float(np.sum(plan * c) + epsilon * entropy)
