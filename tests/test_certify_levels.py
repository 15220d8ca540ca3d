"""Levels of the certifier against brute force and exact rational arithmetic.

Tolerances: float64 levels are compared with exact values to 1e-12 (relative to max(1, level));
hockey-stick values with brute-force subset enumeration to 1e-12 absolute.
"""

import ast
import decimal
import itertools
import math
import pathlib
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import diffpriv as dp
from diffpriv.certify import (
    comparison_levels,
    constraint_levels,
    delta_level,
    exact_holds,
    exp_lower,
    hockey_stick,
    holds,
    identical_rows,
    output_laws,
    pure_level,
    tight_epsilon,
    underflow_risk,
)

SETTINGS = settings(max_examples=60, deadline=None)

counts = st.lists(st.integers(0, 12), min_size=1, max_size=6).filter(lambda c: sum(c) > 0)


@st.composite
def law_pairs(draw):
    """Two distributions on the same ``n ≤ 6`` outputs, with zeros, as float64 vectors."""
    n = draw(st.integers(1, 6))
    pair = []
    for _ in range(2):
        c = draw(st.lists(st.integers(0, 12), min_size=n, max_size=n).filter(lambda c: sum(c) > 0))
        pair.append(np.asarray(c, dtype=np.float64) / sum(c))
    return pair


def brute_force_delta(P, Q, eps):
    """max over all output sets R ⊆ Y of P(R) − e^ε Q(R) (the seeds' D∞^δ), both directions."""
    best = 0.0
    for r in range(len(P) + 1):
        for R in itertools.combinations(range(len(P)), r):
            R = list(R)
            best = max(best, P[R].sum() - math.exp(eps) * Q[R].sum(),
                       Q[R].sum() - math.exp(eps) * P[R].sum())
    return best


@SETTINGS
@given(law_pairs(), st.floats(0.0, 3.0))
def test_delta_level_matches_subset_enumeration(pq, eps):
    P, Q = pq
    assert delta_level(P, Q, eps) == pytest.approx(brute_force_delta(P, Q, eps), abs=1e-12)
    one_way = max(
        P[list(R)].sum() - math.exp(eps) * Q[list(R)].sum()
        for r in range(len(P) + 1) for R in itertools.combinations(range(len(P)), r)
    )
    assert hockey_stick(P, Q, eps) == pytest.approx(max(one_way, 0.0), abs=1e-12)


@SETTINGS
@given(law_pairs(), st.floats(0.0, 0.5))
def test_tight_epsilon_is_least_epsilon_meeting_delta(pq, delta):
    P, Q = pq
    eps = tight_epsilon(P[None], Q[None], delta)[0]
    if np.isinf(eps):  # mass on outputs the other law never emits exceeds δ
        assert max(P[Q == 0].sum(), Q[P == 0].sum()) > delta
        return
    assert delta_level(P, Q, eps) <= delta + 1e-12
    if eps > 1e-6:
        assert brute_force_delta(P, Q, eps - 1e-6) > delta


def test_tight_epsilon_at_zero_delta_is_pure_level_and_exact_at_breakpoints():
    P, Q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])
    assert tight_epsilon(P[None], Q[None], 0.0)[0] == pytest.approx(math.log(2.5), abs=1e-14)
    # δ exactly at the breakpoint r = 1 (ε = 0): δ(0) = TV = 0.3.
    assert tight_epsilon(P[None], Q[None], 0.3)[0] == 0.0
    # Between breakpoints δ(ε) = 0.5 − 0.2 e^ε, so δ = 0.1 gives e^ε = 2.
    assert tight_epsilon(P[None], Q[None], 0.1)[0] == pytest.approx(math.log(2.0), abs=1e-14)


def test_pure_level_conventions_and_huge_epsilon():
    P = np.array([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    Q = np.array([[0.25, 0.75, 0.0], [0.5, 0.0, 0.5], [1.0, 0.0, 0.0]])
    np.testing.assert_allclose(pure_level(P, Q), [math.log(2.0), math.inf, 0.0], rtol=1e-15)
    # e^800 overflows: no warning (warnings are errors here), infinite ratios stay counted.
    np.testing.assert_allclose(delta_level(P, Q, 800.0), [0.0, 0.5, 0.0], atol=0)


def exact_ln(x: Fraction) -> decimal.Decimal:
    ctx = decimal.Context(prec=50)
    return ctx.ln(ctx.divide(decimal.Decimal(x.numerator), decimal.Decimal(x.denominator)))


def exact_law(table, s, w):
    """The exact law of weights ``w / Σw`` on the exactly normalised rows of profile ``s``."""
    used = [(x, Fraction(float(w[x]))) for x in np.flatnonzero(w > 0)]
    total = sum(wx for _, wx in used)
    out = [Fraction(0)] * table.shape[-1]
    for x, wx in used:
        row = [Fraction(float(v)) for v in table[s, x]]
        out = [o + wx / total * v / sum(row) for o, v in zip(out, row, strict=True)]
    return out


def exact_pure_level(problem, table, k, comps):
    """Independent exact pure level of comparison k: Fractions + 50-digit Decimal logs."""
    best = decimal.Decimal(0)
    P = exact_law(table, comps.sa[k], comps.wa[k])
    Q = exact_law(table, comps.sb[k], comps.wb[k])
    for p, q in zip(P, Q, strict=True):
        if (p == 0) != (q == 0):
            return math.inf
        if p > 0:
            best = max(best, abs(exact_ln(p) - exact_ln(q)))
    return float(best)


def domain(prefix, n):
    return dp.Domain(tuple(f"{prefix}{i}" for i in range(n)))


@st.composite
def distp_problems(draw):
    """A pure DistP problem on ≤ 5 inputs, ≤ 6 outputs, two profiles; a rational table."""
    nx, ny = draw(st.integers(2, 5)), draw(st.integers(2, 6))
    size = 2 * nx * ny
    table = np.asarray(draw(st.lists(st.integers(0, 9), min_size=size, max_size=size)),
                       dtype=np.float64).reshape(2, nx, ny)
    table[:, np.arange(nx), np.arange(nx) % ny] += 1.0  # no empty row
    table /= table.sum(axis=-1, keepdims=True)
    items = []
    for i in range(3):
        c = draw(st.lists(st.integers(0, 5), min_size=nx, max_size=nx).filter(lambda c: sum(c) > 0))
        items.append(dp.Item(f"item{i}", np.asarray(c, dtype=np.float64) / sum(c), profile=i % 2))
    X, Y = domain("x", nx), domain("y", ny)
    problem = dp.Problem(X, Y, np.ones((nx, ny)), np.ones((2, nx)) / (2 * nx), items=tuple(items),
                         profiles=("p", "q"),
                         constraints=(dp.DistP(((0, 1), (1, 2), (0, 2)), 1.0),))
    return problem, table


@SETTINGS
@given(distp_problems())
def test_pure_distp_levels_match_exact_rational_levels(case):
    problem, table = case
    comps = problem.comparisons()
    lv = comparison_levels(problem, table, comps)
    exact = [exact_pure_level(problem, table, k, comps) for k in range(comps.size)]
    for got, want in zip(lv.pure, exact, strict=True):
        if math.isinf(want):
            assert got == math.inf
        else:
            assert abs(got - want) <= 1e-12 * max(1.0, want)
    summary = constraint_levels(problem, table)[0]
    assert summary.level == pytest.approx(max(exact), rel=1e-12, abs=1e-12)
    assert summary.witness["P"] == pytest.approx(list(lv.P[summary.worst]), rel=0, abs=0)


@SETTINGS
@given(distp_problems(), st.sampled_from([1e-13, 1e-10, 1e-8]))
def test_float_never_accepts_a_truly_violated_budget(case, rel):
    """Set ε just below the exact level: the float64 rule and the exact check must both refuse."""
    problem, table = case
    comps = problem.comparisons()
    level = max(exact_pure_level(problem, table, k, comps) for k in range(comps.size))
    if not 0 < level < math.inf:
        return
    c = problem.constraints[0]
    tight = dp.Problem(problem.inputs, problem.outputs, problem.loss, problem.prior,
                       items=problem.items, profiles=problem.profiles,
                       constraints=(dp.DistP(c.pairs, level * (1 - rel)),))
    comps = tight.comparisons()
    assert not holds(comparison_levels(tight, table, comps), comps, tight.shape).all()
    assert not exact_holds(tight, table).all()


@SETTINGS
@given(distp_problems(), st.integers(-3, 3))
def test_laws_lift_the_normalised_item_even_when_it_is_stored_unnormalised(case, j):
    """Regression: the spec keeps an item summing to within 2^-40 of 1 as stored; the laws
    must still be those of the item divided by its exact sum, to the relative error
    e_P = (2 n_in + 2 + 17 n_out)·u of the _safety error budget (not 2^-40)."""
    problem, table = case
    items = tuple(dp.Item(it.name, it.dist * (1 + j * 2.0**-42), it.profile)
                  for it in problem.items)
    scaled = dp.Problem(problem.inputs, problem.outputs, problem.loss, problem.prior, items=items,
                        profiles=problem.profiles, constraints=problem.constraints)
    comps = scaled.comparisons()
    P, Q = output_laws(table, comps)
    _, nx, ny = table.shape
    e_p = Fraction(2 * nx + 2 + 17 * ny, 2**53)
    for k in range(comps.size):
        for got, s, w in ((P[k], comps.sa[k], comps.wa[k]), (Q[k], comps.sb[k], comps.wb[k])):
            want = exact_law(table, s, w)
            assert all(abs(Fraction(float(g)) - v) <= e_p * v for g, v in zip(got, want, strict=True))


def test_same_weights_on_the_same_profile_hold_at_zero_budget_for_every_table():
    """Regression: a DistP pair of two equal items of one profile compares a law with itself;
    at ε = 0 no margin can certify it, so it must be accepted as exactly level 0."""
    rng = np.random.default_rng(1)
    X = domain("x", 3)
    lam = np.array([0.2, 0.3, 0.5])
    items = (dp.Item("i", lam), dp.Item("j", lam.copy()), dp.Item("k", lam.copy(), profile=1))
    problem = dp.Problem(X, X, np.ones((3, 3)), np.ones((2, 3)) / 6, items=items,
                         profiles=("p", "q"),
                         constraints=(dp.DistP(((0, 1), (0, 2)), 0.0), dp.DistP(((1, 0),), 0.0, 0.1)))
    table = rng.dirichlet(np.ones(3), size=(2, 3))
    comps = problem.comparisons()
    assert identical_rows(table, comps).tolist() == [True, False, True]
    lv = comparison_levels(problem, table, comps)
    assert lv.pure[[0, 2]].tolist() == [0.0, 0.0] and lv.delta[[0, 2]].tolist() == [0.0, 0.0]
    assert holds(lv, comps, problem.shape).tolist() == [True, False, True]
    assert exact_holds(problem, table).tolist() == [True, False, True]
    table[1] = table[0]  # now the other-profile pair holds too, for both modes
    assert holds(comparison_levels(problem, table, comps), comps, problem.shape).all()
    assert exact_holds(problem, table).all()


def test_exact_mode_proves_equal_laws_at_a_tiny_budget():
    """exp_lower never drops below 1, so equal rows hold at ε = 1e-70 in exact mode too."""
    assert exp_lower(Fraction(1, 10**70)) >= 1
    problem = _ldp_problem(3, 4, eps=1e-70)
    table = np.broadcast_to(np.array([0.1, 0.2, 0.3, 0.4]), (1, 3, 4))
    assert exact_holds(problem, table).all()
    assert holds(comparison_levels(problem, table), problem.comparisons(), problem.shape).all()


def test_xdp_exponent_overflowing_float64_is_still_a_finite_budget():
    """ε·d(x, x') = 1e307 · 20 overflows to +∞: every finite level meets it, +∞ does not."""
    X = dp.Domain(("a", "b", "c"), coords=np.array([[0.0], [10.0], [20.0]]))
    problem = dp.Problem(X, X, np.ones((3, 3)), np.ones(3) / 3, constraints=(dp.ExtendedDP(1e307),))
    comps = problem.comparisons()
    assert np.isinf(comps.eps).any()
    full = np.array([[[0.5, 0.3, 0.2], [0.2, 0.5, 0.3], [0.3, 0.2, 0.5]]])
    assert holds(comparison_levels(problem, full, comps), comps, problem.shape).all()
    assert exact_holds(problem, full).all()
    holes = np.array([[[0.5, 0.5, 0.0], [0.2, 0.5, 0.3], [0.3, 0.2, 0.5]]])
    assert not holds(comparison_levels(problem, holes, comps), comps, problem.shape).all()
    assert not exact_holds(problem, holes).all()


def test_exp_lower_is_a_tight_lower_bound():
    for x in (Fraction(0), Fraction(1, 3), Fraction(1), Fraction(7, 2), Fraction(1000)):
        low = exp_lower(x)
        ctx = decimal.Context(prec=80)
        ref = ctx.exp(ctx.divide(decimal.Decimal(x.numerator), decimal.Decimal(x.denominator)))
        assert Fraction(low) <= Fraction(ref)
        assert Fraction(ref) - low <= Fraction(1, 10**55) * Fraction(ref)


def _ldp_problem(nx, ny, eps=1.0):
    return dp.Problem(domain("x", nx), domain("y", ny), np.ones((nx, ny)), np.ones(nx) / nx,
                      constraints=(dp.LocalDP(eps),))


def test_output_laws_gather_point_weights_exactly_and_identical_rows():
    rng = np.random.default_rng(0)
    problem = _ldp_problem(4, 5)
    table = rng.dirichlet(np.ones(5), size=(1, 4))
    table[0, 3] = table[0, 1]
    comps = problem.comparisons()
    P, Q = output_laws(table, comps)
    for k in range(comps.size):
        assert np.array_equal(P[k], table[0, np.argmax(comps.wa[k])])
        assert np.array_equal(Q[k], table[0, np.argmax(comps.wb[k])])
    same = identical_rows(table, comps)
    pairs = [(int(np.argmax(a)), int(np.argmax(b)))
             for a, b in zip(comps.wa, comps.wb, strict=True)]
    assert [pairs[k] for k in np.flatnonzero(same)] == [(1, 3)]


def test_underflow_risk_flags_dense_laws_near_underflow_only():
    X = dp.Domain(("a", "b"))
    lam = np.array([0.25, 0.75])  # two different items: equal ones would be identical
    items = (dp.Item("i", lam), dp.Item("j", lam[::-1]))
    problem = dp.Problem(X, X, np.ones((2, 2)), lam, items=items,
                         constraints=(dp.DistP(((0, 1),), 1.0), dp.LocalDP(1.0)))
    table = np.array([[[1.0, 1e-310], [1.0, 0.0]]])
    comps = problem.comparisons()
    P, Q = output_laws(table, comps)
    risk = underflow_risk(table, comps, P, Q)
    assert risk.tolist() == [True, False]  # the DistP comparison is dense; LDP rows are exact
    assert not holds(comparison_levels(problem, table, comps), comps, problem.shape)[0]


def test_xdp_pair_at_distance_zero_needs_equal_rows():
    X = dp.Domain(("a", "b", "c"), coords=np.array([[0.0], [0.0], [1.0]]))
    problem = dp.Problem(X, X, np.ones((3, 3)), np.ones(3) / 3, constraints=(dp.ExtendedDP(2.0),))
    row = np.array([0.5, 0.3, 0.2])
    table = np.stack([row, row, [0.3, 0.4, 0.3]])[None]
    (c,) = constraint_levels(problem, table)
    assert c.ok and c.level == pytest.approx(math.log(0.5 / 0.3), rel=1e-14)
    table[0, 1] = [0.5, 0.2, 0.3]
    (c,) = constraint_levels(problem, table)
    assert not c.ok and c.level == math.inf
    assert c.witness["pair"]["inputs"] == ["a", "b"] and c.witness["pair"]["distance"] == 0.0


def test_randomized_response_has_exact_ldp_level():
    """k-ary RR: A[x,x] = e^ε/(e^ε+k−1), else 1/(e^ε+k−1); its pure LDP level is ε."""
    for k in (2, 3, 7):
        for eps in (0.1, 1.0, 4.0):
            e = math.exp(eps)
            table = ((np.ones((k, k)) + (e - 1) * np.eye(k)) / (e + k - 1))[None]
            (c,) = constraint_levels(_ldp_problem(k, k, eps), table)
            assert c.level == pytest.approx(eps, abs=1e-12)


def test_certify_imports_only_numpy_stdlib_and_the_problem_spec():
    """The trusted core, followed through every diffpriv module it imports (the problem spec,
    small helpers), needs only numpy and the standard library: no JAX, no optimizer."""
    package = pathlib.Path(dp.__file__).parent
    todo, seen = sorted((package / "certify").glob("*.py")), set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:  # a diffpriv module: follow it
                base = path.parents[node.level - 1].joinpath(*(node.module or "").split("."))
                todo.append(base.with_suffix(".py") if base.with_suffix(".py").exists()
                            else base / "__init__.py")
                continue
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                roots = {node.module.split(".")[0]}
            else:
                continue
            assert roots <= set(sys.stdlib_module_names) | {"numpy"}, (path.name, roots)
    assert package / "_problem.py" in seen and package / "__init__.py" not in seen
