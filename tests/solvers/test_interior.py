"""The structured interior point (:mod:`diffpriv.solvers._interior`) on small real-like problems:
concentrated priors with empty cells, 4- and 8-neighbour cells, small and large budgets, against
the LP optimum (HiGHS on the whole LP)."""

import dataclasses

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.problems import k_rr_problem, pairs_within
from diffpriv.problems._checks import SpecError
from diffpriv.solvers import _interior, _interior_blocks, _methods


def _concentrated(n: int, eps: float, radius: float, seed: int, empty: float = 0.6) -> dp.Problem:
    """An ``n × n`` grid, a Dirichlet(0.3) prior with ``empty`` of its cells at 0, geo-
    indistinguishability ``eps`` per unit between cells within ``radius``."""
    rng = np.random.default_rng(seed)
    dom = dp.Domain.grid(n, n, 1.0)
    prior = rng.dirichlet(np.full(n * n, 0.3))
    prior[rng.random(n * n) < empty] = 0.0
    if not prior.any():
        prior[0] = 1.0
    prior /= prior.sum()
    return dp.Problem(dom, dom, dom.distances(dom), prior,
                      constraints=(dp.ExtendedDP(eps, pairs=pairs_within(dom, radius)),))


CASES = [(4, 0.3, 1.0, 0), (5, 1.0, 1.0, 1), (5, 3.0, 1.0, 2), (4, 0.5, 1.5, 3), (5, 2.0, 1.5, 4),
         (6, 0.7, 1.0, 5)]
"""``(side, ε, neighbour radius, seed)``: 4-neighbour cells at radius 1, 8-neighbour at 1.5."""


@pytest.mark.parametrize(("n", "eps", "radius", "seed"), CASES)
def test_certified_within_gap_tol_of_the_lp_optimum_on_concentrated_priors(n, eps, radius, seed):
    problem = _concentrated(n, eps, radius, seed)
    assert _interior.applies(problem)
    optimum = dp.solvers.lp(problem).value
    d = dp.design(problem, method="interior", gap_tol=1e-3)
    assert d.certificate.ok and d.result.method == "interior point" and d.result.converged
    assert d.result.lower_bound <= optimum + 1e-9 * max(1.0, optimum)
    assert optimum <= d.certificate.loss + 1e-9
    assert d.certificate.loss <= optimum + 1e-3 * optimum + 1e-9


def test_every_iterate_is_a_table_within_the_budgets_and_every_bound_holds():
    """The run keeps its iterates inside the tightened budgets and its bound below the optimum
    at every iteration, not only at the end."""
    from diffpriv.solvers._options import Options

    problem = _concentrated(5, 1.0, 1.5, 7)
    optimum = dp.solvers.lp(problem).value
    run = _interior.InteriorRun(Options(gap_tol=1e-6, steps=40), problem, 0)
    for _ in range(25):
        status = run.chunk().status
        assert run.bound <= optimum + 1e-9
        table = run.table()
        assert np.allclose(table.sum(axis=-1), 1.0, atol=1e-9)
        assert dp.certify(problem, table).ok
        if status is not None:  # the run ended (the driver stops here)
            break
    assert run.iterations >= 10


def test_local_dp_with_every_row_linked_matches_the_lp():
    problem = k_rr_problem(6, 1.0)
    assert _interior_blocks.Pairs(problem).u == 5  # every row linked to every other: blocks of 5 rows
    d = dp.design(problem, method="interior", gap_tol=1e-4)
    optimum = dp.solvers.lp(problem).value
    assert d.certificate.ok and d.certificate.loss <= optimum * (1 + 1e-4) + 1e-9


def test_refuses_what_it_does_not_solve_in_one_line():
    problem = _concentrated(4, 0.5, 1.0, 0)
    worst = dataclasses.replace(problem, objective="worst")
    near = pairs_within(problem.inputs, 1.0)
    delta = dataclasses.replace(problem, constraints=(dp.LocalDP(0.5, delta=0.01, pairs=near),))
    for p in (worst, delta):
        assert not _interior.applies(p)
        with pytest.raises(SpecError, match="'interior' needs pure local / extended DP"):
            _methods.route(p, "interior")


def test_optimize_says_up_front_how_long_a_long_run_is_expected_to_take(capsys, monkeypatch):
    """``diffpriv optimize`` announces the interior point's expected duration above its threshold,
    and nothing below it or for another solver."""
    from diffpriv.cli import _optimize

    problem = _concentrated(6, 0.7, 1.0, 5)
    _optimize._announce(problem, "auto", 1e-2)
    assert capsys.readouterr().out == ""
    monkeypatch.setattr(_optimize, "LONG_RUN", 0.0)
    _optimize._announce(problem, "auto", 1e-2)
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith("expect a long run: about 0 minutes for the interior point")
    assert "--time-limit" in out
    _optimize._announce(problem, "exact", 1e-2)
    assert capsys.readouterr().out == ""


def test_the_size_model_expects_more_iterations_at_small_budgets_where_outputs_are_left_out():
    """:attr:`_interior.Size.iterations`: the constant where every output runs (a uniform prior), and
    ``SLOW`` more per unit of ``ln(1/ε)`` below 1 where outputs are left out."""
    concentrated = _concentrated(6, 0.7, 1.0, 5)  # 0.7 between 4-neighbours, outputs left out
    assert _interior.outputs(concentrated).size < concentrated.shape[2]
    expected = _interior.ITERATIONS + _interior.SLOW * np.log(1 / 0.7)
    assert _interior.size(concentrated).iterations == round(expected)
    wide = concentrated.with_budget(concentrated.constraints[0].name, 2.0)
    assert _interior.size(wide).iterations == _interior.ITERATIONS  # ε ≥ 1 between neighbours
    flat = np.full_like(concentrated.prior, 1 / concentrated.prior.size)
    uniform = dataclasses.replace(concentrated, prior=flat)  # every output runs
    assert _interior.outputs(uniform).size == uniform.shape[2]
    assert _interior.size(uniform).iterations == _interior.ITERATIONS
    assert _interior.size(concentrated).seconds > _interior.size(wide).seconds > 0


def test_write_lp_writes_the_reference_lp_that_highs_reads_back_at_its_optimum(tmp_path):
    """``dp.solvers.write_lp``: the LP of :func:`dp.solvers.lp` as an MPS file (what the benchmarks
    give HiGHS's other algorithms), read back and solved to the same optimum."""
    import highspy

    problem = _concentrated(4, 0.5, 1.0, 0)
    sizes = dp.solvers.write_lp(problem, tmp_path / "geo.mps")
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(tmp_path / "geo.mps"))
    h.run()
    assert h.getNumCol() == sizes["variables"] and h.getNumRow() == sizes["rows"]
    assert h.getInfo().objective_function_value == pytest.approx(dp.solvers.lp(problem).value, rel=1e-7)


def test_a_budgets_result_warm_starts_the_next_from_its_outputs_and_its_iterate():
    """A sweep's next budget starts from the last run's outputs and, where the budgets grow, its
    iterate (a smaller budget's table is inside a larger one's cone); it still ends within
    ``gap_tol`` of the LP optimum, and a smaller budget starts from the outputs alone."""
    from diffpriv.solvers._options import Options

    small, large = _concentrated(6, 0.5, 1.0, 5), _concentrated(6, 0.9, 1.0, 5)
    first = dp.design(small, method="interior", gap_tol=1e-3).result
    assert isinstance(first.state, _interior.Iterate)
    outs, table = _interior.InteriorRun(Options(), large, 0)._warm(first.state)
    assert table is not None and np.array_equal(outs, first.state.outs)
    assert _interior.InteriorRun(Options(), small, 0)._warm(
        _interior.InteriorRun(Options(), large, 0).iterate())[1] is None  # a smaller budget: outputs only
    other = _concentrated(5, 0.9, 1.0, 5)
    assert _interior.InteriorRun(Options(), other, 0)._warm(first.state) is None  # another problem
    d = dp.design(large, method="interior", gap_tol=1e-3, init=first)
    optimum = dp.solvers.lp(large).value
    assert d.certificate.ok and d.result.method == "interior point" and d.result.converged
    assert d.result.lower_bound <= optimum + 1e-9 <= d.certificate.loss + 2e-9
    assert d.certificate.loss <= optimum * (1 + 1e-3) + 1e-9


def test_the_gap_it_reports_holds_against_the_lp_optimum():
    """Each chunk's gap, once the run has a bound of the whole problem, is at least the iterate's
    own gap to the LP optimum (its bound is below the optimum, its table feasible)."""
    from diffpriv.solvers._driver import Status
    from diffpriv.solvers._options import Options

    problem = _concentrated(6, 0.7, 1.0, 5)
    optimum = dp.solvers.lp(problem).value
    run = _interior.InteriorRun(Options(gap_tol=1e-3, steps=60), problem, 0)
    assert run.others.size  # outputs left out, priced
    seen = 0
    for _ in range(60):
        chunk = run.chunk()
        if run.priced:
            seen += 1
            loss = float(np.sum(run.c * run.a))
            assert chunk.gap >= (loss - optimum) / loss - 1e-9
        if chunk.status is not None:
            break
    assert seen and chunk.status is Status.CONVERGED


def test_a_sweep_over_epsilon_runs_each_budget_from_the_last(monkeypatch):
    """``dp.sweep`` hands each interior point result to the next budget (its ``state``), and every
    budget's certified loss is within ``gap_tol`` of its LP optimum."""
    from diffpriv._sweep import at_budget

    problem = _concentrated(6, 0.5, 1.0, 5)
    seen = []
    real = _interior.InteriorRun._warm

    def warm(self, iterate):
        seen.append(iterate is not None)
        return real(self, iterate)

    monkeypatch.setattr(_interior.InteriorRun, "_warm", warm)
    budgets = (0.4, 0.8, 1.6)
    frontier = dp.sweep(problem, budgets, method="interior", gap_tol=1e-3)
    assert seen == [False, True, True]
    for budget, row in zip(budgets, frontier.rows, strict=True):
        optimum = dp.solvers.lp(at_budget(problem, 0, "epsilon", budget)).value
        assert row["ok"] and row["method"] == "interior point" and row["gap"] <= 1e-3
        assert row["lower_bound"] <= optimum + 1e-9 <= row["certified_loss"] + 2e-9
        assert row["certified_loss"] <= optimum * (1 + 1e-3) + 1e-9


def test_auto_runs_it_where_budgets_between_cells_exceed_column_generations_ratios():
    """Cells within 2.9 units at ε = 5 per unit (``e^{14.1}`` between the farthest, beyond column
    generation's :data:`._columns.LARGEST_RATIO`): ``"auto"`` runs the interior point, on a
    concentrated prior and on the uniform one, within ``gap_tol`` of the LP optimum."""
    from diffpriv.solvers import _columns

    concentrated = _concentrated(5, 5.0, 2.9, 6)
    uniform = dataclasses.replace(concentrated, prior=np.full(25, 1 / 25))
    for problem in (concentrated, uniform):
        assert not _columns.applies(problem) and _interior.applies(problem)
        assert _methods.route(problem, "auto", gap_tol=1e-2)[0] == "interior"
        optimum = dp.solvers.lp(problem).value
        d = dp.design(problem, gap_tol=1e-2)
        assert d.certificate.ok and d.result.method == "interior point"
        assert d.result.lower_bound <= optimum * (1 + 1e-7) + 1e-12
        assert optimum <= d.certificate.loss * (1 + 1e-7) + 1e-12
        assert d.certificate.loss <= optimum * (1 + 1e-2) + 1e-12


def test_pricing_bounds_hold_and_trimming_only_tightens_them():
    """:meth:`._column_pricing.Pricing.term` at HiGHS's multipliers and at perturbed ones: never
    above the pricing LP's optimum (scipy's ``linprog`` on the same LP, a model of its own), and
    never below the bound of the multipliers as given."""
    import scipy.optimize

    from diffpriv.solvers._column_pricing import Pricing, pair_rows
    from diffpriv.solvers._columns import _edges

    rng = np.random.default_rng(3)
    problem = _concentrated(5, 6.0, 1.5, 2)
    i, j, eps = _edges(problem, tight=False)
    n = 25
    pricing = Pricing(n, i, j, eps)
    rows = pair_rows(n, i, j, eps)
    ones = np.ones(n)
    for y in range(8):
        g = rng.normal(size=n) * np.where(rng.random(n) < 0.3, 1e-6, 1.0)
        opt = scipy.optimize.linprog(g, A_ub=rows.toarray(), b_ub=np.zeros(i.size), bounds=(0, 1),
                                     method="highs").fun
        _, lam = pricing.solve(y, g, ones)
        for mult in (lam, lam * rng.uniform(0.5, 2.0, lam.size), rng.exponential(1e-3, lam.size)):
            plain = pricing._value(g, mult, ones)
            term = pricing.term(g, mult, ones)
            assert plain <= term <= opt + 1e-9 * (1 + abs(opt))


def test_a_pricing_lp_highs_does_not_solve_is_bounded_at_zero_multipliers(monkeypatch):
    """Where HiGHS finds no optimum of an output's pricing LP, that output's term is ``λ = 0``'s
    (``Σ min(0, g)``, valid for any column with entries in [0, 1]): the run still ends certified
    within ``gap_tol`` of the LP optimum, its bound below it."""
    from diffpriv.solvers._column_pricing import Pricing
    from diffpriv.solvers._cut_lp import CutsSolveError

    problem = _concentrated(6, 0.7, 1.0, 5)
    assert _interior.outputs(problem).size < 36  # outputs are left out, and priced
    real, failed = Pricing.solve, []

    def solve(self, y, g, upper):
        if y % 2:
            failed.append(y)
            raise CutsSolveError("optimizer: HiGHS found no optimum of a pricing LP (Solve error)")
        return real(self, y, g, upper)

    monkeypatch.setattr(Pricing, "solve", solve)
    optimum = dp.solvers.lp(problem).value
    d = dp.design(problem, method="interior", gap_tol=1e-3)
    assert failed and d.certificate.ok and d.result.converged
    assert d.result.lower_bound <= optimum + 1e-9 <= d.certificate.loss + 2e-9
    assert d.certificate.loss <= optimum * (1 + 1e-3) + 1e-9


def test_where_most_outputs_left_out_price_out_all_of_them_join():
    """:meth:`InteriorRun._short`: the outputs whose priced terms matter join; where they are at
    least :data:`._interior.ALL` of those left out, all of them do; none where the terms add up
    to less than :data:`._interior.PRICED` of ``gap_tol``."""
    from diffpriv.solvers._options import Options

    run = _interior.InteriorRun(Options(gap_tol=1e-2), _concentrated(6, 0.7, 1.0, 5), 0)
    k = run.others.size
    assert k >= 4
    priced = np.zeros(k)
    assert run._short(priced, 1.0).size == 0
    priced[2] = -1.0
    assert np.array_equal(run._short(priced, 1.0), run.others[2:3])
    priced[: -(-k // 2)] = -1.0
    assert np.array_equal(run._short(priced, 1.0), run.others)


def _random_factors(monkeypatch, n=6, seed=8):
    problem = _concentrated(n, 0.7, 1.5, seed, empty=0.3)
    pairs = _interior_blocks.Pairs(problem)
    rng = np.random.default_rng(0)
    m = problem.shape[2]
    w, d = rng.uniform(0.1, 10.0, (pairs.p, m)), rng.uniform(0.1, 10.0, (pairs.n, m))
    return pairs, w, d, rng


def _dense_sum(pairs, w, d):
    g = pairs.g.toarray()
    return sum(np.linalg.inv(g.T @ np.diag(w[:, y]) @ g + np.diag(d[:, y])) for y in range(w.shape[1]))


def test_the_factors_split_over_threads_are_those_of_one_thread(monkeypatch):
    """The outputs factorised in batches over several threads give the same dense system and the
    same solves as one thread (the batches' sums in another order only)."""
    pairs, w, d, rng = _random_factors(monkeypatch)
    rhs = rng.standard_normal((pairs.n, w.shape[1]))
    monkeypatch.setattr(_interior_blocks, "BATCH", 5)  # 36 outputs: 8 batches, and 3 threads solve
    monkeypatch.setattr(_interior_blocks, "workers", lambda: 1)
    one = _interior_blocks.Factors(pairs, w, d)
    monkeypatch.setattr(_interior_blocks, "workers", lambda: 3)
    split = _interior_blocks.Factors(pairs, w, d)
    assert np.allclose(np.triu(split.schur[0]), np.triu(one.schur[0]), rtol=1e-12, atol=0)
    assert np.allclose(split.solve(rhs), one.solve(rhs), rtol=1e-12, atol=1e-14)
    dense = _dense_sum(pairs, w, d)
    assert np.allclose(np.triu(split.schur[0]).T @ np.triu(split.schur[0]), dense, rtol=1e-9)


def test_the_band_of_the_rows_system_is_that_of_the_whole_and_its_steps_are_newtons(monkeypatch):
    """The rows' sums' system formed within a band of blocks holds exactly the entries of the whole
    ``Σ_y H_y⁻¹`` there; conjugate gradients preconditioned by it give the Newton step the whole
    system gives, its rows' sums to the tolerance asked."""
    pairs, w, d, rng = _random_factors(monkeypatch, n=9)
    u, r, n = pairs.u, pairs.r, pairs.n
    assert r >= 6
    dense = _dense_sum(pairs, w, d)
    q, sums = rng.standard_normal((n, w.shape[1])), rng.standard_normal(n)
    whole = _interior_blocks.Factors(pairs, w, d)
    dmu, da = whole.newton(q, sums, 1e-11)
    for band in (1, 2):
        banded = _interior_blocks.Factors(pairs, w, d, band=band)
        assert banded.band == band and not banded.exact and not banded.widened
        formed = np.triu(banded.schur[0]).T @ np.triu(banded.schur[0])
        blocks = np.arange(r * u)[:n] // u
        near = np.abs(blocks[:, None] - blocks[None, :]) <= band
        assert np.allclose(formed[near], dense[near], rtol=1e-9, atol=1e-12)
        assert np.allclose(formed[~near], 0.0, atol=1e-12)
        bmu, bda = banded.newton(q, sums, 1e-11)
        assert np.max(np.abs(bda.sum(axis=1) - sums)) <= 1e-11
        assert np.allclose(bmu, dmu, rtol=1e-8, atol=1e-9) and np.allclose(bda, da, rtol=1e-8, atol=1e-9)
        g = pairs.g.toarray()
        h = g.T[None] @ (w.T[:, :, None] * g[None]) + np.eye(n)[None] * d.T[:, None, :]  # every H_y
        steps = np.linalg.solve(h, (q + bmu[:, None]).T[:, :, None])[:, :, 0].T
        assert np.allclose(bda, steps, rtol=1e-8, atol=1e-9)


def test_a_band_that_is_not_positive_definite_or_too_narrow_gives_way_to_the_whole(monkeypatch):
    """Where the band's system is not positive definite, or its conjugate gradients need more
    than ``LIMIT`` steps, the whole system is formed and the step is still Newton's."""
    pairs, w, d, rng = _random_factors(monkeypatch, n=9)
    q, sums = rng.standard_normal((pairs.n, w.shape[1])), rng.standard_normal(pairs.n)
    dmu, da = _interior_blocks.Factors(pairs, w, d).newton(q, sums, 1e-11)
    cho = _interior_blocks.scipy.linalg.cho_factor
    calls = []

    def refuse_the_band(a, *args):
        calls.append(a.shape)
        if len(calls) == 1:
            raise np.linalg.LinAlgError("not positive definite")
        return cho(a, *args)

    monkeypatch.setattr(_interior_blocks.scipy.linalg, "cho_factor", refuse_the_band)
    refused = _interior_blocks.Factors(pairs, w, d, band=1)
    assert refused.exact and refused.widened and len(calls) == 2
    monkeypatch.setattr(_interior_blocks.scipy.linalg, "cho_factor", cho)
    monkeypatch.setattr(_interior_blocks, "LIMIT", 1)
    slow = _interior_blocks.Factors(pairs, w, d, band=1)
    bmu, bda = slow.newton(q, sums, 1e-11)
    assert slow.exact and slow.widened and slow.steps > 1
    assert np.allclose(bmu, dmu, rtol=1e-8, atol=1e-9) and np.allclose(bda, da, rtol=1e-8, atol=1e-9)


def test_the_outputs_left_out_priced_in_threads_are_priced_as_by_one_model(monkeypatch):
    """:meth:`InteriorRun._price` over three HiGHS models in threads gives each output left out
    the bound one model gives it."""
    from diffpriv.solvers._options import Options

    problem = _concentrated(6, 0.7, 1.5, 5)
    monkeypatch.setattr(_interior_blocks, "workers", lambda: 3)
    run = _interior.InteriorRun(Options(gap_tol=1e-6, steps=40), problem, 0)
    assert run.others.size >= 6
    for _ in range(8):
        run.chunk()
    split = run._price()
    assert len(run.pricing) == 3
    run.pricing = None
    monkeypatch.setattr(_interior_blocks, "workers", lambda: 1)
    one = run._price()
    assert len(run.pricing) == 1
    assert np.all(one <= 0) and np.any(one < 0)
    assert np.allclose(split, one, rtol=1e-9, atol=1e-12)


def test_a_run_that_few_outputs_join_resumes_from_its_kept_iterate_and_reaches_the_optimum():
    """Where few outputs join (at most ``FEW`` of those run), the run goes on from the iterate it
    kept at gap ``RESUME``: strictly positive, its ``μ`` kept, and it still converges to the LP
    optimum."""
    from diffpriv.solvers._options import Options

    problem = _concentrated(6, 0.7, 1.5, 5)
    optimum = dp.solvers.lp(problem).value
    run = _interior.InteriorRun(Options(gap_tol=1e-3, steps=200), problem, 0)
    others = run.others.copy()
    while run.early is None:
        run.chunk()
    assert run.outs.size + others.size == problem.shape[2] and run.others.size == others.size
    kept_mu = run.early[4].copy()
    few = others[:max(1, int(_interior.FEW * run.outs.size))]
    run._widen(few)
    assert np.array_equal(run.outs, np.union1d(run.outs, few)) and np.isin(few, run.outs).all()
    assert np.array_equal(run.mu, kept_mu)
    assert (run.a > 0).all() and (run.s > 0).all() and (run.z > 0).all() and (run.lam > 0).all()
    status = None
    while status is None and run.iterations < 150:
        status = run.chunk().status
    out = run.finish(status)
    assert status == _interior.Status.CONVERGED
    assert out.bound <= optimum + 1e-9 and optimum <= problem.objective_value(out.table) + 1e-9
    assert problem.objective_value(out.table) <= optimum * (1 + 1e-3) + 1e-9


def test_a_start_is_centred_and_a_drifting_step_ends_the_run_at_its_best(monkeypatch):
    """Every complementarity product of a (re)start is at least their mean; a step that would move
    a row's sum from 1 by more than ``DRIFT`` is refused (the run stops at its best iterate, a
    table that certifies)."""
    from diffpriv.solvers._options import Options

    problem = _concentrated(5, 1.0, 1.5, 7, empty=0.0)
    run = _interior.InteriorRun(Options(gap_tol=1e-3, steps=40), problem, 0)
    assert not run.others.size  # every output runs
    top = float(np.max(run.c))
    lam = np.full(run.s.shape, _interior.START * top)  # the multipliers before they are raised
    z = np.maximum(run.c + run.pairs.gt @ lam, _interior.START * top)
    mean = (np.sum(run.a * z) + np.sum(run.s * lam)) / (z.size + lam.size)
    products = np.concatenate([(run.a * run.z).ravel(), (run.s * run.lam).ravel()])
    assert products.min() >= mean * (1 - 1e-12) and (run.lam >= lam).all()
    assert products.min() > 10 * float(np.min(np.r_[(run.a * z).ravel(), (run.s * lam).ravel()]))
    for _ in range(3):
        run.chunk()
    newton = _interior_blocks.Factors.newton  # each step's rows' sums off by 10⁻³

    def off(self, q, sums, tol):
        dmu, da = newton(self, q, sums, tol)
        return dmu, da + 1e-3 / da.shape[1]

    monkeypatch.setattr(_interior_blocks.Factors, "newton", off)
    chunk = run.chunk()
    assert chunk.status == _interior.Status.STALLED
    assert np.allclose(run.table().sum(axis=-1), 1.0, atol=1e-12)
    out = run.finish(chunk.status)
    assert dp.certify(problem, out.table).ok


def test_a_run_on_the_band_of_the_rows_system_reaches_the_lp_optimum(monkeypatch):
    """With the rows' sums' system formed within one block of its diagonal (conjugate gradients
    doing the rest), the run converges to the LP optimum as with the whole system, in as many
    iterations."""
    problem = _concentrated(8, 1.0, 1.5, 11, empty=0.5)
    optimum = dp.solvers.lp(problem).value
    whole = dp.design(problem, method="interior", gap_tol=1e-3)
    widened = []
    monkeypatch.setattr(_interior, "BAND", 1)
    monkeypatch.setattr(_interior_blocks, "band", lambda r, blocks: blocks)
    factors = _interior_blocks.Factors.__init__

    def record(self, *args, **kwargs):
        factors(self, *args, **kwargs)
        widened.append(self.band)

    monkeypatch.setattr(_interior_blocks.Factors, "__init__", record)
    banded = dp.design(problem, method="interior", gap_tol=1e-3)
    assert banded.certificate.ok and banded.result.converged and min(widened) == 1
    assert banded.result.lower_bound <= optimum + 1e-9 <= banded.certificate.loss + 2e-9
    assert banded.certificate.loss <= optimum * (1 + 1e-3) + 1e-9
    assert abs(banded.result.steps - whole.result.steps) <= 2
