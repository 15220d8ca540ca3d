"""The price of privacy: how fast the optimal loss falls as a budget grows, from the LP's
multipliers (the envelope theorem).

With the privacy rows ``P_k[y] − e^{ε_k} Q_k[y] (− z_{k,y}) ≤ 0`` (and ``Σ_y z_{k,y} ≤ δ_k``) and
their multipliers ``μ ≥ 0`` (``ν ≥ 0``) at the optimum ``A*``, the optimal value ``V`` of the LP
moves with a constraint's budget as its Lagrangian does:

    dV/dε = −Σ_k s_k e^{ε_k} Σ_y (μ_{k,0,y} Q_k[y] + μ_{k,1,y} P_k[y])     (ε_k = ε·s_k)
    dV/dδ = −Σ_k (ν_{k,0} + ν_{k,1})

over the comparisons ``k`` of that constraint, ``s_k`` their scale (a distance for extended DP and
extended DistP, else 1), each in both directions (the second with ``P`` and ``Q`` swapped). Both
are ≤ 0. Where the optimum has a kink in the budget (several optimal multipliers) this is one
one-sided rate, not the other. Only the constraints whose comparisons are all linear (pure and
(ε, δ) bounds) are priced.

The interior point (:mod:`._interior`) has the same multipliers in another order: one per pair
row ``a[i] − e^{ε_p} a[j] ≤ 0`` and output (:func:`pair_prices`), at its last iterate rather than
at an optimum: its rates are those of the problem it has solved to its ``gap_tol``.
"""

from __future__ import annotations

import numpy as np

from diffpriv.problems._blocks import budgets
from diffpriv.problems._problem import Problem

__all__ = ["pair_prices", "prices"]


def prices(problem: Problem, table: np.ndarray, multipliers: np.ndarray,
           delta_multipliers: np.ndarray) -> dict[str, dict[str, float]]:
    """``{constraint name: {"epsilon": dV/dε, "delta": dV/dδ}}`` (module docstring; ``"delta"``
    only for (ε, δ) constraints) from the LP optimum ``table`` and its multipliers ``[K, 2, Y]``
    and ``[K, 2]`` over ``problem.blocks()`` in order (:class:`._lp.ReferenceResult`)."""
    from diffpriv.certification._laws import output_laws

    blocks = problem.blocks()
    if not blocks:
        return {}
    p, q = output_laws(np.asarray(table, np.float64), blocks)
    b = budgets(blocks)
    with np.errstate(over="ignore"):
        grow = b.scale * np.exp(b.eps)  # d e^{ε_k} / dε
    rate = -grow * (np.sum(multipliers[:, 0] * q, axis=1) + np.sum(multipliers[:, 1] * p, axis=1))
    out: dict[str, dict[str, float]] = {}
    for i, c in enumerate(problem.constraints):
        own = [block for block in blocks if block.constraint == i]
        if not own or not all(block.linear for block in own):
            continue
        mine = b.constraint == i
        price = {"epsilon": float(np.sum(rate[mine]))}
        if any(block.delta > 0 for block in own):
            price["delta"] = -float(np.sum(delta_multipliers[mine]))
        out[c.name] = price
    return out


def pair_prices(problem: Problem, table: np.ndarray, multipliers: np.ndarray,
                pure: tuple) -> dict[str, dict[str, float]]:
    """``{constraint name: {"epsilon": dV/dε}}`` of the constraints made only of pure pair bounds
    (local and extended DP), from ``table`` ``[S·X, Y]`` (rows flattened) and the multipliers
    ``[E, Y]`` of the pair rows ``a[i] − e^{ε_p} a[j] ≤ 0`` of the blocks ``pure`` (those of
    ``problem.blocks()`` that are pure pair bounds, in order: :func:`._columns._edges`' rows):
    ``dV/dε = −Σ_p s_p e^{ε_p} Σ_y λ_{p,y} a[j_p, y]`` over the rows ``p`` of that constraint
    (``ε_p = ε·s_p``)."""
    nx, rate, at = problem.shape[1], {}, 0
    mixed = {b.constraint for b in problem.blocks() if not any(b is p for p in pure)}
    for block in pure:
        ra, rb = block.rows(nx)
        eps = np.broadcast_to(np.asarray(block.eps, np.float64), ra.shape)
        scale = np.broadcast_to(np.asarray(block.scale, np.float64), ra.shape)
        for _, j in ((ra, rb),) if block.directed else ((ra, rb), (rb, ra)):
            lam = multipliers[at:at + j.size]
            with np.errstate(over="ignore"):
                grow = scale * np.exp(eps)
            rate[block.constraint] = rate.get(block.constraint, 0.0) - float(
                np.sum(grow * np.einsum("py,py->p", lam, table[j])))
            at += j.size
    if at != multipliers.shape[0]:
        raise ValueError(f"multipliers: {multipliers.shape[0]} rows for {at} pair rows")
    return {c.name: {"epsilon": rate[i]} for i, c in enumerate(problem.constraints)
            if i in rate and i not in mixed}
