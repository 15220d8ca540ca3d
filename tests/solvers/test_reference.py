"""The LP reference solver against closed forms, a second formulation and its own duals."""

import dataclasses
import itertools
import math

import numpy as np
import pytest
import scipy.optimize

import diffpriv as dp
from diffpriv.problems._known import (
    bernoulli_flip_alpha,
    bernoulli_two_profile_problem,
    k_rr_loss,
    k_rr_problem,
    observation10_alpha,
    random_problem,
    randomized_response,
)
from diffpriv.problems._problem import DistP, Domain, ExtendedDP, LocalDP, Problem
from diffpriv.solvers._lp import ReferenceSolveError, solve_lp
from tests._comparisons import dense_comparisons, worst_violation

# -- plain numpy checks, independent of the solver ----------------------------------------------


def lagrangian_bound(problem: Problem, result) -> float:
    """Weak-duality lower bound from the returned multipliers (see ``ReferenceResult``)."""
    c = dense_comparisons(problem)
    n_prof = problem.shape[0]
    ga = np.eye(n_prof)[c.sa][:, :, None] * c.wa[:, None, :]  # [K, S, X]
    gb = np.eye(n_prof)[c.sb][:, :, None] * c.wb[:, None, :]
    growth = np.exp(c.eps)[:, None, None]
    mu = result.multipliers
    rho = result.row_weights  # [S, X] per row, or [S, X, Y] per entry (largest entry)
    cost = (rho if rho.ndim == 3 else rho[:, :, None]) * problem.loss[None]
    cost = cost + np.einsum("ky,ksx->sxy", mu[:, 0], ga - growth * gb)
    cost = cost + np.einsum("ky,ksx->sxy", mu[:, 1], gb - growth * ga)
    cost = np.where(problem.support_mask(), cost, np.inf)
    return float(cost.min(axis=-1).sum() - np.sum(result.delta_multipliers * c.delta[:, None]))


def dense_lp_value(problem: Problem) -> float:
    """A second formulation built from the constraints with explicit loops, for tiny problems.

    No auxiliary variables for δ > 0: the hockey-stick bound is written as
    ``P(T) − e^ε Q(T) ≤ δ`` for every subset ``T`` of outputs. Variables outside the support
    get the bounds (0, 0). Dense matrices.
    """
    n_prof, n_in, n_out = problem.shape
    mask = problem.support_mask()
    column = {}
    for s in range(n_prof):
        for x in range(n_in):
            for y in range(n_out):
                column[s, x, y] = len(column)
    worst = isinstance(problem.objective, (dp.WorstCaseLoss, dp.LargestEntry))
    entries = isinstance(problem.objective, dp.LargestEntry)
    n_vars = len(column) + int(worst)

    laws = []  # (profile, weights, profile, weights, eps, delta)
    for con in problem.constraints:
        if isinstance(con, DistP):
            for i, j in con.pairs:
                a, b = problem.items[i], problem.items[j]
                laws.append((a.profile, a.dist, b.profile, b.dist, con.epsilon, con.delta))
            continue
        pairs = con.pairs or [(x, x2) for x in range(n_in) for x2 in range(n_in) if x < x2]
        for s in range(n_prof):
            for x, x2 in pairs:
                wx, wx2 = np.eye(n_in)[x], np.eye(n_in)[x2]
                if isinstance(con, LocalDP):
                    laws.append((s, wx, s, wx2, con.epsilon, con.delta))
                else:
                    assert isinstance(con, ExtendedDP)
                    eps = con.epsilon * problem.metric()[x, x2]
                    laws.append((s, wx, s, wx2, eps, 0.0))

    a_ub, b_ub = [], []
    for s1, w1, s2, w2, eps, delta in laws:
        for sp, wp, sq, wq in ((s1, w1, s2, w2), (s2, w2, s1, w1)):
            if delta == 0:
                subsets = [(y,) for y in range(n_out)]
            else:
                subsets = [
                    t for r in range(1, n_out + 1) for t in itertools.combinations(range(n_out), r)
                ]
            for subset in subsets:
                row = np.zeros(n_vars)
                for y in subset:
                    for x in range(n_in):
                        row[column[sp, x, y]] += wp[x]
                        row[column[sq, x, y]] -= math.exp(eps) * wq[x]
                a_ub.append(row)
                b_ub.append(delta)
    cost = np.zeros(n_vars)
    for s in range(n_prof):
        for x in range(n_in):
            if entries and problem.prior[s, x] > 0:  # one epigraph row per entry
                for y in range(n_out):
                    row = np.zeros(n_vars)
                    row[column[s, x, y]] = problem.loss[x, y]
                    row[-1] = -1.0
                    a_ub.append(row)
                    b_ub.append(0.0)
            elif worst and problem.prior[s, x] > 0:
                row = np.zeros(n_vars)
                for y in range(n_out):
                    row[column[s, x, y]] = problem.loss[x, y]
                row[-1] = -1.0
                a_ub.append(row)
                b_ub.append(0.0)
            if not worst:
                for y in range(n_out):
                    cost[column[s, x, y]] = problem.prior[s, x] * problem.loss[x, y]
    if worst:
        cost[-1] = 1.0
    a_eq = np.zeros((n_prof * n_in, n_vars))
    for (s, x, _), col in column.items():
        a_eq[s * n_in + x, col] = 1.0
    bounds = [(0.0, None if mask[key] else 0.0) for key in column] + [(0.0, None)] * int(worst)
    res = scipy.optimize.linprog(
        cost, A_ub=np.array(a_ub) if a_ub else None, b_ub=np.array(b_ub) if b_ub else None,
        A_eq=a_eq, b_eq=np.ones(n_prof * n_in), bounds=bounds, method="highs",
    )
    assert res.status == 0, res.message
    return float(res.fun)


def alpha_by_bisection(p_i: float, p_j: float, eps: float) -> float:
    """The least symmetric flip of LP (4), by bisection on its constraints as printed."""

    def feasible(alpha: float) -> bool:
        e = math.exp(eps)
        one_i, one_j = p_i * (1 - alpha) + (1 - p_i) * alpha, p_j * (1 - alpha) + (1 - p_j) * alpha
        return all(u <= e * v and v <= e * u for u, v in ((one_i, one_j), (1 - one_i, 1 - one_j)))

    if feasible(0.0):
        return 0.0
    lo, hi = 0.0, 0.5
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return hi


# -- closed forms --------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 3, 5, 10])
@pytest.mark.parametrize("eps", [0.05, 0.5, 1.0, 2.0, 4.0])
def test_k_rr_closed_form(k, eps):
    result = solve_lp(k_rr_problem(k, eps))
    assert result.value == pytest.approx(k_rr_loss(k, eps), abs=1e-8)
    np.testing.assert_allclose(result.table[0], randomized_response(k, eps), atol=1e-8)
    assert worst_violation(k_rr_problem(k, eps), result.table) <= 1e-9
    assert "Optimal" in result.status and result.seconds > 0


def test_randomized_response_is_eps_ldp():
    table = randomized_response(4, 1.3)
    np.testing.assert_allclose(table.sum(axis=1), 1.0, atol=1e-15)
    assert np.log(table.max(axis=0) / table.min(axis=0)).max() == pytest.approx(1.3, abs=1e-12)


_GRID = [
    (float(p_i), float(p_j), eps)
    for p_i in np.linspace(0, 1, 11)
    for p_j in np.linspace(0, 1, 11)
    for eps in (0.0, 0.1, 0.5, 1.0, 2.0, 3.0)
]


def test_bernoulli_minimax_is_the_symmetric_flip():
    """With the worst objective, the LP optimum over two flip probabilities is α of (4)."""
    for p_i, p_j, eps in _GRID:
        problem = bernoulli_two_profile_problem(p_i, p_j, eps)
        result = solve_lp(problem)
        alpha = alpha_by_bisection(p_i, p_j, eps)
        assert result.value == pytest.approx(alpha, abs=1e-9), (p_i, p_j, eps)
        assert bernoulli_flip_alpha(p_i, p_j, eps) == pytest.approx(alpha, abs=1e-9)
        flip = np.array([[[1 - alpha, alpha], [alpha, 1 - alpha]]])
        assert worst_violation(problem, flip) <= 1e-9
        assert problem.worst_loss(result.table) == pytest.approx(result.value, abs=1e-9)


def test_observation10_where_exact():
    exact_cases = 0
    for p_i, p_j, eps in _GRID:
        if p_i > p_j or eps == 0.0:
            continue
        e, k = math.exp(eps), math.expm1(eps)
        c1, c0 = p_j - e * p_i, (1 - p_i) - e * (1 - p_j)
        alpha = solve_lp(bernoulli_two_profile_problem(p_i, p_j, eps)).value
        closed = observation10_alpha(p_i, p_j, eps)
        assert closed >= alpha - 1e-9  # always an upper bound for p_i <= p_j, as the paper says
        if 2 * c1 + k > 0 and 2 * c0 + k > 0:
            assert closed == pytest.approx(alpha, abs=1e-8), (p_i, p_j, eps)
            exact_cases += 1
    assert exact_cases > 100


def test_observation10_outside_its_region():
    # p_i = p_j: α = 0, but a term of (7) with a negative denominator is spurious.
    assert observation10_alpha(0.8, 0.8, 1.0) == pytest.approx(4 / 3, abs=1e-12)
    same = solve_lp(bernoulli_two_profile_problem(0.8, 0.8, 1.0))
    assert same.value == pytest.approx(0.0, abs=1e-12)
    # p_i > p_j: (7) misses the binding constraints.
    e = math.e
    assert observation10_alpha(1.0, 0.0, 1.0) == pytest.approx(e / (e + 1), abs=1e-12)
    assert bernoulli_flip_alpha(1.0, 0.0, 1.0) == pytest.approx(1 / (e + 1), abs=1e-12)
    # The textbook randomized response case p_i = 0, p_j = 1.
    assert observation10_alpha(0.0, 1.0, 1.0) == pytest.approx(1 / (e + 1), abs=1e-12)


# -- random problems -----------------------------------------------------------------------------


_FAMILIES = [
    {},
    {"extra": "ldp"},
    {"extra": "xdp"},
    {"n_profiles": 2},
    {"n_profiles": 3, "extra": "ldp"},
    {"delta": 0.05},
    {"delta": 0.1, "extra": "ldp"},
    {"objective": "worst"},
    {"objective": "worst", "delta": 0.05, "n_profiles": 2},
    {"objective": "entry", "extra": "ldp"},
    {"objective": "entry", "delta": 0.05, "n_profiles": 2},
    {"sparse": True, "n_profiles": 3},
    {"outputs": "grid", "loss": "random"},
    {"loss": "hamming", "extra": "xdp"},
]


def _tiny(seed: int, family: dict) -> Problem:
    rng = np.random.default_rng(seed)
    n_in = int(rng.integers(2, 5))
    if family.get("outputs") == "grid":
        return random_problem(seed, n_in=n_in, n_out=4, **family)
    return random_problem(seed, n_in=n_in, outputs="same", **family)


@pytest.mark.parametrize("index", range(len(_FAMILIES)))
def test_tiny_problems_match_a_second_formulation(index):
    family = _FAMILIES[index]
    for seed in range(3):
        problem = _tiny(100 * index + seed, family)
        result = solve_lp(problem)
        assert result.value == pytest.approx(dense_lp_value(problem), abs=1e-8), family
        assert problem.objective_value(result.table) == pytest.approx(result.value, abs=1e-9)
        assert worst_violation(problem, result.table) <= 1e-9


@pytest.mark.parametrize("index", range(len(_FAMILIES)))
def test_multipliers_prove_optimality(index):
    family = _FAMILIES[index]
    for seed in range(2):
        problem = random_problem(1000 + 10 * index + seed, n_in=12 + 4 * seed, **family)
        result = solve_lp(problem)
        assert np.all(result.multipliers >= 0) and np.all(result.delta_multipliers >= 0)
        assert worst_violation(problem, result.table) <= 1e-9
        bound = lagrangian_bound(problem, result)
        assert bound <= result.value + 1e-7
        assert bound == pytest.approx(result.value, abs=1e-7), family
        # The library's own bound (all rows but the simplices dualised) agrees with this one.
        assert result.bound == pytest.approx(bound, abs=1e-7), family
        assert result.bound <= result.value + 1e-9 and result.violation <= 1e-9
        if problem.objective.epigraph:
            assert result.row_weights.sum() == pytest.approx(1.0, abs=1e-7)
        else:
            np.testing.assert_array_equal(result.row_weights, problem.prior)


@pytest.mark.parametrize("index", range(len(_FAMILIES)))
def test_dual_bound_is_valid_at_any_multipliers(index):
    """Weak duality holds whatever the multipliers: perturbed or scaled HiGHS multipliers give a
    bound below the optimum (the brute-force second formulation), never above it."""
    from diffpriv.solvers._lp import _build, _dual_bound

    family = _FAMILIES[index]
    problem = _tiny(500 + index, family)
    optimum = dense_lp_value(problem)
    lp = _build(problem, problem.blocks())
    rng = np.random.default_rng(index)
    n_ub = 0 if lp.a_ub is None else lp.a_ub.shape[0]
    for _ in range(20):
        y_ub = -rng.exponential(rng.choice([0.01, 1.0, 100.0]), n_ub) * (rng.random(n_ub) < 0.5)
        y_eq = rng.normal(size=lp.a_eq.shape[0])
        assert _dual_bound(lp, y_ub, y_eq) <= optimum + 1e-9


def test_support_mask_is_respected():
    for seed in range(6):
        problem = _tiny(seed, {"extra": "ldp"} if seed % 2 else {"n_profiles": 2})
        rng = np.random.default_rng(seed)
        mask = rng.random(problem.shape) < 0.6
        mask[..., int(rng.integers(problem.shape[2]))] = True  # a common output keeps it feasible
        masked = dataclasses.replace(problem, support=mask)
        result = solve_lp(masked)
        assert np.all(result.table[~mask] == 0.0)
        np.testing.assert_allclose(result.table.sum(axis=-1), 1.0, atol=1e-12)
        assert result.value >= solve_lp(problem).value - 1e-9
        assert result.value == pytest.approx(dense_lp_value(masked), abs=1e-8)
        assert worst_violation(masked, result.table) <= 1e-9
        assert lagrangian_bound(masked, result) == pytest.approx(result.value, abs=1e-7)


def test_worst_objective():
    problem = random_problem(7, n_in=12, outputs="same", loss="euclidean", extra="ldp")
    expected = solve_lp(problem)
    worst = solve_lp(dataclasses.replace(problem, objective="worst"))
    assert worst.value == pytest.approx(problem.worst_loss(worst.table), abs=1e-9)
    assert worst.value <= problem.worst_loss(expected.table) + 1e-9
    assert expected.value <= problem.expected_loss(worst.table) + 1e-9


def test_entry_objective():
    """The largest weighted entry sits between the worst row loss over the row's support size and
    the worst row loss; LP optima order accordingly."""
    problem = random_problem(8, n_in=8, outputs="same", loss="euclidean", extra="ldp")
    entry = solve_lp(dataclasses.replace(problem, objective="entry"))
    worst = solve_lp(dataclasses.replace(problem, objective="worst"))
    weighted = entry.table * problem.loss[None]
    assert entry.value == pytest.approx(weighted[problem.prior > 0].max(), abs=1e-9)
    assert entry.value <= dp.LargestEntry().value(problem, worst.table) + 1e-9
    assert entry.value <= worst.value + 1e-9
    assert worst.value <= problem.shape[2] * entry.value + 1e-9


def test_positive_delta_beats_pure():
    pure = k_rr_problem(4, 1.0)
    approx = dataclasses.replace(pure, constraints=(LocalDP(epsilon=1.0, delta=0.05),))
    r_pure, r_approx = solve_lp(pure), solve_lp(approx)
    assert r_approx.value < r_pure.value - 1e-3
    assert worst_violation(approx, r_approx.table) <= 1e-9
    assert worst_violation(pure, r_approx.table) > 1e-3  # it does use the slack
    problem = random_problem(3, n_in=15, outputs="same", n_profiles=1, n_pairs=2)
    relaxed = dataclasses.replace(
        problem, constraints=(dataclasses.replace(problem.constraints[0], delta=0.05),)
    )
    assert solve_lp(relaxed).value < solve_lp(problem).value - 1e-6


@pytest.mark.parametrize("method", ["highs-ipm", "highs-ds", "highs"])
def test_every_highs_method_reaches_the_closed_form(method):
    result = solve_lp(k_rr_problem(5, 1.0), method=method)
    assert result.value == pytest.approx(k_rr_loss(5, 1.0), abs=1e-8)
    assert result.bound == pytest.approx(result.value, abs=1e-8) and result.basis is None


def test_an_unknown_highs_method_is_named():
    with pytest.raises(ValueError, match="method: expected one of highs-ipm, highs-ds, highs"):
        solve_lp(k_rr_problem(2, 1.0), method="simplex")


def test_infeasible_support_raises():
    dom = Domain(("a", "b"))
    problem = Problem(
        dom, dom, 1.0 - np.eye(2), np.array([0.5, 0.5]),
        constraints=(LocalDP(epsilon=1.0),), support=np.eye(2, dtype=bool),
    )
    with pytest.raises(ReferenceSolveError, match="status"):
        solve_lp(problem)


def test_random_problem_families():
    assert random_problem(5).shape == random_problem(5).shape
    np.testing.assert_array_equal(random_problem(5).loss, random_problem(5).loss)
    for seed in range(40):
        problem = random_problem(seed)
        n_prof, n_in, n_out = problem.shape
        assert n_prof in (1, 2, 3) and 3 <= n_in <= 30 and n_out <= 30
        assert 1 <= len(problem.constraints[0].pairs) <= 3
        assert 0.1 <= problem.constraints[0].epsilon <= 3.0
        constant = np.broadcast_to(np.full(n_out, 1.0 / n_out), problem.shape)
        assert worst_violation(problem, constant) <= 1e-12  # the constant table is feasible
    forced = random_problem(11, n_profiles=3, n_pairs=3, extra="xdp", loss="hamming", delta=0.02)
    assert forced.shape[0] == 3 and forced.inputs is forced.outputs
    assert [c.kind for c in forced.constraints] == ["distp", "xdp"]
    assert forced.constraints[0].delta == 0.02
    for s, item in enumerate(forced.items):  # π[s] = w_s λ_s
        assert item.profile == s
        np.testing.assert_allclose(forced.prior[s] / forced.prior[s].sum(), item.dist, atol=1e-12)
    grid = random_problem(11, outputs="grid", n_out=12)
    assert grid.shape[2] == 12
    with pytest.raises(ValueError, match="hamming"):
        random_problem(0, loss="hamming", outputs="grid")


@pytest.mark.slow
def test_an_interior_point_stop_without_verdict_is_finished_by_the_simplex():
    """Approximate LDP (ε = 1, δ ≈ 0.01) between the 4-neighbour cells of a 10×10 grid (the
    benchmark's Gaussian-mixture prior, seed 1): HiGHS's interior point method and crossover stop
    with model status "Unknown" after about 11 s; the simplex now finishes from where it stopped,
    optimal: the weak-duality bound at the multipliers meets the value, the table meets its
    constraints, and the value is a cold dual simplex's (an independent path, about 18 s)."""
    dom = Domain.grid(10, 10, 1.0)
    rng = np.random.default_rng(1)

    def mixture(k):
        centres, weights = rng.uniform(0, 10, (k, 2)), rng.dirichlet(np.ones(k))
        widths = rng.uniform(0.8, 2.5, k)
        d = sum(w * np.exp(-np.sum((dom.coords - m) ** 2, axis=1) / (2 * s**2))
                for m, w, s in zip(centres, weights, widths, strict=True))
        return d / d.sum()

    prior = (mixture(3) + mixture(2)) / 2
    delta = float(rng.uniform(0.05, 0.5)) / 10
    ldp = LocalDP(epsilon=1.0, delta=delta, pairs=dp.problems.pairs_within(dom, 1.0))
    problem = Problem(dom, dom, dom.distances(dom), prior, constraints=(ldp,))
    values = []
    for method in ("highs-ipm", "highs-ds"):
        result = solve_lp(problem, method=method)
        assert result.bound == pytest.approx(result.value, rel=1e-8)
        assert worst_violation(problem, result.table) <= 1e-9
        values.append(result.value)
    assert values[0] == pytest.approx(values[1], rel=1e-9)


def test_a_highs_stop_without_a_solution_is_a_solver_error_and_the_route_goes_on():
    """Extended DP with ε·d = 100 between 100-unit cells (ε = 1 per unit): HiGHS stops without an
    optimal point and hands back empty arrays. That is a ``ReferenceSolveError`` (the residuals
    of an empty solution raised ValueError), and under ``method = "auto"`` the next solver runs:
    a certified table all the same."""
    dom = Domain.grid(3, 3, 100.0)
    problem = Problem(dom, dom, dom.distances(dom), np.full(9, 1 / 9),
                      constraints=(ExtendedDP(epsilon=1.0),))
    with pytest.raises(ReferenceSolveError):
        solve_lp(problem)
    d = dp.design(problem, quantize=53)
    assert d.certificate.ok and dp.verify(d.certificate).ok
    assert d.result.lower_bound <= d.certificate.loss


def test_the_dual_bound_is_rounded_outward_by_its_float_error():
    """The weak-duality bound at HiGHS's multipliers is lowered by a bound of its own float64
    error: it stays at most the LP's optimum, by no more than a few ulps of the magnitudes
    summed, on random problems with budgets from tiny to large (multipliers up to ~e^ε)."""
    from diffpriv.solvers._lp import _build, _dual_bound, _reduced_costs, _solve_highspy

    for seed, eps in itertools.product(range(4), (0.05, 1.0, 8.0)):
        problem = random_problem(seed, epsilon=eps)
        lp = _build(problem, problem.blocks())
        res, _ = _solve_highspy(lp, {}, None)
        lag = _reduced_costs(lp, res.ineqlin.marginals, res.eqlin.marginals)
        bound = _dual_bound(lp, res.ineqlin.marginals, res.eqlin.marginals)
        assert bound <= res.fun + 1e-12 * max(1.0, abs(res.fun))
        scale = float(np.abs(lag.size).max()) * lp.a_eq.shape[0] + lag.constant_size
        assert res.fun - bound <= 1e-6 * max(1.0, abs(res.fun)) + 1e-9 * scale
