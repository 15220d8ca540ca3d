"""Divergence constraints for the optimizer: data, residuals and a certified lower bound.

A block measured in a divergence other than the max-divergence and the hockey-stick
(:attr:`~diffpriv.problems._blocks.PairBlock.linear` is False: KL, reverse KL, TV, χ², Hellinger,
Rényi; and Wasserstein on a line) asks ``D(P_k‖Q_k) ≤ ε_k`` (and ``D(Q_k‖P_k) ≤ ε_k`` unless
directed) for lifted laws ``P_k = wa[k] @ A``, ``Q_k = wb[k] @ A`` (rows ``r = (s, x)`` of
the table flattened to ``[R, Y]``; a pair block is a one-hot weight). Each comparison becomes
the convex constraint

    ``g_k(A) = (φ(D(P_k‖Q_k)) − φ(ε_k)) / s_k ≤ 0``

with ``φ(D) = e^{(α−1) D}`` for a Rényi order ``α > 1`` (then ``φ(D) = Σ P^α Q^{1−α}`` is
jointly convex, while ``D`` itself is only quasi-convex) and ``φ(D) = D`` otherwise (jointly
convex: the f-divergences, and Rényi for ``α < 1``); ``s_k = max(φ(ε_k), 10^-3)`` balances the
constraints. The levels are the log-space JAX twins of the certifier's
(:mod:`diffpriv.solvers._divergence_levels`). Wasserstein DP of order ``μ`` enters as
``(W_μ^μ − ε^μ) / max(ε^μ, 10^-3)`` with the exact, differentiable 1-D formula (outputs on a
line; another ground metric is refused with one line).

**Lower bound.** For multipliers ``λ ≥ 0`` and any table ``A₀`` with positive laws, convexity
gives ``g_k(A) ≥ g_k(A₀) + ⟨∇g_k(A₀), A − A₀⟩``, so the Lagrangian is bounded below by a function
linear in ``A``: together with the linear constraints' bound (:func:`._linear.lower_bound`),

    ``OPT ≥ Σ_r min_y (C + Gᵀu + Σ_k λ_k ∇g_k(A₀))[r, y] − Σ δ·max u⁺
            + Σ_k λ_k (g_k(A₀) − ⟨∇g_k(A₀), A₀⟩)``

(for the epigraph objectives, with the ``ν`` terms of :mod:`._linear`). It is tight at an
optimal ``(A₀, u, λ)``. The gradient is taken through the log-laws, so it is finite wherever the
laws are positive; columns no allowed entry reaches get none.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from diffpriv.problems._blocks import MixtureBlock, PairBlock
from diffpriv.problems._checks import SpecError
from diffpriv.problems._problem import Problem
from diffpriv.solvers import _x64  # noqa: F401  (float64 before any array is made)
from diffpriv.solvers._divergence_levels import divergence, log_lift, wasserstein_1d

__all__ = ["DivergenceData", "Kind", "divergence_data", "frank_wolfe_bound", "linearized", "residuals"]

Kind = tuple[str, float | None]
"""A group's divergence name and Rényi order (static)."""

SCALE_FLOOR = 1e-3


class DivergenceData(NamedTuple):
    """The nonlinear comparisons, one entry per group of one divergence (``kinds``, static)."""

    wa: tuple  # per group [K, R] normalised weights of P
    wb: tuple  # per group [K, R]
    eps: tuple  # per group [K] budgets
    both: tuple  # per group [K] bool: both directions
    order: tuple  # per group [Y] int: the outputs sorted along the line (Wasserstein; else [0])
    points: tuple  # per group [Y] their coordinates, sorted (Wasserstein; else [0])

    @property
    def size(self) -> int:
        return sum(int(e.shape[0]) for e in self.eps)


def divergence_data(problem: Problem) -> tuple[DivergenceData, tuple[Kind, ...]]:
    """The nonlinear blocks of ``problem`` as :class:`DivergenceData`, and their kinds."""
    ns, nx, _ = problem.shape
    groups: dict[Kind, list] = {}
    lines: dict[Kind, tuple] = {}
    for block in problem.blocks():
        if block.linear:
            continue
        if block.divergence == "max":
            raise ValueError(f"optimizer: the one-way max-divergence of constraints[{block.constraint}] "
                             "is not supported; bound both directions (pure DistP)")
        line = _line(problem, block)
        k = block.size
        wa, wb = np.zeros((k, ns * nx)), np.zeros((k, ns * nx))
        if isinstance(block, PairBlock):
            ra, rb = block.rows(nx)
            wa[np.arange(k), ra] = 1.0
            wb[np.arange(k), rb] = 1.0
        else:
            assert isinstance(block, MixtureBlock)
            for w, s, side in ((wa, block.sa, block.wa), (wb, block.sb, block.wb)):
                w.reshape(k, ns, nx)[np.arange(k), s] = side / side.sum(axis=1, keepdims=True)
        groups.setdefault((block.divergence, block.alpha), []).append(
            (wa, wb, np.asarray(block.eps, np.float64), np.full(k, not block.directed)))
        lines[(block.divergence, block.alpha)] = line
    kinds = tuple(groups)
    parts = [tuple(np.concatenate(col) for col in zip(*groups[kind], strict=True)) for kind in kinds]
    data = DivergenceData(*(tuple(jnp.asarray(p[i]) for p in parts) for i in range(4)),
                          *(tuple(jnp.asarray(lines[kind][i]) for kind in kinds) for i in range(2)))
    return data, kinds


def _line(problem: Problem, block) -> tuple[np.ndarray, np.ndarray]:
    """``(order, points)``: for a Wasserstein block, the outputs sorted along their line and their
    coordinates (the JAX level is the exact 1-D formula, which needs a line metric); else empty."""
    if block.divergence != "wasserstein":
        return np.zeros(1, np.int64), np.zeros(1)
    coords = problem.outputs.coords
    on_line = coords is not None and coords.shape[1] == 1
    if on_line:
        x = coords[:, 0]
        on_line = np.array_equal(block.ground, np.abs(x[:, None] - x[None, :]))
    if not on_line:
        raise SpecError(f"constraints[{block.constraint}]: the optimizer handles Wasserstein DP on "
                        "outputs along a line (1-D coordinates, their distance); `diffpriv reference` "
                        "(dp.solvers.convex) solves any ground metric")
    order = np.argsort(x, kind="stable")
    return order, x[order]


def _phi(kind: Kind, d):
    name, alpha = kind
    return jnp.exp((alpha - 1.0) * d) if name == "renyi" and alpha > 1 else d


def _group_residuals(kind: Kind, wa, wb, eps, both, order, points, log_rows):
    """``[K, 2]`` normalised residuals ``g_k`` of both directions (the second is −1 when the
    comparison is directed)."""
    lp, lq = log_lift(log_rows, wa), log_lift(log_rows, wb)
    if kind[0] == "wasserstein":  # W_μ^μ(P, Q) ≤ ε^μ: symmetric, jointly convex
        mu = kind[1]
        cost = wasserstein_1d(jnp.exp(lp[:, order]), jnp.exp(lq[:, order]), points, mu, root=False)
        target = eps**mu
        return jnp.stack([(cost - target) / jnp.maximum(target, SCALE_FLOOR), jnp.full_like(cost, -1.0)],
                         axis=1)
    level = divergence(*kind)
    target = _phi(kind, eps)
    scale = jnp.maximum(target, SCALE_FLOOR)
    fwd = (_phi(kind, level(lp, lq)) - target) / scale
    bwd = jnp.where(both, (_phi(kind, level(lq, lp)) - target) / scale, -1.0)
    return jnp.stack([fwd, bwd], axis=1)


def residuals(dd: DivergenceData, kinds: tuple[Kind, ...], log_rows) -> jax.Array:
    """``[K, 2]`` residuals ``g_k`` of every nonlinear comparison, groups in ``kinds`` order, for
    the table ``exp(log_rows)`` (``[R, Y]`` log-rows, ``-inf`` outside the support)."""
    parts = [_group_residuals(kind, *arrays, log_rows)
             for kind, *arrays in zip(kinds, dd.wa, dd.wb, dd.eps, dd.both, dd.order, dd.points, strict=True)]
    return jnp.concatenate(parts, axis=0) if parts else jnp.zeros((0, 2))


def linearized(dd: DivergenceData, kinds: tuple[Kind, ...], table, lam):
    """``(∇, c)``: the linearisation of ``Σ_k λ_k·g_k`` at ``table`` ``[R, Y]`` (positive on its
    support): ``Σ λ g(A) ≥ ⟨∇, A⟩ + c`` for every table ``A`` (module docstring). ``lam``:
    ``[K, 2]`` multipliers (negative entries count as 0)."""
    # W_μ^μ for μ > 1 is convex, but the gradient of its sort-based formula is not known to be a
    # subgradient where quantiles tie: those constraints are left out of the bound (λ = 0, a
    # relaxation, still valid). μ = 1 is Σ|linear|, whose gradient (sign(0) = 0) is a subgradient.
    keep = jnp.concatenate([jnp.full(e.shape[0], not (kind[0] == "wasserstein" and kind[1] != 1.0))
                            for kind, e in zip(kinds, dd.eps, strict=True)] or [jnp.zeros(0, bool)])
    lam = jnp.where(keep[:, None], jnp.maximum(lam, 0.0), 0.0)
    log_rows = jnp.where(table > 0, jnp.log(jnp.where(table > 0, table, 1.0)), -jnp.inf)

    def weighted(lr):
        return jnp.sum(lam * jnp.maximum(residuals(dd, kinds, lr), -1e300))

    value, g_log = jax.value_and_grad(weighted)(log_rows)
    grad = jnp.where(table > 0, g_log / jnp.where(table > 0, table, 1.0), 0.0)  # d/dA = d/dlogA / A
    # A zero entry of the table would need a subgradient that may be −∞ (P ln(P/Q) at P = 0):
    # callers pass tables positive on the support; a non-finite value gives no bound at all.
    ok = jnp.isfinite(value) & jnp.all(jnp.isfinite(grad))
    return jnp.where(ok, grad, 0.0), jnp.where(ok, value - jnp.sum(grad * table), -jnp.inf)


def frank_wolfe_bound(linear_cost, mask, bound_of, dd: DivergenceData, kinds: tuple[Kind, ...], table,
                      lam, iters: int):
    """The best of ``bound_of(linearized(A_t))`` over Frank–Wolfe iterates ``A_t`` on
    ``φ(A) = ⟨linear_cost, A⟩ + Σ λ_k g_k(A)`` from ``table``.

    Every ``A_t`` gives a valid bound (the linearisation of a convex function is below it
    everywhere); moving ``A_t`` towards the minimiser of ``φ`` makes it tight. The step is the
    classic ``2 / (t + 2)`` towards the per-row vertex minimising the current gradient;
    iterates stay positive wherever ``table`` is.
    """
    rows = jnp.arange(table.shape[0])

    def step(carry, t):
        a, best = carry
        lin = linearized(dd, kinds, a, lam)
        best = jnp.maximum(best, bound_of(lin))
        grad = jnp.where(mask, linear_cost + lin[0], jnp.inf)
        vertex = jnp.zeros_like(a).at[rows, jnp.argmin(grad, axis=1)].set(1.0)
        gamma = 2.0 / (t + 3.0)
        return ((1.0 - gamma) * a + gamma * vertex, best), None

    (a, best), _ = jax.lax.scan(step, (table, jnp.asarray(-jnp.inf)), jnp.arange(iters, dtype=table.dtype))
    return jnp.maximum(best, bound_of(linearized(dd, kinds, a, lam)))
