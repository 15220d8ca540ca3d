"""Soundness of the certifier at the edges of float64 (issue 6, items 1-4).

Every test here compares the float64 rule (:func:`holds`) and the exact mode
(:func:`exact_holds`) with what is true of the certified mechanism (rows and items divided by
their exact sums), decided in rational arithmetic: a false accept is never allowed, and float64
never accepts what the exact mode rejects. ``e^x`` is enclosed rigorously (``Decimal.exp`` is
correctly rounded; the enclosure is widened by ``10^-75`` relative), and a comparison the
enclosure cannot decide is not used.
"""

import decimal
import math
import tracemalloc
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import diffpriv as dp
from diffpriv.certification import (
    comparison_levels,
    constraint_levels,
    delta_level,
    exact_holds,
    hockey_stick,
    holds,
    tight_epsilon,
)
from diffpriv.certification._exact import sqrt_lower
from diffpriv.config import ConfigError, config_from_dict
from diffpriv.problems._blocks import PairBlock, budgets

TINIEST = 5e-324  # 2^-1074, the least positive float64

# -- an exact reference ---------------------------------------------------------------------

_CTX = decimal.Context(prec=80, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
_WIDEN = Fraction(1, 10**75)
_EXP_CAP = Fraction(5000)
"""Above this exponent only the lower end of the enclosure is kept (the upper end is ``+∞``):
every ratio of two positive laws built from float64 numbers is far below ``e^5000``."""


def _to_decimal(x: Fraction, rounding) -> decimal.Decimal:
    ctx = _CTX.copy()
    ctx.rounding = rounding
    return ctx.divide(decimal.Decimal(x.numerator), decimal.Decimal(x.denominator))


def exp_enclosure(lo: Fraction, hi: Fraction) -> tuple[Fraction, Fraction | None]:
    """Rationals ``L ≤ e^lo`` and ``U ≥ e^hi`` (``U = None`` for ``+∞``), for ``0 ≤ lo ≤ hi``."""
    low = _CTX.exp(_to_decimal(min(lo, _EXP_CAP), decimal.ROUND_FLOOR))
    L = Fraction(low) * (1 - _WIDEN)
    if hi > _EXP_CAP:
        return L, None
    high = _CTX.exp(_to_decimal(hi, decimal.ROUND_CEILING))
    return L, Fraction(high) * (1 + _WIDEN)


def sqrt_enclosure(D: Fraction) -> tuple[Fraction, Fraction]:
    """Rationals enclosing ``√D`` (``Decimal.sqrt`` is correctly rounded)."""
    if D == 0:
        return Fraction(0), Fraction(0)
    r = Fraction(_CTX.sqrt(_to_decimal(D, decimal.ROUND_HALF_EVEN)))
    return r * (1 - _WIDEN), r * (1 + _WIDEN)


def exact_row(table, s, x) -> list[Fraction]:
    row = [Fraction(float(v)) for v in table[s, x]]
    total = sum(row)
    return [v / total for v in row]


def exact_law(table, s, w) -> list[Fraction]:
    """``Σ_x (w[x] / Σ w) · row(s, x)`` with the rows divided by their exact sums."""
    w = [Fraction(float(v)) for v in w]
    total = sum(w)
    out = [Fraction(0)] * table.shape[-1]
    for x, wx in enumerate(w):
        if wx:
            out = [o + wx / total * v for o, v in zip(out, exact_row(table, s, x), strict=True)]
    return out


def exact_laws(table, block, k):
    if isinstance(block, PairBlock):
        s = int(block.s[k])
        return exact_row(table, s, int(block.a[k])), exact_row(table, s, int(block.b[k]))
    return exact_law(table, int(block.sa[k]), block.wa[k]), exact_law(table, int(block.sb[k]), block.wb[k])


def _one_way(P, Q, c):
    """``Σ_y max(0, P − c·Q)``; ``c = None`` is ``+∞`` (only outputs with ``Q = 0`` count)."""
    if c is None:
        return sum((p for p, q in zip(P, Q, strict=True) if q == 0), Fraction(0))
    return sum((max(Fraction(0), p - c * q) for p, q in zip(P, Q, strict=True)), Fraction(0))


def truth(P, Q, delta: Fraction, x_lo: Fraction, x_hi: Fraction) -> bool | None:
    """Does the exact comparison meet its budget ``(x, δ)`` with ``x ∈ [x_lo, x_hi]``?
    ``None`` when the enclosure cannot tell."""
    if P == Q:  # every level is exactly 0
        return True
    L, U = exp_enclosure(x_lo, x_hi)
    if delta == 0:
        if any((p == 0) != (q == 0) for p, q in zip(P, Q, strict=True)):
            return False
        ratio = max((max(p / q, q / p) for p, q in zip(P, Q, strict=True) if p > 0), default=1)
        if ratio <= L:
            return True
        return False if U is not None and ratio > U else None
    if max(_one_way(P, Q, L), _one_way(Q, P, L)) <= delta:
        return True
    return False if max(_one_way(P, Q, U), _one_way(Q, P, U)) > delta else None


def exponent_enclosure(problem, block, k) -> tuple[Fraction, Fraction]:
    """The exact budget exponent of comparison ``k``: ``ε``, or ``ε·‖c_a − c_b‖`` for extended DP
    (from the coordinates, not from the float distance)."""
    eps = Fraction(float(problem.constraints[block.constraint].epsilon))
    if not (isinstance(block, PairBlock) and block.scaled):
        return eps, eps
    ca, cb = problem.inputs.coords[block.a[k]], problem.inputs.coords[block.b[k]]
    D = sum((Fraction(float(u)) - Fraction(float(v))) ** 2 for u, v in zip(ca, cb, strict=True))
    lo, hi = sqrt_enclosure(D)
    return eps * lo, eps * hi


def check_against_truth(problem, table) -> list[bool | None]:
    """Asserts no false accept in either mode and float ⇒ exact; returns the truths."""
    blocks = problem.blocks()
    float_ok = holds(comparison_levels(problem, table, blocks), budgets(blocks), problem.shape)
    exact_ok = exact_holds(problem, table)
    constraint_levels(problem, table)  # the summary must not warn either
    truths = []
    k = 0
    for block in blocks:
        for j in range(block.size):
            P, Q = exact_laws(table, block, j)
            t = truth(P, Q, Fraction(block.delta), *exponent_enclosure(problem, block, j))
            assert not (float_ok[k] and t is False), f"float64 accepts a false claim (comparison {k})"
            assert not (exact_ok[k] and t is False), f"exact mode accepts a false claim ({k})"
            assert exact_ok[k] or not float_ok[k], f"float64 accepts what exact rejects ({k})"
            truths.append(t)
            k += 1
    return truths


def ldp(eps, delta=0.0, n_in=2, n_out=2):
    X, Y = dp.Domain(tuple(f"x{i}" for i in range(n_in))), dp.Domain(tuple(f"y{i}" for i in range(n_out)))
    return dp.Problem(X, Y, np.ones((n_in, n_out)), np.ones(n_in) / n_in,
                      constraints=(dp.LocalDP(eps, delta),))


def xdp(coords, eps):
    coords = np.asarray(coords, dtype=np.float64)
    n = coords.shape[0]
    X = dp.Domain(tuple(f"x{i}" for i in range(n)), coords=coords)
    Y = dp.Domain(("u", "v"))
    return dp.Problem(X, Y, np.ones((n, 2)), np.ones(n) / n, constraints=(dp.ExtendedDP(eps),))


# -- 1. (ε, δ) levels when e^ε overflows ------------------------------------------------------


def test_hockey_stick_beyond_exp_overflow_is_rejected_in_both_modes():
    """ε = 710 overflows ``e^ε``; ``e^710 · 5e-324 ≈ 1.1e-15``, so the true divergence ≈ 0.9."""
    problem = ldp(710.0, 0.5)
    table = np.array([[[0.9, 0.1], [TINIEST, 1.0]]])
    P, Q = table[0, :1], table[0, 1:]
    assert hockey_stick(P, Q, 710.0)[0] == pytest.approx(0.9, abs=1e-14)
    (c,) = constraint_levels(problem, table)
    assert not c.ok and c.level == pytest.approx(0.9, abs=1e-14)
    assert not exact_holds(problem, table).any()
    assert check_against_truth(problem, table) == [False]


@pytest.mark.parametrize("eps", [700.0, 709.78, 710.0, 720.0, 744.0, 745.0, 1000.0, 1419.0, 1e6])
def test_hockey_stick_of_subnormal_q_matches_the_exact_value(eps):
    """``Σ max(0, P − e^ε Q)`` for ``Q`` down to ``2^-1074``, against the exact sum (rel 1e-13)."""
    P = np.array([0.5, 0.25, 0.25, 0.0])
    Q = np.array([TINIEST, 1e-310, 1e-300, 1.0 - 1e-300])
    L, U = exp_enclosure(Fraction(eps), Fraction(eps))
    FP, FQ = [Fraction(p) for p in P], [Fraction(q) for q in Q]
    want, back = float(_one_way(FP, FQ, L)), float(_one_way(FQ, FP, L))
    assert float(_one_way(FP, FQ, U)) == pytest.approx(want, rel=1e-15)
    assert hockey_stick(P, Q, eps) == pytest.approx(want, rel=1e-13, abs=1e-300)
    assert hockey_stick(Q, P, eps) == pytest.approx(back, rel=1e-13, abs=1e-300)
    assert delta_level(P, Q, eps) == pytest.approx(max(want, back), rel=1e-13, abs=1e-300)


def test_tight_epsilon_beyond_exp_overflow_is_the_least_epsilon():
    """``P = [0.9, 0.1]``, ``Q = [2^-1074, 1]``, ``δ = 0.5``: ``0.9 − c·2^-1074 = 0.5`` at
    ``c = 0.4·2^1074``, so ``ε = ln 0.4 + 1074 ln 2 ≈ 743.52`` (no overflow warning on the way)."""
    P, Q = np.array([[0.9, 0.1]]), np.array([[TINIEST, 1.0]])
    want = math.log(0.4) + 1074 * math.log(2.0)
    got = tight_epsilon(P, Q, 0.5)[0]
    assert got == pytest.approx(want, rel=1e-14)
    assert delta_level(P, Q, got * (1 + 1e-12))[0] <= 0.5 < delta_level(P, Q, got * (1 - 1e-12))[0]


def test_approximate_distp_with_a_dense_law_in_the_underflow_range_at_huge_epsilon():
    """The lifted law ``0.75·2^-1074`` rounds up to ``2^-1074``; at ``ε = 743.9`` the error is
    multiplied by ``e^ε ≈ 0.58·2^1074``: the float hockey-stick reads 0, the truth is 0.066."""
    X, Y = dp.Domain(("a", "b", "c")), dp.Domain(("u", "v"))
    items = (dp.Item("A", np.array([0.75, 0.25, 0.0])), dp.Item("B", np.array([0.0, 0.0, 1.0])))
    problem = dp.Problem(X, Y, np.ones((3, 2)), np.ones(3) / 3, items=items,
                         constraints=(dp.DistP(((0, 1),), 743.9, 0.03),))
    table = np.array([[[1.0, TINIEST], [1.0, 0.0], [0.5, 0.5]]])
    (c,) = constraint_levels(problem, table)
    assert not c.ok
    assert check_against_truth(problem, table) == [False]
    # At a moderate ε the same underflow is harmless: still certified.
    ok = dp.Problem(X, Y, np.ones((3, 2)), np.ones(3) / 3, items=items,
                    constraints=(dp.DistP(((0, 1),), 2.0, 0.6),))
    assert constraint_levels(ok, table)[0].ok


# -- 2. extended DP with a distance that overflows ---------------------------------------------


def test_xdp_distance_whose_square_overflows_is_computed_not_infinite():
    """[0], [1], [2e155]: d² overflows but d does not. At ε = 1e-156 the budget of the far pairs
    is 0.2; a level of 22.3 there was certified (d = +∞ gave an infinite budget)."""
    problem = xdp([[0.0], [1.0], [2e155]], 1e-156)
    (block,) = problem.blocks()
    np.testing.assert_array_equal(block.scale, [1.0, 2e155, 2e155])
    np.testing.assert_allclose(block.eps, [1e-156, 0.2, 0.2], rtol=1e-15)
    assert problem.inputs.distances(problem.inputs)[0, 2] == 2e155
    e = math.exp(22.3)
    near, far = [e / (1 + e), 1 / (1 + e)], [1 / (1 + e), e / (1 + e)]
    table = np.array([[near, near, far]])
    (c,) = constraint_levels(problem, table)
    assert not c.ok and c.n_failed == 2
    assert check_against_truth(problem, table) == [True, False, False]
    e = math.exp(0.19)
    table = np.array([[[e / (1 + e), 1 / (1 + e)]] * 2 + [[1 / (1 + e), e / (1 + e)]]])
    assert constraint_levels(problem, table)[0].ok and exact_holds(problem, table).all()


@pytest.mark.parametrize("eps", [0.2, 0.0])
def test_xdp_distance_beyond_float64_is_a_spec_error(eps):
    """1.5e308 − (−1.5e308) is not a float64: a one-line error naming the constraint and pair
    (ε = 0 used to give the budget ∞ · 0 = NaN)."""
    with pytest.raises(dp.problems.SpecError, match=r"^constraints\[0\]: .*'x0' and 'x2'.*float64") as e:
        xdp([[-1.5e308], [0.0], [1.5e308]], eps)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(("coords", "metric"), [
    ([[0.0], [10.0], [20.0]], None),
    (None, [[0.0, 10.0, 20.0], [10.0, 0.0, 10.0], [20.0, 10.0, 0.0]]),
])
def test_xdp_budget_overflow_is_a_spec_error_naming_epsilon(coords, metric):
    """ε·d = 1e307 · 20 overflows float64: rejected, naming the field and the pair."""
    X = dp.Domain(("a", "b", "c"), coords=None if coords is None else np.array(coords))
    with pytest.raises(dp.problems.SpecError, match=r"^constraints\[0\]\.epsilon: .*'a', 'c'"):
        dp.Problem(X, X, np.ones((3, 3)), np.ones(3) / 3, constraints=(dp.ExtendedDP(1e307),),
                   input_metric=None if metric is None else np.array(metric))
    ok = dp.Problem(X, X, np.ones((3, 3)), np.ones(3) / 3, constraints=(dp.ExtendedDP(1e306),),
                    input_metric=None if metric is None else np.array(metric))
    assert np.isfinite(ok.blocks()[0].eps).all()


def test_xdp_distance_overflow_from_a_config_is_one_line():
    d = {"inputs": {"labels": ["a", "b", "c"], "coords": [[-1.5e308], [1.0], [1.5e308]]},
         "loss": {"kind": "hamming"}, "constraints": [{"kind": "xdp", "epsilon": 0.2}]}
    # The config may refuse the coordinates first (their span); either way: one line, a field.
    with pytest.raises(ConfigError, match=r"^(constraints\[0\]|inputs\.coords): ") as e:
        config_from_dict(d)
    assert "\n" not in str(e.value)


def test_domain_distances_build_no_n_by_n_by_d_array():
    """1500 points in 4-D: one ``[n, n]`` float64 array is 18 MB; the old builder held ``2d + 1``."""
    rng = np.random.default_rng(0)
    X = dp.Domain(tuple(str(i) for i in range(1500)), coords=rng.normal(size=(1500, 4)))
    one = 1500 * 1500 * 8
    tracemalloc.start()
    try:
        d = X.distances(X)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2.2 * one
    c = X.coords
    for i, j in ((0, 1), (5, 1499), (700, 700)):
        assert d[i, j] == pytest.approx(math.dist(c[i], c[j]), rel=12 * 2.0**-53, abs=0)  # 3·dim·u


def test_domain_distances_do_not_overflow_or_underflow():
    coords = np.array([[0.0, 0.0], [3e200, 4e200], [3e-170, 4e-170], [1.5e308, 0.0], [-1.5e308, 0.0]])
    X = dp.Domain(tuple("abcde"), coords=coords)
    d = X.distances(X)
    assert d[0, 1] == pytest.approx(5e200, rel=1e-15)
    assert d[0, 2] == pytest.approx(5e-170, rel=1e-15)
    assert d[3, 4] == math.inf and d[0, 3] == 1.5e308  # beyond float64: +inf, no warning
    np.testing.assert_array_equal(d, d.T)
    np.testing.assert_array_equal(np.diag(d), 0.0)


def test_xdp_level_per_unit_distance_beyond_float64_is_reported_infinite():
    """Level 2.197 over a distance of 5e-324: the effective ε exceeds float64 (no warning)."""
    problem = xdp([[0.0], [TINIEST]], 1e300)
    table = np.array([[[0.9, 0.1], [0.1, 0.9]]])
    (c,) = constraint_levels(problem, table)
    assert c.level == math.inf and not c.ok
    assert check_against_truth(problem, table) == [False]


# -- 3. a distance whose square is subnormal ----------------------------------------------------


def _two_point_table(level: float) -> np.ndarray:
    e = math.exp(level)  # the two rows' ratio is e on one output and 1/e on the other
    return np.array([[[e / (1 + e), 1 / (1 + e)], [1 / (1 + e), e / (1 + e)]]])


def test_subnormal_squared_distance_gives_the_true_budget_in_both_modes():
    """1.575e-162 apart (d² is subnormal), ε = 1e162: the true budget is 1.575; level 2.0 fails."""
    problem = xdp([[0.0], [1.575e-162]], 1e162)
    (block,) = problem.blocks()
    assert block.scale[0] == 1.575e-162
    assert problem.inputs.distances(problem.inputs)[0, 1] == 1.575e-162
    table = _two_point_table(2.0)
    (c,) = constraint_levels(problem, table)
    assert not c.ok
    assert not exact_holds(problem, table).any()
    assert check_against_truth(problem, table) == [False]
    assert constraint_levels(problem, _two_point_table(1.5))[0].ok  # below the true budget


def test_exact_mode_does_not_take_the_rounded_float_distance_as_exact():
    """Find 2-D points whose float distance rounds *up*; put the level strictly between the true
    budget ``ε·d`` and ``ε·fl(d)``: the exact mode must reject (float64 rejects by its margin)."""
    ctx = decimal.Context(prec=60)
    for i in range(1, 500):
        u, v = 0.37 * i, 20.0
        problem = xdp([[0.0, 0.0], [u, v]], 1.0)
        d_float = Fraction(float(problem.blocks()[0].scale[0]))
        D = Fraction(u) ** 2 + Fraction(v) ** 2
        if d_float**2 > D:
            break
    else:
        pytest.fail("no rounding-up distance found")
    d_true = ctx.sqrt(_to_decimal(D, decimal.ROUND_HALF_EVEN))
    d_up = _to_decimal(d_float, decimal.ROUND_HALF_EVEN)
    assert d_true < d_up
    # Q = [b, 1 − b] against P = [0.5, 0.5]: level ln(0.5·S / b), S the exact row sum of Q.
    b0 = float(ctx.exp(-(d_true + d_up) / 2) / 2)
    for step in range(-40, 41):
        b = b0 + step * math.ulp(b0)
        table = np.array([[[0.5, 0.5], [b, 1.0 - b]]])
        S = Fraction(b) + Fraction(1.0 - b)
        level = ctx.ln(_to_decimal(Fraction(1, 2) * S / Fraction(b), decimal.ROUND_HALF_EVEN))
        if d_true < level < d_up - decimal.Decimal("1e-45"):
            break
    else:
        pytest.fail("no table with its level between the two budgets")
    assert not exact_holds(problem, table).any()
    assert not constraint_levels(problem, table)[0].ok
    assert check_against_truth(problem, table) == [False]


def test_sqrt_lower_is_a_tight_lower_bound_and_exact_on_squares_of_floats():
    for x in (Fraction(2), Fraction(1, 3), Fraction(10**400 + 1), Fraction(1, 2**2148) * 5):
        r = sqrt_lower(x)
        assert r * r <= x and (x - r * r) <= x * Fraction(1, 2**250)
    for v in (1.575e-162, TINIEST, 2e155, 0.1):
        assert sqrt_lower(Fraction(v) ** 2) == Fraction(v)


# -- 4. a sweep of extreme values ------------------------------------------------------------

EPS = (st.sampled_from([0.0, 1e-300, 0.5, 700.0, 709.78, 709.79, 710.0, 720.0, 740.0, 744.4, 745.0,
                        1e6])
       | st.floats(700.0, 750.0) | st.floats(0.0, 5.0))  # e^ε overflows from 709.79 on
DELTA = st.sampled_from([0.0, TINIEST, 1e-300, 1e-12, 0.5, 1.0 - 2.0**-53]) | st.floats(0.0, 0.99)
ENTRY = st.sampled_from([0.0, TINIEST, 3 * TINIEST, 1e-320, 1e-310, 2.2250738585072014e-308,
                         1e-300, 1e-162, 1e-20, 0.1, 0.3, 0.5, 1.0])
SWEEP = settings(max_examples=150, deadline=None)


@st.composite
def tables(draw, n_in: int, n_out: int):
    rows = []
    for _ in range(n_in):
        row = np.array(draw(st.lists(ENTRY, min_size=n_out, max_size=n_out)))
        assume(row.sum() > 0)
        rows.append(row / row.sum())
    return np.stack(rows)[None]


@SWEEP
@given(st.integers(1, 3).flatmap(lambda n: tables(3, n)), EPS, DELTA)
def test_sweep_ldp(table, eps, delta):
    check_against_truth(ldp(eps, delta, n_in=3, n_out=table.shape[-1]), table)


WEIGHT = st.sampled_from([0.0, 1e-300, TINIEST, 0.25, 0.5, 0.6, 0.75, 0.9, 1.0])


@SWEEP
@given(st.integers(1, 3).flatmap(lambda n: tables(3, n)), EPS | st.floats(743.0, 745.0), DELTA,
       st.lists(st.lists(WEIGHT, min_size=3, max_size=3), min_size=2, max_size=2))
def test_sweep_distp(table, eps, delta, weights):
    w = [np.array(v) for v in weights]
    assume(all(v.sum() > 0 for v in w))
    items = tuple(dp.Item(f"i{j}", v / v.sum()) for j, v in enumerate(w))
    X, Y = dp.Domain(("a", "b", "c")), dp.Domain(tuple(f"y{i}" for i in range(table.shape[-1])))
    problem = dp.Problem(X, Y, np.ones((3, table.shape[-1])), np.ones(3) / 3, items=items,
                         constraints=(dp.DistP(((0, 1),), eps, delta),))
    check_against_truth(problem, table)


@SWEEP
@given(st.floats(0.01, 0.99), st.sampled_from([1, 2, 3, 7]), st.floats(0.01, 0.99),
       st.floats(735.0, 746.0), st.floats(0.0, 0.99))
def test_sweep_distp_dense_laws_in_the_underflow_range(w, k, p, eps, delta):
    """A dense item lifted onto a row with ``k·2^-1074``: the lifted entry rounds among the
    subnormals, and ``e^ε`` (near ``2^1074``) magnifies the rounding."""
    X, Y = dp.Domain(("a", "b", "c")), dp.Domain(("u", "v"))
    items = (dp.Item("A", np.array([w, 1.0 - w, 0.0])), dp.Item("B", np.array([0.0, 0.0, 1.0])))
    problem = dp.Problem(X, Y, np.ones((3, 2)), np.ones(3) / 3, items=items,
                         constraints=(dp.DistP(((0, 1),), eps, delta),))
    table = np.array([[[1.0, k * TINIEST], [1.0, 0.0], [1.0 - p, p]]])
    check_against_truth(problem, table)


COORD = st.sampled_from([0.0, TINIEST, 1.575e-162, 1e-160, 1e-100, 0.5, 1.0, 3.0, 1e150, 1e154,
                         -1e154, 1e300])


@SWEEP
@given(tables(3, 2), EPS | st.sampled_from([1e162, 1e300]),
       st.lists(st.lists(COORD, min_size=2, max_size=2), min_size=3, max_size=3))
def test_sweep_xdp(table, eps, coords):
    try:
        problem = xdp(coords, eps)
    except dp.problems.SpecError:  # only where a budget ε·d or a distance is beyond float64
        c = [[Fraction(v) for v in row] for row in coords]
        D = max(sum((u - v) ** 2 for u, v in zip(a, b, strict=True)) for a in c for b in c)
        assert max(Fraction(eps), Fraction(1)) ** 2 * D > Fraction(1e308) ** 2
        return
    check_against_truth(problem, table)
