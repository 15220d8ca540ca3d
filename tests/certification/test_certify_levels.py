"""Levels of the certifier against brute force and exact rational arithmetic.

Tolerances: float64 levels are compared with exact values to 1e-12 (relative to max(1, level));
hockey-stick values with brute-force subset enumeration to 1e-12 absolute.
"""

import ast
import decimal
import itertools
import math
import pathlib
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import diffpriv as dp
from diffpriv.certification import (
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
from diffpriv.problems._blocks import budgets

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


def sides(blocks, n_in):
    """Every comparison as ``((s, w), (s', w'))``: its two sides as a profile and weights
    (a one-hot weight for a row of a pair block), in the flat order of ``blocks``."""
    out = []
    for block in blocks:
        if block.kind == "pair":
            eye = np.eye(n_in)
            out += [((block.s[k], eye[block.a[k]]), (block.s[k], eye[block.b[k]]))
                    for k in range(block.size)]
        else:
            out += [((block.sa[k], block.wa[k]), (block.sb[k], block.wb[k]))
                    for k in range(block.size)]
    return out


def exact_pure_level(table, side_a, side_b):
    """Independent exact pure level of one comparison: Fractions + 50-digit Decimal logs."""
    best = decimal.Decimal(0)
    P = exact_law(table, *side_a)
    Q = exact_law(table, *side_b)
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
    blocks = problem.blocks()
    lv = comparison_levels(problem, table, blocks)
    exact = [exact_pure_level(table, a, b) for a, b in sides(blocks, table.shape[1])]
    assert len(exact) == lv.pure.size == budgets(blocks).size
    for got, want in zip(lv.pure, exact, strict=True):
        if math.isinf(want):
            assert got == math.inf
        else:
            assert abs(got - want) <= 1e-12 * max(1.0, want)
    summary = constraint_levels(problem, table)[0]
    assert summary.level == pytest.approx(max(exact), rel=1e-12, abs=1e-12)
    assert summary.witness["P"] == pytest.approx(list(lv.laws.at(summary.worst)[0]), rel=0, abs=0)


@SETTINGS
@given(distp_problems(), st.sampled_from([1e-13, 1e-10, 1e-8]))
def test_float_never_accepts_a_truly_violated_budget(case, rel):
    """Set ε just below the exact level: the float64 rule and the exact check must both refuse."""
    problem, table = case
    level = max(exact_pure_level(table, a, b) for a, b in sides(problem.blocks(), table.shape[1]))
    if not 0 < level < math.inf:
        return
    c = problem.constraints[0]
    tight = dp.Problem(problem.inputs, problem.outputs, problem.loss, problem.prior,
                       items=problem.items, profiles=problem.profiles,
                       constraints=(dp.DistP(c.pairs, level * (1 - rel)),))
    blocks = tight.blocks()
    assert not holds(comparison_levels(tight, table, blocks), budgets(blocks), tight.shape).all()
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
    blocks = scaled.blocks()
    P, Q = output_laws(table, blocks)
    _, nx, ny = table.shape
    e_p = Fraction(2 * nx + 2 + 17 * ny, 2**53)
    pairs = sides(blocks, nx)
    assert len(pairs) == P.shape[0] == Q.shape[0]
    for k, (side_a, side_b) in enumerate(pairs):
        for got, (s, w) in ((P[k], side_a), (Q[k], side_b)):
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
    blocks = problem.blocks()
    assert identical_rows(table, blocks).tolist() == [True, False, True]
    lv = comparison_levels(problem, table, blocks)
    assert lv.pure[[0, 2]].tolist() == [0.0, 0.0] and lv.delta[[0, 2]].tolist() == [0.0, 0.0]
    assert holds(lv, budgets(blocks), problem.shape).tolist() == [True, False, True]
    assert exact_holds(problem, table).tolist() == [True, False, True]
    table[1] = table[0]  # now the other-profile pair holds too, for both modes
    assert holds(comparison_levels(problem, table, blocks), budgets(blocks), problem.shape).all()
    assert exact_holds(problem, table).all()


def test_exact_mode_proves_equal_laws_at_a_tiny_budget():
    """exp_lower never drops below 1, so equal rows hold at ε = 1e-70 in exact mode too."""
    assert exp_lower(Fraction(1, 10**70)) >= 1
    problem = _ldp_problem(3, 4, eps=1e-70)
    table = np.broadcast_to(np.array([0.1, 0.2, 0.3, 0.4]), (1, 3, 4))
    assert exact_holds(problem, table).all()
    assert holds(comparison_levels(problem, table), budgets(problem.blocks()), problem.shape).all()


def test_xdp_huge_exponent_is_met_by_every_finite_level_and_an_overflowing_one_is_an_error():
    """ε·d(x, x') = 1e306 · 20: every finite level meets it, +∞ does not. At ε = 1e307 the
    product overflows float64: the specification rejects it (issue 6)."""
    X = dp.Domain(("a", "b", "c"), coords=np.array([[0.0], [10.0], [20.0]]))
    with pytest.raises(dp.problems.SpecError, match=r"constraints\[0\]\.epsilon: .* overflows float64"):
        dp.Problem(X, X, np.ones((3, 3)), np.ones(3) / 3, constraints=(dp.ExtendedDP(1e307),))
    problem = dp.Problem(X, X, np.ones((3, 3)), np.ones(3) / 3, constraints=(dp.ExtendedDP(1e306),))
    blocks = problem.blocks()
    bud = budgets(blocks)
    assert bud.eps.max() == pytest.approx(2e307, rel=1e-15)
    full = np.array([[[0.5, 0.3, 0.2], [0.2, 0.5, 0.3], [0.3, 0.2, 0.5]]])
    assert holds(comparison_levels(problem, full, blocks), bud, problem.shape).all()
    assert exact_holds(problem, full).all()
    holes = np.array([[[0.5, 0.5, 0.0], [0.2, 0.5, 0.3], [0.3, 0.2, 0.5]]])
    assert not holds(comparison_levels(problem, holes, blocks), bud, problem.shape).all()
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
    (block,) = problem.blocks()
    assert block.kind == "pair" and block.size == 6
    P, Q = output_laws(table, (block,))
    assert P.shape == Q.shape == (6, 5)
    for k in range(block.size):
        assert np.array_equal(P[k], table[block.s[k], block.a[k]])
        assert np.array_equal(Q[k], table[block.s[k], block.b[k]])
    same = identical_rows(table, (block,))
    pairs = [(int(a), int(b)) for a, b in zip(block.a, block.b, strict=True)]
    assert [pairs[k] for k in np.flatnonzero(same)] == [(1, 3)]


def test_identical_rows_of_mixtures_are_equal_values():
    """Items on different rows are identical when every row they weigh is the same vector (as
    values: −0.0 = +0.0), and not when one entry differs by one ulp."""
    X = dp.Domain(("a", "b", "c"))
    items = (dp.Item("i", np.array([0.5, 0.5, 0.0])), dp.Item("j", np.array([0.0, 0.0, 1.0])))
    problem = dp.Problem(X, X, np.ones((3, 3)), np.ones(3) / 3, items=items,
                         constraints=(dp.DistP(((0, 1),), 0.0),))
    table = np.array([[[0.25, 0.75, 0.0], [0.25, 0.75, -0.0], [0.25, 0.75, 0.0]]])
    assert identical_rows(table, problem.blocks()).tolist() == [True]
    table[0, 2, 0] = np.nextafter(0.25, 1.0)
    assert identical_rows(table, problem.blocks()).tolist() == [False]


def test_underflow_risk_flags_dense_laws_near_underflow_only():
    X = dp.Domain(("a", "b"))
    lam = np.array([0.25, 0.75])  # two different items: equal ones would be identical
    items = (dp.Item("i", lam), dp.Item("j", lam[::-1]))
    problem = dp.Problem(X, X, np.ones((2, 2)), lam, items=items,
                         constraints=(dp.DistP(((0, 1),), 1.0), dp.LocalDP(1.0)))
    table = np.array([[[1.0, 1e-310], [1.0, 0.0]]])
    blocks = problem.blocks()
    assert [b.kind for b in blocks] == ["mixture", "pair"]
    P, Q = output_laws(table, blocks)
    risk = underflow_risk(table, blocks, P, Q)
    assert risk.tolist() == [True, False]  # the DistP comparison is dense; LDP rows are exact
    assert not holds(comparison_levels(problem, table, blocks), budgets(blocks), problem.shape)[0]


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
    small helpers), needs only numpy and the standard library: no JAX, no optimizer. The one
    exceptions, imported inside functions only: POT's exact transport solver (``ot``), in the
    functions that *find* couplings (the checks of a coupling or a dual witness are numpy:
    certification/_transport); and JAX in ``problems/_user.py``, which calls a user's own utility
    (JAX code the user wrote) for the objective's value, never for a privacy claim, and for a
    certificate only when told to (``--run-utility``)."""
    package = pathlib.Path(dp.__file__).parent
    todo, seen = sorted((package / "certification").glob("*.py")), set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        tree = ast.parse(path.read_text())
        top = set(map(id, tree.body))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                raise AssertionError(f"{path.name}: relative import")
            if isinstance(node, ast.ImportFrom) and node.module.startswith("diffpriv."):
                base = package.parent.joinpath(*node.module.split("."))  # follow it
                todo.append(base.with_suffix(".py") if base.with_suffix(".py").exists()
                            else base / "__init__.py")
                continue
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                roots = {node.module.split(".")[0]}
            else:
                continue
            inner = {"ot"} | ({"jax"} if path.name == "_user.py" else set())
            allowed = set(sys.stdlib_module_names) | {"numpy"} | (inner if id(node) not in top else set())
            assert roots <= allowed, (path.name, roots)
    assert package / "problems" / "_problem.py" in seen and package / "__init__.py" not in seen


def test_certifier_and_config_load_without_jax():
    """At run time too: validating a config and verifying a certificate never import JAX."""
    code = ("import sys, diffpriv as dp, diffpriv.certification, diffpriv.config; "
            "assert 'jax' not in sys.modules, sorted(m for m in sys.modules if 'jax' in m)")
    subprocess.run([sys.executable, "-c", code], check=True)


TRUSTED_LOADS = ("diffpriv.certification", "diffpriv.problems", "diffpriv.measures", "diffpriv._files",
                 "diffpriv._lazy")


def test_the_certifier_imports_alone_in_a_fresh_interpreter():
    """``import diffpriv.certification`` loads numpy, the problem specification, the measures and
    the file helpers only: no pydantic, no scipy solver, no JAX, no config, solver or CLI module;
    the package's names load on first use."""
    code = ("import sys, diffpriv.certification as c; "
            "print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('diffpriv', 'pydantic', 'pydantic_core', 'jax', 'jaxlib', 'cvxpy', 'typer', 'ot') "
            "or m.startswith('scipy.optimize'))))")
    loaded = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                            text=True).stdout.split()
    strays = [m for m in loaded if m != "diffpriv" and not m.startswith(TRUSTED_LOADS)]
    assert not strays, strays
    code = "import diffpriv as dp; assert dp.DistP and dp.problems.Problem is dp.Problem and dp.solvers.lp"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pair_blocks_levels_match_brute_force_on_table_rows():
    """LDP on all pairs of 6 inputs (pure and approximate, two profiles): only pair blocks.
    Every level equals the one computed directly from the two table rows."""
    rng = np.random.default_rng(5)
    nx, ny = 6, 4
    problem = dp.Problem(domain("x", nx), domain("y", ny), np.ones((nx, ny)),
                         np.ones((2, nx)) / (2 * nx), profiles=("p", "q"),
                         constraints=(dp.LocalDP(1.5), dp.LocalDP(0.5, delta=0.1, name="approx")))
    table = rng.dirichlet(np.ones(ny), size=(2, nx))
    table[0, 4] = table[0, 2]  # equal rows: level exactly 0
    table[1, 5, 0] = 0.0  # a hole: infinite pure level against every other row of profile q
    table[1, 5] /= table[1, 5].sum()
    blocks = problem.blocks()
    assert [b.kind for b in blocks] == ["pair", "pair"]
    bud = budgets(blocks)
    lv = comparison_levels(problem, table, blocks)
    assert lv.pure.shape == (2 * 2 * 15,)
    k = 0
    for block in blocks:
        delta = block.delta
        assert sorted(zip(block.s.tolist(), block.a.tolist(), block.b.tolist(), strict=True)) == [
            (s, a, b) for s in range(2) for a in range(nx) for b in range(a + 1, nx)]
        for s, a, b in zip(block.s, block.a, block.b, strict=True):
            P, Q = table[s, a], table[s, b]
            assert all(np.array_equal(got, want) for got, want in zip(lv.laws.at(k), (P, Q), strict=True))
            if np.any((P > 0) != (Q > 0)):
                want = math.inf
            else:
                want = max(abs(math.log(p) - math.log(q)) for p, q in zip(P, Q, strict=True))
            assert lv.identical[k] == np.array_equal(P, Q)
            assert lv.pure[k] == pytest.approx(want, rel=1e-13, abs=1e-15)
            assert lv.delta[k] == pytest.approx(brute_force_delta(P, Q, bud.eps[k]), abs=1e-12)
            assert bud.delta[k] == delta and bud.constraint[k] == block.constraint
            assert not lv.underflow[k]
            k += 1
    assert k == bud.size
    pure, approx = constraint_levels(problem, table)
    assert pure.level == math.inf and not pure.ok
    assert pure.witness["pair"]["profile"] == "q" and "x5" in pure.witness["pair"]["inputs"]
    ks = np.flatnonzero(bud.constraint == 1)
    assert approx.level == pytest.approx(max(
        brute_force_delta(*lv.laws.at(j), 0.5) for j in ks), abs=1e-12)
    assert approx.n_comparisons == 30 and approx.worst in ks


def test_xdp_on_a_30x30_grid_with_neighbour_pairs_builds_nothing_quadratic():
    """900 inputs, 4-neighbour pairs: the levels come from gathered rows, in memory far below
    one [n_in, n_in] array (6.5 MB as float64), and agree with the rows' own levels."""
    import tracemalloc

    X = dp.Domain.grid(30, 30)
    Y = dp.Domain(("u", "v", "w"))
    nx = X.size
    idx = np.arange(nx).reshape(30, 30)
    pairs = [(int(i), int(j)) for i, j in zip(idx[:, :-1].ravel(), idx[:, 1:].ravel(), strict=True)]
    pairs += [(int(i), int(j)) for i, j in zip(idx[:-1].ravel(), idx[1:].ravel(), strict=True)]
    problem = dp.Problem(X, Y, np.ones((nx, 3)), np.ones(nx) / nx,
                         constraints=(dp.ExtendedDP(2.0, pairs=tuple(pairs)),))
    rng = np.random.default_rng(0)
    table = rng.dirichlet(np.full(3, 50.0), size=(1, nx))
    tracemalloc.start()
    try:
        lv = comparison_levels(problem, table)
        (c,) = constraint_levels(problem, table)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < nx * nx  # bytes: not even a boolean [n_in, n_in] mask
    (block,) = problem.blocks()
    assert block.size == len(pairs) == 2 * 30 * 29
    np.testing.assert_array_equal(block.scale, 1.0)  # neighbour cells are 1 apart
    np.testing.assert_array_equal(lv.pure, pure_level(table[0, block.a], table[0, block.b]))
    assert c.level == lv.pure.max() and c.witness["pair"]["distance"] == 1.0
