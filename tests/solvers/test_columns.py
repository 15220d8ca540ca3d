"""Column generation over output columns (Dantzig–Wolfe) for pure pair bounds: local and
extended DP, geo-indistinguishability. Checked against HiGHS on the whole LP, randomized
response's closed form, and a brute-force closure."""

import dataclasses

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.problems import random_problem
from diffpriv.solvers import _columns
from diffpriv.solvers._cut_lp import CutsSolveError
from diffpriv.solvers._linear import tighten_eps
from diffpriv.solvers._methods import COLUMNS_FROM, COLUMNS_TO, choose, cuts_solver, route
from diffpriv.solvers._optimizer import Optimizer
from tests._problems import geo_problem, ldp_problem


def _pairs_problem(seed: int) -> dp.Problem:
    """A random problem (1–3 profiles, Y = X or a grid, Euclidean / Hamming / random loss) under
    local DP on all pairs or extended DP, at a random budget; every third the worst-case loss."""
    base = random_problem(seed, extra="none", objective="worst" if seed % 3 == 2 else "expected")
    rng = np.random.default_rng(seed)
    if seed % 2:
        constraint = dp.LocalDP(float(rng.uniform(0.3, 2.5)))
    else:
        constraint = dp.ExtendedDP(float(rng.uniform(1.0, 6.0)))
    return dataclasses.replace(base, items=(), constraints=(constraint,))


@pytest.mark.parametrize("seed", range(12))
def test_columns_meet_the_lp_on_pure_pair_bounds(seed):
    p = _pairs_problem(seed)
    assert cuts_solver(p) == "columns"
    ref = dp.solvers.lp(p).value
    d = dp.design(p, method="cuts", gap_tol=1e-4)
    assert (d.result.method, d.result.plan, d.result.status) == ("columns", "cuts", "converged")
    assert d.certificate.ok
    assert d.result.lower_bound <= ref + 1e-9 * max(1.0, abs(ref))
    assert d.certificate.loss <= ref + 2e-4 * max(ref, 1e-6)


@pytest.mark.parametrize(("k", "eps", "objective"),
                         [(3, 0.5, "expected"), (6, 1.0, "worst"), (12, 2.0, "expected"), (12, 2.0, "worst")])
def test_randomized_response_is_found_under_local_dp(k, eps, objective):
    """Under ε-LDP with the 0/1 loss and a uniform prior, k-ary randomized response is optimal:
    loss ``(k − 1) / (e^ε + k − 1)`` (Kairouz et al.; the seeds' baseline), in every row, so also
    its worst-case loss."""
    p = dataclasses.replace(ldp_problem(k, eps), objective=objective)
    d = dp.design(p, method="cuts", gap_tol=1e-6)
    closed = (k - 1) / (np.exp(eps) + k - 1)
    assert d.certificate.ok and d.result.status == "converged"
    assert d.result.lower_bound <= closed * (1 + 1e-9)
    assert d.certificate.loss == pytest.approx(closed, rel=1e-6)


def test_geo_indistinguishability_with_a_support_and_a_skewed_prior():
    """4-neighbour pairs on a 6×6 grid in two halves compared within each half only (a chain
    reaching a forbidden entry forbids the whole chain), outputs forbidden in one half."""
    base = geo_problem(6, 0.7, prior_seed=3)
    pairs = tuple((a, b) for a, b in dp.problems.pairs_within(base.inputs, 1.0) if (a < 18) == (b < 18))
    support = np.ones(base.shape, bool)
    support[0, :18, 30:] = False  # the lower half may not report the top row of cells
    p = dataclasses.replace(base, support=support, constraints=(dp.ExtendedDP(0.7, pairs=pairs),))
    run = _columns.ColumnsRun(Optimizer(method="cuts"), p, 0)
    assert run.zero is not None and run.zero[:18, 30:].all() and not run.zero[18:].any()
    ref = dp.solvers.lp(p).value
    d = dp.design(p, method="cuts", gap_tol=1e-5)
    assert d.result.status == "converged" and d.certificate.ok
    assert np.all(d.table[0, :18, 30:] == 0)
    assert d.result.lower_bound <= ref + 1e-12 and d.certificate.loss <= ref * (1 + 1e-5)


def test_every_round_bounds_the_optimum_and_the_master_only_falls():
    p = geo_problem(7, 0.4)
    ref = dp.solvers.lp(p).value
    run = _columns.ColumnsRun(Optimizer(method="cuts", gap_tol=1e-6), p, 0)
    values, bounds = [], []
    for _ in range(40):
        chunk = run.chunk()
        values.append(run.value)
        bounds.append(run.bound)
        if chunk.status is not None:
            break
    assert chunk.status == "converged"
    assert max(bounds) <= ref + 1e-12 and bounds[0] < ref * 0.95  # the first rounds bound loosely
    assert np.all(np.diff(values) <= 1e-12) and values[-1] == pytest.approx(ref, rel=1e-6)


def test_a_raised_ray_is_the_least_that_meets_the_tightened_bounds():
    """Against the fixed point of Bellman–Ford sweeps ``a[j] ← max(a[j], a[i] e^{−ε'})``."""
    p = geo_problem(5, 0.6)
    run = _columns.ColumnsRun(Optimizer(method="cuts"), p, 0)
    i, j, eps = _columns._edges(p, tight=True)
    assert np.allclose(eps, tighten_eps(np.full(eps.shape, 0.6)))
    a = np.random.default_rng(0).random(25) ** 8
    raised = run._raised(a)
    brute = a.copy()
    for _ in range(100):
        np.maximum.at(brute, j, brute[i] * np.exp(-eps))
    assert np.allclose(raised, brute, rtol=1e-13, atol=0)
    assert np.all(raised[i] <= np.exp(eps) * raised[j] * (1 + 1e-15)) and np.all(raised >= a - 1e-300)


def test_auto_runs_columns_from_the_threshold_and_falls_back():
    small, big = geo_problem(8), geo_problem(10)
    assert 64 * 64 < COLUMNS_FROM <= 100 * 100
    assert choose(small, "auto") == "exact"
    assert route(big, "auto") == ("columns", "interior", "exact", "pdhg")
    assert route(geo_problem(48), "auto") == ("columns", "pdhg")  # beyond HiGHS and the interior point
    skewed = dataclasses.replace(big, prior=np.random.default_rng(0).dirichlet(np.full(100, 0.1))[None])
    assert not _columns.balanced(skewed) and _columns.balanced(big)
    assert route(skewed, "auto") == ("interior", "exact")  # a concentrated prior: the interior point
    assert route(small, "cuts") == ("columns",) and route(small, "auto") == ("exact", "columns", "pdhg")
    huge = dp.Problem(dp.Domain(tuple(map(str, range(2500)))), dp.Domain(tuple(map(str, range(2500)))),
                      1 - np.eye(2500), np.full(2500, 1 / 2500), constraints=(dp.LocalDP(1.0),))
    assert 2500**2 > COLUMNS_TO and choose(huge, "auto") == "pdhg" and choose(huge, "cuts") == "cuts"
    result = dp.optimize(big)
    assert (result.method, result.status) == ("columns", "converged")
    # not a pure pair bound (δ > 0), or the largest entry
    approx = dataclasses.replace(small, constraints=(dp.LocalDP(1.0, 0.01),))
    assert cuts_solver(approx) is None and cuts_solver(dataclasses.replace(small, objective="entry")) is None
    assert cuts_solver(dataclasses.replace(small, objective="worst")) == "columns"


def test_no_output_every_row_allows_leaves_it_to_the_next_solver():
    base = geo_problem(3, 0.5)
    pairs = ((0, 1), (1, 2))  # the other cells are compared with nothing
    support = np.ones(base.shape, bool)
    support[0, 8, :8] = False  # the last cell may report only itself, no other cell may
    support[0, :8, 8] = False
    p = dataclasses.replace(base, support=support, constraints=(dp.ExtendedDP(0.5, pairs=pairs),))
    with pytest.raises(CutsSolveError, match="no output is allowed for every row"):
        dp.optimize(p, method="cuts")
    assert dp.optimize(p).status == "converged"  # "auto": HiGHS at this size


def test_under_auto_a_run_that_does_not_converge_in_its_rounds_hands_over(monkeypatch):
    """A prior far from uniform (Dirichlet(0.1)) makes the master degenerate: under ``"auto"``
    the run stops ``stalled`` after ``AUTO_ROUNDS`` and the route's next solver takes over."""
    base = geo_problem(6, 0.5)
    prior = np.random.default_rng(0).dirichlet(np.full(36, 0.1)).reshape(base.prior.shape)
    p = dataclasses.replace(base, prior=prior)
    monkeypatch.setattr(_columns, "AUTO_ROUNDS", 2)
    run = _columns.ColumnsRun(Optimizer(method="auto", gap_tol=1e-4), p, 0)
    assert run.chunk().status is None and run.chunk().status == "stalled"
    assert _columns.ColumnsRun.hands_over
    explicit = _columns.ColumnsRun(Optimizer(method="cuts", gap_tol=1e-4), p, 0)
    assert explicit.chunk().status is None and explicit.chunk().status is None


def test_under_auto_a_run_with_no_bound_above_the_trivial_one_hands_over_early(monkeypatch):
    """A small budget (ε = 0.1 per cell side) makes wide columns and swinging multipliers: no
    Lagrangian bound above the trivial one after ``BOUNDLESS_ROUNDS``, so ``"auto"`` moves on."""
    p = geo_problem(8, 0.1)
    monkeypatch.setattr(_columns, "BOUNDLESS_ROUNDS", 3)
    run = _columns.ColumnsRun(Optimizer(method="auto", gap_tol=1e-2), p, 0)
    statuses = [run.chunk().status for _ in range(3)]
    assert statuses == [None, None, "stalled"] and run.bound == run.floor
    explicit = _columns.ColumnsRun(Optimizer(method="cuts", gap_tol=1e-2), p, 0)
    assert [explicit.chunk().status for _ in range(4)] == [None] * 4
    assert dp.optimize(p, method="cuts", gap_tol=1e-2, steps=3).status == "step limit"


# ---- f-divergence budgets beside the pair bounds ----------------------------------------------

DIVERGENCES = [("kl", None, 0.3), ("reverse_kl", None, 0.3), ("chi2", None, 0.4), ("hellinger", None, 0.08),
               ("renyi", 2.0, 0.3), ("renyi", 0.5, 0.1)]
"""(Total variation between rows is linear: the LP takes it.)"""


def _geo_beside(divergence: str, alpha, eps: float, *, n: int = 3, objective: str = "expected",
                seed: int = 0) -> dp.Problem:
    """Geo-indistinguishability (ε = 1 per cell) on an ``n × n`` grid with a Dirichlet(2) prior,
    and divergence DP between the same 4-neighbour cells at ``eps``."""
    base = geo_problem(n, 1.0)
    prior = np.random.default_rng(seed).dirichlet(np.full(n * n, 2.0))
    pairs = dp.problems.pairs_within(base.inputs, 1.0)
    div = dp.DivergenceDP(divergence=divergence, alpha=alpha, epsilon=eps, pairs=pairs)
    return dataclasses.replace(base, prior=prior, constraints=(*base.constraints, div), objective=objective)


@pytest.mark.parametrize(("divergence", "alpha", "eps"), DIVERGENCES)
def test_columns_meet_clarabel_beside_divergence_dp(divergence, alpha, eps):
    """Every f-divergence the column generation takes, beside geo-indistinguishability, against
    Clarabel on the whole convex program: the bound below its optimum, the certified table within
    ``gap_tol`` of it."""
    p = _geo_beside(divergence, alpha, eps)
    assert cuts_solver(p) == "columns"
    ref = dp.solvers.convex(p).value
    d = dp.design(p, method="cuts", gap_tol=1e-3)
    assert (d.result.method, d.result.status) == ("columns", "converged")
    assert d.certificate.ok
    assert d.result.lower_bound <= ref + 1e-6 * max(1.0, abs(ref))
    assert d.certificate.loss <= ref * (1 + 1.5e-3) + 1e-9


@pytest.mark.parametrize("objective", ["worst", "expected"])
def test_columns_beside_kl_under_local_dp_and_the_worst_case(objective):
    """Local DP on all pairs beside KL-DP between 4-neighbours, on a 3×3 grid."""
    base = _geo_beside("kl", None, 0.2, objective=objective, seed=1)
    p = dataclasses.replace(base, constraints=(dp.LocalDP(1.5), base.constraints[1]))
    ref = dp.solvers.convex(p).value
    d = dp.design(p, method="cuts", gap_tol=1e-3)
    assert d.result.status == "converged" and d.certificate.ok
    assert d.result.lower_bound <= ref + 1e-6 * max(1.0, abs(ref))
    assert d.certificate.loss <= ref * (1 + 1.5e-3) + 1e-9


def test_the_divergence_bound_holds_at_any_multipliers():
    """The bound ``Σ μ − Σ λ b + Σ_y v_y`` from the pricing LPs' multipliers stays below
    Clarabel's optimum at random row and budget multipliers, not only the master's."""
    p = _geo_beside("renyi", 2.0, 0.3, seed=2)
    ref = dp.solvers.convex(p).value
    run = _columns.ColumnsRun(Optimizer(method="cuts"), p, 0)
    rng = np.random.default_rng(0)
    for _ in range(6):
        mu = rng.uniform(-0.05, 0.3, run.n_rows)
        lam = rng.exponential(0.2, run.terms.size) * (rng.random(run.terms.size) < 0.7)
        bound, _ = run._price_divergences(mu, run.weights, lam, 1.0)
        assert bound <= ref + 1e-9


def test_a_mix_of_rays_meets_the_budgets_the_master_does():
    """φ is convex and homogeneous: the master's table meets its divergence budgets, so the table
    of every round is certified without the repair mixing it."""
    from diffpriv.certification._repair import repair

    p = _geo_beside("kl", None, 0.25, n=4, seed=3)
    run = _columns.ColumnsRun(Optimizer(method="cuts", gap_tol=1e-6), p, 0)
    for _ in range(6):
        run.chunk()
        assert repair(p, run._table(run._weights_of_rays())).t == 0.0


def test_divergences_alone_or_with_wasserstein_keep_the_other_solvers():
    base = _geo_beside("kl", None, 0.3)
    alone = dataclasses.replace(base, constraints=base.constraints[1:])
    assert not _columns.applies(alone) and cuts_solver(alone) == "cuts"
    assert _columns.applies(base) and route(base, "cuts") == ("columns",)


def test_auto_routes_pair_bounds_beside_divergences():
    """The linear relaxation (geo-indistinguishability alone, by column generation), then Clarabel
    up to its limit (about 8×8), then mirror-prox whose table column generation starts from; the
    augmented Lagrangian beyond :data:`COLUMNS_BESIDE_TO`."""
    from diffpriv.solvers._methods import COLUMNS_BESIDE_TO, CONVEX_VARIABLES_MIRROR

    small = _geo_beside("kl", None, 0.3)
    assert route(small, "auto") == ("relaxed", "exact", "mirror", "columns")
    for n, expected in ((10, ("relaxed", "mirror", "columns")), (16, ("relaxed", "al"))):
        p = _geo_beside("kl", None, 0.3, n=n)
        size = n**4
        assert size > CONVEX_VARIABLES_MIRROR
        assert (size <= COLUMNS_BESIDE_TO) == (expected[-1] == "columns")
        assert route(p, "auto") == expected


def _kl_distp_beside(n: int) -> dp.Problem:
    base = geo_problem(n, 1.0)
    rng = np.random.default_rng(4)
    items = tuple(dp.Item(name, rng.dirichlet(np.ones(n * n))) for name in "ab")
    kl = dp.DivergenceDistP(divergence="kl", epsilon=0.3, pairs=((0, 1),))
    return dataclasses.replace(base, items=items, constraints=(*base.constraints, kl))


def test_auto_keeps_mirror_prox_off_divergences_between_item_laws():
    """KL-DistP between two items beside geo-indistinguishability: mirror-prox does not run an
    f-divergence between item laws, so past Clarabel column generation runs alone."""
    assert route(_kl_distp_beside(10), "auto") == ("relaxed", "columns")
    small = _kl_distp_beside(3)
    assert route(small, "auto") == ("relaxed", "exact", "columns")
    assert dp.design(small, method="cuts", gap_tol=1e-3).certificate.ok


def test_a_start_table_joins_the_first_rays():
    """Clarabel's (repaired) table as ``start``: the first master is no worse than it, up to the
    rays' raise to the tightened bounds."""
    p = _geo_beside("kl", None, 0.25, n=4, seed=3)
    ref = dp.design(p, method="exact")
    plain = _columns.ColumnsRun(Optimizer(method="cuts"), p, 0)
    seeded = _columns.ColumnsRun(Optimizer(method="cuts"), p, 0, start=ref.table)
    assert len(seeded.rays) == len(plain.rays) + p.shape[2]
    plain.chunk(), seeded.chunk()
    assert seeded.value <= ref.certificate.loss * (1 + 1e-6) < plain.value


# ---- hockey-stick bounds (δ > 0) beside -------------------------------------------------------

def _with_delta(which: str, objective: str = "expected", seed: int = 0) -> dp.Problem:
    """:func:`_geo_beside` (KL-DP) on a 3×3 grid with two items, and an (ε, δ) bound beside:
    DistP between the items, or local DP between the 4-neighbour cells."""
    base = _geo_beside("kl", None, 0.3, objective=objective, seed=seed)
    rng = np.random.default_rng(seed + 10)
    items = (dp.Item("a", rng.dirichlet(np.ones(9))), dp.Item("b", rng.dirichlet(np.ones(9))))
    pairs = dp.problems.pairs_within(base.inputs, 1.0)
    extra = {"distp": dp.DistP(pairs=((0, 1),), epsilon=0.1, delta=0.01),
             "ldp": dp.LocalDP(epsilon=0.3, delta=0.01, pairs=pairs)}[which]
    return dataclasses.replace(base, items=items, constraints=(*base.constraints, extra))


@pytest.mark.parametrize(("which", "objective"),
                         [("distp", "expected"), ("ldp", "expected"), ("distp", "worst")])
def test_hockey_stick_bounds_beside_meet_clarabel(which, objective):
    """(ε, δ)-DistP between two items or approximate local DP beside geo-indistinguishability and
    KL-DP: each a budget row ``Σ_y max(0, P − e^ε Q) ≤ δ`` of the master; against Clarabel."""
    p = _with_delta(which, objective)
    assert cuts_solver(p) == "columns"
    ref = dp.solvers.convex(p).value
    d = dp.design(p, method="cuts", gap_tol=1e-3)
    assert (d.result.method, d.result.status) == ("columns", "converged")
    assert d.certificate.ok and d.certificate.repair_t == 0.0
    assert d.result.lower_bound <= ref + 1e-6 * max(1.0, abs(ref))
    assert d.certificate.loss <= ref * (1 + 1.5e-3) + 1e-9
    loose = dataclasses.replace(p, constraints=p.constraints[:2])  # the δ bound binds
    assert dp.solvers.convex(loose).value < ref * (1 - 1e-2)


def test_a_hockey_stick_term_is_the_divergence():
    """The term of each direction, ``Σ_y max(0, P − e^ε Q)``, summed over every output column of a
    random table, is the hockey-stick divergence the certifier measures."""
    from diffpriv.solvers._column_pricing import DivergenceTerms

    p = _with_delta("distp")
    terms = DivergenceTerms(p, 0.0)
    table = np.random.default_rng(1).dirichlet(np.ones(9), size=9)
    total = terms.values(table).sum(axis=1)[-2:]
    laws = [item.dist @ table for item in p.items]
    eps = 0.1
    expected = [np.maximum(laws[0] - np.exp(eps) * laws[1], 0).sum(),
                np.maximum(laws[1] - np.exp(eps) * laws[0], 0).sum()]
    np.testing.assert_allclose(total, expected, rtol=1e-12)
    assert terms.true_budget[-1] == 0.01


def test_hockey_sticks_without_pure_pair_bounds_keep_the_other_solvers():
    p = _with_delta("ldp")
    alone = dataclasses.replace(p, constraints=p.constraints[1:])  # KL-DP and approximate LDP
    assert not _columns.applies(alone)
    assert route(p, "auto") == ("relaxed", "exact", "columns")
    big = dataclasses.replace(_geo_beside("kl", None, 0.3, n=10),
                              constraints=(*_geo_beside("kl", None, 0.3, n=10).constraints,
                                           dp.LocalDP(epsilon=0.5, delta=0.02)))
    assert route(big, "auto") == ("columns",)  # approximate LDP between all pairs: HiGHS too large
