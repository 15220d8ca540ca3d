"""Profile-based mechanisms: Observation 10, One Bit Cluster, Smooth One Bit, Smooth Categorical
and the Categorical-Chain experiment, against closed forms and diffpriv's LP reference."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import diffpriv as dp
from diffpriv.mechanisms import _profile_based as pb
from diffpriv.mechanisms._registry import MECHANISMS
from diffpriv.problems._known import bernoulli_two_profile_problem


def observation10(p_i, p_j, eps):
    """The closed form (7) of Observation 10 as printed (terms with a zero denominator skipped)."""
    e = math.exp(eps)
    terms = [(p_j - e * p_i, 2 * (p_j - e * p_i) - (1 - e)),
             (p_i - e * p_j + e - 1, 2 * (p_i - e * p_j) + e - 1)]
    return max([0.0] + [n / d for n, d in terms if d != 0])


def flip_laws(p, alpha):
    """Output laws ``[P(0), P(1)]`` of ``Bernoulli(p)`` flipped with probability ``alpha``."""
    one = p * (1 - alpha) + (1 - p) * alpha
    return np.array([1 - one, one])


def edge_level(p_i, a_i, p_j, a_j):
    """``max_y |ln P − ln Q|``; outputs 0 on both sides are ignored, on one side give ``+∞``."""
    p, q = flip_laws(p_i, a_i), flip_laws(p_j, a_j)
    on = (p > 0) | (q > 0)
    with np.errstate(divide="ignore"):
        return float(np.max(np.abs(np.log(p[on]) - np.log(q[on]))))


def bernoulli_graph_problem(p, edges, eps):
    dom = dp.Domain(("0", "1"))
    items = tuple(dp.Item(f"P{i}", np.array([1 - q, q]), profile=i) for i, q in enumerate(p))
    prior = np.stack([item.dist for item in items]) / len(p)
    return dp.Problem(dom, dom, 1 - np.eye(2), prior, items=items,
                      constraints=(dp.DistP(pairs=tuple(edges), epsilon=eps),),
                      profiles=tuple(f"P{i}" for i in range(len(p))), objective="worst")


# -- LP (4) and Observation 10 ------------------------------------------------------------------


@pytest.mark.parametrize("p_i, p_j, eps", [(0.2, 0.7, 0.5), (0.1, 0.9, 1.0), (0.45, 0.5, 0.05),
                                           (0.0, 0.3, 0.2), (0.05, 0.9, 2.0)])
def test_observation10_closed_form_is_the_lp_optimum(p_i, p_j, eps):
    closed = observation10(p_i, p_j, eps)
    assert 0 < closed < 0.5
    assert pb.flip_probability(p_i, p_j, eps) == pytest.approx(closed, abs=1e-10)


@settings(max_examples=60, deadline=None)
@given(p=st.tuples(st.floats(0, 1), st.floats(0, 1)), eps=st.floats(0.01, 4.0))
def test_observation10_bounds_lp4(p, eps):
    p_i, p_j = sorted(p)
    alpha = pb.flip_probability(p_i, p_j, eps)
    closed = observation10(p_i, p_j, eps)
    assert 0 <= alpha <= 1 / (1 + math.exp(eps)) + 1e-10  # randomized response is feasible
    assert alpha <= closed + 1e-10  # Observation 10, for p_i <= p_j
    # (7) is exact whenever it is below 1/2; above 1/2 a term is spurious (see _known.py).
    if closed < 0.5 - 1e-9:
        assert alpha == pytest.approx(closed, abs=1e-9)
    # α meets (4), and is least: a smaller flip violates it
    assert edge_level(p_i, alpha, p_j, alpha) <= eps + 1e-8
    if alpha > 1e-6:
        assert edge_level(p_i, alpha - 1e-6, p_j, alpha - 1e-6) > eps


def test_randomized_response_is_the_extreme_case():
    for eps in (0.1, 1.0, 3.0):
        assert pb.flip_probability(0.0, 1.0, eps) == pytest.approx(1 / (1 + math.exp(eps)), abs=1e-12)


@pytest.mark.parametrize("name", ["one_bit_cluster", "smooth_one_bit"])
def test_two_profiles_sharing_a_table_match_the_lp_reference(name):
    """One table for two Bernoulli items is LP (4), which diffpriv expresses exactly (worst-case
    0/1 loss): both mechanisms give its optimum and the table certifies as is."""
    for p_i, p_j, eps in [(0.2, 0.7, 0.5), (0.05, 0.6, 1.2), (0.5, 0.52, 0.01)]:
        problem = bernoulli_two_profile_problem(p_i, p_j, eps)
        table = MECHANISMS[name](problem)
        alpha = table[0, 0, 1]
        np.testing.assert_allclose(table[0], [[1 - alpha, alpha], [alpha, 1 - alpha]], atol=1e-15)
        assert alpha == pytest.approx(dp.solvers.lp(problem).value, abs=1e-7)
        assert alpha == pytest.approx(pb.flip_probability(p_i, p_j, eps), abs=1e-7)
        cert = dp.certify(problem, table, repair=False)
        assert cert.ok and cert.constraints[0].level <= eps


# -- One Bit Cluster and Smooth One Bit ---------------------------------------------------------

P6 = np.array([0.1, 0.5, 0.3, 0.8, 0.85, 0.2])
EDGES6 = [(0, 1), (1, 2), (3, 4)]  # components {0, 1, 2}, {3, 4} and the lone profile 5


def test_one_bit_cluster_uses_the_largest_flip_of_its_component():
    eps = 0.3
    alpha = pb.one_bit_cluster(P6, EDGES6, eps)
    per_edge = {e: pb.flip_probability(*sorted((P6[e[0]], P6[e[1]])), eps) for e in EDGES6}
    first = max(per_edge[(0, 1)], per_edge[(1, 2)])
    np.testing.assert_allclose(alpha, [first] * 3 + [per_edge[(3, 4)]] * 2 + [0.0], atol=1e-12)
    assert per_edge[(0, 1)] != pytest.approx(per_edge[(1, 2)], abs=1e-3)  # the max matters
    problem = bernoulli_graph_problem(P6, EDGES6, eps)
    table = MECHANISMS["one_bit_cluster"](problem)
    np.testing.assert_allclose(table[:, 0, 1], alpha, atol=1e-7)
    cert = dp.certify(problem, table, repair=False)
    assert cert.ok


@pytest.mark.parametrize("n, eps", [(6, 0.2), (6, 1.0), (21, 0.2), (21, 1.0)])
def test_smooth_one_bit_on_bernoulli_chains(n, eps):
    """Bernoulli-Chain-n: profiles p uniformly spaced on [0, 1], a chain of edges."""
    p = np.linspace(0, 1, n)
    edges = [(i, i + 1) for i in range(n - 1)]
    alpha = pb.smooth_one_bit(p, edges, eps)
    cluster = pb.one_bit_cluster(p, edges, eps)
    # the uniform cluster flip is feasible for (5), and so is randomized response
    assert alpha.max() <= cluster.max() + 1e-9
    assert alpha.max() <= 1 / (1 + math.exp(eps)) + 1e-9
    assert alpha.max() == pytest.approx(pb.smooth_one_bit(p, edges, eps, tie_break=False).max(), abs=1e-8)
    for i, j in edges:
        assert edge_level(p[i], alpha[i], p[j], alpha[j]) <= eps + 1e-8
    problem = bernoulli_graph_problem(p, edges, eps)
    table = MECHANISMS["smooth_one_bit"](problem)
    assert dp.certify(problem, table, repair=False).ok
    # diffpriv's LP with per-profile tables and the worst-case 0/1 loss relaxes (5)
    # (flips need not be symmetric, rows of zero prior do not count)
    assert dp.solvers.lp(problem).value <= table[:, 0, 1].max() + 1e-9


# -- Smooth Categorical -------------------------------------------------------------------------

CHAIN = pb.CATEGORICAL_CHAIN
EDGES = pb.CATEGORICAL_CHAIN_EDGES


@pytest.mark.parametrize("eps", [0.05, 0.3, 1.0])
def test_smooth_categorical_objectives_match_the_lp_reference(eps):
    """LP (6)'s constraints are diffpriv's DistP on the profile graph, and its objective (the
    largest off-diagonal entry) is diffpriv's ``entry`` objective: with each objective the two LPs
    agree."""
    for objective, kind in (("expected", "expected"), ("rows", "worst"), ("entries", "entry")):
        sol = pb.smooth_categorical(CHAIN, EDGES, eps, objective=objective)
        reference = dp.solvers.lp(pb.categorical_chain_problem(eps, objective=kind)).value
        assert sol.value == pytest.approx(reference, abs=1e-9)
    # LP (6) (largest entry) is squeezed by the largest row mass: entry ≤ row ≤ (d − 1)·entry
    entries = pb.smooth_categorical(CHAIN, EDGES, eps).value
    rows = pb.smooth_categorical(CHAIN, EDGES, eps, objective="rows").value
    d = CHAIN.shape[1]
    assert rows / (d - 1) - 1e-10 <= entries <= rows + 1e-10


@pytest.mark.parametrize("eps", [0.1, 0.5])
def test_smooth_categorical_objective_under_diffprivs_optimizer(eps):
    """LP (6)'s objective through dp.optimize (PDHG with one epigraph row per entry): the
    certified table's largest off-diagonal entry is within 0.1 % of LP (6)'s optimum, and the
    optimizer's certified lower bound is below it."""
    value = pb.smooth_categorical(CHAIN, EDGES, eps).value
    problem = pb.categorical_chain_problem(eps, objective="entry")
    result = dp.optimize(problem, method="pdhg", gap_tol=1e-4)
    cert = dp.certify(problem, result.table, repair=True)
    assert cert.ok
    largest = float((result.table * (1 - np.eye(CHAIN.shape[1]))).max())
    assert cert.loss == pytest.approx(largest, abs=1e-15)
    assert result.lower_bound <= value + 1e-9
    assert value - 1e-9 <= cert.loss <= value * (1 + 1e-3)


def test_smooth_categorical_value_and_threshold():
    """The identity is private iff ε ≥ the largest adjacent log-ratio (ln 3 on the chain: 0.3
    vs 0.1); below it LP (6) must perturb, and its value never grows with ε."""
    ratio = max(np.max(np.abs(np.log(CHAIN[i]) - np.log(CHAIN[j]))) for i, j in EDGES)
    assert ratio == pytest.approx(math.log(3))
    assert pb.smooth_categorical(CHAIN, EDGES, ratio + 1e-6).value == pytest.approx(0, abs=1e-10)
    values = [pb.smooth_categorical(CHAIN, EDGES, e).value for e in (0.05, 0.1, 0.5, 1.0, ratio - 0.01)]
    assert values[-1] > 1e-4
    assert all(a >= b - 1e-10 for a, b in zip(values, values[1:], strict=False))
    for eps, value in zip((0.05, 0.1, 0.5), values, strict=False):  # k-RR is feasible for (6)
        assert value <= 1 / (math.exp(eps) + 3) + 1e-10


@pytest.mark.parametrize("objective", ["entries", "rows", "expected"])
@pytest.mark.parametrize("eps", [0.05, 0.5, 1.0, 1.2])
def test_smooth_categorical_tables_certify(objective, eps):
    problem = pb.categorical_chain_problem(eps)
    table = MECHANISMS["smooth_categorical"](problem, objective=objective)
    cert = dp.certify(problem, table, repair=False)
    assert cert.ok and cert.repair_t == 0.0
    if eps < math.log(3):  # binding, up to the design margin
        assert eps - 1e-7 < cert.constraints[0].level <= eps
    else:  # the identity is private: its level is the largest adjacent log-ratio
        np.testing.assert_allclose(table, np.broadcast_to(np.eye(4), table.shape), atol=1e-15)
        assert cert.constraints[0].level == pytest.approx(math.log(3), abs=1e-15)


def test_categorical_chain_report():
    epsilons = (0.1, 0.5, 1.0, 2.0)
    rows = pb.categorical_chain_report(epsilons)
    assert [(r.epsilon, r.mechanism) for r in rows] == [
        (e, m) for e in epsilons for m in ("smooth_categorical", "krr")]
    k, d = CHAIN.shape
    for row in rows:
        e = math.exp(row.epsilon)
        if row.mechanism == "krr":  # |P_i[j] − (P_i A)[j]| = |1 − k P_i[j]| / (e^ε + k − 1)
            expected = np.max(np.abs(1 - d * CHAIN), axis=0) / (e + d - 1)
            np.testing.assert_allclose(row.costs, expected, rtol=1e-12)
            assert row.max_off_diagonal == pytest.approx(1 / (e + d - 1), rel=1e-12)
        else:
            tables = pb.smooth_categorical(CHAIN, EDGES, row.epsilon).tables
            out = np.stack([CHAIN[i] @ tables[i] for i in range(k)])
            np.testing.assert_allclose(row.costs, np.max(np.abs(CHAIN - out), axis=0), atol=1e-15)
            assert row.max_off_diagonal <= 1 / (e + d - 1) + 1e-10
    # above ln 3 the identity is private: Smooth Categorical reports exactly
    assert rows[-2].costs == pytest.approx((0.0,) * d, abs=1e-10)


# -- failures --------------------------------------------------------------------------------


def test_lp_failure_raises(monkeypatch):
    real = pb.scipy.optimize.linprog

    def failed(*args, **kwargs):
        res = real(*args, **kwargs)
        res.status, res.message = 1, "Iteration limit reached"
        return res

    monkeypatch.setattr(pb.scipy.optimize, "linprog", failed)
    with pytest.raises(pb.ProfileLPError, match="Iteration limit"):
        pb.flip_probability(0.2, 0.7, 0.5)


def test_registered_mechanisms_reject_other_constraints():
    problem = pb.categorical_chain_problem(0.5)
    ldp = dp.Problem(problem.inputs, problem.outputs, problem.loss, problem.prior.sum(0),
                     constraints=(dp.LocalDP(epsilon=1.0),))
    with pytest.raises(ValueError, match="pure DistP"):
        MECHANISMS["smooth_categorical"](ldp)
    approx = dp.Problem(problem.inputs, problem.outputs, problem.loss, problem.prior,
                        items=problem.items, profiles=problem.profiles,
                        constraints=(dp.DistP(pairs=EDGES, epsilon=0.5, delta=0.01),))
    with pytest.raises(ValueError, match="δ"):
        MECHANISMS["smooth_categorical"](approx)
    with pytest.raises(ValueError, match="two inputs"):
        MECHANISMS["smooth_one_bit"](problem)


@pytest.mark.slow
def test_optimizer_reaches_the_expected_misreport_optimum():
    """diffpriv's optimizer (JAX, then certified) on the Categorical-Chain problem with the
    expected 0/1 loss reaches the Smooth Categorical LP with that objective (~10 s: compiling)."""
    eps = 0.3
    value = pb.smooth_categorical(CHAIN, EDGES, eps, objective="expected").value
    design = dp.design(pb.categorical_chain_problem(eps), method="pdhg")
    assert design.certificate.ok
    assert design.result.lower_bound <= value + 1e-9
    assert value - 1e-9 <= design.certificate.loss <= value * (1 + 1e-3)


@pytest.mark.parametrize("name", ["one_bit_cluster", "smooth_one_bit", "smooth_categorical"])
@pytest.mark.parametrize("polish", [True, False])
def test_tiny_probabilities_still_certify(name, polish, monkeypatch):
    """Output laws near 1e-12 are below HiGHS's absolute tolerance: the LP alone leaves edges
    over budget, the float64 polish (mixing with the uniform channel) brings them back."""
    if not polish:
        monkeypatch.setattr(pb, "_polish", lambda dists, owner, tables, edges, bound: tables)
    problem = bernoulli_graph_problem(np.array([1e-13, 3e-13, 1e-12]), [(0, 1), (1, 2)], 0.5)
    cert = dp.certify(problem, MECHANISMS[name](problem), repair=False)
    assert cert.ok == polish
