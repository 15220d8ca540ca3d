"""Profile-based privacy mechanisms (Geumlek & Chaudhuri 2019, *Profile-based privacy for
locally private computations*): One Bit Cluster, Smooth One Bit, Smooth Categorical.

A profile graph ``G = (P, E)`` is a set of input distributions (profiles) ``P_i`` with edges
between the pairs that must be indistinguishable. A mechanism ``A^i`` per profile (a
``[d, d]`` row-stochastic matrix on ``d`` categories, reporting one of the categories) is
``(G, ε)``-private iff for every edge ``(i, j)`` and every output ``y``

    ``P_i A^i [y] ≤ e^ε · P_j A^j [y]``  and  ``P_j A^j [y] ≤ e^ε · P_i A^i [y]``,

which is pure distribution privacy between the items ``(i, P_i)`` and ``(j, P_j)``: in diffpriv, a
:class:`~diffpriv.DistP` constraint on the edges. Every constraint is linear in the tables, so
each mechanism below is an LP solved by HiGHS (a status other than optimal raises
:class:`ProfileLPError`):

* **One Bit Cluster** (their Alg. 2): for each edge the least symmetric flip probability ``α_e``
  of LP (4), then one flip ``α = max_e α_e`` for the whole connected component.
* **Smooth One Bit** (LP (5)): a flip ``α_i`` per profile, minimising ``max_i α_i``.
* **Smooth Categorical** (LP (6)): a matrix per profile, minimising the largest off-diagonal
  entry of all of them.

**Ties.** (5) and (6) only fix the largest flip / off-diagonal entry: many tables are optimal
and a solver returns any vertex. With ``tie_break=True`` (the default) a second LP keeps the
optimal value (up to ``1e-9`` relative) and, among those tables, minimises the expected
misreport probability ``Σ_{i,x} w[i,x] (1 − A^i[x,x])`` (``w``: the profiles' own distributions,
or the problem's prior; plus ``10⁻⁶`` of a uniform weight so that rows of weight 0 also prefer
their input): the paper's motivation for the smooth mechanisms, that profiles far from a costly
edge need less perturbation. Rows that no edge constrains (categories outside every item's support) report
their input. Either way the first LP's optimal value is unchanged.

**Exact feasibility.** HiGHS meets the rows to an absolute ``1e-10``, which says little about a
ratio of two probabilities below ``1e-8``. So every solution is checked in float64 (each edge's
level ``max_y |ln P_u[y] − ln P_v[y]|``, as the certifier computes it) and, only if an edge is
above its budget, mixed with the uniform channel by the least weight that fixes it (bisection;
levels never grow with the weight). Flips stay symmetric flips.

**Budgets of the registered mechanisms.** They read ε from the problem's pure DistP
constraints (one budget per edge) and solve at ``ε − 4·pure_margin(ε)`` (twice the certifier's
repair target), so that the table certifies as is: at ε itself the optimum sits on the
boundary, which float64 cannot certify. numpy and scipy only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import scipy.optimize
import scipy.sparse
import scipy.sparse.csgraph

from diffpriv.certification import REPAIR_FACTOR, pure_bound
from diffpriv.mechanisms._coupling import flag
from diffpriv.mechanisms._registry import register_mechanism
from diffpriv.problems._known import randomized_response
from diffpriv.problems._problem import DistP, Domain, Item, Problem

__all__ = [
    "CATEGORICAL_CHAIN",
    "CATEGORICAL_CHAIN_EDGES",
    "ChainRow",
    "ProfileLPError",
    "ProfileSolution",
    "categorical_chain_problem",
    "categorical_chain_report",
    "categorical_costs",
    "flip_probability",
    "flip_tables",
    "one_bit_cluster",
    "smooth_categorical",
    "smooth_one_bit",
]

CATEGORICAL_CHAIN = np.array([
    [0.2, 0.3, 0.4, 0.1],
    [0.3, 0.3, 0.3, 0.1],
    [0.4, 0.4, 0.1, 0.1],
])
"""The three 4-category profiles of the Categorical-Chain experiment (Geumlek & Chaudhuri 2019,
Table 1), one per row."""

CATEGORICAL_CHAIN_EDGES = ((0, 1), (1, 2))
"""Its profile graph: the chain ``P1 − P2 − P3``."""

_HIGHS_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}
_OBJECTIVES = ("entries", "rows", "expected")


class ProfileLPError(RuntimeError):
    """HiGHS did not return an optimal solution of a profile-based LP."""


class ProfileSolution(NamedTuple):
    """A solved profile-based LP.

    Attributes:
      tables: ``[k, d, d]`` row-stochastic matrices ``A^i``, one per profile.
      value: the LP's optimal objective value (before any tie-break).
    """

    tables: np.ndarray
    value: float


def _solve(c, a_ub, b_ub, a_eq, b_eq, bounds, what: str) -> scipy.optimize.OptimizeResult:
    res = scipy.optimize.linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=bounds,
                                 method="highs", options=_HIGHS_OPTIONS)
    if res.status != 0 or res.x is None:
        raise ProfileLPError(f"{what}: HiGHS did not solve the LP (status {res.status}): {res.message}")
    return res


def edge_levels(dists, owner, tables, edges) -> np.ndarray:
    """``[E]`` exact pure DistP level ``max_y |ln P_u[y] − ln P_v[y]|`` of each edge, with
    ``P_u = dists[u] @ tables[owner[u]]`` (an output 0 on both sides is ignored, on one side is
    ``+∞``), as the certifier defines it."""
    dists = np.asarray(dists, dtype=np.float64)
    out = np.zeros(len(edges))
    for e, (a, b) in enumerate(edges):
        p, q = dists[a] @ tables[owner[a]], dists[b] @ tables[owner[b]]
        on = (p > 0) | (q > 0)
        with np.errstate(divide="ignore"):
            gap = np.abs(np.log(p[on]) - np.log(q[on]))
        out[e] = gap.max(initial=0.0)
    return out


def _polish(dists, owner, tables, edges, bound) -> np.ndarray:
    """``tables`` mixed with the uniform channel by the least ``t`` (bisection) that brings every
    edge's exact level to its ``bound``; ``t = 0`` unless the LP's absolute tolerance left an edge
    above it (possible only where an output law has entries below about ``1e-8``). Levels never
    grow with ``t`` (every profile's law moves towards the same uniform law)."""
    d = tables.shape[-1]

    def mixed(t):
        return (1.0 - t) * tables + t / d

    def ok(t):
        return bool(np.all(edge_levels(dists, owner, mixed(t), edges) <= bound))

    if ok(0.0):
        return tables
    lo, hi = 0.0, 1.0
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return mixed(hi)


def _profile_lp(dists, owner, n_tables: int, edges, eps, *, objective: str = "entries",
                weights=None, symmetric: bool = False, tie_break: bool = True,
                bound=None) -> ProfileSolution:
    """The LP behind every mechanism here.

    Items ``u`` (distributions ``dists[u]`` over ``d`` categories) use table ``owner[u]``; each
    edge ``(a, b)`` with budget ``eps[e]`` asks ``P_u A^{owner u} ≤ e^ε P_v A^{owner v}``
    entrywise in both directions. ``objective``: ``"entries"`` minimises the largest
    off-diagonal entry (LP (6); with ``symmetric`` 2×2 flips it is LP (4)/(5)), ``"rows"`` the
    largest off-diagonal row mass over rows with ``weights > 0``, ``"expected"`` the weighted
    off-diagonal mass ``Σ w[i,x] (1 − A^i[x,x])``. The solution is then polished
    (:func:`_polish`) so that every edge's exact level is at most ``bound`` (default ``eps``).
    """
    w_items = np.asarray(dists, dtype=np.float64)
    m, d = w_items.shape
    owner = np.asarray(owner, dtype=np.int64)
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    eps = np.broadcast_to(np.asarray(eps, dtype=np.float64), (edges.shape[0],))
    if objective not in _OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(_OBJECTIVES)}, got {objective!r}")
    if np.any(eps < 0) or not np.all(np.isfinite(np.exp(eps))):
        raise ValueError(f"epsilon must be non-negative with e^ε finite, got {eps}")
    if weights is None:  # each table's own (mean) item distribution, tables weighted equally
        weights = np.zeros((n_tables, d))
        np.add.at(weights, owner, w_items)
        counts = np.bincount(owner, minlength=n_tables)[:, None]
        weights = weights / np.maximum(counts, 1) / n_tables
    weights = np.asarray(weights, dtype=np.float64)
    n_a = n_tables * d * d
    var = np.arange(n_a).reshape(n_tables, d, d)
    off = ~np.eye(d, dtype=bool)
    epigraph = objective != "expected"
    n_vars = n_a + int(epigraph)

    rows, cols, vals = [], [], []
    n_rows = 0
    for e, (a, b) in enumerate(edges):
        for u, v in ((a, b), (b, a)):
            for item, factor in ((u, 1.0), (v, -math.exp(eps[e]))):
                x, y = np.nonzero(np.broadcast_to(w_items[item][:, None] > 0, (d, d)))
                rows.append(n_rows + y)
                cols.append(var[owner[item], x, y])
                vals.append(factor * w_items[item][x])
            n_rows += d
    if epigraph:
        if objective == "entries":
            i, x, y = np.nonzero(np.broadcast_to(off, (n_tables, d, d)))
            r = np.arange(i.size)
        else:
            i, x, y = np.nonzero(off[None] & (weights[:, :, None] > 0))
            _, r = np.unique(i * d + x, return_inverse=True)
        rows += [n_rows + r, n_rows + np.unique(r)]
        cols += [var[i, x, y], np.full(np.unique(r).size, n_a)]
        vals += [np.ones(i.size), -np.ones(np.unique(r).size)]
        n_rows += np.unique(r).size
    a_ub = scipy.sparse.coo_array(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n_rows, n_vars)
    ).tocsr() if rows else None
    b_ub = np.zeros(n_rows) if rows else None

    eq_rows = [np.repeat(np.arange(n_tables * d), d)]
    eq_cols = [np.arange(n_a)]
    eq_vals = [np.ones(n_a)]
    n_eq = n_tables * d
    if symmetric:
        if d != 2:
            raise ValueError(f"symmetric flips need 2 categories, got {d}")
        t = np.arange(n_tables)
        eq_rows += [n_eq + t, n_eq + t]
        eq_cols += [var[t, 0, 1], var[t, 1, 0]]
        eq_vals += [np.ones(n_tables), -np.ones(n_tables)]
        n_eq += n_tables
    a_eq = scipy.sparse.coo_array(
        (np.concatenate(eq_vals), (np.concatenate(eq_rows), np.concatenate(eq_cols))),
        shape=(n_eq, n_vars),
    ).tocsr()
    b_eq = np.concatenate([np.ones(n_tables * d), np.zeros(n_eq - n_tables * d)])

    misreport = np.zeros(n_vars)
    misreport[:n_a] = (weights[:, :, None] * off[None]).ravel()
    c = misreport if not epigraph else np.eye(1, n_vars, n_a).ravel()
    # the tie-break adds 1e-6 of a uniform weight, so that rows of weight 0 prefer their input
    uniform = 1e-6 * (weights.sum() or 1.0) / (n_tables * d)
    tie = misreport + np.concatenate([np.broadcast_to(uniform * off, (n_tables, d, d)).ravel(),
                                      np.zeros(n_vars - n_a)])
    bounds = [(0.0, 1.0)] * n_vars
    res = _solve(c, a_ub, b_ub, a_eq, b_eq, bounds, f"profile LP ({objective})")
    value = float(res.fun)
    if epigraph and tie_break:
        bounds[-1] = (0.0, value * (1 + 1e-9) + 1e-12)
        res = _solve(tie, a_ub, b_ub, a_eq, b_eq, bounds, "profile LP (tie-break)")
    tables = np.clip(res.x[:n_a].reshape(n_tables, d, d), 0.0, None)
    if tie_break and not symmetric:  # rows no edge constrains report their input
        constrained = np.zeros((n_tables, d), dtype=bool)
        for u in np.unique(edges):
            constrained[owner[u]] |= w_items[u] > 0
        tables[~constrained] = np.eye(d)[np.nonzero(~constrained)[1]]
    tables /= tables.sum(axis=-1, keepdims=True)
    bound = eps if bound is None else np.broadcast_to(np.asarray(bound, dtype=np.float64), eps.shape)
    return ProfileSolution(_polish(w_items, owner, tables, [tuple(e) for e in edges], bound), value)


def _bernoulli(p) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64).reshape(-1)
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError(f"Bernoulli parameters must lie in [0, 1], got {p}")
    return np.stack([1.0 - p, p], axis=1)


def flip_tables(alphas) -> np.ndarray:
    """``[k, 2, 2]`` flip matrices ``[[1 − α, α], [α, 1 − α]]``."""
    a = np.asarray(alphas, dtype=np.float64).reshape(-1)
    return np.stack([np.stack([1 - a, a], -1), np.stack([a, 1 - a], -1)], axis=1)


def flip_probability(p_i: float, p_j: float, eps: float) -> float:
    """LP (4): the least flip probability ``α ∈ [0, 1/2]`` making ``Bernoulli(p_i)`` and
    ``Bernoulli(p_j)`` ε-indistinguishable when both are flipped with probability ``α``.

    For ``p_i = 0``, ``p_j = 1`` it is randomized response's ``1/(1 + e^ε)``.
    """
    sol = _profile_lp(_bernoulli([p_i, p_j]), [0, 0], 1, [(0, 1)], [eps], symmetric=True,
                      tie_break=False)
    return float(sol.tables[0, 0, 1])


def _components(n: int, links) -> np.ndarray:
    """Connected-component label of each of ``n`` nodes."""
    graph = scipy.sparse.coo_array(
        (np.ones(len(links)), tuple(np.asarray(links, dtype=np.int64).reshape(-1, 2).T)), shape=(n, n)
    )
    return scipy.sparse.csgraph.connected_components(graph, directed=False)[1]


def one_bit_cluster(p, edges: Sequence[tuple[int, int]], eps) -> np.ndarray:
    """One Bit Cluster (Alg. 2): per profile, the largest LP (4) flip of its component's edges.

    Args:
      p: ``[k]`` Bernoulli parameters of the profiles.
      edges: the profile graph's edges ``(i, j)``.
      eps: the budget ε (or one per edge).

    Returns:
      ``[k]`` flip probabilities (0 for a profile with no edge).
    """
    p = np.asarray(p, dtype=np.float64).reshape(-1)
    edges = list(edges)
    eps = np.broadcast_to(np.asarray(eps, dtype=np.float64), (len(edges),))
    alpha_e = np.array([flip_probability(p[i], p[j], e) for (i, j), e in zip(edges, eps, strict=True)])
    label = _components(p.size, edges)
    out = np.zeros(p.size)
    for (i, _), a in zip(edges, alpha_e, strict=True):
        out[label == label[i]] = np.maximum(out[label == label[i]], a)
    return out


def smooth_one_bit(p, edges: Sequence[tuple[int, int]], eps, *, tie_break: bool = True) -> np.ndarray:
    """Smooth One Bit (LP (5)): a flip ``α_i`` per profile, minimising ``max_i α_i``.

    Returns:
      ``[k]`` flip probabilities (ties broken as in the module docstring).
    """
    dists = _bernoulli(p)
    k = dists.shape[0]
    sol = _profile_lp(dists, np.arange(k), k, list(edges), eps, symmetric=True, tie_break=tie_break)
    return sol.tables[:, 0, 1].copy()


def smooth_categorical(profiles, edges: Sequence[tuple[int, int]], eps, *, objective: str = "entries",
                       weights=None, tie_break: bool = True) -> ProfileSolution:
    """Smooth Categorical (LP (6)): a ``[d, d]`` matrix per profile, minimising the largest
    off-diagonal entry of all of them.

    Args:
      profiles: ``[k, d]`` categorical profiles ``P_i``.
      edges: the profile graph's edges ``(i, j)``.
      eps: the budget ε (or one per edge).
      objective: ``"entries"`` is LP (6) (diffpriv's ``"entry"`` objective with the 0/1 loss,
        when every row has positive weight). Two more, also diffpriv objectives (for comparison
        with its LP reference): ``"rows"``, the largest off-diagonal row mass
        ``max_{i,x: w>0} (1 − A^i[x,x])`` (diffpriv's worst-case objective with the 0/1 loss);
        ``"expected"``, ``Σ w[i,x] (1 − A^i[x,x])`` (its expected 0/1 loss with prior ``w``).
      weights: ``[k, d]`` row weights ``w`` (default ``P_i / k``).
      tie_break: see the module docstring.
    """
    dists = np.asarray(profiles, dtype=np.float64)
    k = dists.shape[0]
    return _profile_lp(dists, np.arange(k), k, list(edges), eps, objective=objective,
                       weights=weights, tie_break=tie_break)


def categorical_costs(profiles, tables) -> np.ndarray:
    """The per-category costs of eq. (8), ``cost_j = max_i |P_i[j] − (P_i A^i)[j]|``: ``[d]``."""
    p = np.asarray(profiles, dtype=np.float64)
    return np.abs(p - np.einsum("ix,ixy->iy", p, np.asarray(tables, dtype=np.float64))).max(axis=0)


# -- the Categorical-Chain experiment ------------------------------------------------------


class ChainRow(NamedTuple):
    """One line of :func:`categorical_chain_report`.

    Attributes:
      epsilon: the budget ε.
      mechanism: ``"smooth_categorical"`` (LP (6)) or ``"krr"`` (k-ary randomized response).
      costs: eq. (8) per category, ``cost_j = max_i |P_i[j] − (P_i A^i)[j]|``.
      max_off_diagonal: the largest off-diagonal entry (LP (6)'s objective) of the tables.
    """

    epsilon: float
    mechanism: str
    costs: tuple[float, ...]
    max_off_diagonal: float


def categorical_chain_report(epsilons: Sequence[float] = (0.05, 0.1, 0.25, 0.5, 1.0, 1.5),
                             profiles=CATEGORICAL_CHAIN,
                             edges: Sequence[tuple[int, int]] = CATEGORICAL_CHAIN_EDGES) -> list[ChainRow]:
    """Per-category costs (eq. (8)) of Smooth Categorical and k-ary randomized response.

    Smooth Categorical is solved at each ε exactly (no certification margin; ties broken as in
    the module docstring). Randomized response ``A[x,x] = e^ε/(e^ε+k−1)`` is ε-local DP, hence
    (G, ε)-private for every profile graph; its costs are ``max_i |1 − k P_i[j]| / (e^ε + k − 1)``.
    """
    p = np.asarray(profiles, dtype=np.float64)
    k, d = p.shape
    out = []
    for eps in epsilons:
        sol = smooth_categorical(p, edges, eps)
        rr = np.broadcast_to(randomized_response(d, eps), (k, d, d))
        off = ~np.eye(d, dtype=bool)
        for name, tables in (("smooth_categorical", sol.tables), ("krr", rr)):
            costs = tuple(float(c) for c in categorical_costs(p, tables))
            out.append(ChainRow(float(eps), name, costs, float(tables[:, off].max())))
    return out


def categorical_chain_problem(eps: float, *, objective: str = "expected", profiles=CATEGORICAL_CHAIN,
                              edges: Sequence[tuple[int, int]] = CATEGORICAL_CHAIN_EDGES) -> Problem:
    """The Categorical-Chain experiment as a diffpriv problem: a profile per row of ``profiles``
    with its distribution as the one item, ε-DistP on the chain's edges, 0/1 loss, prior
    ``π[i, x] = P_i[x] / k``, and ``objective`` ``"expected"``, ``"worst"`` or ``"entry"``
    (LP (6)'s: every prior entry is positive on the chain, so every off-diagonal entry counts)."""
    p = np.asarray(profiles, dtype=np.float64)
    k, d = p.shape
    dom = Domain(tuple(f"c{j + 1}" for j in range(d)))
    return Problem(
        inputs=dom, outputs=dom, loss=1.0 - np.eye(d), prior=p / k,
        items=tuple(Item(f"P{i + 1}", p[i], profile=i) for i in range(k)),
        constraints=(DistP(pairs=tuple(edges), epsilon=eps),),
        profiles=tuple(f"P{i + 1}" for i in range(k)),
        objective=objective,
    )


# -- the registered mechanisms ------------------------------------------------------------


class _Graph(NamedTuple):
    dists: np.ndarray  # [m, d] item distributions, categories in input order
    owner: np.ndarray  # [m] profile of each item
    edges: list  # item pairs
    eps: np.ndarray  # [E] design budget of each edge (the LP's)
    bound: np.ndarray  # [E] what the polished tables meet (the certifier's repair target)
    own: np.ndarray  # [d] output column of each input


def _graph(problem, mech: str, *, bits: bool = False) -> _Graph:
    """The profile graph of ``problem``: its items and its pure DistP pairs (design budgets)."""
    ins, outs = problem.inputs.labels, problem.outputs.labels
    if sorted(ins) != sorted(outs):
        raise ValueError(f"mechanism {mech!r} needs the outputs to be the inputs (the same labels)")
    if bits and len(ins) != 2:
        raise ValueError(f"mechanism {mech!r} needs two inputs (one bit), got {len(ins)}")
    if problem.support is not None and not problem.support.all():
        raise ValueError(f"mechanism {mech!r} does not take a support mask")
    edges, eps, bound = [], [], []
    d = len(ins)
    for i, c in enumerate(problem.constraints):
        if not isinstance(c, DistP) or c.delta != 0:
            raise ValueError(f"mechanism {mech!r} handles pure DistP constraints (profile-graph "
                             f"edges) only; constraints[{i}] is {c.kind!r}"
                             + (f" with δ = {c.delta:g}" if isinstance(c, DistP) else ""))
        if not math.isfinite(c.epsilon):  # no constraint
            continue
        design = max(0.0, float(pure_bound(c.epsilon, d, d, factor=2 * REPAIR_FACTOR)))
        target = max(0.0, float(pure_bound(c.epsilon, d, d, factor=REPAIR_FACTOR)))
        edges += list(c.pairs)
        eps += [design] * len(c.pairs)
        bound += [target] * len(c.pairs)
    dists = np.stack([it.dist / it.dist.sum() for it in problem.items]) if problem.items \
        else np.zeros((0, d))
    owner = np.array([it.profile for it in problem.items], dtype=np.int64)
    own = np.array([outs.index(label) for label in ins])
    return _Graph(dists, owner, edges, np.asarray(eps), np.asarray(bound), own)


def _to_problem(problem, g: _Graph, tables: np.ndarray) -> np.ndarray:
    out = np.zeros(problem.shape)
    out[:, :, g.own] = tables
    return out


@register_mechanism("one_bit_cluster", params={}, calibrate=None,
           summary="One Bit Cluster (Geumlek & Chaudhuri 2019): one flip per component of the "
                   "profile graph, the largest its edges need")
def build_one_bit_cluster(problem) -> np.ndarray:
    """One Bit Cluster for a one-bit problem whose pure DistP pairs are the profile graph.

    A component links the items of an edge and the items of one profile (they share a table),
    so every profile of a component gets the same flip: the proof's monotonicity argument then
    covers every edge. A profile with no edge reports its bit.
    """
    g = _graph(problem, "one_bit_cluster", bits=True)
    ns = len(problem.profiles)
    m = g.dists.shape[0]
    # nodes: items 0..m-1, then profiles m..m+ns-1
    links = list(g.edges) + [(u, m + int(s)) for u, s in enumerate(g.owner)]
    label = _components(m + ns, links)
    alpha = np.zeros(m + ns)
    for (a, b), e, top in zip(g.edges, g.eps, g.bound, strict=True):
        sol = _profile_lp(g.dists[[a, b]], [0, 0], 1, [(0, 1)], [e], symmetric=True, tie_break=False,
                          bound=[top])
        group = label == label[a]
        alpha[group] = np.maximum(alpha[group], sol.tables[0, 0, 1])
    return _to_problem(problem, g, flip_tables(alpha[m:]))


@register_mechanism("smooth_one_bit", params={"tie_break": True}, calibrate=None,
           summary="Smooth One Bit (Geumlek & Chaudhuri 2019): a flip per profile, LP (5)")
def build_smooth_one_bit(problem, *, tie_break) -> np.ndarray:
    """Smooth One Bit (LP (5)) on a one-bit problem; the profiles' items and DistP pairs are the
    profile graph (several items of one profile share its flip)."""
    g = _graph(problem, "smooth_one_bit", bits=True)
    ns = len(problem.profiles)
    sol = _profile_lp(g.dists, g.owner, ns, g.edges, g.eps, symmetric=True, weights=problem.prior,
                      bound=g.bound,
                      tie_break=flag("smooth_one_bit", "tie_break", tie_break))
    return _to_problem(problem, g, flip_tables(sol.tables[:, 0, 1]))


@register_mechanism("smooth_categorical", params={"objective": "entries", "tie_break": True}, calibrate=None,
           summary="Smooth Categorical (Geumlek & Chaudhuri 2019): a matrix per profile, LP (6)")
def build_smooth_categorical(problem, *, objective, tie_break) -> np.ndarray:
    """Smooth Categorical (LP (6), or ``objective="rows"``/``"expected"`` as in
    :func:`smooth_categorical`, with the problem's prior as the row weights)."""
    g = _graph(problem, "smooth_categorical")
    ns = len(problem.profiles)
    sol = _profile_lp(g.dists, g.owner, ns, g.edges, g.eps, objective=str(objective),
                      weights=problem.prior, bound=g.bound,
                      tie_break=flag("smooth_categorical", "tie_break", tie_break))
    return _to_problem(problem, g, sol.tables)
