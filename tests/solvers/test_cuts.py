"""Column-and-cut generation for f-divergence constraints (:mod:`diffpriv.solvers._cuts`) against
the convex reference (cvxpy + Clarabel), and the facts its bound rests on: the tangents and the
conjugates in closed form, and weak duality at every multiplier."""

import dataclasses

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.problems import random_problem
from diffpriv.solvers import _cuts
from diffpriv.solvers._lp import _build


def small(seed, *constraints, objective="expected", n=6):
    base = random_problem(seed, n_in=n, n_out=n)
    items = tuple(dp.Item(f"item{i}", np.random.default_rng(seed * 7 + i).dirichlet(np.ones(n)))
                  for i in range(3))
    return dataclasses.replace(base, items=items, constraints=tuple(constraints), objective=objective)


FAMILIES = [("kl", 1.0), ("power", 2.0), ("power", 3.5), ("power", 0.5), ("power", 0.2), ("tv", 1.0)]


@pytest.mark.parametrize("fam", FAMILIES)
def test_tangents_and_conjugates_bound_the_perspective(fam):
    """``Q f(P/Q) ≥ a P + c Q`` with equality at ratio ``s`` (the tangent), and
    ``λ Q f(P/Q) ≥ p P + q Q`` for ``q = −λ f*(p/λ)`` (Fenchel–Young), on random laws; the
    conjugate is the supremum over ratios, by brute force on a fine grid."""
    rng = np.random.default_rng(0)
    p_, q_ = rng.random(500) + 1e-3, rng.random(500) + 1e-3
    value = q_ * _cuts._f(fam, p_ / q_)
    s = np.exp(rng.normal(size=500))
    a, c = _cuts._tangent(fam, s)
    assert np.all(value >= a * p_ + c * q_ - 1e-12)
    np.testing.assert_allclose(a * s + c, _cuts._f(fam, s), rtol=1e-12, atol=1e-12)
    lam = 0.5 + rng.random(500)
    raw = rng.normal(size=500) * 2.0
    p, q = _cuts._conjugate_q(fam, raw, lam)
    assert np.all(lam * value >= p * p_ + q * q_ - 1e-10)
    t = np.concatenate([np.linspace(0.0, 5.0, 100_001), np.geomspace(5.0, 1e4, 10_000)])
    ratio = np.abs(p / lam)  # where the brute-force grid reaches the supremum:
    ok = (ratio < 3.0) & ((ratio > 0.3) | (fam[0] != "power") | (fam[1] > 1))
    brute = np.max((p / lam)[ok, None] * t[None] - _cuts._f(fam, t)[None], axis=1)
    np.testing.assert_allclose(-q[ok] / lam[ok], brute, rtol=1e-3, atol=1e-3)
    zero = _cuts._conjugate_q(fam, raw, np.zeros(500))
    assert np.all(zero[0] == 0) and np.all(zero[1] == 0)


CASES = {
    "kl-distp": dp.DivergenceDistP(pairs=((0, 1), (1, 2)), divergence="kl", epsilon=0.1),
    "reverse_kl": dp.DivergenceDistP(pairs=((0, 1),), divergence="reverse_kl", epsilon=0.08),
    "kl-forward": dp.DivergenceDistP(pairs=((0, 2),), divergence="kl", epsilon=0.05, direction="forward"),
    "chi2": dp.DivergenceDistP(pairs=((0, 1), (1, 2)), divergence="chi2", epsilon=0.15),
    "hellinger": dp.DivergenceDistP(pairs=((0, 1),), divergence="hellinger", epsilon=0.02),
    "renyi0.5": dp.DivergenceDistP(pairs=((0, 1),), divergence="renyi", alpha=0.5, epsilon=0.1),
    "renyi3": dp.DivergenceDistP(pairs=((1, 2),), divergence="renyi", alpha=3.0, epsilon=0.2),
    "tv-xdistp": dp.ExtendedDistP(pairs=((0, 1), (1, 2)), divergence="tv", epsilon=0.1),
    "kl-dp-pairs": dp.DivergenceDP(divergence="kl", epsilon=0.3, pairs=((0, 1), (2, 3), (1, 4))),
    "kl-dp-all": dp.DivergenceDP(divergence="kl", epsilon=0.4),
    "renyi2-dp-neighbours": dp.DivergenceDP(divergence="renyi", alpha=2.0, epsilon=0.3,
                                            pairs=tuple((i, i + 1) for i in range(5))),
    "kl-xdistp": dp.ExtendedDistP(pairs=((0, 1), (1, 2)), divergence="kl", epsilon=0.1),
    "hellinger-xdistp-winf": dp.ExtendedDistP(pairs=((0, 1),), divergence="hellinger", epsilon=0.03,
                                              transport="winf"),
}
"""Every family and form the solver takes, one case each."""


@pytest.mark.parametrize("objective", ["expected", "worst", "entry"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_cuts_converge_to_the_convex_optimum_with_a_valid_bound(case, objective):
    problem = small(3, CASES[case], objective=objective)
    ref = dp.solvers.convex(problem).value
    result = dp.optimize(problem, method="cuts", gap_tol=1e-5)
    assert (result.method, result.plan, result.status) == ("cuts", "cuts", "converged")
    assert result.lower_bound <= ref + 1e-7 * max(1.0, abs(ref))
    cert = dp.certify(problem, result.table, repair=True)
    assert cert.ok and cert.repair_t == 0
    assert cert.loss <= ref + 2e-5 * abs(ref) + 1e-9


def test_cuts_beside_linear_constraints_and_profiles():
    """A KL budget beside pure DistP and local DP rows, and on a profile chain (the shipped
    divergence config's form): converged, within 10⁻⁵ of the convex optimum."""
    problem = small(5, dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=0.05),
                    dp.DistP(pairs=((1, 2),), epsilon=0.5), dp.LocalDP(epsilon=2.0))
    ref = dp.solvers.convex(problem).value
    result = dp.optimize(problem, method="cuts", gap_tol=1e-5)
    assert result.status == "converged" and result.lower_bound <= ref + 1e-9
    assert dp.certify(problem, result.table, repair=True).loss <= ref * (1 + 2e-5)
    config, _ = dp.load_config("configs/divergence.toml")  # KL and Hellinger on profile edges
    result = dp.optimize(config, method="cuts")
    ref = dp.solvers.convex(config).value
    assert result.method == "cuts" and result.status == "converged"
    assert result.lower_bound <= ref * (1 + 1e-9) and result.objective <= ref * (1 + 1e-4)


@pytest.mark.parametrize("case", ["kl-distp", "hellinger", "renyi3", "kl-xdistp"])
def test_every_multiplier_gives_a_lower_bound(case):
    """Weak duality whatever the iterate: the bound at random multipliers (tangent and budget
    multipliers, the linear rows') never exceeds the convex optimum."""
    problem = small(11, CASES[case], dp.DistP(pairs=((1, 2),), epsilon=1.0))
    ref = dp.solvers.convex(problem).value
    blocks = tuple(b for b in problem.blocks() if b.linear)
    full = _build(problem, blocks)
    terms = _cuts._terms(problem, 0.0)
    cuts = _cuts._Cuts()
    n_out = problem.shape[2]
    rng = np.random.default_rng(2)
    for _ in range(30):
        k = 40
        cuts = _cuts._Cuts()
        cuts.add(terms, rng.integers(0, terms.wp.shape[0], k), rng.integers(0, n_out, k),
                 np.exp(rng.normal(size=k) * 2))
        rnd = _cuts._Round(np.zeros(problem.shape), 0.0, np.zeros((terms.wp.shape[0], n_out)),
                           -rng.exponential(size=full.a_ub.shape[0]) * rng.integers(0, 2, full.a_ub.shape[0]),
                           rng.exponential(size=terms.wp.shape[0]), rng.exponential(size=k))
        bound, _ = _cuts._bound(problem, full, terms, cuts, rnd)
        assert bound <= ref + 1e-9


def test_an_infeasible_working_support_takes_every_column_and_a_step_limit_is_reported():
    """The starting support always holds a feasible table (every row to one output); with one
    LP round allowed the run stops at its limit, its table still certified."""
    problem = small(4, CASES["kl-distp"])
    result = dp.optimize(problem, method="cuts", steps=1)
    assert result.status == "step limit" and result.steps == 1
    assert dp.certify(problem, result.table, repair=True).ok


def test_applies_and_the_auto_choice():
    from diffpriv.solvers._methods import auto_cuts, choose, route

    kl = small(0, CASES["kl-distp"])
    assert auto_cuts(kl) and choose(kl, "auto") == "exact"  # 6×6: Clarabel is faster
    assert choose(small(0, CASES["kl-distp"], n=150), "auto") == "cuts"
    wdp = small(0, dp.WassersteinDP(epsilon=0.2))
    assert not _cuts.applies(wdp, (("wasserstein", 1.0),))  # Kantorovich cuts take it
    assert choose(wdp, "auto") == "cuts" and route(wdp, "auto")[0] == "transport cuts"
    transport = small(0, CASES["kl-distp"], objective=dp.TransportLoss())
    assert choose(transport, "auto") != "cuts"
    rows = small(0, dp.DivergenceDP(divergence="kl", epsilon=0.3, pairs=((0, 1), (2, 3))))
    assert not auto_cuts(rows) and choose(rows, "auto") != "cuts"  # row pairs: others or Clarabel
    assert choose(rows, "cuts") == "cuts" and dp.optimize(rows, method="cuts").status == "converged"


def test_a_frontier_runs_cuts_budget_by_budget():
    """``dp.solvers.solve_batch`` on KL DistP (the shipped city's form): each budget's table certified
    within 10⁻⁴ of its own bound, every bound below the convex optimum."""
    problem, _ = dp.load_config("configs/kl-city.toml")
    scales = np.array([0.5, 2.0])
    tables, bounds = dp.solvers.solve_batch(problem, scales)
    for s, table, bound in zip(scales, tables, bounds, strict=True):
        p = dataclasses.replace(problem, constraints=tuple(
            dataclasses.replace(c, epsilon=c.epsilon * s) for c in problem.constraints))
        ref = dp.solvers.convex(p).value
        cert = dp.certify(p, table, repair=True)
        assert cert.ok and bound <= ref * (1 + 1e-9) and cert.loss <= bound * (1 + 1e-4)


def test_the_scaled_bound_is_the_best_along_the_ray():
    """:func:`._lp.scaled_bound` is at least the bound at the multipliers themselves (θ = 1) and
    at none (θ = 0), and meets scipy's bounded scalar search over θ ∈ [0, 2] (the bound is
    concave in θ)."""
    import scipy.optimize

    from diffpriv.solvers._lp import _bound_at, _reduced_costs, scaled_bound

    problem = small(3, CASES["kl-distp"], dp.DistP(pairs=((1, 2),), epsilon=0.5))
    full = _build(problem, tuple(b for b in problem.blocks() if b.linear))
    rng = np.random.default_rng(5)
    for _ in range(10):
        ineq = -rng.exponential(size=full.a_ub.shape[0]) * 3
        lag = _reduced_costs(full, ineq, None)
        reduced, constant = lag.reduced, lag.constant
        direction = reduced - full.c + rng.normal(size=full.c.size) * 0.1
        best = scaled_bound(full, direction, constant)
        def minus(t, d=direction, k=constant):
            return -_bound_at(full, full.c + t * d, t * k)

        res = scipy.optimize.minimize_scalar(minus, bounds=(0.0, 2.0), method="bounded",
                                             options={"xatol": 1e-12})
        fine = -res.fun
        assert best >= _bound_at(full, full.c + direction, constant) - 1e-12
        assert best >= _bound_at(full, full.c, 0.0) - 1e-12
        assert best == pytest.approx(fine, abs=1e-8)


@pytest.mark.parametrize("divergence", ["hellinger", "renyi"])
def test_sparse_laws_leave_outputs_untouched_and_the_bound_stays_finite(divergence):
    """Items on few cells (most outputs enter no law of the working support): for ``f = −t^α``
    (α < 1) a term with no tangent at an output takes λ times the tangent at ratio 1 there, not
    the conjugate at 0 (infinite), so the bound rises to the optimum instead of staying at 0."""
    pytest.importorskip("cvxpy")
    rng = np.random.default_rng(5)
    dom = dp.Domain.grid(5, 5, 1.0)
    a, b = np.zeros(25), np.zeros(25)
    a[rng.permutation(25)[:8]] = 1.0
    b[rng.permutation(25)[:8]] = 1.0
    a, b = a / 8, b / 8
    c = dp.ExtendedDistP(pairs=((0, 1),), divergence=divergence, alpha=0.5 if divergence == "renyi" else None,
                         epsilon=0.05)
    p = dp.Problem(dom, dom, dom.distances(dom), (a + b) / 2, items=(dp.Item("a", a), dp.Item("b", b)),
                   constraints=(c,))
    ref = dp.solvers.convex(p).value
    d = dp.design(p, method="cuts", gap_tol=1e-3, presolve=False)
    assert d.result.status == "converged" and d.certificate.ok
    assert 0 < d.result.lower_bound <= ref * (1 + 1e-6)
    assert d.certificate.loss <= ref * (1 + 2e-3)


@pytest.mark.parametrize("seed", range(12))
def test_column_generation_on_linear_distp_meets_the_lp(seed):
    """Linear comparisons of item laws only (pure and approximate DistP, profile edges; every
    objective): column generation alone converges, its bound below HiGHS's optimum of the
    whole LP, its certified table within gap_tol of it."""
    objective = ("expected", "worst", "entry")[seed % 3]
    delta = 0.05 if seed % 4 == 3 else 0.0
    p = random_problem(seed, extra="none", objective=objective, delta=delta)
    ref = dp.solvers.lp(p).value
    d = dp.design(p, method="cuts", gap_tol=1e-4)
    assert d.result.method == "cuts" and d.result.status == "converged" and d.certificate.ok
    assert d.result.lower_bound <= ref + 1e-9 * max(1.0, abs(ref))
    assert d.certificate.loss <= ref + 2e-4 * max(ref, 1e-6)


def test_auto_runs_column_generation_on_larger_distp_only():
    from diffpriv.solvers._methods import LINEAR_CUTS_FROM, route

    small = random_problem(0, n_in=10, extra="none")
    assert route(small, "auto") == ("exact", "cuts", "pdhg")
    dom = dp.Domain.grid(16, 16, 1.0)
    rng = np.random.default_rng(0)
    a, b = rng.dirichlet(np.ones(256)), rng.dirichlet(np.ones(256))
    big = dp.Problem(dom, dom, dom.distances(dom), (a + b) / 2, items=(dp.Item("a", a), dp.Item("b", b)),
                     constraints=(dp.DistP(((0, 1),), 1.0),))
    assert 256 * 256 >= LINEAR_CUTS_FROM and route(big, "auto") == ("cuts", "pdhg")
    with_ldp = dataclasses.replace(big, constraints=(*big.constraints, dp.LocalDP(3.0)))
    assert route(with_ldp, "auto")[0] != "cuts"  # pair blocks: the whole LP's rows
    with pytest.raises(ValueError, match="'cuts' needs"):
        route(with_ldp, "cuts")


def _grid_distp(n: int, *, delta: float = 0.0, profiles: bool = False) -> dp.Problem:
    """Two Gaussian-mixture items on an ``n × n`` grid (the benchmark's shape), pure or
    approximate DistP; with ``profiles``, one profile per item."""
    dom = dp.Domain.grid(n, n, 1.0)
    c = dom.coords / n

    def bumps(centres):
        d = sum(np.exp(-np.sum((c - m) ** 2, axis=1) / 0.02) for m in centres)
        return d / d.sum()

    a, b = bumps([(0.15, 0.15), (0.85, 0.2)]), bumps([(0.5, 0.5), (0.7, 0.8)])
    if profiles:
        return dp.Problem(dom, dom, dom.distances(dom), np.stack([a, b]) / 2, profiles=("a", "b"),
                          items=(dp.Item("a", a, 0), dp.Item("b", b, 1)),
                          constraints=(dp.DistP(((0, 1),), 0.5, delta),))
    return dp.Problem(dom, dom, dom.distances(dom), (a + b) / 2, items=(dp.Item("a", a), dp.Item("b", b)),
                      constraints=(dp.DistP(((0, 1),), 0.5, delta),))


def test_coarsen_sums_the_laws_and_averages_the_loss():
    from diffpriv.solvers._coarse import COARSE_FROM, coarsen

    p = _grid_distp(20, profiles=True)
    coarse, cin, cout = coarsen(p)
    assert coarse.shape == (2, 100, 100) and np.array_equal(cin, cout)
    assert np.array_equal(np.bincount(cin), np.full(100, 4))  # 2 × 2 cells
    for it, ic in zip(p.items, coarse.items, strict=True):
        np.testing.assert_allclose(ic.dist, np.bincount(cin, weights=it.dist), rtol=0, atol=1e-15)
    np.testing.assert_allclose(coarse.prior, [np.bincount(cin, weights=w) for w in p.prior], atol=1e-15)
    X, Y = 37, 58
    np.testing.assert_allclose(coarse.loss[X, Y], p.loss[np.ix_(cin == X, cout == Y)].mean(), rtol=1e-12)
    np.testing.assert_allclose(coarse.inputs.coords[X], p.inputs.coords[cin == X].mean(axis=0))
    # Where it does not apply: too few points, pair comparisons, f-divergences, no coordinates.
    assert coarsen(_grid_distp(int(np.sqrt(COARSE_FROM)) - 1)) is None
    kl = dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=0.1)
    assert coarsen(dataclasses.replace(p, constraints=(kl,))) is None
    assert coarsen(dataclasses.replace(p, constraints=(*p.constraints, dp.LocalDP(3.0)))) is None
    bare = dp.Domain(p.inputs.labels)
    assert coarsen(dataclasses.replace(p, inputs=bare, outputs=bare)) is None


@pytest.mark.parametrize("delta", [0.0, 0.02])
def test_a_coarse_start_leaves_the_result_and_saves_rounds(monkeypatch, delta):
    """Column generation from the coarse solve's support: converged, its bound below the whole
    LP's optimum and its certified table within gap_tol of it, as from the plain start, in no
    more LP rounds."""
    from diffpriv.solvers import _coarse

    p = _grid_distp(20, delta=delta)
    ref = dp.solvers.lp(p).value
    runs = {}
    for coarse in (True, False):
        monkeypatch.setattr(_coarse, "COARSE_FROM", 400 if coarse else 10**9)
        d = dp.design(p, method="cuts", gap_tol=1e-3)
        assert d.result.status == "converged" and d.certificate.ok
        assert d.result.lower_bound <= ref + 1e-9 and d.certificate.loss <= ref * (1 + 1e-3)
        runs[coarse] = d.result.steps
    assert runs[True] <= runs[False], runs
