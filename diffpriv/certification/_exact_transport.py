"""Exact check of a Wasserstein budget ``W_μ(P, Q) ≤ ε`` for exact rational laws.

No float rounding enters the decision:

1. **An exact coupling.** POT's network simplex solves the transport between the laws rounded
   to float64 (:func:`._transport.wasserstein`); its plan is a basic solution, so its support is a
   forest. :func:`exact_coupling` joins the forest's components whose exact masses do not
   balance (from a component with surplus to one with a deficit, by the solver's reduced cost,
   then distance) and solves the flows in rationals, leaf by leaf: on a tree whose masses
   balance the marginals fix the flows uniquely, and they sum to ``P`` and ``Q`` exactly. A flow
   that comes out negative (the float plan was degenerate there) is set to 0, and the exact
   marginal defect ``η`` that leaves is charged.
2. **Outward-rounded powers.** ``W_μ^μ ≤ Σ π_ij d_ij^μ + η·D^μ`` (``D`` the largest distance
   between the supports; the lemma of :func:`._transport.check_coupling`), evaluated in
   ``decimal`` with upward rounding: each ``d^μ = exp(μ·ln d)`` from the correctly rounded
   ``ln`` and ``exp`` (their results are within half an ulp, so one ulp up is an upper bound), the
   products and sums rounded toward ``+∞``. The budget side ``ε^μ`` is rounded toward 0 the same
   way. Decimal exponents reach ``10^±10^17``, so nothing underflows or overflows at any order or
   distance a float64 can hold.

The ground is the block's as stored: a given metric exactly, or the output coordinates'
Euclidean distances rounded up (``W_μ`` is non-decreasing in the ground).
"""

from __future__ import annotations

import decimal
from fractions import Fraction

import numpy as np

__all__ = ["exact_coupling", "wasserstein_holds", "PRECISION"]

PRECISION = 40
"""Significant decimal digits of the outward-rounded powers."""


def _context(rounding: str) -> decimal.Context:
    return decimal.Context(prec=PRECISION, rounding=rounding, Emax=decimal.MAX_EMAX,
                           Emin=decimal.MIN_EMIN)


_UP, _DOWN = _context(decimal.ROUND_CEILING), _context(decimal.ROUND_FLOOR)


def _power(x: float, mu: float, ctx: decimal.Context) -> decimal.Decimal:
    """``x^μ`` for a float ``x > 0`` and ``μ ≥ 1``, rounded up (``_UP``) or down (``_DOWN``).

    ``ln`` and ``exp`` are correctly rounded (half-even) in ``decimal``: one step of
    ``next_plus``/``next_minus`` past each turns it into a directed bound, and ``exp`` is
    increasing, so the bound of the exponent carries through."""
    step = ctx.next_plus if ctx is _UP else ctx.next_minus
    log = step(ctx.ln(decimal.Decimal(x)))
    return step(ctx.exp(ctx.multiply(decimal.Decimal(mu), log)))


def _decimal(x: Fraction, ctx: decimal.Context) -> decimal.Decimal:
    return ctx.divide(decimal.Decimal(x.numerator), decimal.Decimal(x.denominator))


def exact_coupling(P: list[Fraction], Q: list[Fraction], plan: np.ndarray, ground: np.ndarray,
                   slack: np.ndarray | None = None) -> tuple[dict[tuple[int, int], Fraction], Fraction]:
    """``(flows, η)``: a non-negative rational plan on ``supp P × supp Q`` and its exact marginal
    defect ``η = ½(‖rows − P‖₁ + ‖cols − Q‖₁)`` (0 when every tree flow is non-negative).

    ``P``, ``Q``: exact laws (each summing to 1); ``plan``: a float plan whose support seeds the
    tree; ``ground``: the distances that pick the joining cells; ``slack``: the solver's reduced
    costs, if known. Joining cells are taken by least slack, then least distance: a cell of zero
    reduced cost keeps the plan optimal (complementary slackness), and at a large order a
    correction of 1e-17 moved one step too far can outweigh the whole plan.
    """
    rows = [i for i, v in enumerate(P) if v > 0]
    cols = [j for j, v in enumerate(Q) if v > 0]
    nodes = {("r", i): k for k, i in enumerate(rows)}
    nodes.update({("c", j): len(rows) + k for k, j in enumerate(cols)})
    parent = list(range(len(nodes)))

    def find(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    tree: list[tuple[int, int]] = []
    surplus = [P[i] for i in rows] + [-Q[j] for j in cols]  # per component root, exact

    def join(i: int, j: int) -> None:
        u, v = find(nodes[("r", i)]), find(nodes[("c", j)])
        if u != v:
            parent[u] = v
            surplus[v] += surplus[u]
            tree.append((i, j))

    sub = plan[np.ix_(rows, cols)]
    for a, b in zip(*np.nonzero(sub > 0), strict=True):  # the plan's forest (a cycle edge is skipped)
        join(rows[a], cols[b])
    # A component whose exact masses balance needs no other; the others are joined, cheapest cell
    # first, from a component with surplus (its row) to one with a deficit (its column): the
    # joining flow then carries the surplus, positive.
    def unbalanced() -> bool:
        return any(surplus[v] != 0 for v in range(len(nodes)) if find(v) == v)

    if unbalanced():
        d = ground[np.ix_(rows, cols)].ravel()
        keys = (d,) if slack is None else (np.maximum(slack[np.ix_(rows, cols)].ravel(), 0.0), d)
        order = [divmod(int(flat), len(cols)) for flat in np.lexsort(keys)]
        joined = True
        while joined and unbalanced():  # each join merges two components: at most n scans
            joined = False
            for a, b in order:
                u, v = find(nodes[("r", rows[a])]), find(nodes[("c", cols[b])])
                if u != v and surplus[u] > 0 > surplus[v]:
                    join(rows[a], cols[b])
                    joined = True
                    break

    # Leaf elimination: a leaf's one edge carries what the leaf still needs.
    need = {("r", i): P[i] for i in rows} | {("c", j): Q[j] for j in cols}
    edges: dict[tuple[str, int], set[tuple[int, int]]] = {v: set() for v in need}
    for i, j in tree:
        edges[("r", i)].add((i, j))
        edges[("c", j)].add((i, j))
    leaves = [v for v, e in edges.items() if len(e) == 1]
    flows: dict[tuple[int, int], Fraction] = {}
    while leaves:
        v = leaves.pop()
        if len(edges[v]) != 1:
            continue
        (i, j), = edges[v]
        other = ("c", j) if v[0] == "r" else ("r", i)
        flows[(i, j)] = need[v]
        need[other] -= need[v]
        need[v] = Fraction(0)
        edges[v].clear()
        edges[other].discard((i, j))
        if len(edges[other]) == 1:
            leaves.append(other)

    kept = {cell: f for cell, f in flows.items() if f > 0}
    row_sum = dict.fromkeys(rows, Fraction(0))
    col_sum = dict.fromkeys(cols, Fraction(0))
    for (i, j), f in kept.items():
        row_sum[i] += f
        col_sum[j] += f
    eta = (sum((abs(row_sum[i] - P[i]) for i in rows), Fraction(0))
           + sum((abs(col_sum[j] - Q[j]) for j in cols), Fraction(0))) / 2
    return kept, eta


def wasserstein_holds(P: list[Fraction], Q: list[Fraction], ground: np.ndarray, order: float,
                      epsilon: float) -> bool:
    """``W_μ(P, Q) ≤ ε`` is proven for the exact laws ``P``, ``Q`` (lists of Fractions, each
    summing to 1) under the float64 ``ground [n_out, n_out]`` (module docstring)."""
    from diffpriv.measures._transport import TransportError, wasserstein

    if P == Q:
        return True
    if not epsilon > 0:
        return False
    p, q = np.array([float(v) for v in P]), np.array([float(v) for v in Q])
    try:
        sol = wasserstein(p / p.sum(), q / q.sum(), ground, order)
    except (TransportError, ValueError):
        return False
    flows, eta = exact_coupling(P, Q, sol.plan, ground, sol.slack)
    total = decimal.Decimal(0)
    for (i, j), f in flows.items():
        if ground[i, j] > 0:
            total = _UP.add(total, _UP.multiply(_decimal(f, _UP), _power(float(ground[i, j]), order, _UP)))
    if eta > 0:
        rows, cols = [v > 0 for v in P], [v > 0 for v in Q]
        top = float(ground[np.ix_(rows, cols)].max())
        if top > 0:
            total = _UP.add(total, _UP.multiply(_decimal(eta, _UP), _power(top, order, _UP)))
    return total <= _power(float(epsilon), order, _DOWN)
