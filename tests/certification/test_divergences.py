"""Divergence levels: closed forms, zero conventions, known inequalities, data processing,
composition, and the float64 error bounds against exact / 60-digit references.

Tolerances: closed forms to 1e-12 relative (float64 algebra); inequalities between levels of
the same float laws to 1e-12 absolute; the soundness test uses each divergence's own stated
bound (``Divergence.error``), nothing else.
"""

import decimal
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diffpriv.certification import pure_level
from diffpriv.measures._divergences import DIVERGENCES, U64, divergence, renyi

SETTINGS = settings(max_examples=60, deadline=None)
TOL = 1e-12
KL, RKL, TV, CHI2, HEL, MAX = (DIVERGENCES[k] for k in ("kl", "reverse_kl", "tv", "chi2", "hellinger", "max"))
ORDERS = (1e-3, 0.3, 0.5, 1 - 1e-9, 1 + 1e-9, 1 + 1e-4, 1.0014, 1.5, 2.0, 7.5, 100.0, 1e4)


def law(counts):
    c = np.asarray(counts, np.float64)
    return c / c.sum()


@st.composite
def law_pairs(draw, n_max=6):
    """Two laws on the same ``n ≤ n_max`` outputs, with zeros (as float64 vectors)."""
    n = draw(st.integers(1, n_max))
    counts = st.lists(st.integers(0, 9), min_size=n, max_size=n).filter(lambda c: sum(c) > 0)
    return law(draw(counts)), law(draw(counts))


def every_divergence():
    return [*DIVERGENCES.values(), *(renyi(a) for a in (0.3, 0.5, 2.0, 7.5))]


# ---------------------------------------------------------------- closed forms


def test_bernoulli_kl_chi2_tv_hellinger():
    p, q = 0.3, 0.6
    P, Q = np.array([p, 1 - p]), np.array([q, 1 - q])
    kl = p * math.log(p / q) + (1 - p) * math.log((1 - p) / (1 - q))
    assert KL.level(P, Q) == pytest.approx(kl, rel=TOL)
    assert RKL.level(P, Q) == pytest.approx(KL.level(Q, P), rel=0)
    assert CHI2.level(P, Q) == pytest.approx((p - q) ** 2 / (q * (1 - q)), rel=TOL)
    assert TV.level(P, Q) == pytest.approx(abs(p - q), rel=TOL)
    bc = math.sqrt(p * q) + math.sqrt((1 - p) * (1 - q))
    assert HEL.level(P, Q) == pytest.approx(1 - bc, rel=TOL)
    assert renyi(0.5).level(P, Q) == pytest.approx(-2 * math.log(bc), rel=TOL)
    assert MAX.level(P, Q) == pytest.approx(math.log((1 - p) / (1 - q)), rel=TOL)


def test_disjoint_supports():
    P, Q = np.array([0.2, 0.8, 0.0, 0.0]), np.array([0.0, 0.0, 0.5, 0.5])
    assert TV.level(P, Q) == 1.0 and HEL.level(P, Q) == 1.0  # bounded: Table I's ½(√t − 1)²
    for d in (KL, RKL, CHI2, MAX, renyi(0.3), renyi(2.0)):
        assert d.level(P, Q) == np.inf, d.name


def test_identical_laws_are_exactly_zero():
    P = law([1, 2, 0, 7, 1e-300])
    for d in every_divergence():
        assert d.level(P, P) == 0.0, d.name


@given(law_pairs())
@SETTINGS
def test_renyi_2_is_log_one_plus_chi2_and_half_is_hellinger(pq):
    P, Q = pq
    assert renyi(2.0).level(P, Q) == pytest.approx(np.log1p(CHI2.level(P, Q)), rel=TOL, abs=TOL)
    h2 = HEL.level(P, Q)
    # Disjoint supports: Rényi ½ is +∞, while the Hellinger level, rounded, can sit a hair below 1
    # (found: P = (0, 0, 0, 1), Q = (0, ½, ½, 0) gave 73.47).
    disjoint = not np.any((P > 0) & (Q > 0))
    expected = math.inf if disjoint or h2 == 1 else -2 * math.log1p(-h2)
    assert renyi(0.5).level(P, Q) == pytest.approx(expected, rel=TOL, abs=TOL)


@given(law_pairs())
@SETTINGS
def test_max_divergence_both_ways_is_the_pure_level(pq):
    P, Q = pq
    assert max(MAX.level(P, Q), MAX.level(Q, P)) == pure_level(P, Q)


def test_renyi_limits():
    P, Q = law([1, 2, 3, 0]), law([3, 1, 1, 1])
    for a in (1 - 1e-9, 1 + 1e-9):  # → KL: |D_α − KL| = O(|α − 1|)
        assert renyi(a).level(P, Q) == pytest.approx(KL.level(P, Q), rel=1e-8)
    # → max-divergence: D_∞ − ln(1/P(y*))/(α − 1) ≤ D_α ≤ D_∞
    top = MAX.level(P, Q)
    for a in (1e2, 1e4, 1e6):
        assert top - math.log(1 / P.max()) / (a - 1) - TOL <= renyi(a).level(P, Q) <= top + TOL
    assert renyi(1.0) is KL and renyi(math.inf) is MAX


def test_registry_and_parameters():
    assert {d.name for d in DIVERGENCES.values() if d.bounded} == {"tv", "hellinger"}
    assert {d.name for d in DIVERGENCES.values() if d.symmetric} == {"tv", "hellinger"}
    assert renyi(0.5).symmetric and not renyi(2).symmetric and renyi(2).alpha == 2.0
    assert divergence("renyi", alpha=3).name == "renyi(3.0)" and divergence("chi2") is CHI2
    for bad in (0.0, -1.0, math.nan, -math.inf, 1e301):
        with pytest.raises(ValueError, match="alpha must be > 0"):
            renyi(bad)
    for call, msg in ((lambda: divergence("renyi"), "needs an order"),
                      (lambda: divergence("js"), "unknown divergence 'js'"),
                      (lambda: divergence("kl", alpha=2), "takes no order"),
                      (lambda: KL.level([0.5, 0.5], [1.0]), "shapes"),
                      (lambda: KL.level([1.5, -0.5], [0.5, 0.5]), ">= 0"),
                      (lambda: KL.level([np.nan, 1.0], [0.5, 0.5]), ">= 0")):
        with pytest.raises(ValueError, match=msg):
            call()


def test_vectorised_over_leading_axes():
    rng = np.random.default_rng(0)
    P, Q = rng.dirichlet(np.ones(5), (3, 4)), rng.dirichlet(np.ones(5), (3, 4))
    P[0, 0, 1] = Q[1, 2, 3] = 0.0
    for d in every_divergence():
        levels = d.level(P, Q)
        assert levels.shape == (3, 4)
        rows = [d.level(P[i, j], Q[i, j]) for i in range(3) for j in range(4)]
        np.testing.assert_array_equal(levels.ravel(), rows)  # same arithmetic, bit for bit


# ---------------------------------------------------------------- conventions for zeros

H = 0.5
CASES = [  # P, Q, {name: exact level}; ln 2 written as L
    ((H, H), (1, 0), {"kl": math.inf, "reverse_kl": "L", "tv": 0.5, "chi2": math.inf,
                      "hellinger": 1 - math.sqrt(H), "max": math.inf,
                      "renyi(0.5)": "L", "renyi(2.0)": math.inf, "renyi(0.3)": "3/7 L"}),
    ((1, 0), (H, H), {"kl": "L", "reverse_kl": math.inf, "tv": 0.5, "chi2": 1.0,
                      "hellinger": 1 - math.sqrt(H), "max": "L",
                      "renyi(0.5)": "L", "renyi(2.0)": "L", "renyi(0.3)": "L"}),
    ((H, H, 0), (0.25, 0.75, 0), {"kl": 0.5 * math.log(2) + 0.5 * math.log(2 / 3),
                                  "tv": 0.25, "chi2": 1 / 3}),  # an output neither emits: ignored
    ((0, 1), (0, 1), {"kl": 0.0, "tv": 0.0, "chi2": 0.0, "hellinger": 0.0, "max": 0.0,
                      "renyi(0.3)": 0.0, "renyi(2.0)": 0.0}),
    ((0, 0), (0, 0), {"kl": 0.0, "tv": 0.0, "hellinger": 0.0, "renyi(2.0)": 0.0, "renyi(0.3)": 0.0}),
]


@pytest.mark.parametrize("P, Q, expected", CASES)
def test_zero_conventions(P, Q, expected):
    for name, value in expected.items():
        d = renyi(float(name[6:-1])) if name.startswith("renyi") else DIVERGENCES[name]
        if isinstance(value, str):
            value = math.log(2) * (3 / 7 if value.startswith("3/7") else 1.0)
        assert d.level(np.array(P, float), np.array(Q, float)) == pytest.approx(value, rel=TOL), name


# ---------------------------------------------------------------- inequalities


@given(law_pairs())
@SETTINGS
def test_known_inequalities(pq):
    P, Q = pq
    tv, kl, chi2, h2 = TV.level(P, Q), KL.level(P, Q), CHI2.level(P, Q), HEL.level(P, Q)
    assert tv <= math.sqrt(kl / 2) + TOL  # Pinsker
    assert h2 <= tv + TOL and tv <= math.sqrt(h2 * (2 - h2)) + TOL <= math.sqrt(2 * h2) + 2 * TOL
    assert kl <= np.log1p(chi2) + TOL  # KL ≤ D_2 = ln(1 + χ²) ≤ χ²
    assert np.log1p(chi2) <= chi2 + TOL
    assert 0 <= tv <= 1 and 0 <= h2 <= 1
    chain = [renyi(a).level(P, Q) for a in (0.3, 0.5)] + [kl] + [renyi(a).level(P, Q) for a in (2, 7.5)]
    chain.append(MAX.level(P, Q))
    assert all(a <= b + TOL * max(1, b) for a, b in zip(chain, chain[1:], strict=False))  # monotone in α
    assert renyi(0.5).level(P, Q) == pytest.approx(renyi(0.5).level(Q, P), rel=TOL, abs=TOL)


@given(law_pairs(), st.integers(1, 5), st.integers(0, 2**32 - 1))
@SETTINGS
def test_data_processing(pq, m, seed):
    """Post-processing by a channel ``B`` never increases a level: ``D(PB‖QB) ≤ D(P‖Q)``."""
    P, Q = pq
    rng = np.random.default_rng(seed)
    B = rng.dirichlet(np.ones(m), len(P)) * (rng.random((len(P), m)) < 0.7)
    B[B.sum(axis=1) == 0, 0] = 1.0
    B /= B.sum(axis=1, keepdims=True)
    for d in every_divergence():
        before, after = d.level(P, Q), d.level(P @ B, Q @ B)
        assert after <= before + TOL * max(1.0, before), d.name


# ---------------------------------------------------------------- composition


@given(law_pairs(4), law_pairs(4))
@SETTINGS
def test_product_laws(pq1, pq2):
    """Independent composition: KL and Rényi add, ``1 + χ²`` and ``1 − H²`` multiply."""
    (P1, Q1), (P2, Q2) = pq1, pq2
    P, Q = np.outer(P1, P2).ravel(), np.outer(Q1, Q2).ravel()
    for d in (KL, RKL, MAX, renyi(0.5), renyi(2.0), renyi(7.5)):
        assert d.level(P, Q) == pytest.approx(d.level(P1, Q1) + d.level(P2, Q2), rel=1e-10, abs=TOL)
    assert 1 + CHI2.level(P, Q) == pytest.approx((1 + CHI2.level(P1, Q1)) * (1 + CHI2.level(P2, Q2)),
                                                 rel=1e-10)
    assert 1 - HEL.level(P, Q) == pytest.approx((1 - HEL.level(P1, Q1)) * (1 - HEL.level(P2, Q2)),
                                                rel=1e-10, abs=TOL)
    assert max(TV.level(P1, Q1), TV.level(P2, Q2)) - TOL <= TV.level(P, Q)
    assert TV.level(P, Q) <= TV.level(P1, Q1) + TV.level(P2, Q2) + TOL


def test_adaptive_kl_composition():
    """Kawamoto & Murakami 2019, Prop. 3: the second mechanism sees the first's output ``y0``;
    KL of the joint laws = KL of the first + the ``P0``-average of the second's (chain rule),
    so it is at most ``ε0 + max_{y0} ε1(y0)``."""
    rng = np.random.default_rng(7)
    for _ in range(50):
        n0, n1 = rng.integers(1, 5, size=2)
        P0, Q0 = rng.dirichlet(np.ones(n0)), rng.dirichlet(np.ones(n0))
        P1, Q1 = rng.dirichlet(np.ones(n1), n0), rng.dirichlet(np.ones(n1), n0)  # [y0, y1]
        joint = KL.level((P0[:, None] * P1).ravel(), (Q0[:, None] * Q1).ravel())
        eps1 = KL.level(P1, Q1)
        assert joint == pytest.approx(KL.level(P0, Q0) + P0 @ eps1, rel=1e-10, abs=TOL)
        assert joint <= KL.level(P0, Q0) + eps1.max() + TOL


# ---------------------------------------------------------------- float64 soundness

CTX = decimal.Context(prec=60, Emin=decimal.MIN_EMIN, Emax=decimal.MAX_EMAX)


def references(P, Q, alphas):
    """Exact levels of the float laws ``P``, ``Q`` by name (rational where possible, else 60
    digits), for every registered divergence and ``renyi(α)`` for ``α`` in ``alphas``."""
    Pf, Qf = [Fraction(float(p)) for p in P], [Fraction(float(q)) for q in Q]
    only_p = any(p > 0 and q == 0 for p, q in zip(Pf, Qf, strict=True))
    only_q = any(q > 0 and p == 0 for p, q in zip(Pf, Qf, strict=True))
    out = {"tv": sum(abs(p - q) for p, q in zip(Pf, Qf, strict=True)) / 2,
           "chi2": math.inf if only_p else sum((p - q) ** 2 / q for p, q in zip(Pf, Qf, strict=True) if q)}
    with decimal.localcontext(CTX):
        Pd, Qd = [decimal.Decimal(float(p)) for p in P], [decimal.Decimal(float(q)) for q in Q]
        out["hellinger"] = sum((p - q) ** 2 / (p.sqrt() + q.sqrt()) ** 2
                               for p, q in zip(Pd, Qd, strict=True) if p + q > 0) / 2
        logs = [(p, q, p.ln(), q.ln()) for p, q in zip(Pd, Qd, strict=True) if p > 0 and q > 0]
        out["kl"] = math.inf if only_p else sum(p * (lp - lq) for p, _, lp, lq in logs)
        out["reverse_kl"] = math.inf if only_q else sum(q * (lq - lp) for _, q, lp, lq in logs)
        out["max"] = math.inf if only_p else max([lp - lq for _, _, lp, lq in logs], default=0)
        for alpha in alphas:
            a = decimal.Decimal(alpha)
            z = [a * lp + (1 - a) * lq for _, _, lp, lq in logs]  # ln(P^α Q^{1−α})
            top = max(z, default=0)
            log_s = top + (sum((t - top).exp() for t in z) / sum(Pd)).ln() if z else -math.inf
            out[renyi(alpha).name] = math.inf if (a > 1 and only_p) or not z else log_s / (a - 1)
    return out


def random_pair(rng):
    """Laws with zeros, subnormal entries, entries near 1, entries down to 1e-300, near-equal pairs."""
    n = int(rng.integers(1, 10))
    kind = rng.integers(6)
    P, Q = rng.dirichlet(np.full(n, 0.5)), rng.dirichlet(np.full(n, 0.5))
    if kind == 1:  # zeros
        P[rng.random(n) < 0.3] = 0.0
        Q[rng.random(n) < 0.3] = 0.0
    elif kind == 2:  # subnormal entries
        P[rng.random(n) < 0.3] = rng.integers(1, 2**20) * 2.0**-1074
        Q[rng.random(n) < 0.3] = rng.integers(1, 2**20) * 2.0**-1074
    elif kind == 3:  # one entry near 1
        for R in (P, Q):
            R *= 10.0 ** -rng.uniform(1, 17)
            R[rng.integers(n)] = 1.0
    elif kind == 4:  # every scale down to 1e-300
        P, Q = 10.0 ** -rng.uniform(0, 300, n), 10.0 ** -rng.uniform(0, 300, n)
    elif kind == 5:  # near-equal: cancellation
        Q = P * (1 + rng.integers(-8, 9, n) * 10.0 ** -rng.uniform(4, 16))
    if not (P.sum() > 0 and Q.sum() > 0):
        return random_pair(rng)
    return P / P.sum(), Q / Q.sum()


def stated_error(d, n, exact):
    """The bound ``u·((r1·n + r0)·D + a1·n + a0) + n·2^-1073`` of ``Divergence.error``, exactly."""
    r1, r0, a1, a0 = (Fraction(c) for c in d.error)
    return Fraction(U64) * ((r1 * n + r0) * Fraction(exact) + a1 * n + a0) + n * Fraction(2) ** -1073


def test_error_bounds_hold_against_exact_references():
    """Thousands of random pairs: ``|computed − exact| ≤`` the stated bound and ``upper ≥ exact``."""
    rng = np.random.default_rng(20240607)
    divs = list(DIVERGENCES.values())
    checked = 0
    for _ in range(1000):
        P, Q = random_pair(rng)
        alpha = float(rng.choice(ORDERS))
        exact_levels = references(P, Q, [alpha])
        for d in [*divs, renyi(alpha)]:
            exact, got, upper = exact_levels[d.name], float(d.level(P, Q)), float(d.upper(P, Q))
            if exact == math.inf:
                assert got == upper == math.inf, (d.name, P, Q)
                continue
            if exact > 1e300 and got == math.inf:  # beyond float64 (χ² with a subnormal Q[y])
                continue
            assert abs(Fraction(got) - Fraction(exact)) <= stated_error(d, len(P), exact), (d.name, P, Q)
            assert Fraction(upper) >= Fraction(exact), (d.name, P, Q)
            checked += 1
    assert checked > 6_000
