"""Divergence DistP, divergence DP and extended DistP: specification, certified levels against
independent computations (scipy's relative entropy, a transportation LP), repair, exact mode,
JSON, configs, and the linear solvers' refusal."""

import dataclasses
import json
import math

import numpy as np
import pytest
import scipy.special

import diffpriv as dp
from diffpriv.config import ConfigError
from diffpriv.measures import _transport
from diffpriv.problems import SpecError, problem_from_dict, problem_hash, problem_to_dict
from tests._problems import ITEMS_IN, ITEMS_OUT, three_items_problem
from tests._transport_lp import transport_lp


def random_table(seed=0, concentration=1.0):
    return np.random.default_rng(seed).dirichlet(np.full(ITEMS_OUT, concentration), size=(1, ITEMS_IN))


def kl(p, q):
    """Independent: scipy's elementwise relative entropy."""
    return float(scipy.special.rel_entr(p, q).sum())


def w1_lp(a, b, ground):
    """Independent: W1 as a dense transportation LP (HiGHS)."""
    return transport_lp(a, b, ground)


def test_kl_distp_level_is_the_kl_of_the_lifted_laws():
    problem = three_items_problem(
        (dp.DivergenceDistP(pairs=((0, 1), (1, 2)), divergence="kl", epsilon=10.0),))
    table = random_table()
    (level,) = dp.certify(problem, table, repair=False).constraints
    laws = [item.dist @ table[0] for item in problem.items]
    expected = max(kl(laws[0], laws[1]), kl(laws[1], laws[0]), kl(laws[1], laws[2]), kl(laws[2], laws[1]))
    assert level.ok and level.level == pytest.approx(expected, rel=1e-12)
    assert level.level >= expected  # rounded up
    forward = three_items_problem((dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=10.0,
                                               direction="forward"),))
    (one,) = dp.certify(forward, table, repair=False).constraints
    assert one.level == pytest.approx(kl(laws[0], laws[1]), rel=1e-12)


@pytest.mark.parametrize("name, alpha", [("tv", None), ("chi2", None), ("hellinger", None),
                                         ("reverse_kl", None), ("renyi", 2.0), ("renyi", 0.5)])
def test_divergence_dp_level_by_brute_force(name, alpha):
    problem = three_items_problem((dp.DivergenceDP(divergence=name, alpha=alpha, epsilon=50.0),))
    table = random_table(1)
    (level,) = dp.certify(problem, table, repair=False).constraints
    rows = table[0]

    def d(p, q):
        if name == "tv":
            return 0.5 * np.abs(p - q).sum()
        if name == "chi2":
            return ((p - q) ** 2 / q).sum()
        if name == "hellinger":
            return 0.5 * ((np.sqrt(p) - np.sqrt(q)) ** 2).sum()
        if name == "reverse_kl":
            return kl(q, p)
        return math.log((p**alpha * q ** (1 - alpha)).sum()) / (alpha - 1)

    brute = max(d(rows[i], rows[j]) for i in range(ITEMS_IN) for j in range(ITEMS_IN) if i != j)
    assert level.n_comparisons == ITEMS_IN * (ITEMS_IN - 1) // 2
    assert level.level == pytest.approx(brute, rel=1e-10)


def test_extended_distp_budget_is_eps_times_w1_of_the_inputs():
    problem = three_items_problem(
        (dp.ExtendedDistP(pairs=((0, 1), (0, 2), (1, 2)), divergence="kl", epsilon=1.0),))
    ground = problem.metric()
    (block,) = problem.blocks()
    for k, (i, j) in enumerate(((0, 1), (0, 2), (1, 2))):
        exact = w1_lp(problem.items[i].dist, problem.items[j].dist, ground)
        assert exact * (1 - 1e-9) <= block.scale[k] <= exact  # a certified lower bound, tight
        assert block.eps[k] <= block.scale[k]
    table = random_table(2)
    (level,) = dp.certify(problem, table, repair=False).constraints
    laws = [item.dist @ table[0] for item in problem.items]
    ratios = [max(kl(laws[i], laws[j]), kl(laws[j], laws[i])) / block.scale[k]
              for k, (i, j) in enumerate(((0, 1), (0, 2), (1, 2)))]
    assert level.level == pytest.approx(max(ratios), rel=1e-10)
    assert level.witness["pair"]["distance"] == pytest.approx(block.scale[int(np.argmax(ratios))])


def test_extended_distp_w_infinity_is_a_certified_lower_bound():
    problem = three_items_problem((dp.ExtendedDistP(pairs=((0, 1),), divergence="max", epsilon=1.0,
                                             transport="winf"),))
    (block,) = problem.blocks()
    a, b = (problem.items[k].dist for k in (0, 1))
    exact = _transport.w_infinity(a, b, problem.metric()).value
    # a Hall set proves the exact value under the float metric; the block's is under the
    # Euclidean distances rounded down (the float ones may be up to 3·dim ulps too long)
    assert exact * (1 - 1e-14) <= block.scale[0] <= exact
    assert not block.linear or block.divergence == "max"


def test_certify_repairs_to_the_budget_and_verify_rechecks_exactly():
    problem = three_items_problem((dp.DivergenceDistP(pairs=((0, 1), (1, 2)), divergence="kl", epsilon=0.01),
                            dp.DivergenceDP(divergence="hellinger", epsilon=0.05, name="h"),
                            dp.ExtendedDistP(pairs=((0, 2),), divergence="chi2", epsilon=0.1, name="x")))
    table = random_table(3, concentration=0.3)
    assert not dp.certify(problem, table, repair=False).ok
    cert = dp.certify(problem, table, repair=True)
    assert cert.ok and 0 < cert.repair_t < 1
    for c in cert.constraints:
        assert c.level <= c.epsilon and c.margin >= 0
    d = json.loads(json.dumps(cert.to_dict()))
    assert dp.verify(d).ok and dp.verify(d, exact=True).ok
    d["constraints"][0]["level"] = 0.0  # a stored level is never trusted
    assert not dp.verify(d).ok


def test_a_table_just_over_a_kl_budget_is_refused_in_both_modes():
    problem = three_items_problem((dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=1.0),))
    table = random_table(4)
    laws = [item.dist @ table[0] for item in problem.items[:2]]
    level = max(kl(laws[0], laws[1]), kl(laws[1], laws[0]))
    for eps, ok in ((level * (1 - 1e-6), False), (level * (1 + 1e-6), True)):
        con = dataclasses.replace(problem.constraints[0], epsilon=eps)
        p = dataclasses.replace(problem, constraints=(con,))
        cert = dp.certify(p, table, repair=False)
        assert cert.ok is ok
        report = dp.verify(json.loads(json.dumps(cert.to_dict())), exact=True)
        assert report.ok is ok


def test_kl_is_a_relaxation_of_pure_distp():
    """KL ≤ D∞: a table certified ε-DistP is certified (ε, KL)-DistP on the same pairs."""
    pairs = ((0, 1), (1, 2))
    pure = three_items_problem((dp.DistP(pairs=pairs, epsilon=0.3),))
    cert = dp.certify(pure, random_table(5), repair=True)
    relaxed = three_items_problem((dp.DivergenceDistP(pairs=pairs, divergence="kl", epsilon=0.3),
                            dp.DivergenceDistP(pairs=pairs, divergence="max", epsilon=0.3, name="max")))
    again = dp.certify(relaxed, cert.table, repair=False)
    assert again.ok
    kl_level, max_level = (c.level for c in again.constraints)
    assert kl_level <= max_level <= 0.3
    assert max_level == pytest.approx(cert.constraints[0].level, rel=1e-9)


def test_renyi_orders_one_and_infinity_are_kl_and_max():
    one = three_items_problem((dp.DivergenceDP(divergence="renyi", alpha=1, epsilon=1.0),))
    inf = three_items_problem((dp.DivergenceDP(divergence="renyi", alpha=math.inf, epsilon=1.0),))
    assert one.constraints[0].divergence == "kl" and one.constraints[0].alpha is None
    assert inf.constraints[0].divergence == "max" and inf.blocks()[0].linear


@pytest.mark.parametrize("constraint, message", [
    (dp.DivergenceDP(divergence="renyi", alpha=0.0, epsilon=1.0),
     r"^constraints\[0\]\.alpha: the Rényi order must be > 0"),
    (dp.DivergenceDP(divergence="renyi", alpha=-1.0, epsilon=1.0),
     r"^constraints\[0\]\.alpha: the Rényi order must be > 0"),
    (dp.DivergenceDP(divergence="renyi", epsilon=1.0), r"^constraints\[0\]\.alpha: the Rényi order"),
    (dp.DivergenceDP(divergence="kl", alpha=2.0, epsilon=1.0), r"^constraints\[0\]\.alpha: only"),
    (dp.DivergenceDP(divergence="js", epsilon=1.0), r"^constraints\[0\]\.divergence: must be one of"),
    (dp.DivergenceDP(divergence="kl", epsilon=-1.0), r"^constraints\[0\]\.epsilon"),
    (dp.DivergenceDistP(pairs=((0, 0),), divergence="kl", epsilon=1.0), r"^constraints\[0\]\.pairs"),
    (dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=1.0, direction="back"),
     r"^constraints\[0\]\.direction"),
    (dp.ExtendedDistP(pairs=((0, 1),), divergence="kl", epsilon=1.0, transport="w2"),
     r"^constraints\[0\]\.transport"),
])
def test_bad_parameters_are_one_line_errors(constraint, message):
    with pytest.raises(SpecError, match=message) as err:
        three_items_problem((constraint,))
    assert "\n" not in str(err.value)


def test_extended_distp_needs_a_metric_on_the_inputs():
    with pytest.raises(SpecError, match=r"^constraints\[0\]: extended DistP needs input coordinates"):
        three_items_problem((dp.ExtendedDistP(pairs=((0, 1),), divergence="kl", epsilon=1.0),), coords=False)
    problem = three_items_problem(())
    bad = np.ones((ITEMS_IN, ITEMS_IN)) - np.eye(ITEMS_IN)
    bad[0, 1] = bad[1, 0] = 5.0  # 5 > 1 + 1: the triangle inequality fails
    with pytest.raises(SpecError, match=r"^constraints\[0\]: input_metric: triangle inequality fails"):
        dataclasses.replace(problem, input_metric=bad, constraints=(
            dp.ExtendedDistP(pairs=((0, 1),), divergence="kl", epsilon=1.0),))


def test_json_round_trip_and_hash():
    problem = three_items_problem((
        dp.DivergenceDistP(pairs=((0, 1),), divergence="renyi", alpha=2.5, epsilon=0.4),
        dp.DivergenceDP(divergence="tv", epsilon=0.2, direction="forward"),
        dp.ExtendedDistP(pairs=((1, 2),), divergence="kl", epsilon=1.0, transport="winf")))
    d = json.loads(json.dumps(problem_to_dict(problem)))
    assert d["constraints"][0] == {"kind": "divergence_distp", "name": "divergence_distp",
                                   "divergence": "renyi", "alpha": 2.5, "direction": "both",
                                   "epsilon": 0.4, "pairs": [[0, 1]]}
    back = problem_from_dict(d)
    assert back.constraints == problem.constraints and problem_hash(back) == problem_hash(problem)


def test_linear_solvers_refuse_a_divergence_in_one_line():
    problem = three_items_problem(
        (dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=0.4, name="kl"),))
    with pytest.raises(SpecError, match=r"^constraints\[0\]: the LP reference handles linear constraints "
                                        r"\(max-divergence, hockey-stick\), not the 'kl' divergence of "
                                        r"divergence_distp 'kl'$"):
        dp.solvers.lp(problem)
    linear = three_items_problem((dp.DivergenceDistP(pairs=((0, 1),), divergence="max", epsilon=0.4),))
    assert dp.solvers.lp(linear).value == pytest.approx(
        dp.solvers.lp(three_items_problem((dp.DistP(pairs=((0, 1),), epsilon=0.4),))).value, abs=1e-12)


CONFIG = """
[inputs]
labels = ["a", "b", "c"]
coords = [[0.0], [1.0], [2.0]]

[loss]
kind = "euclidean"

[[items]]
name = "left"
distribution = [0.6, 0.3, 0.1]

[[items]]
name = "right"
distribution = [0.1, 0.3, 0.6]
"""


def _config(tmp_path, constraint: str):
    path = tmp_path / "c.toml"
    path.write_text(CONFIG + "\n[[constraints]]\n" + constraint)
    return dp.load_config(path)[0]


def test_configs_state_every_divergence_kind(tmp_path):
    p = _config(tmp_path, 'kind = "divergence_distp"\ndivergence = "kl"\nepsilon = 0.2\n')
    assert p.constraints[0] == dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=0.2,
                                                  name="divergence_distp0")
    p = _config(tmp_path, 'kind = "divergence_dp"\ndivergence = "renyi"\nalpha = 3\nepsilon = 0.5\n'
                          'direction = "forward"\n')
    assert (p.constraints[0].alpha, p.constraints[0].direction) == (3.0, "forward")
    p = _config(tmp_path, 'kind = "xdistp"\ndivergence = "max"\ntransport = "winf"\nepsilon = 1.0\n'
                          'pairs = [["left", "right"]]\n')
    # W∞ of the two: mass 0.5 must move from a to c (distance 2, rounded down as a lower bound)
    assert 2.0 * (1 - 1e-14) <= p.blocks()[0].scale[0] <= 2.0


@pytest.mark.parametrize("constraint, message", [
    ('kind = "divergence_dp"\ndivergence = "renyi"\nalpha = -2\nepsilon = 0.5\n',
     "constraints[0].alpha: the Rényi order must be > 0"),
    ('kind = "divergence_dp"\nepsilon = 0.5\n',
     "constraints[0].divergence: required key is missing"),
    ('kind = "divergence_dp"\ndivergence = "kl"\nepsilon = 0.5\ndelta = 0.1\n', "constraints[0].delta"),
    ('kind = "ldp"\ndivergence = "kl"\nepsilon = 0.5\n',
     "constraints[0].divergence: ldp takes no divergence"),
    ('kind = "divergence_dp"\ndivergence = "kl"\ntransport = "w1"\nepsilon = 0.5\n',
     "constraints[0].transport: divergence_dp takes no transport"),
])
def test_config_errors_name_the_field(tmp_path, constraint, message):
    with pytest.raises((ConfigError, SpecError)) as err:
        _config(tmp_path, constraint)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_cli_reference_solves_a_divergence_config_as_a_convex_program(tmp_path):
    from typer.testing import CliRunner

    from diffpriv.cli import app

    out = tmp_path / "ref"
    result = CliRunner().invoke(app, ["reference", "configs/divergence.toml", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "convex optimum" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] and summary["status"] == "optimal"
    assert summary["convex_optimum"] == pytest.approx(summary["certified"], rel=1e-6)
    assert [c["budget_text"] for c in summary["constraints"]] == ["KL ≤ 0.05", "Hellinger ≤ 0.2"]
