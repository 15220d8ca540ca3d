"""The problem specification: every validation rule raises a SpecError naming its field; the
comparisons are cached and read-only; a problem dict that is malformed in any way is a SpecError."""

import copy
import dataclasses
import json
import re

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.problems._json import problem_from_dict, problem_hash, problem_to_dict

SpecError = dp.problems.SpecError


def make(**changes) -> dp.Problem:
    """A valid problem on 3 inputs with coordinates, two items and one DistP constraint."""
    X = dp.Domain(("a", "b", "c"), coords=np.array([[0.0], [1.0], [2.0]]))
    kw = dict(
        inputs=X, outputs=X, loss=1 - np.eye(3), prior=np.ones(3) / 3,
        items=(dp.Item("i", np.array([0.5, 0.5, 0.0])), dp.Item("j", np.array([0.0, 0.5, 0.5]))),
        constraints=(dp.DistP(((0, 1),), 1.0),),
    )
    kw.update(changes)
    return dp.Problem(**kw)


def item(name="i", dist=(0.5, 0.5, 0.0), profile=0):
    return dp.Item(name, np.asarray(dist, dtype=np.float64), profile)


NO_COORDS = dp.Domain(("a", "b", "c"))
ASYMMETRIC = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.5, 0.0]])

# (what is wrong, changes to make(), the start of the expected message)
RULES = [
    ("loss shape", dict(loss=np.ones((2, 3))), "loss: shape (2, 3)"),
    ("loss NaN", dict(loss=np.where(np.eye(3) > 0, np.nan, 1.0)), "loss: has a NaN"),
    ("loss negative", dict(loss=-np.ones((3, 3))), "loss: has a negative entry"),
    ("loss not numbers", dict(loss=[["x"] * 3] * 3), "loss: expected an array of numbers"),
    ("prior shape", dict(prior=np.ones(4) / 4), "prior: shape (1, 4)"),
    ("prior sum", dict(prior=np.array([0.5, 0.2, 0.2])), "prior: sums to 0.9"),
    ("prior negative", dict(prior=np.array([1.5, -0.5, 0.0])), "prior: has a negative entry"),
    ("prior NaN", dict(prior=np.array([np.nan, 0.5, 0.5])), "prior: has a NaN"),
    ("profiles duplicate", dict(profiles=("p", "p")), "profiles: duplicate label 'p'"),
    ("profiles a string", dict(profiles="ab"), "profiles: expected a sequence of labels"),
    ("objective", dict(objective="median"),
     "objective: must be 'expected', 'worst', 'entry', 'transport', 'estimation', 'information', "
     "'sinkhorn' or 'python'"),
    ("item duplicate name", dict(items=(item("i"), item("i"))), "items[1].name: duplicate item name"),
    ("item name not a string", dict(items=(item(3), item("j"))), "items[0].name: expected a string"),
    ("item profile out of range", dict(items=(item(profile=1), item("j"))),
     "items[0].profile: index 1 out of range for 1 profiles"),
    ("item profile a string", dict(items=(item(profile="x"), item("j"))),
     "items[0].profile: expected an integer, got 'x'"),
    ("item profile a bool", dict(items=(item(profile=True), item("j"))),
     "items[0].profile: expected an integer"),
    ("item profile fractional", dict(items=(item(profile=0.5), item("j"))),
     "items[0].profile: expected an integer"),
    ("item length", dict(items=(item(dist=(0.5, 0.5)), item("j"))),
     "items.i.distribution: has 2 entries, expected 3"),
    ("item sum", dict(items=(item(dist=(0.5, 0.6, 0.0)), item("j"))),
     "items.i.distribution: sums to 1.1"),
    ("item not an Item", dict(items=((0.5, 0.5, 0.0),)), "items[0]: expected an Item"),
    ("pairs not a sequence", dict(constraints=(dp.DistP(5, 1.0),)),
     "constraints[0].pairs: expected a sequence of pairs"),
    ("no pairs", dict(constraints=(dp.DistP((), 1.0),)), "constraints[0].pairs: no pairs"),
    ("pair not a sequence", dict(constraints=(dp.LocalDP(1.0, pairs=(0, 1)),)),
     "constraints[0].pairs[0]: a pair must be a sequence of two indices"),
    ("pair of three", dict(constraints=(dp.LocalDP(1.0, pairs=((0, 1), (0, 1, 2))),)),
     "constraints[0].pairs[1]: a pair must be a sequence of two indices"),
    ("pair non-integral", dict(constraints=(dp.DistP(((0, 1.7),), 1.0),)),
     "constraints[0].pairs[0]: expected an integer, got 1.7"),
    ("pair a bool", dict(constraints=(dp.DistP(((False, True),), 1.0),)),
     "constraints[0].pairs[0]: expected an integer"),
    ("pair a string", dict(constraints=(dp.LocalDP(1.0, pairs=(("0", "1"),)),)),
     "constraints[0].pairs[0]: expected an integer"),
    ("pair out of range", dict(constraints=(dp.DistP(((0, 2),), 1.0),)),
     "constraints[0].pairs[0]: item index 2 out of range (have 2)"),
    ("input pair out of range", dict(constraints=(dp.LocalDP(1.0, pairs=((0, -1),)),)),
     "constraints[0].pairs[0]: input index -1 out of range (have 3)"),
    ("pair with itself", dict(constraints=(dp.ExtendedDP(1.0, pairs=((1, 1),)),)),
     "constraints[0].pairs[0]: pair (1, 1) compares input 1 with itself"),
    ("delta 1", dict(constraints=(dp.DistP(((0, 1),), 1.0, 1.0),)),
     "constraints[0].delta: must be in [0, 1)"),
    ("delta negative", dict(constraints=(dp.LocalDP(1.0, -0.1),)), "constraints[0].delta: must be >= 0"),
    ("epsilon negative", dict(constraints=(dp.DistP(((0, 1),), -1.0),)),
     "constraints[0].epsilon: must be >= 0"),
    ("epsilon NaN", dict(constraints=(dp.LocalDP(float("nan")),)), "constraints[0].epsilon: must be finite"),
    ("epsilon infinite", dict(constraints=(dp.LocalDP(float("inf")),)),
     "constraints[0].epsilon: must be finite"),
    ("epsilon overflows float64", dict(constraints=(dp.LocalDP(10**400),)),
     "constraints[0].epsilon: must be finite"),
    ("epsilon a bool", dict(constraints=(dp.LocalDP(True),)), "constraints[0].epsilon: expected a number"),
    ("epsilon a string", dict(constraints=(dp.LocalDP("1"),)), "constraints[0].epsilon: expected a number"),
    ("constraint name", dict(constraints=(dp.LocalDP(1.0, name=7),)),
     "constraints[0].name: expected a string"),
    ("constraint kind", dict(constraints=("ldp",)), "constraints[0].kind: unknown constraint str"),
    ("xdp without coordinates or metric", dict(inputs=NO_COORDS, outputs=NO_COORDS,
                                               constraints=(dp.ExtendedDP(1.0),)),
     "constraints[0]: extended DP needs input coordinates or an input metric"),
    ("support shape", dict(support=np.ones((2, 3), dtype=bool)), "support: shape (2, 3)"),
    ("support with an empty row", dict(support=np.array([[1, 1, 1], [0, 0, 0], [1, 1, 1]], dtype=bool)),
     "support: input 'b' of profile 'all' has no allowed output"),
    ("metric shape", dict(input_metric=np.zeros((2, 2))), "input_metric: shape (2, 2), expected (3, 3)"),
    ("metric negative", dict(input_metric=-np.ones((3, 3))), "input_metric: must be finite and non-negative"),
    ("metric NaN", dict(input_metric=np.full((3, 3), np.nan)),
     "input_metric: must be finite and non-negative"),
    ("metric diagonal", dict(input_metric=np.ones((3, 3))),
     "input_metric: must have a zero diagonal, d[0, 0] = 1"),
    ("metric asymmetric", dict(input_metric=ASYMMETRIC), "input_metric: must be symmetric, d[1, 2] = 1"),
]


@pytest.mark.parametrize(("changes", "message"), [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_each_rule_raises_a_spec_error_naming_the_field(changes, message):
    with pytest.raises(SpecError, match="^" + re.escape(message)):
        make(**changes)


DOMAIN_RULES = [
    (dict(labels=()), "domain.labels: is empty"),
    (dict(labels=("a", "a")), "domain.labels: duplicate label 'a'"),
    (dict(labels="abc"), "domain.labels: expected a sequence of labels"),
    (dict(labels=("a", "b"), coords=np.zeros((3, 2))), "domain.coords: shape (3, 2) does not match 2"),
    (dict(labels=("a", "b"), coords=[[0.0], [np.inf]]), "domain.coords: has a NaN or infinite entry"),
    (dict(labels=("a", "b"), coords=["x", "y"]), "domain.coords: expected an array of numbers"),
]


@pytest.mark.parametrize(("kwargs", "message"), DOMAIN_RULES)
def test_domain_rules(kwargs, message):
    with pytest.raises(SpecError, match="^" + re.escape(message)):
        dp.Domain(**kwargs)


def test_values_that_are_valid_if_unusual():
    # Integral floats and numpy integers are indices; e^ε overflowing float64 is a valid budget.
    p = make(items=(item(profile=0.0), item("j", (0.0, 0.5, 0.5))),
             constraints=(dp.DistP(((np.int64(0), 1.0),), 1e300),
                          dp.LocalDP(800.0, pairs=np.array([[0, 2]]))))
    assert p.items[0].profile == 0 and isinstance(p.items[0].profile, int)
    assert p.constraints[0].pairs == ((0, 1),) and p.constraints[1].pairs == ((0, 2),)
    assert all(type(i) is int for pair in p.constraints[1].pairs for i in pair)
    metric = np.array([[0.0, 0.0, 2.0], [0.0, 0.0, 2.0], [2.0, 2.0, 0.0]])  # a pseudometric
    assert make(input_metric=metric, constraints=(dp.ExtendedDP(1.0),)).metric() is not None


def test_distribution_within_2_pow_40_of_one_is_kept_bit_identical():
    dist = np.array([0.5, 0.5 + 2.0**-42, 0.0])
    p = make(items=(item(dist=dist), item("j", (0.0, 0.5, 0.5))))
    assert np.array_equal(p.items[0].dist, dist)
    q = make(items=(item(dist=[0.5, 0.5 + 1e-10, 0.0]), item("j", (0.0, 0.5, 0.5))))
    assert q.items[0].dist.sum() == pytest.approx(1.0, abs=2.0**-52)  # renormalised


def test_blocks_are_typed_cached_and_read_only():
    p = make(constraints=(dp.DistP(((0, 1),), 1.0), dp.LocalDP(1.0), dp.ExtendedDP(0.5)))
    blocks = p.blocks()
    assert p.blocks() is blocks
    P = dp.problems
    assert [type(b) for b in blocks] == [P.MixtureBlock, P.PairBlock, P.PairBlock]
    assert [b.size for b in blocks] == [1, 3, 3] and [b.constraint for b in blocks] == [0, 1, 2]
    assert [b.divergence for b in blocks] == ["max", "max", "max"]
    xdp = blocks[2]  # all pairs x < x' of the three inputs, ε·d as budget, d as scale
    assert xdp.a.tolist() == [0, 0, 1] and xdp.b.tolist() == [1, 2, 2]
    np.testing.assert_array_equal(xdp.scale, p.metric()[xdp.a, xdp.b])
    np.testing.assert_array_equal(xdp.eps, 0.5 * xdp.scale)
    for b in blocks:
        for f in dataclasses.fields(b):
            a = getattr(b, f.name)
            if isinstance(a, np.ndarray):
                assert not a.flags.writeable, f.name
                with pytest.raises(ValueError, match="read-only"):
                    a[0] = 0
    assert blocks[0].describe(0, p)["items"] == [p.items[0].name, p.items[1].name]
    assert blocks[2].describe(0, p)["distance"] == pytest.approx(float(p.metric()[0, 1]))
    # Building a block copies: the caller's arrays stay writable and unchanged.
    w = np.eye(2)
    c = dp.problems.MixtureBlock(0, np.zeros(2, int), w, np.zeros(2, int), w, np.zeros((2, 2), int),
                        np.ones(2), np.ones(2))
    assert w.flags.writeable and c.wa is not w and c.sa.dtype == np.int64
    with pytest.raises(ValueError, match="divergence"):
        dp.problems.PairBlock(0, [0], [0], [1], [1.0], [1.0], delta=0.1, divergence="max")


def test_short_docstrings_exist():
    for obj in (dp.Domain.size, dp.Domain.index, dp.problems.PairBlock.size, dp.problems.MixtureBlock.size):
        assert obj.__doc__ and obj.__doc__.strip()


# -- problem_from_dict ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def spec():
    p = make(items=(item(dist=[0.5, 0.5 + 2.0**-42, 0.0]), item("j", (0.0, 0.5, 0.5))),
             constraints=(dp.DistP(((0, 1),), 1.0, 0.1, "d"), dp.LocalDP(1.0, pairs=((0, 2),)),
                          dp.ExtendedDP(2.0)),
             support=np.ones((3, 3), dtype=bool))
    return json.loads(json.dumps(problem_to_dict(p)))


def test_round_trip_is_bit_identical(spec):
    p = problem_from_dict(spec)
    assert problem_to_dict(p) == spec
    assert problem_hash(problem_from_dict(problem_to_dict(p))) == problem_hash(p)


def _set(path, value):
    def edit(d):
        *parents, last = path
        for key in parents:
            d = d[key]
        if value is DELETE:
            del d[last]
        else:
            d[last] = value
    return edit


DELETE = object()

MALFORMED = [
    ("loss missing", _set(["loss"], DELETE), "problem: missing field 'loss'"),
    ("inputs not a mapping", _set(["inputs"], ["a", "b", "c"]), "inputs: expected a mapping, got list"),
    ("labels a string", _set(["inputs", "labels"], "abc"), "inputs.labels: expected a list, got str"),
    ("labels missing", _set(["outputs", "labels"], DELETE), "outputs: missing field 'labels'"),
    ("coords not numbers", _set(["outputs", "coords"], ["x", "y", "z"]), "outputs.coords: expected an array"),
    ("profiles a string", _set(["profiles"], "all"), "profiles: expected a list, got str"),
    ("items not a list", _set(["items"], {"i": 1}), "items: expected a list, got dict"),
    ("item not a mapping", _set(["items", 0], [0.5, 0.5, 0.0]), "items[0]: expected a mapping, got list"),
    ("item without dist", _set(["items", 1, "dist"], DELETE), "items[1]: missing field 'dist'"),
    ("item profile a string", _set(["items", 0, "profile"], "x"), "items[0].profile: expected an integer"),
    ("item dist not numbers", _set(["items", 0, "dist"], "abc"), "items.i.distribution: expected"),
    ("constraints not a list", _set(["constraints"], 3), "constraints: expected a list, got int"),
    ("constraint not a mapping", _set(["constraints", 1], "ldp"),
     "constraints[1]: expected a mapping, got str"),
    ("constraint without epsilon", _set(["constraints", 0, "epsilon"], DELETE),
     "constraints[0]: missing field 'epsilon'"),
    ("constraint kind", _set(["constraints", 2, "kind"], "zdp"),
     "constraints[2].kind: unknown constraint kind"),
    ("epsilon overflows", _set(["constraints", 1, "epsilon"], 10**400),
     "constraints[1].epsilon: must be finite"),
    ("delta a string", _set(["constraints", 0, "delta"], "0.1"), "constraints[0].delta: expected a number"),
    ("pairs not a list", _set(["constraints", 0, "pairs"], 5),
     "constraints[0].pairs: expected a list, got int"),
    ("pair not a list", _set(["constraints", 1, "pairs"], [0, 2]), "constraints[1].pairs[0]: a pair must be"),
    ("pair non-integral", _set(["constraints", 1, "pairs"], [[0, 1.5]]),
     "constraints[1].pairs[0]: expected an"),
    ("pair index overflows", _set(["constraints", 1, "pairs"], [[0, 10**400]]),
     "constraints[1].pairs[0]: input"),
    ("loss overflows", _set(["loss", 0, 0], 10**400), "loss: expected an array of numbers"),
    ("loss ragged", _set(["loss", 0], [1.0]), "loss: expected an array of numbers"),
    ("metric overflows", _set(["input_metric"], [[0, 10**400, 0]] * 3), "input_metric: expected an array"),
    ("support ragged", _set(["support", 0, 1], [1]), "support: expected a boolean array"),
    ("objective unknown", _set(["objective"], ["worst"]),
     "objective: must be 'expected', 'worst', 'entry', 'transport', 'estimation', 'information', "
     "'sinkhorn' or 'python'"),
]


@pytest.mark.parametrize(("edit", "message"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_problem_dicts_raise_spec_errors_naming_the_field(spec, edit, message):
    d = copy.deepcopy(spec)
    edit(d)
    with pytest.raises(SpecError, match="^" + re.escape(message)):
        problem_from_dict(d)


@pytest.mark.parametrize("value", [None, [], "problem", 3])
def test_problem_dict_must_be_a_mapping(value):
    with pytest.raises(SpecError, match="^problem: expected a mapping"):
        problem_from_dict(value)


def test_size_estimates_scale_with_pairs_not_with_dense_rows():
    from diffpriv.certification._laws import CHUNK
    from diffpriv.problems import SizeError, admit, estimate
    from diffpriv.problems._json import DIGEST_LIMIT
    from diffpriv.problems._size import PER_COMPARISON

    dom = dp.Domain.grid(20, 20)
    loss = dom.distances(dom)
    prior = np.full(400, 1 / 400)
    all_pairs = dp.Problem(dom, dom, loss, prior, constraints=(dp.LocalDP(1.0),))
    four = tuple((i, i + 1) for i in range(399) if (i + 1) % 20)
    some = dp.Problem(dom, dom, loss, prior, constraints=(dp.LocalDP(1.0, pairs=four),))
    # The multipliers dominate: 2 · pairs · |Y| numbers, 10 copies of 8 bytes, plus the table.
    # The certifier holds a few tables and a chunk of comparisons' laws, at most CHUNK entries.
    k_all, k_four = 400 * 399 // 2, len(four)
    for p, k in ((all_pairs, k_all), (some, k_four)):
        assert estimate(p, "optimizer") == 8 * (15 * 400 * 400 + 12 * 2 * k * 400) + 24 * k
        chunk = min(k, CHUNK // 400) * 400
        text = 70 * 400 * 400 if 400 * 400 <= DIGEST_LIMIT else 0  # an inline table's JSON text
        certifier = 8 * (4 * 400 * 400 + 16 * chunk) + text + PER_COMPARISON * k
        assert estimate(p, "certifier") == certifier
    assert "_blocks" not in all_pairs.__dict__  # estimated without building a block
    admit(some, "optimizer", limit=estimate(some, "optimizer"))
    with pytest.raises(SizeError, match=r"^inputs: 400 inputs × 400 outputs × 1 profile\(s\) with "
                                        r"ldp on all pairs needs ~.* for the lp, above the .* "
                                        r"limit; use neighbours or radius$"):
        admit(all_pairs, "lp", limit=estimate(all_pairs, "lp") - 1)


# -- objectives as objects ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _RowPower(dp.problems.Objective):
    """A test objective with a parameter: Σ π[s,x] (Σ_y A L)^p (not linear for p ≠ 1)."""

    power: float = 2.0
    kind = "test_row_power"
    text = "row-power loss"
    epigraph = False

    def value(self, problem, table):
        rows = np.einsum("sxy,xy->sx", table, problem.loss)
        return float(np.sum(problem.prior * rows ** self.power))


@pytest.fixture(scope="module")
def row_power():
    dp.problems.register_objective(_RowPower)
    yield _RowPower
    del dp.problems.OBJECTIVES[_RowPower.kind]


def test_objective_kinds_and_objects_are_the_same_problem():
    by_kind, by_object = make(objective="worst"), make(objective=dp.WorstCaseLoss())
    assert by_kind.objective == by_object.objective == dp.WorstCaseLoss()
    assert problem_hash(by_kind) == problem_hash(by_object)
    assert problem_to_dict(by_object)["objective"] == "worst"  # the JSON form is unchanged
    assert isinstance(make().objective, dp.ExpectedLoss)
    table = np.tile(np.array([0.6, 0.3, 0.1]), (1, 3, 1))
    assert make().objective_value(table) == make().expected_loss(table)
    assert by_kind.objective_value(table) == by_kind.worst_loss(table) == pytest.approx(0.9)
    assert make().expected_loss(table) == pytest.approx((0.4 + 0.7 + 0.9) / 3)


def test_largest_entry_objective():
    """``entry``: the largest loss-weighted entry over rows of positive prior, by brute force;
    its JSON form is the bare kind."""
    p = make(objective="entry")
    assert isinstance(p.objective, dp.LargestEntry) and problem_to_dict(p)["objective"] == "entry"
    rng = np.random.default_rng(3)
    table = rng.dirichlet(np.ones(p.shape[2]), size=p.shape[:2])
    best = max(p.loss[x, y] * table[s, x, y] for s in range(p.shape[0]) for x in range(p.shape[1])
               for y in range(p.shape[2]) if p.prior[s, x] > 0)
    assert p.objective_value(table) == best
    assert dp.certify(p, table, repair=True).loss == pytest.approx(best, rel=1e-12)  # it renormalises rows


def test_objective_registry_is_the_extension_point(row_power):
    """A new objective is one registered class: JSON round trip with its parameters, the
    certifier uses its value, and the linear solvers refuse it in one line."""
    p = make(objective=row_power(power=3.0))
    d = problem_to_dict(p)
    assert d["objective"] == {"kind": "test_row_power", "power": 3.0}
    back = problem_from_dict(json.loads(json.dumps(d)))
    assert back.objective == row_power(3.0) and problem_hash(back) == problem_hash(p)
    assert problem_hash(make(objective=row_power(2.0))) != problem_hash(p)
    table = np.tile(np.eye(3)[None] * 0.5 + 0.5 / 3, (1, 1, 1))
    rows = (table[0] * p.loss).sum(-1)
    cert = dp.certify(p, table, repair=True)
    assert cert.loss == pytest.approx(np.mean(rows ** 3)) and cert.objective == d["objective"]
    assert dp.verify(json.loads(json.dumps(cert.to_dict()))).ok
    with pytest.raises(SpecError, match=r"^objective: the LP reference handles 'expected', "
                                        r"'worst', 'entry' and 'transport', not 'test_row_power'$"):
        dp.solvers.lp(p)
    with pytest.raises(SpecError, match=r"^objective: the optimizer handles"):
        dp.optimize(p, steps=10)
    with pytest.raises(SpecError, match=r"^objective: objective 'test_row_power' takes the "
                                        r"parameters power, got sharpness$"):
        problem_from_dict({**d, "objective": {"kind": "test_row_power", "sharpness": 1}})


def test_a_certificate_with_another_objective_fails_verification():
    cert = dp.certify(make(), np.full((1, 3, 3), 1 / 3), repair=True).to_dict()
    cert["objective"] = "worst"
    report = dp.verify(cert)
    assert not report.ok and any(f.startswith("objective: stored 'worst'") for f in report.failures)


def test_a_kind_is_registered_once():
    with pytest.raises(ValueError, match=r"^constraint kind 'distp' is registered twice$"):
        dp.problems.register_constraint(dp.DistP)
    with pytest.raises(ValueError, match=r"^objective kind 'worst' is registered twice$"):
        dp.problems.register_objective(dp.WorstCaseLoss)
    assert dp.problems.FAMILIES["distp"] is dp.DistP and dp.problems.OBJECTIVES["worst"] is dp.WorstCaseLoss


@pytest.mark.parametrize("radius", [1.0, np.sqrt(2.0), 2.5])
def test_pairs_within_is_the_brute_force_radius_graph(radius):
    """``dp.problems.pairs_within`` lists exactly the pairs ``i < j`` at most ``radius`` apart (a 6 × 7
    grid: 4-neighbour, 8-neighbour and a wider radius), sorted, against the distance matrix."""
    dom = dp.Domain.grid(6, 7, 1.0)
    d = dom.distances(dom)
    i, j = np.nonzero(np.triu(d <= radius * (1 + 1e-9), k=1))
    assert dp.problems.count_pairs_within(dom, radius) == i.size
    assert dp.problems.pairs_within(dom, radius) == tuple(zip(i.tolist(), j.tolist(), strict=True))
    assert len(dp.problems.pairs_within(dp.Domain.grid(6, 7), 1.0)) == 6 * 6 + 5 * 7
    with pytest.raises(dp.problems.SpecError, match="domain.pairs_within: needs coordinates"):
        dp.problems.pairs_within(dp.Domain(("a", "b")), 1.0)
    with pytest.raises(dp.problems.SpecError, match="domain.pairs_within: radius must be finite"):
        dp.problems.pairs_within(dom, float("nan"))


def test_scaled_multiplies_every_budget_and_leaves_the_problem_alone():
    problem = dp.problems.random_problem(3, n_in=4, n_out=4)
    double = problem.scaled(2.0)
    assert [c.epsilon for c in double.constraints] == [2.0 * c.epsilon for c in problem.constraints]
    assert double.objective == problem.objective and double.shape == problem.shape


def test_with_budget_sets_one_constraints_budget_and_repr_is_short():
    from diffpriv.problems import pairs_within
    from diffpriv.problems._checks import SpecError

    dom = dp.Domain.grid(3, 3, 1.0)
    problem = dp.Problem(dom, dom, dom.distances(dom), np.full(9, 1 / 9), constraints=(
        dp.ExtendedDP(1.0, pairs=pairs_within(dom, 1.0), name="geo"),
        dp.LocalDP(4.0, delta=0.01, name="ldp")))
    moved = problem.with_budget("geo", 0.5)
    assert moved.constraints[0] == dataclasses.replace(problem.constraints[0], epsilon=0.5)
    assert moved.constraints[1] == problem.constraints[1] and problem.constraints[0].epsilon == 1.0
    assert problem.with_budget("ldp", 0.02, "delta").constraints[1].delta == 0.02
    for name, field, words in (("nope", "epsilon", "no constraint named 'nope' (the constraints: geo, ldp)"),
                               ("geo", "delta", "has no delta budget"),
                               ("geo", "alpha", "no alpha budget")):
        with pytest.raises(ValueError, match=re.escape(words)):
            problem.with_budget(name, 1.0, field)
    with pytest.raises(SpecError):
        problem.with_budget("geo", -1.0)
    text = repr(problem)
    assert text == ("Problem(9 inputs → 9 outputs, expected loss, 2 constraints: geo (xdp, ε=1), "
                    "ldp (ldp, ε=4))")
