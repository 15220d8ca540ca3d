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
``(W_μ^μ − ε^μ) / max(ε^μ, 10^-3)``: with the exact, differentiable 1-D formula when the outputs
lie on a line under their distance, and on any other ground metric as ``⟨f, P⟩ + ⟨g, Q⟩`` with
the optimal potentials of the exact transport problem (network simplex on the host,
:func:`~._divergence_levels.exact_potentials`): the exact value, with a subgradient as gradient.

**Lower bound.** For multipliers ``λ ≥ 0`` and any table ``A₀`` with positive laws, convexity
gives ``g_k(A) ≥ g_k(A₀) + ⟨∇g_k(A₀), A − A₀⟩``, so the Lagrangian is bounded below by a function
linear in ``A``: together with the linear constraints' bound (:func:`._linear.lower_bound`),

    ``OPT ≥ Σ_r min_y (C + Gᵀu + Σ_k λ_k ∇g_k(A₀))[r, y] − Σ δ·max u⁺
            + Σ_k λ_k (g_k(A₀) − ⟨∇g_k(A₀), A₀⟩)``

(for the epigraph objectives, with the ``ν`` terms of :mod:`._linear`). It is tight at an
optimal ``(A₀, u, λ)``. The gradient is taken through the log-laws, so it is finite wherever the
laws are positive; columns no allowed entry reaches get none. A Wasserstein constraint is
linearised by feasible potentials (``f ⊕ g ≤ d^μ``, c-transformed): ``W_μ^μ(P, Q) ≥ ⟨f, P⟩ + ⟨g, Q⟩``
for every pair of laws (weak duality), for every order ``μ``, tight where the potentials are
optimal.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from diffpriv.problems._blocks import MixtureBlock, PairBlock
from diffpriv.problems._checks import SpecError
from diffpriv.problems._problem import Problem
from diffpriv.solvers._divergence_levels import (
    divergence,
    exact_potentials,
    line_potentials,
    log_lift,
    symmetric,
    wasserstein_1d,
)
from diffpriv.solvers._linear import LinearData, operator, sparse_matrix
from diffpriv.solvers._polish import violation

__all__ = ["DivergenceData", "Kind", "block_weights", "divergence_data", "frank_wolfe_bound", "linearized",
           "residuals", "transport_dual_bound", "coupling_dual", "divergence_violation"]

Kind = tuple[str, float | None]
"""A group's divergence name and Rényi order (static)."""

SCALE_FLOOR = 1e-3


class DivergenceData(NamedTuple):
    """The nonlinear comparisons, one entry per group of one divergence (``kinds``, static)."""

    wa: tuple  # per group [K, R] normalised weights of P
    wb: tuple  # per group [K, R]
    eps: tuple  # per group [K] budgets
    both: tuple  # per group [K] bool: both directions
    order: tuple  # per group [Y] int: the outputs, sorted along the line if on one (Wasserstein; else [0])
    points: tuple  # per group [Y] their coordinates, sorted (Wasserstein on a line; else [0])
    ground: tuple  # per group [Y, Y] the cost d^μ in that order, _largest's unit (Wasserstein; else [1, 1])
    ia: tuple  # per group [K] the row of P in a group of row pairs (a pair block's); else [0]
    ib: tuple  # per group [K] the row of Q; else [0]

    @property
    def size(self) -> int:
        return sum(int(e.shape[0]) for e in self.eps)


def block_weights(block, ns: int, nx: int) -> tuple[np.ndarray, np.ndarray]:
    """``([K, ns·nx], [K, ns·nx])``: the weights over the table's rows of the two laws each
    comparison of a nonlinear ``block`` compares (a row each for a pair, the normalised item
    laws for a mixture)."""
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
    return wa, wb


def divergence_data(problem: Problem,
                    n_rows: int | None = None) -> tuple[DivergenceData, tuple[Kind, ...]]:
    """The nonlinear blocks of ``problem`` as :class:`DivergenceData`, and their kinds (one group
    per divergence, and per ground metric for Wasserstein blocks); ``n_rows``: the weights padded
    with zero columns to the solvers' rows (the transport objective's plan rows take no part in
    the divergences)."""
    ns, nx, _ = problem.shape
    width = ns * nx if n_rows is None else n_rows
    groups: dict[tuple, list] = {}
    geometry: dict[tuple, tuple] = {}
    for block in problem.blocks():
        if block.linear:
            continue
        if block.divergence == "max":
            raise SpecError(f"optimizer: the one-way max-divergence of constraints[{block.constraint}] "
                             "is not supported; bound both directions (pure DistP)")
        k = block.size
        wa, wb = block_weights(block, ns, nx)
        pairs = isinstance(block, PairBlock)
        key = (block.divergence, block.alpha, None if block.ground is None else block.ground.tobytes(), pairs)
        pad = ((0, 0), (0, width - ns * nx))
        rows = block.rows(nx) if pairs else (np.zeros(0, np.int64), np.zeros(0, np.int64))
        eps = np.asarray(block.eps, np.float64)
        if block.divergence == "wasserstein":  # in _largest's unit (_geometry); past D: vacuous
            unit, top = _largest(block), float(np.max(block.ground, initial=0.0))
            eps = np.minimum(eps, top * 2.0 ** (1.0 / block.alpha)) / unit if unit != 1.0 else eps
        groups.setdefault(key, []).append(
            (np.pad(wa, pad), np.pad(wb, pad), eps,
             np.full(k, not block.directed), *(np.asarray(r, np.int64) for r in rows)))
        geometry[key] = _geometry(problem, block)
    keys = tuple(groups)
    parts = [tuple(np.concatenate(col) for col in zip(*groups[key], strict=True)) for key in keys]
    data = DivergenceData(*(tuple(jnp.asarray(p[i]) for p in parts) for i in range(4)),
                          *(tuple(jnp.asarray(geometry[key][i]) for key in keys) for i in range(3)),
                          *(tuple(jnp.asarray(p[i]) for p in parts) for i in (4, 5)))
    return data, tuple(key[:2] for key in keys)


def _largest(block) -> float:
    """The unit of a Wasserstein block's budgets, points and costs here: 1, or its largest ground
    distance ``D`` where ``D^μ`` is beyond ``10^{±100}`` (order 1,000 over distances of 10
    overflowed), so that no ``d^μ`` overflows or underflows; a residual ``(W^μ − ε^μ) / ε^μ`` is
    the same in any unit. (In units of ``D`` everywhere, the augmented Lagrangian's bound on a
    grid at order 2 came out 6 % lower: its steps are not scale-free.)"""
    ground = np.asarray(block.ground, np.float64)
    top = float(ground.max()) if ground.size else 0.0
    if top <= 0:
        return 1.0
    exponent = block.alpha * math.log10(top)
    return top if abs(exponent) > 100 else 1.0


def _geometry(problem: Problem, block) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(order, points, cost)`` of a Wasserstein block: the outputs sorted along their line and
    their coordinates when the ground metric is the distance on a line (the exact 1-D formula
    applies), else the identity order and no points; the cost ``d^μ`` in that order; all in the
    unit of :func:`_largest`. Placeholders for other divergences."""
    if block.divergence != "wasserstein":
        return np.zeros(1, np.int64), np.zeros(1), np.zeros((1, 1))
    coords, ground = problem.outputs.coords, np.asarray(block.ground, np.float64)
    on_line = coords is not None and coords.shape[1] == 1 and coords.shape[0] > 1
    if on_line:
        x = coords[:, 0]
        on_line = np.array_equal(ground, np.abs(x[:, None] - x[None, :]))
    order = np.argsort(coords[:, 0], kind="stable") if on_line else np.arange(ground.shape[0])
    top = _largest(block)
    points = coords[order, 0] / top if on_line else np.zeros(1)
    return order, points, (ground[np.ix_(order, order)] / top) ** block.alpha


def _phi(kind: Kind, d):
    name, alpha = kind
    return jnp.exp((alpha - 1.0) * d) if name == "renyi" and alpha > 1 else d


def _potentials(p, q, points, ground, mu):
    """Feasible potentials of ``W_μ^μ(P, Q)`` for laws in a group's output order: from the 1-D
    formula on a line (``points`` has more than one entry: static), else the network simplex's."""
    if points.shape[0] > 1:
        return line_potentials(p, q, points, mu, ground)
    return exact_potentials(p, q, ground, 1.0)  # ground is already d^μ


def _group_residuals(kind: Kind, wa, wb, eps, both, order, points, ground, ia, ib, log_rows, minorant: bool):
    """``[K, 2]`` normalised residuals ``g_k`` of both directions (the second is −1 when the
    comparison is directed; a symmetric divergence is computed once, half the work of the
    mirror-prox step on squared-Hellinger DP). ``minorant`` (static): a Wasserstein group as its
    linear minorant by feasible potentials (module docstring), also on a line. A group of row pairs (``ia``
    non-empty: static) gathers its rows instead of lifting through the dense weights."""
    if ia.shape[0]:
        lp, lq = log_rows[ia], log_rows[ib]
    else:
        lp, lq = log_lift(log_rows, wa), log_lift(log_rows, wb)
    if kind[0] == "wasserstein":  # W_μ^μ(P, Q) ≤ ε^μ: symmetric, jointly convex
        mu = kind[1]
        p, q = jnp.exp(lp[:, order]), jnp.exp(lq[:, order])
        if points.shape[0] > 1 and not minorant:  # on a line (static)
            cost = wasserstein_1d(p, q, points, mu, root=False)
        else:
            f, g = _potentials(p, q, points, ground, mu)
            cost = jnp.sum(f * p, axis=-1) + jnp.sum(g * q, axis=-1)
        target = eps**mu
        return jnp.stack([(cost - target) / jnp.maximum(target, SCALE_FLOOR), jnp.full_like(cost, -1.0)],
                         axis=1)
    level = divergence(*kind)
    target = _phi(kind, eps)
    scale = jnp.maximum(target, SCALE_FLOOR)
    fwd = (_phi(kind, level(lp, lq)) - target) / scale
    back = fwd if symmetric(*kind) else (_phi(kind, level(lq, lp)) - target) / scale  # static
    return jnp.stack([fwd, jnp.where(both, back, -1.0)], axis=1)


def residuals(dd: DivergenceData, kinds: tuple[Kind, ...], log_rows, *, minorant: bool = False) -> jax.Array:
    """``[K, 2]`` residuals ``g_k`` of every nonlinear comparison, groups in ``kinds`` order, for
    the table ``exp(log_rows)`` (``[R, Y]`` log-rows, ``-inf`` outside the support)."""
    groups = zip(kinds, *dd, strict=True)  # every field is per group, in order
    parts = [_group_residuals(kind, *arrays, log_rows, minorant) for kind, *arrays in groups]
    return jnp.concatenate(parts, axis=0) if parts else jnp.zeros((0, 2))


def linearized(dd: DivergenceData, kinds: tuple[Kind, ...], table, lam):
    """``(∇, c)``: the linearisation of ``Σ_k λ_k·g_k`` at ``table`` ``[R, Y]`` (positive on its
    support): ``Σ λ g(A) ≥ ⟨∇, A⟩ + c`` for every table ``A`` (module docstring). ``lam``:
    ``[K, 2]`` multipliers (negative entries count as 0)."""
    lam = jnp.maximum(lam, 0.0)
    log_rows = jnp.where(table > 0, jnp.log(jnp.where(table > 0, table, 1.0)), -jnp.inf)

    def weighted(lr):
        return jnp.sum(lam * jnp.maximum(residuals(dd, kinds, lr, minorant=True), -1e300))

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


def coupling_dual(cost, a, b, z, budget):
    """``[K]``: ``min_ij (a_ki + b_kj + z_k C_kij) − z_k ê_k``, each comparison's coupling term of
    the transport Lagrangian (``cost`` ``[K, Y, Y]``, marginal multipliers ``a``, ``b`` ``[K, Y]``,
    cost multipliers ``z ≥ 0``): with ``⟨a_k, P_k⟩ + ⟨b_k, Q_k⟩`` subtracted from the table's term, a
    lower bound of ``z_k (W_μ^μ(P_k, Q_k) − ê_k)`` for any free ``a``, ``b``. Shared by the
    augmented Lagrangian's bound (:func:`transport_dual_bound`) and the lifted PDHG's."""
    inner = jnp.min(a[:, :, None] + b[:, None, :] + z[:, None, None] * cost, axis=(1, 2))
    return inner - z * budget


def transport_dual_bound(bound_of, dd: DivergenceData, kinds: tuple[Kind, ...], table, lam, steps: int):
    """The best bound over ``steps`` of Adam ascent on free transport multipliers.

    Each Wasserstein comparison ``k`` (multiplier ``λ_k``, normalisation ``s_k``) is dualised
    through its coupling ``γ_k`` (mass 1, marginals ``P_k``, ``Q_k``) with free multipliers
    ``U_k``, ``V_k`` of the marginals: for every table (``w_k = λ_k/s_k``),

        ``w_k (W_μ^μ − ε^μ) ≥ ⟨U_k, P_k⟩ + ⟨V_k, Q_k⟩ + min_ij (w_k C_ij − U_ki − V_kj) − w_k ε^μ``,

    linear in the table for *any* ``U``, ``V`` (no feasibility needed), and concave in them. It
    starts from ``λ_k/s_k`` times the table's potentials (then the min is 0: the linearisation of
    :func:`linearized`), whose choice among the optimal potentials makes that bound loose (W1 is
    piecewise linear); the ascent moves them toward the Lagrangian dual's. Other divergences stay
    linearised at ``table``. Every iterate's bound is valid; the best is returned.
    """
    lam = jnp.maximum(lam, 0.0)
    is_w = [kind[0] == "wasserstein" for kind in kinds]
    sizes = [int(e.shape[0]) for e in dd.eps]
    starts = np.cumsum([0, *sizes])
    keep = jnp.concatenate([jnp.full(n, not w) for n, w in zip(sizes, is_w, strict=True)]
                           or [jnp.zeros(0, bool)])
    other = linearized(dd, kinds, table, jnp.where(keep[:, None], lam, 0.0))
    log_rows = jnp.where(table > 0, jnp.log(jnp.where(table > 0, table, 1.0)), -jnp.inf)
    groups, init = [], []
    for i, (kind, w) in enumerate(zip(kinds, is_w, strict=True)):
        if not w:
            continue
        mu = kind[1]
        weight = lam[starts[i]:starts[i + 1], 0] / jnp.maximum(dd.eps[i] ** mu, SCALE_FLOOR)
        p = jnp.exp(log_lift(log_rows, dd.wa[i])[:, dd.order[i]])
        q = jnp.exp(log_lift(log_rows, dd.wb[i])[:, dd.order[i]])
        f, g = _potentials(p, q, dd.points[i], dd.ground[i], mu)
        groups.append((i, mu, weight))
        init.append((weight[:, None] * f, weight[:, None] * g))

    def bound(uv):
        grad, const = other
        for (i, mu, weight), (u, v) in zip(groups, uv, strict=True):
            rows = dd.wa[i].T @ u + dd.wb[i].T @ v  # [R, Y] in the group's output order
            grad = grad.at[:, dd.order[i]].add(rows)
            const = const + jnp.sum(coupling_dual(dd.ground[i], -u, -v, weight, dd.eps[i] ** mu))
        return bound_of((grad, const))

    if not groups:
        return jnp.asarray(-jnp.inf)
    sizes_uv = jnp.stack([jnp.max(jnp.abs(u)) + jnp.max(jnp.abs(v)) for u, v in init])
    scale = jnp.maximum(jnp.max(sizes_uv), 1e-12)  # steps of 1 % of the potentials' size
    opt = optax.adam(1e-2 * scale)

    def step(carry, _):
        uv, state, best = carry
        value, grad = jax.value_and_grad(bound)(uv)
        best = jnp.maximum(best, jnp.where(jnp.isfinite(value), value, -jnp.inf))
        updates, state = opt.update(jax.tree_util.tree_map(jnp.negative, grad), state, uv)
        return (optax.apply_updates(uv, updates), state, best), None

    init = tuple(init)
    (uv, _, best), _ = jax.lax.scan(step, (init, opt.init(init), jnp.asarray(-jnp.inf)), None, length=steps)
    return jnp.maximum(best, bound(uv))


def divergence_violation(data: LinearData, nl: DivergenceData, kinds: tuple[Kind, ...],
                         table: np.ndarray) -> float:
    """The largest violation of ``table`` (``[S, X, Y]`` or ``[R, Y]``) at the real budgets:
    linear rows of ``data`` (solver units) or divergence comparisons of ``nl`` (normalised
    residuals)."""
    rows = table.reshape(-1, table.shape[-1])
    g, delta = sparse_matrix(operator(data))
    viol = violation(g, delta, rows)
    lin = float(viol.max()) if viol.size else 0.0
    log_rows = np.where(rows > 0, np.log(np.where(rows > 0, rows, 1.0)), -np.inf)
    res = np.asarray(residuals(nl, kinds, jnp.asarray(log_rows)))
    return max(lin, float(res.max(initial=0.0)))
