"""Repair by mixing with a data-independent ν: soundness, minimality, linear loss, errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import diffpriv as dp
from diffpriv.certification import (
    RepairError,
    TableError,
    comparison_levels,
    exact_holds,
    holds,
    mix,
    repair,
    repair_holds,
    sanitize_table,
)
from diffpriv.problems._blocks import budgets

RTOL = 1e-6  # repair's default bisection tolerance on t


def make_problem(kind: str, rng, nx=5, ny=6, support=None):
    X = dp.Domain.grid(1, nx)
    Y = dp.Domain.grid(1, ny, cell=nx / ny)
    loss = X.distances(Y)
    prior = rng.dirichlet(np.ones(2 * nx)).reshape(2, nx)
    items = tuple(dp.Item(f"i{i}", rng.dirichlet(np.ones(nx)), profile=i % 2) for i in range(4))
    constraints = {
        "ldp": (dp.LocalDP(1.0),),
        "ldp_approx": (dp.LocalDP(0.5, delta=0.05),),
        "xdp": (dp.ExtendedDP(0.8),),
        "distp": (dp.DistP(((0, 1), (1, 2), (2, 3)), 0.4),
                  dp.DistP(((0, 3),), 0.2, delta=0.02, name="approx")),
    }[kind]
    return dp.Problem(X, Y, loss, prior, items=items, constraints=constraints, profiles=("a", "b"),
                      support=support)


def violating_table(problem, rng, scale=3.0):
    """A geometric-ish table, randomly perturbed, inside the support: violates its budgets."""
    A = np.exp(-scale * problem.loss * rng.uniform(0.3, 1.7, problem.shape))
    A = A * problem.support_mask()
    return A / A.sum(axis=-1, keepdims=True)


def check_repaired(problem, table):
    out = repair(problem, table, rtol=RTOL)
    blocks = problem.blocks()
    assert repair_holds(problem, out.table).all()
    assert holds(comparison_levels(problem, out.table, blocks), budgets(blocks), problem.shape).all()
    assert exact_holds(problem, out.table).all()
    return out


@pytest.mark.parametrize("kind", ["ldp", "ldp_approx", "xdp", "distp"])
def test_repair_makes_random_violating_tables_hold_with_least_t(kind):
    rng = np.random.default_rng(7)
    for _ in range(4):
        problem = make_problem(kind, rng)
        A = violating_table(problem, rng)
        assert not repair_holds(problem, A).all()
        out = check_repaired(problem, A)
        assert 0 < out.t < 1 and out.strategy in ("violation", "uniform")
        assert out.nu.shape == (problem.shape[2],) and out.nu.sum() == pytest.approx(1, abs=1e-12)
        # Minimal up to the bisection tolerance: one tolerance step less fails.
        clean = sanitize_table(problem, A)
        assert not repair_holds(problem, mix(clean, out.t * (1 - RTOL), out.nu)).all()
        np.testing.assert_array_equal(out.table, mix(clean, out.t, out.nu))


def test_loss_of_the_mixture_is_linear_in_t():
    rng = np.random.default_rng(1)
    problem = make_problem("ldp", rng)
    A = sanitize_table(problem, violating_table(problem, rng))
    nu = rng.dirichlet(np.ones(problem.shape[2]))
    u0, u1 = problem.expected_loss(A), problem.expected_loss(mix(A, 1.0, nu))
    for t in np.linspace(0, 1, 11):
        want = (1 - t) * u0 + t * u1
        assert problem.expected_loss(mix(A, t, nu)) == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("kind", ["ldp", "xdp", "distp"])
def test_violation_nu_needs_less_mixing_than_uniform_and_best_has_least_loss(kind):
    """DESIGN §3: ν ∝ violation mass costs far less mixing weight than the uniform ν."""
    rng = np.random.default_rng(3)
    problem = make_problem(kind, rng)
    A = violating_table(problem, rng)
    first = repair(problem, A)
    near = mix(sanitize_table(problem, A), 0.99 * first.t, first.nu)  # just short of feasible
    noisy = near * np.exp(1e-3 * rng.standard_normal(near.shape))
    noisy /= noisy.sum(axis=-1, keepdims=True)
    by = {s: repair(problem, noisy, strategy=s) for s in ("violation", "uniform", "best")}
    assert by["violation"].strategy == "violation" and by["uniform"].strategy == "uniform"
    assert 0 < by["violation"].t < by["uniform"].t / 2
    assert problem.objective_value(by["best"].table) == min(
        problem.objective_value(by[s].table) for s in ("violation", "uniform"))


def test_infinite_ratio_gets_nu_mass():
    rng = np.random.default_rng(0)
    problem = make_problem("ldp", rng)
    A = sanitize_table(problem, violating_table(problem, rng, scale=0.1))
    A[:, 0, 2] = 0.0  # input 0 never reports output 2: an infinite ratio against every row
    A /= A.sum(axis=-1, keepdims=True)
    out = check_repaired(problem, A)
    assert out.nu[2] > 0 and out.t < 0.5


def test_no_violation_means_no_repair():
    rng = np.random.default_rng(0)
    problem = make_problem("ldp", rng)
    A = np.full(problem.shape, 1.0 / problem.shape[2])
    A[0, 0] += np.linspace(-1e-17, 1e-17, problem.shape[2])  # optimizer dust, incl. negatives
    out = repair(problem, A)
    assert out.t == 0.0 and out.nu is None and out.strategy == "none"
    assert np.all(out.table >= 0)


def test_support_mask_is_respected_and_forced_to_full_mixing():
    """Input 0 may not use output 0: LDP then forces every row onto the common support."""
    rng = np.random.default_rng(2)
    support = np.ones((5, 6), dtype=bool)
    support[0, 0] = False
    problem = make_problem("ldp", rng, support=support)
    out = check_repaired(problem, violating_table(problem, rng))
    assert out.t == 1.0 and out.nu[0] == 0.0
    assert np.all(out.table[..., 0] == 0.0)


def test_empty_common_support_is_a_clear_error():
    rng = np.random.default_rng(2)
    support = np.zeros((5, 6), dtype=bool)
    support[np.arange(5), np.arange(5)] = True
    support[0, 5] = True
    problem = make_problem("ldp", rng, support=support)
    with pytest.raises(RepairError, match="no output is allowed in every row"):
        repair(problem, violating_table(problem, rng))


def test_malformed_tables_are_errors():
    rng = np.random.default_rng(0)
    support = np.ones((5, 6), dtype=bool)
    support[1, 3] = False
    problem = make_problem("ldp", rng, support=support)
    good = violating_table(problem, rng)
    with pytest.raises(TableError, match="shape"):
        repair(problem, good[0])
    bad = good.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(TableError, match="non-finite"):
        repair(problem, bad)
    bad = good.copy()
    bad[0, 0, 0] -= 1e-3
    bad[0, 0, 1] += 2e-3
    bad[0, 0, 0] = -1e-3
    with pytest.raises(TableError, match="negative"):
        repair(problem, bad)
    bad = good.copy()
    bad[1, 1, 3] = 1e-9
    with pytest.raises(TableError, match="outside the support"):
        repair(problem, bad)
    with pytest.raises(TableError, match="row sums to 0.9"):
        repair(problem, 0.9 * good)


@st.composite
def tiny_cases(draw):
    kind = draw(st.sampled_from(["ldp", "ldp_approx", "xdp", "distp"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    problem = make_problem(kind, rng, nx=draw(st.integers(2, 4)), ny=draw(st.integers(2, 5)))
    return problem, violating_table(problem, rng, scale=draw(st.floats(0.1, 6.0)))


@settings(max_examples=25, deadline=None)
@given(tiny_cases())
def test_repaired_tables_hold_exactly(case):
    check_repaired(*case)


@pytest.mark.parametrize("kind", ["ldp", "xdp", "distp"])
def test_the_closed_form_floor_settles_the_least_t_in_one_check(kind, monkeypatch):
    """``_Mixer.pure_floor`` (the least ``t`` of the pure comparisons, in closed form) gives the
    bisection's answer to its tolerance; with pure budgets only it takes two checks (``t = 0`` and
    just above the floor) instead of ~20. With a δ budget beside them (``distp``) the answer is
    still the bisection's."""
    from diffpriv.certification import _repair

    rng = np.random.default_rng(11)
    calls = []
    all_ok = _repair._Mixer.all_ok
    monkeypatch.setattr(_repair._Mixer, "all_ok", lambda self, t, nu: calls.append(t) or all_ok(self, t, nu))
    for _ in range(3):
        problem = make_problem(kind, rng)
        A = sanitize_table(problem, violating_table(problem, rng))
        blocks = problem.blocks()
        mixer = _repair._Mixer(budgets(blocks), problem.shape, comparison_levels(problem, A, blocks).laws)
        nu = rng.dirichlet(np.ones(problem.shape[2]))
        calls.clear()
        fast, checks = mixer.least_t(nu, RTOL), len(calls)
        with monkeypatch.context() as m:
            m.setattr(_repair._Mixer, "pure_floor", lambda self, nu: 0.0)
            slow = mixer.least_t(nu, RTOL)
        assert 0 < fast < 1 and fast == pytest.approx(slow, rel=2 * RTOL)
        assert mixer.all_ok(fast, nu) and not mixer.all_ok(fast * (1 - RTOL), nu)
        if kind != "distp":
            assert checks == 2
