"""The convex reference solver (cvxpy + CLARABEL): agreement with the LP on linear problems,
certified tables for every divergence family, the orderings the divergences imply between
optimal values, closed-form optima of a binary problem, and its errors."""

import dataclasses
import math

import numpy as np
import pytest
import scipy.optimize

import diffpriv as dp
from diffpriv.problems import SpecError
from diffpriv.problems._known import random_problem
from diffpriv.problems._objectives import Objective
from diffpriv.solvers._convex import ConvexSolveError, solve_convex
from tests._problems import three_items_problem

pytest.importorskip("cvxpy")

PAIRS = ((0, 1), (1, 2), (0, 2))
DIVERGENCES = [("kl", None), ("reverse_kl", None), ("tv", None), ("chi2", None), ("hellinger", None),
               ("renyi", 0.5), ("renyi", 2.0)]


def value(constraint, objective="expected") -> float:
    return solve_convex(three_items_problem((constraint,), objective=objective)).value


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


# -- linear problems: the LP's optimum ------------------------------------------------------------

LINEAR_FAMILIES = [dict(), dict(extra="ldp"), dict(extra="xdp"), dict(delta=0.05),
                   dict(objective="worst"), dict(objective="entry"), dict(n_profiles=3)]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("family", LINEAR_FAMILIES, ids=lambda f: ",".join(map(str, f.values())) or "pure")
def test_linear_problems_match_the_lp(family, seed):
    problem = random_problem(seed, n_in=4 + seed, **family)
    lp = dp.solvers.lp(problem).value
    result = solve_convex(problem)
    assert result.status == "optimal" and result.solver == "CLARABEL"
    assert rel(result.value, lp) <= 1e-6 or abs(result.value - lp) <= 1e-9  # measured ≤ 3e-7
    assert result.table.shape == problem.shape
    np.testing.assert_allclose(result.table.sum(-1), 1.0, atol=1e-12)
    assert rel(problem.objective_value(result.table), lp) <= 1e-6 or abs(result.value - lp) <= 1e-9


def test_a_support_mask_and_another_solver_match_the_lp():
    problem = random_problem(4, n_in=5, extra="ldp")
    support = np.random.default_rng(0).random(problem.shape) < 0.6
    support[..., 0] = True  # one output every row may use: the problem stays feasible
    problem = dataclasses.replace(problem, support=support)
    lp = dp.solvers.lp(problem).value
    for solver in ("CLARABEL", "HIGHS"):
        result = solve_convex(problem, solver=solver)
        assert result.solver == solver and rel(result.value, lp) <= 1e-6
        assert np.all(result.table[~support] == 0)


# -- divergence budgets: certified tables -----------------------------------------------------------

def _family(kind: str, name: str, alpha, eps: float):
    if kind == "distp":
        return dp.DivergenceDistP(pairs=PAIRS, divergence=name, alpha=alpha, epsilon=eps)
    if kind == "dp":
        return dp.DivergenceDP(divergence=name, alpha=alpha, epsilon=eps)
    if kind == "forward":
        return dp.DivergenceDistP(pairs=PAIRS, divergence=name, alpha=alpha, epsilon=eps, direction="forward")
    return dp.ExtendedDistP(pairs=PAIRS, divergence=name, alpha=alpha, epsilon=2 * eps, transport=kind)


def _certified(problem, result, eps: float):
    cert = dp.certify(problem, result.table, repair=True)
    assert cert.ok
    assert cert.repair_t <= 1e-5  # measured: 0 or at most ~5e-8
    assert rel(cert.loss, result.value) <= 1e-5  # measured ≤ 3e-8
    level = cert.constraints[0].level
    assert level <= eps
    return level


@pytest.mark.parametrize("kind", ["distp", "dp", "w1", "winf", "forward"])
@pytest.mark.parametrize("name, alpha", DIVERGENCES + [("max", None)], ids=lambda v: str(v))
def test_the_optimal_table_certifies_and_uses_its_budget(name, alpha, kind):
    constraint = _family(kind, name, alpha, 0.05)
    problem = three_items_problem((constraint,))
    result = solve_convex(problem)
    level = _certified(problem, result, constraint.epsilon)
    # The budget binds at the optimum (0.05 is tight on this problem): the program is not
    # stricter than the divergence it models.
    assert level >= constraint.epsilon * (1 - 1e-4)


@pytest.mark.parametrize("objective", ["worst", "entry"])
@pytest.mark.parametrize("name, alpha", [("kl", None), ("hellinger", None), ("renyi", 3.0)])
def test_epigraph_objectives_with_a_divergence_certify(name, alpha, objective):
    constraint = dp.DivergenceDP(divergence=name, alpha=alpha, epsilon=0.1)
    problem = three_items_problem((constraint,), objective=objective)
    _certified(problem, solve_convex(problem), 0.1)


def test_profiles_and_a_support_mask_with_a_divergence_certify():
    """Input 0 may not report y1, and KL between the rows of inputs 0–1 and 1–2 is +∞ unless
    they agree on which outputs they use: inputs 1 and 2 must leave y1 at exactly 0 too (an
    interior point would leave ~1e-9, an infinite level for the certifier)."""
    problem = random_problem(1, n_in=5, n_profiles=3)
    support = np.ones(problem.shape, dtype=bool)
    support[:, 0, 1] = False
    problem = dataclasses.replace(problem, support=support, constraints=(
        dp.DivergenceDistP(pairs=((0, 1), (1, 2)), divergence="kl", epsilon=0.1),
        dp.DivergenceDP(divergence="kl", epsilon=0.5, pairs=((0, 1), (1, 2)), name="dp"),
        dp.DivergenceDP(divergence="chi2", epsilon=0.5, pairs=((3, 4),), name="chi2")))
    result = solve_convex(problem)
    assert np.all(result.table[:, :3, 1] == 0)
    cert = dp.certify(problem, result.table, repair=True)
    assert cert.ok and cert.repair_t <= 1e-5 and rel(cert.loss, result.value) <= 1e-5


# -- orderings between the optimal values -----------------------------------------------------------

def test_relaxations_order_the_optimal_values():
    eps, slack = 0.3, 1e-7
    v = {(name, alpha): value(_family("distp", name, alpha, eps)) for name, alpha in DIVERGENCES}
    pure = dp.solvers.lp(three_items_problem((dp.DistP(pairs=PAIRS, epsilon=eps),))).value
    v_max = value(_family("distp", "max", None, eps))
    kl = v[("kl", None)]
    assert rel(v_max, pure) <= 1e-6  # the max-divergence block is the LP's pure DistP
    # Rényi divergences grow with the order (½ ≤ 1 = KL ≤ 2 ≤ ∞ = max): feasible sets shrink.
    assert v[("renyi", 0.5)] <= kl + slack <= v[("renyi", 2.0)] + 2 * slack <= v_max + 3 * slack
    assert kl <= pure + slack and kl <= v[("chi2", None)] + slack  # KL ≤ ln(1 + χ²) ≤ χ²
    assert v[("hellinger", None)] <= v[("tv", None)] + slack  # H² ≤ TV
    assert value(_family("distp", "tv", None, math.sqrt(eps / 2))) <= kl + slack  # Pinsker
    assert value(_family("forward", "kl", None, eps)) <= kl + slack  # one direction only
    # Identities: KL both ways = reverse KL both ways; D_2 = ln(1 + χ²); D_½ = −2 ln(1 − H²).
    assert rel(v[("reverse_kl", None)], kl) <= 1e-6
    assert rel(v[("renyi", 2.0)], value(_family("distp", "chi2", None, math.expm1(eps)))) <= 1e-6
    assert rel(v[("renyi", 0.5)], value(_family("distp", "hellinger", None, -math.expm1(-eps / 2)))) <= 1e-6
    assert v[("hellinger", None)] + 1e-3 < kl < pure - 1e-3  # H² ≤ KL/2: and the gaps are real here


# -- a closed-form anchor ---------------------------------------------------------------------------

def binary_problem(name: str, alpha, eps: float) -> dp.Problem:
    """Two inputs, two outputs, 0/1 loss, uniform prior, (ε, D)-DP between the inputs."""
    bits = dp.Domain(("0", "1"))
    return dp.Problem(bits, bits, 1.0 - np.eye(2), np.full((1, 2), 0.5),
                      constraints=(dp.DivergenceDP(divergence=name, alpha=alpha, epsilon=eps),))


def flip_level(name: str, alpha, p: float) -> float:
    """D of the two rows (1 − p, p) and (p, 1 − p) of a symmetric flip table (same both ways)."""
    if name == "tv":
        return 1 - 2 * p
    if name == "kl":
        return (1 - 2 * p) * math.log((1 - p) / p)
    if name == "hellinger":
        return 1 - 2 * math.sqrt(p * (1 - p))
    if name == "chi2":
        return (1 - 2 * p) ** 2 / (p * (1 - p))
    return math.log((1 - p) ** alpha * p ** (1 - alpha) + p**alpha * (1 - p) ** (1 - alpha)) / (alpha - 1)


@pytest.mark.parametrize("eps", [0.05, 0.4])
@pytest.mark.parametrize("name, alpha", [("tv", None), ("kl", None), ("hellinger", None), ("chi2", None),
                                         ("renyi", 0.5), ("renyi", 2.0)], ids=lambda v: str(v))
def test_binary_problem_closed_form(name, alpha, eps):
    """The feasible set is convex and symmetric under swapping both labels, so a symmetric flip
    table ``p`` is optimal: the least ``p ≤ ½`` with ``D ≤ ε``, and the expected loss is ``p``
    (each level decreases in ``p`` on ``(0, ½)``). TV: ``|1 − 2p| ≤ ε`` gives ``(1 − ε)/2``."""
    if name == "tv":
        p = (1 - eps) / 2
    elif name == "hellinger":
        p = (1 - math.sqrt(1 - (1 - eps) ** 2)) / 2  # 2√(p(1 − p)) = 1 − ε
    else:
        p = scipy.optimize.brentq(lambda q: flip_level(name, alpha, q) - eps, 1e-12, 0.5, xtol=1e-15)
    assert flip_level(name, alpha, p) == pytest.approx(eps, rel=1e-9)
    problem = binary_problem(name, alpha, eps)
    result = solve_convex(problem)
    assert result.value == pytest.approx(p, abs=1e-7)  # measured ≤ 2e-9
    _certified(problem, result, eps)


# -- errors ------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class MedianLoss(Objective):
    kind = "median"
    text = "median loss"
    epigraph = ""

    def value(self, problem, table):
        return 0.0


def test_an_unsupported_objective_is_a_one_line_spec_error():
    problem = dataclasses.replace(three_items_problem((_family("dp", "kl", None, 0.1),)),
                                  objective=MedianLoss())
    with pytest.raises(SpecError, match=r"^objective: the convex reference handles 'expected', 'worst', "
                                        r"'entry' and 'transport', not 'median'$") as err:
        solve_convex(problem)
    assert "\n" not in str(err.value)


def test_an_infeasible_problem_raises():
    """Rows with disjoint supports have infinite KL: no table meets a KL budget."""
    bits = dp.Domain(("0", "1"))
    problem = dp.Problem(bits, bits, 1.0 - np.eye(2), np.full((1, 2), 0.5), support=np.eye(2, dtype=bool),
                         constraints=(dp.DivergenceDP(divergence="kl", epsilon=5.0),))
    with pytest.raises(ConvexSolveError, match="infeasible"):
        solve_convex(problem)


def test_the_conic_solvers_value_is_not_the_bound_stated():
    """KL-DistP between two sparse items on a 4×4 grid: Clarabel's optimal value lies
    4·10⁻⁹ above the loss of its own certified table (its tolerance). The stated bound is the
    weak-duality bound of the tangent relaxation at Clarabel's table: at most the certified
    loss, within the default gap of it, and the certificate passes ``verify``."""
    rng = np.random.default_rng(0)
    dom = dp.Domain.grid(4, 4, 1.0)
    a, b = np.zeros(16), np.zeros(16)
    a[rng.choice(16, 5, replace=False)] = rng.random(5)
    b[rng.choice(16, 5, replace=False)] = rng.random(5)
    a, b = a / a.sum(), b / b.sum()
    problem = dp.Problem(dom, dom, dom.distances(dom), (a + b) / 2, items=(dp.Item("a", a), dp.Item("b", b)),
                         constraints=(dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=0.3),))
    value = solve_convex(problem).value
    d = dp.design(problem, method="exact", quantize=53)
    assert d.result.method == "clarabel"
    assert d.result.lower_bound < value
    assert d.result.lower_bound <= d.certificate.loss
    assert d.gap <= 1e-4
    assert dp.verify(d.certificate).ok
