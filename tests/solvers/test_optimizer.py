"""The optimizer against independent answers: closed forms from the seeds and the LP reference."""

import jax
import numpy as np
import pytest

import diffpriv as dp
from diffpriv.certification import certify, verify
from diffpriv.problems._known import (
    bernoulli_flip_alpha,
    bernoulli_two_profile_problem,
    k_rr_loss,
    k_rr_problem,
    random_problem,
    randomized_response,
)
from diffpriv.solvers import _budgets, _pdhg_run
from diffpriv.solvers._lp import solve_lp
from tests._problems import geo_problem


@pytest.mark.parametrize(("k", "eps"), [(2, 0.5), (3, 1.0), (5, 2.0)])
def test_k_ary_randomized_response_is_reproduced(k, eps):
    problem = k_rr_problem(k, eps)
    result = dp.optimize(problem, method="pdhg", gap_tol=1e-9)  # to solver accuracy, not the default 1e-4
    cert = certify(problem, result.table, repair=True)
    # Closed form (k-1)/(e^eps+k-1); certification may mix in ~1e-8 to prove the budget.
    assert cert.ok
    assert cert.loss == pytest.approx(k_rr_loss(k, eps), rel=1e-6)
    assert result.lower_bound <= k_rr_loss(k, eps) * (1 + 1e-9)
    assert result.lower_bound == pytest.approx(k_rr_loss(k, eps), rel=1e-6)
    np.testing.assert_allclose(result.table[0], randomized_response(k, eps), atol=1e-6)


@pytest.mark.parametrize(("p_i", "p_j", "eps"), [(0.2, 0.6, 0.5), (0.1, 0.9, 1.0), (0.3, 0.5, 0.2)])
def test_bernoulli_two_profile_flip_matches_lp_4(p_i, p_j, eps):
    """002, LP (4): the optimal symmetric flip probability (closed form, Observation 10)."""
    problem = bernoulli_two_profile_problem(p_i, p_j, eps)
    alpha = bernoulli_flip_alpha(p_i, p_j, eps)
    result = dp.optimize(problem, method="pdhg", gap_tol=1e-7)  # the default 1e-4 allows more than rel=1e-6
    cert = certify(problem, result.table, repair=True)
    assert cert.ok
    assert cert.loss == pytest.approx(alpha, rel=1e-6)
    assert result.lower_bound <= alpha + 1e-12
    assert result.lower_bound == pytest.approx(alpha, rel=1e-6)


@pytest.mark.parametrize("seed", [0, 2, 5, 7])
def test_certified_loss_close_to_lp_optimum(seed):
    problem = random_problem(seed)
    ref = solve_lp(problem)
    result = dp.optimize(problem, method="pdhg")
    cert = certify(problem, result.table, repair=True)
    assert cert.ok and verify(cert.to_dict()).ok
    assert result.lower_bound <= ref.value * (1 + 1e-9) + 1e-12  # weak duality
    assert cert.loss <= ref.value * 1.002  # within 0.2 %
    assert cert.loss >= ref.value * (1 - 1e-9)  # a certified table cannot beat the optimum


def test_approximate_distp_close_to_lp():
    problem = random_problem(0, delta=0.05)
    ref = solve_lp(problem)
    result = dp.optimize(problem, method="pdhg")
    cert = certify(problem, result.table, repair=True)
    assert cert.ok
    assert ref.value * (1 - 1e-9) <= cert.loss <= ref.value * 1.002
    assert result.lower_bound <= ref.value * (1 + 1e-9)


@pytest.mark.parametrize("objective", ["worst", "entry"])
def test_epigraph_objectives_close_to_lp(objective):
    """The worst row loss and the largest weighted entry (one epigraph constraint per row, per
    entry): PDHG certifies within 0.2 % of the LP; the batch and the augmented Lagrangian give
    lower bounds below it."""
    import dataclasses

    problem = dataclasses.replace(random_problem(3, n_in=6, n_out=6, extra="ldp"), objective=objective)
    ref = solve_lp(problem)
    result = dp.optimize(problem, method="pdhg")
    cert = certify(problem, result.table, repair=True)
    assert cert.ok
    assert result.lower_bound <= ref.value * (1 + 1e-9) + 1e-12
    assert ref.value * (1 - 1e-9) <= cert.loss <= ref.value * 1.002
    _, bounds = dp.solvers.solve_batch(problem, np.array([0.5, 1.0]), steps=2000, polish=False)
    assert np.all(bounds <= [solve_lp(_scale_eps(problem, 0.5)).value * (1 + 1e-9), ref.value * (1 + 1e-9)])
    al = dp.optimize(problem, method="al", steps=2000)
    assert al.lower_bound <= ref.value * (1 + 1e-9) + 1e-12


def test_deterministic_for_a_seed():
    problem = random_problem(1, n_in=6, n_out=6)
    a = dp.optimize(problem, method="pdhg", seed=3, steps=2000)
    b = dp.optimize(problem, method="pdhg", seed=3, steps=2000)
    np.testing.assert_array_equal(a.table, b.table)
    assert a.lower_bound == b.lower_bound


def test_same_shapes_do_not_recompile():
    p1 = random_problem(11, n_in=7, n_out=7, n_profiles=1, n_pairs=1, extra="none")
    p2 = random_problem(12, n_in=7, n_out=7, n_profiles=1, n_pairs=1, extra="none")
    dp.optimize(p1, method="pdhg", steps=1000, period=500)
    before = _pdhg_run._run._cache_size()
    dp.optimize(p2, method="pdhg", steps=1000, period=500)
    assert _pdhg_run._run._cache_size() == before


def test_batch_over_budgets_matches_single_runs():
    problem = random_problem(4, n_in=6, n_out=6, extra="none")
    scales = np.array([0.5, 1.0, 2.0])
    tables, bounds = dp.solvers.solve_batch(problem, scales, steps=3000, polish=False)
    for s, table, bound in zip(scales, tables, bounds, strict=True):
        scaled = _scale_eps(problem, s)
        single = dp.optimize(scaled, method="pdhg", steps=3000, polish=False)
        np.testing.assert_allclose(table, single.table, atol=1e-9)
        assert bound == pytest.approx(single.lower_bound, rel=1e-9, abs=1e-12)
    # A larger budget can only lower the optimum: the bounds are monotone up to solver error.
    ref = [solve_lp(_scale_eps(problem, s)).value for s in scales]
    assert all(b <= r * (1 + 1e-9) + 1e-12 for b, r in zip(bounds, ref, strict=True))


def _scale_eps(problem, s):
    import dataclasses

    cons = tuple(dataclasses.replace(c, epsilon=c.epsilon * s) for c in problem.constraints)
    return dataclasses.replace(problem, constraints=cons)


def test_mechanism_is_softmax_of_logits_on_support():
    support = np.ones((1, 3, 4), dtype=bool)
    support[0, 0, 1:] = False
    m = dp.mechanisms.Mechanism(jax.numpy.asarray(np.random.default_rng(0).normal(size=(1, 3, 4))),
                     jax.numpy.asarray(support))
    table = np.asarray(m.table())
    np.testing.assert_allclose(table.sum(-1), 1.0, rtol=1e-14)
    assert table[0, 0, 1:].max() == 0.0
    np.testing.assert_allclose(np.exp(np.asarray(m.log_table())), table, rtol=1e-14)
    back = dp.mechanisms.Mechanism.from_table(table)
    np.testing.assert_allclose(np.asarray(back.table()), table, rtol=1e-12)


def test_options_are_validated():
    with pytest.raises(ValueError, match="optimizer.steps"):
        dp.optimize(k_rr_problem(2, 1.0), method="pdhg", steps=0)
    with pytest.raises(ValueError, match="optimizer.omega"):
        dp.optimize(k_rr_problem(2, 1.0), method="pdhg", omega=-1.0)
    with pytest.raises(ValueError, match=r"^optimizer.omega_range: must be >= 1.0, got 0.5$"):
        dp.optimize(k_rr_problem(2, 1.0), method="pdhg", omega_range=0.5)


def test_primal_weight_adapts_upwards_within_its_range():
    """PDLP's primal-weight update moves the weight at restarts, never below the initial weight
    nor above omega_range times it; omega_range = 1 keeps it fixed, and both runs certify."""
    problem = random_problem(1)
    start = float(dp.optimize(problem, method="pdhg", steps=1, period=1, polish=False).state.omega)
    fixed = dp.optimize(problem, method="pdhg", steps=6000, omega_range=1.0)
    adapted = dp.optimize(problem, method="pdhg", steps=6000)
    assert float(fixed.state.omega) == start and fixed.state.anchor == ()
    assert start < float(adapted.state.omega) <= 9 * start * (1 + 1e-12)
    ref = solve_lp(problem).value
    for r in (fixed, adapted):
        assert certify(problem, r.table, repair=True).loss == pytest.approx(ref, rel=1e-2)


def test_support_radius_table_certifies_without_mixing():
    """With a support mask no data-independent mixing exists (no output is allowed in every
    row), so the optimizer itself must deliver a table that holds: budgets are tightened by a
    hair and numerical dust is zeroed before polishing."""
    problem, d = _home_out_with_radius(3.0)
    ref = solve_lp(problem)
    result = dp.optimize(problem, method="pdhg")
    cert = certify(problem, result.table, repair=True)
    assert cert.ok and cert.repair_t == 0.0
    assert np.all(cert.table[0][d > 3.0] == 0.0)
    assert ref.value * (1 - 1e-9) <= cert.loss <= ref.value * 1.002


def test_infeasible_problem_is_detected_by_the_dual_bound():
    """Support radius 2 with distant home/out distributions: no table meets ε = 1 (the LP says
    infeasible); the dual bound grows past any achievable loss, which proves it."""
    problem, _ = _home_out_with_radius(2.0)
    with pytest.raises(dp.solvers.ReferenceSolveError, match="nfeasible"):
        solve_lp(problem)
    assert dp.optimize(problem, method="pdhg", steps=20_000).infeasible
    assert not dp.optimize(k_rr_problem(3, 1.0), method="pdhg").infeasible


def _home_out_with_radius(radius):
    """A 5×5 grid, pure DistP (ε = 1) between two Gaussian blobs, outputs within ``radius``."""
    X = dp.Domain.grid(5, 5)
    d = X.distances(X)
    home = np.exp(-0.5 * np.sum((X.coords - [1.0, 1.0]) ** 2, axis=1))
    out = np.exp(-0.5 * np.sum((X.coords - [3.5, 3.5]) ** 2, axis=1))
    items = (dp.Item("home", home / home.sum()), dp.Item("out", out / out.sum()))
    problem = dp.Problem(X, X, d, (items[0].dist + items[1].dist) / 2, items=items,
                         constraints=(dp.DistP(((0, 1),), 1.0),), support=d <= radius)
    return problem, d


def test_warm_start_continues_a_run():
    """``init=result`` restores the primal and dual state: 2000 + 2000 steps = 4000 steps."""
    problem = random_problem(2)
    first = dp.optimize(problem, method="pdhg", steps=2000, polish=False)
    warm = dp.optimize(problem, method="pdhg", steps=2000, polish=False, init=first)
    cold = dp.optimize(problem, method="pdhg", steps=4000, polish=False)
    np.testing.assert_allclose(warm.table, cold.table, atol=1e-9)
    assert warm.lower_bound >= first.lower_bound


def test_warm_start_from_a_mechanism():
    """A primal-only warm start (a Mechanism) of the right shape is accepted; the result's own
    mechanism reproduces its table; a wrong shape is a clear error."""
    problem = random_problem(2)
    ref = solve_lp(problem)
    warm = dp.optimize(problem, method="pdhg", steps=5000, init=dp.mechanisms.Mechanism.from_table(ref.table))
    assert certify(problem, warm.table, repair=True).loss <= ref.value * 1.002
    np.testing.assert_allclose(np.asarray(warm.mechanism.table()), warm.table, atol=1e-12)
    with pytest.raises(ValueError, match="init: shape"):
        dp.optimize(problem, method="pdhg", init=np.ones((1, 2, 2)) / 2)


def test_huge_epsilon_stays_finite_and_every_traced_bound_is_valid():
    # e^800 overflows float64; the constraint is then void and the optimum is 0 (report the truth).
    # At a zero bound the gap is absolute (one rule, device and host): a table within 1e-21 of
    # the identity is converged.
    result = dp.optimize(k_rr_problem(3, 800.0), method="pdhg")
    assert result.status == "converged" and np.isfinite(result.lower_bound)
    assert 0.0 <= result.objective <= 1e-12 and result.lower_bound <= result.objective
    # The per-period bounds are evaluated at the real budgets, not the tightened ones.
    result = dp.optimize(k_rr_problem(4, 1.0), method="pdhg")
    assert np.max(result.history["lower_bound"]) <= k_rr_loss(4, 1.0) * (1 + 1e-12)


def test_batch_does_not_recompile_and_rejects_other_methods():
    problem = random_problem(4, n_in=5, n_out=5, extra="none")
    dp.solvers.solve_batch(problem, [1.0, 2.0], steps=1000)
    before = _budgets._batch._cache_size()
    dp.solvers.solve_batch(random_problem(5, n_in=5, n_out=5, n_pairs=sum(b.size for b in problem.blocks()),
                                  n_profiles=len(problem.profiles), extra="none"), [0.5, 3.0], steps=1000)
    assert _budgets._batch._cache_size() == before
    with pytest.raises(ValueError, match="optimizer.method"):
        dp.solvers.solve_batch(problem, [1.0], method="al")


def test_seed_is_validated():
    with pytest.raises(ValueError, match="seed"):
        dp.optimize(k_rr_problem(2, 1.0), method="pdhg", seed=2**64)


def test_design_stops_at_a_certified_gap():
    """dp.design: the certified table is within gap_tol of its own lower bound, hence of the
    LP optimum, and well before the step limit."""
    for seed in (0, 5):
        problem = random_problem(seed)
        d = dp.design(problem, method="pdhg", gap_tol=1e-3)
        lp = dp.solvers.lp(problem)
        assert d.result.status == "converged" and d.result.steps < 100_000
        assert d.certificate.ok and d.gap <= 1e-3
        assert d.result.lower_bound <= lp.value * (1 + 1e-9)
        assert lp.value * (1 - 1e-9) <= d.certificate.loss <= lp.value * (1 + 1e-3)


def test_adaptive_restarts_keep_averaging_on_a_geo_grid():
    """Geo-indistinguishability on an 8×8 grid: with restarts only when the KKT error has fallen
    enough (no fixed-period or artificial restarts), 5,000 steps give a certified lower bound
    within 3 % of the LP optimum (fixed restarts every period gave 4.6 %)."""
    problem = geo_problem(8, 0.5)
    ref = solve_lp(problem).value
    result = dp.optimize(problem, method="pdhg", steps=5000, gap_tol=1e-12, polish=False)
    assert 0.97 * ref <= result.lower_bound <= ref * (1 + 1e-9)


def test_compilation_time_is_reported_apart_from_solving():
    """… by a JAX listener that is there only while a run is driven."""
    from jax._src import monitoring

    listeners = len(monitoring.get_event_duration_listeners())
    problem = k_rr_problem(7, 1.3)  # a shape no other test compiles
    first = dp.optimize(problem, method="pdhg", steps=1000)
    assert len(monitoring.get_event_duration_listeners()) == listeners
    again = dp.optimize(problem, method="pdhg", steps=1000)
    assert 0 < first.compile_seconds < first.seconds
    assert again.compile_seconds < 0.1 * first.compile_seconds  # nothing left to compile
    d = dp.design(problem, method="pdhg", steps=1000)
    assert set(d.seconds) == {"compile", "solve", "certify"}
    assert d.seconds["solve"] > 0 and d.seconds["certify"] > 0
