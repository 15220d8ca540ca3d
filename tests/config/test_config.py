"""Config parsing: each bad input gives one line naming the field; good configs build problems."""

import copy
import math
from pathlib import Path

import numpy as np
import pytest

from diffpriv import DistP, ExtendedDP, LocalDP
from diffpriv.config import ConfigError, config_from_dict, load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

BASE = {
    "inputs": {"labels": ["a", "b", "c"]},
    "loss": {"kind": "hamming"},
    "items": [
        {"name": "p", "distribution": [0.5, 0.3, 0.2]},
        {"name": "q", "distribution": [0.2, 0.3, 0.5]},
    ],
    "constraints": [{"kind": "distp", "epsilon": 1.0, "pairs": [["p", "q"]]}],
}


def _with(path: str, value) -> dict:
    """A copy of BASE with ``value`` at the dotted ``path`` (integers index lists)."""
    d = copy.deepcopy(BASE)
    *parents, last = [int(k) if k.isdigit() else k for k in path.split(".")]
    node = d
    for k in parents:
        node = node[k]
    node[last] = value
    return d


# (case id, config, field the message must start with, words it must contain)
BAD = [
    ("sum", _with("items.0.distribution", [0.5, 0.3, 0.1]), "items[0].distribution", "sums to 0.9"),
    ("negative", _with("items.1.distribution", [0.9, -0.1, 0.2]), "items[1].distribution",
     "negative entry -0.1"),
    ("nan", _with("items.0.distribution", [0.5, math.nan, 0.5]), "items[0].distribution", "NaN"),
    ("shape", _with("items.0.distribution", [0.5, 0.5]), "items[0].distribution",
     "has 2 entries, expected 3"),
    ("loss-shape", _with("loss", {"kind": "matrix", "matrix": [[0, 1], [1, 0]]}), "loss.matrix",
     "shape (2, 2), expected (3, 3)"),
    ("kind", _with("constraints.0.kind", "tdp"), "constraints[0].kind",
     "'distp', 'ldp', 'xdp', 'divergence_distp', 'divergence_dp', 'xdistp', 'wdp' or 'wdistp'"),
    ("eps<0", _with("constraints.0.epsilon", -0.5), "constraints[0].epsilon",
     "must be >= 0, got -0.5"),
    ("delta=1", _with("constraints.0.delta", 1.0), "constraints[0].delta", "must be in [0, 1), got 1"),
    ("delta<0", _with("constraints.0.delta", -0.1), "constraints[0].delta",
     "must be >= 0, got -0.1"),
    ("empty", _with("inputs.labels", []), "inputs.labels", "is empty"),
    ("duplicate", _with("inputs.labels", ["a", "b", "a"]), "inputs.labels", "duplicate label 'a'"),
    ("unknown-item", _with("constraints.0.pairs", [["p", "z"]]), "constraints[0].pairs[0]",
     "unknown item 'z'"),
    ("unknown-key", _with("colour", "red"), "colour", "unknown key"),
    ("unknown-nested-key", _with("constraints.0.epsilonn", 1.0), "constraints[0].epsilonn",
     "distp takes no epsilonn (did you mean 'epsilon'?)"),
    ("kind-typo", _with("constraints.0.kind", "dsitp"), "constraints[0].kind",
     "got 'dsitp' (did you mean 'distp'?)"),
    ("literal-typo", _with("loss", {"kind": "euclidian"}), "loss.kind",
     "got 'euclidian' (did you mean 'euclidean'?)"),
    ("key-typo", _with("optimizer", {"gap_toll": 1e-3}), "optimizer.gap_toll",
     "unknown key (did you mean 'gap_tol'?)"),
    ("missing", _with("loss", {}), "loss.kind", "required"),
    ("xdp-delta", _with("constraints.0", {"kind": "xdp", "epsilon": 1.0, "delta": 0.1}),
     "constraints[0].delta", "xdp takes no delta"),
    ("two-sources", _with("items.0.distribution", {"uniform": True, "values": [1, 0, 0]}),
     "items[0].distribution", "exactly one of"),
    ("unknown-label", _with("items.0.distribution", {"labels": {"a": 0.5, "zz": 0.5}}),
     "items[0].distribution.labels", "unknown label 'zz'"),
    ("unknown-profile", _with("items.0.profile", "kids"), "items[0].profile",
     "unknown profile 'kids'"),
    ("euclidean-no-coords", _with("loss.kind", "euclidean"), "loss.kind", "needs coordinates"),
    ("duplicate-item", _with("items.1.name", "p"), "items[1].name", "duplicate item name 'p'"),
    ("grid4-on-labels", _with("constraints.0", {"kind": "ldp", "epsilon": 1.0,
                                                "neighbours": "grid4"}),
     "constraints[0].neighbours", "needs a grid"),
    ("points-file-missing", _with("items.0.distribution", {"points_file": "nope.csv"}),
     "items[0].distribution.points_file", "cannot read"),
    ("bad-distribution-type", _with("items.0.distribution", 0.5), "items[0].distribution",
     "expected a list of numbers or a table, got 0.5"),
    ("optimizer-unknown", _with("optimizer", {"learning_rate": 0.1}), "optimizer.learning_rate",
     "unknown key"),
    ("grid-too-large", _with("inputs", {"grid": {"rows": 1000, "cols": 1000}}), "inputs.grid",
     "1000 × 1000 = 1000000 cells, at most 10000 allowed"),
    ("output-grid-too-large", _with("outputs", {"grid": {"rows": 10**30, "cols": 1}}), "outputs.grid",
     "cells, at most 10000 allowed"),
]

# the histogram forms on a 2 × 2 grid: (case id, distribution, field, words)
GRID = {"inputs": {"grid": {"rows": 2, "cols": 2}}, "loss": {"kind": "euclidean"}}
BAD_POINTS = [
    ("ragged", {"points": [[1.0, 2.0], [3.0]]}, "items[0].distribution.points",
     "point 1 has 1 numbers, point 0 has 2"),
    ("no-numbers", {"points": [[]]}, "items[0].distribution.points", "point 0 has no numbers"),
    ("no-points", {"points": []}, "items[0].distribution.points", "no points"),
    ("dimension", {"points": [[1.0, 2.0, 3.0]]}, "items[0].distribution.points",
     "has 3 coordinates, the inputs have 2"),
]
BAD += [(f"points-{name}", {**GRID, "items": [{"name": "i", "distribution": dist}]}, field, words)
        for name, dist, field, words in BAD_POINTS]
BAD += [("support-radius-dimensions",
         {"inputs": {"labels": ["a", "b"], "coords": [[0.0, 0.0], [1.0, 1.0]]},
          "outputs": {"labels": ["c"], "coords": [[0.0]]},
          "loss": {"kind": "hamming"}, "mechanism": {"support_radius": 1.0}},
         "mechanism.support_radius", "the inputs have 2-D coordinates, the outputs 1-D")]

# (field, bad value, words): each [optimizer] field rejects a value of the wrong kind or range
BAD_OPTIMIZER = [
    ("seed", -1, "greater than or equal to 0, got -1"),
    ("steps", 0, "greater than or equal to 1, got 0"),
    ("steps", 10.5, "valid integer, got 10.5"),
    ("period", 0, "greater than or equal to 1, got 0"),
    ("period", True, "valid integer, got True"),
    ("omega", 0.0, "greater than 0, got 0.0"),
    ("omega", math.inf, "finite number, got inf"),
    ("gap_tol", -1e-9, "greater than 0, got -1e-09"),
    ("gap_tol", "small", "valid number, got 'small'"),
    ("chunk", 0, "greater than or equal to 1, got 0"),
    ("jitter", -0.1, "greater than or equal to 0, got -0.1"),
    ("polish", "yes", "valid boolean, got 'yes'"),
    ("seed", 2**64, "less than or equal to 4294967295, got 18446744073709551616"),
]
BAD += [(f"optimizer-{f}={v!r}", _with("optimizer", {f: v}), f"optimizer.{f}", w)
        for f, v, w in BAD_OPTIMIZER]


@pytest.mark.parametrize(
    ("config", "field", "words"), [c[1:] for c in BAD], ids=[c[0] for c in BAD]
)
def test_bad_input_is_one_line_naming_the_field(config, field, words):
    with pytest.raises(ConfigError) as e:
        config_from_dict(config)
    msg = str(e.value)
    assert msg.startswith(f"{field}: "), msg
    assert words in msg, msg
    assert "\n" not in msg


def test_a_missing_key_beside_its_typo_is_reported_as_the_typo():
    config = copy.deepcopy(BASE)
    config["constraints"][0]["epsilom"] = config["constraints"][0].pop("epsilon")
    with pytest.raises(ConfigError, match=r"^constraints\[0\]\.epsilom: distp takes no epsilom "
                                          r"\(did you mean 'epsilon'\?\)"):
        config_from_dict(config)
    with pytest.raises(ConfigError, match=r"^optimizer\.colour: unknown key$"):  # nothing near: no guess
        config_from_dict(_with("optimizer", {"colour": 1}))


def test_toml_syntax_error(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[inputs]\nlabels = ["a", "b"]\n[loss]\nkind = \n')
    with pytest.raises(ConfigError, match=r"bad\.toml: invalid TOML: .*line 4"):
        load_config(path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.toml: no such file"):
        load_config(tmp_path / "nope.toml")


def test_base_config_builds():
    problem, opts = config_from_dict(BASE)
    assert problem.shape == (1, 3, 3)
    assert problem.profiles == ("all",)
    np.testing.assert_array_equal(problem.loss, 1 - np.eye(3))
    # default prior: mean of the profile's items; exact float64 arithmetic
    np.testing.assert_allclose(problem.prior[0], [0.35, 0.3, 0.35], rtol=0, atol=1e-15)
    assert problem.constraints == (DistP(pairs=((0, 1),), epsilon=1.0, delta=0.0, name="distp0"),)
    assert (opts.seed, opts.steps) == (0, None)


def test_histogram_from_points_and_file(tmp_path):
    grid = {"grid": {"rows": 2, "cols": 2, "cell": 2.0}}  # centres (1,1) (3,1) (1,3) (3,3)
    points = [[0.2, 0.1], [1.4, 0.9], [3.9, 3.5], [2.1, 0.3]]
    (tmp_path / "pts.csv").write_text("x,y\n" + "\n".join(f"{x},{y}" for x, y in points) + "\n")
    d = {
        "inputs": grid,
        "loss": {"kind": "euclidean"},
        "items": [
            {"name": "inline", "distribution": {"points": points}},
            {"name": "file", "distribution": {"points_file": "pts.csv", "smoothing": 1.0}},
            {"name": "weighted", "distribution": {"points": points, "weights": [1, 1, 2, 0]}},
        ],
    }
    problem, _ = config_from_dict(d, base_dir=tmp_path)
    dists = [it.dist for it in problem.items]
    # counts per cell r0c0, r0c1, r1c0, r1c1: 2, 1, 0, 1 (exact: small integers / 4)
    np.testing.assert_array_equal(dists[0], [0.5, 0.25, 0.0, 0.25])
    np.testing.assert_array_equal(dists[1], np.array([3, 2, 1, 2]) / 8)
    np.testing.assert_array_equal(dists[2], [0.5, 0.0, 0.0, 0.5])
    assert np.array_equal(problem.loss[0], [0.0, 2.0, 2.0, math.sqrt(8.0)])


@pytest.mark.parametrize(("text", "words"), [
    ("x,y\n1,2\n3\n", "pts.csv line 3 has 1 numbers, pts.csv line 2 has 2"),
    ("1,2\n\n3,4,5\n", "pts.csv line 3 has 3 numbers, pts.csv line 1 has 2"),
    ("1,2\nnan,1\n", "pts.csv line 2 has a NaN or infinite number"),
    ("x,y\n", "no points"),
    ("1,2\nx,y\n", "pts.csv line 2 is not numeric"),
])
def test_points_file_is_checked_like_inline_points(tmp_path, text, words):
    (tmp_path / "pts.csv").write_text(text)
    d = {**GRID, "items": [{"name": "i", "distribution": {"points_file": "pts.csv"}}]}
    with pytest.raises(ConfigError) as e:
        config_from_dict(d, base_dir=tmp_path)
    assert str(e.value) == f"items[0].distribution.points_file: {words}"


def test_points_file_not_text(tmp_path):
    (tmp_path / "pts.csv").write_bytes(b"\xff\xfe\x00\x01")
    d = {**GRID, "items": [{"name": "i", "distribution": {"points_file": "pts.csv"}}]}
    with pytest.raises(ConfigError, match=r"^items\[0\]\.distribution\.points_file: cannot read"):
        config_from_dict(d, base_dir=tmp_path)


def test_largest_grid_and_seed_are_accepted():
    d = {"inputs": {"grid": {"rows": 100, "cols": 100}}, "outputs": {"labels": ["a"]},
         "loss": {"kind": "hamming"}, "optimizer": {"seed": 2**32 - 1}}
    problem, options = config_from_dict(d)
    assert problem.shape == (1, 10_000, 1) and options.seed == 2**32 - 1


def test_gaussian_mixture_matches_closed_form():
    d = {
        "inputs": {"labels": ["x0", "x1", "x2"], "coords": [[0.0], [1.0], [2.0]]},
        "loss": {"kind": "euclidean"},
        "items": [{"name": "g", "distribution": {"gaussians": [
            {"center": [0.0], "scale": 1.0, "weight": 3.0},
            {"center": [2.0], "scale": 0.5, "weight": 1.0},
        ]}}],
    }
    problem, _ = config_from_dict(d)
    x = np.array([0.0, 1.0, 2.0])
    g1 = np.exp(-(x**2) / 2)
    g2 = np.exp(-((x - 2) ** 2) / 0.5)
    expected = 0.75 * g1 / g1.sum() + 0.25 * g2 / g2.sum()
    np.testing.assert_allclose(problem.items[0].dist, expected, rtol=1e-14)


def test_categories_samples_and_uniform():
    d = copy.deepcopy(BASE)
    d["items"] = [
        {"name": "lab", "distribution": {"labels": {"c": 0.25, "a": 0.75}}},
        {"name": "smp", "distribution": {"samples": ["a", "c", "c", "b"]}},
        {"name": "uni", "distribution": {"uniform": True}},
    ]
    d["constraints"] = [{"kind": "distp", "epsilon": 0.5}]
    problem, _ = config_from_dict(d)
    np.testing.assert_array_equal(problem.items[0].dist, [0.75, 0.0, 0.25])
    np.testing.assert_array_equal(problem.items[1].dist, [0.25, 0.25, 0.5])
    np.testing.assert_allclose(problem.items[2].dist, [1 / 3] * 3, rtol=1e-15)
    assert problem.constraints[0].pairs == ((0, 1), (0, 2), (1, 2))  # default: all item pairs


def test_profiles_weights_priors_and_edges():
    d = {
        "inputs": {"labels": ["0", "1"]},
        "loss": {"kind": "hamming"},
        "profiles": [
            {"name": "lo", "weight": 1.0},
            {"name": "hi", "weight": 3.0, "prior": [0.5, 0.5]},
            {"name": "none", "weight": 0.0},
        ],
        "items": [
            {"name": "lo", "profile": "lo", "distribution": [0.8, 0.2]},
            {"name": "hi", "profile": "hi", "distribution": [0.2, 0.8]},
        ],
        "constraints": [{"kind": "distp", "epsilon": 0.5, "pairs": [["lo", "hi"]]}],
    }
    problem, _ = config_from_dict(d)
    assert problem.profiles == ("lo", "hi", "none")
    assert [it.profile for it in problem.items] == [0, 1]
    # π[s] = w_s / Σw · prior_s: the item's dist for "lo", the given prior for "hi"
    np.testing.assert_allclose(problem.prior, [[0.2, 0.05], [0.375, 0.375], [0, 0]], atol=1e-15)


def test_item_profile_required_with_several_profiles():
    d = copy.deepcopy(BASE)
    d["profiles"] = [{"name": "x"}, {"name": "y"}]
    with pytest.raises(ConfigError, match=r"^items\[0\]\.profile: required"):
        config_from_dict(d)


def test_support_radius_must_leave_an_output():
    d = {"inputs": {"labels": ["a", "b"], "coords": [[0.0], [1.0]]},
         "outputs": {"labels": ["far"], "coords": [[5.0]]},
         "loss": {"kind": "euclidean"}, "mechanism": {"support_radius": 4.5}}
    with pytest.raises(ConfigError, match=r"^mechanism\.support_radius: input 'a' has no output"):
        config_from_dict(d)


def test_neighbours_radius_and_support():
    d = {
        "inputs": {"grid": {"rows": 3, "cols": 3}},
        "loss": {"kind": "euclidean"},
        "constraints": [
            {"kind": "xdp", "epsilon": 1.0, "neighbours": "grid4"},
            {"kind": "ldp", "epsilon": 2.0, "neighbours": "grid8"},
            {"kind": "ldp", "epsilon": 2.0, "pairs": [["r0c0", "r2c2"]], "name": "corner"},
        ],
        "mechanism": {"support_radius": 1.0},
        "optimizer": {"seed": 7, "steps": 50},
    }
    problem, opts = config_from_dict(d)
    xdp, ldp8, corner = problem.constraints
    assert isinstance(xdp, ExtendedDP) and len(xdp.pairs) == 12  # 2 * 3 * 2 grid edges
    assert isinstance(ldp8, LocalDP) and len(ldp8.pairs) == 12 + 8  # plus 2 * 2 * 2 diagonals
    assert corner.pairs == ((0, 8),) and corner.name == "corner"
    assert problem.support[0].sum(axis=1).tolist() == [3, 4, 3, 4, 5, 4, 3, 4, 3]
    assert (opts.seed, opts.steps) == (7, 50)
    assert opts.kwargs() == {"seed": 7, "steps": 50}  # unset fields keep the optimizer's defaults


def test_optimizer_options_pass_through():
    table = {"seed": 3, "steps": 800, "period": 200, "omega": 1, "gap_tol": 1e-6,
             "viol_factor": 0.1, "chunk": 2, "jitter": 0.0, "polish": False}
    _, opts = config_from_dict(_with("optimizer", table))
    kwargs = opts.kwargs()
    assert kwargs == {**table, "omega": 1.0}
    assert isinstance(kwargs["omega"], float)


def test_optimizer_schema_is_derived_from_the_optimizer_settings():
    """One declaration: every optimizer setting is a config key with the same bounds."""
    import dataclasses

    from diffpriv.config._schema import OptimizerCfg
    from diffpriv.solvers._options import Options

    assert set(OptimizerCfg.model_fields) == {"seed"} | {f.name for f in dataclasses.fields(Options)}
    for f in dataclasses.fields(Options):
        for bound in ("ge", "gt", "le"):
            if bound in f.metadata:
                value = f.metadata[bound] - 1 if bound != "le" else f.metadata[bound] * 2
                with pytest.raises(ConfigError, match=rf"^optimizer\.{f.name}: "):
                    config_from_dict(_with("optimizer", {f.name: value}))


@pytest.mark.parametrize("name", ["quickstart", "categorical", "profiles", "divergence", "wasserstein",
                                  "estimation"])
def test_shipped_configs_load(name):
    problem, _ = load_config(CONFIGS / f"{name}.toml")
    assert problem.constraints
    assert np.isclose(problem.prior.sum(), 1.0, rtol=0, atol=1e-12)


def test_optimizer_method_is_validated_and_passed_through(tmp_path):

    base = {"inputs": {"labels": ["a", "b"]}, "loss": {"kind": "hamming"},
            "constraints": [{"kind": "ldp", "epsilon": 1.0}]}
    _, options = config_from_dict({**base, "optimizer": {"method": "al"}}, tmp_path)
    assert options.kwargs()["method"] == "al"
    with pytest.raises(ConfigError, match=r"^optimizer\.method: "):
        config_from_dict({**base, "optimizer": {"method": "newton"}}, tmp_path)


def test_domain_units_travel_from_config_to_certificate_and_axes(tmp_path):
    """``units`` on a domain: kept by the certificate (the certifier's schema accepts it), read
    back, and written on the plot's axes; a certificate without it stays as it was."""
    from matplotlib.figure import Figure

    import diffpriv as dp
    from diffpriv.io._plot import _plane

    problem, _ = load_config(Path(__file__).parents[2] / "configs" / "quickstart.toml")
    assert problem.inputs.units == problem.outputs.units == "km"
    cert = dp.certify(problem, np.full(problem.shape, 1.0 / problem.shape[2]), repair=True)
    path = cert.save(tmp_path / "c.json")
    assert dp.verify(path).ok  # the certifier re-reads it, units and all
    back = dp.problems.problem_from_dict(dp.Certificate.load(path).problem)
    assert back.inputs.units == back.outputs.units == "km"
    ax = Figure().subplots()
    _plane(ax, problem.inputs.coords, problem.prior[0], "viridis", 1.0, back.inputs.units)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("x (km)", "y (km)")
    bare = dict(BASE, inputs={"labels": ["a", "b", "c"]})
    plain = dp.certify(config_from_dict(bare)[0], np.full((1, 3, 3), 1 / 3), repair=True)
    assert "units" not in plain.to_dict()["problem"]["inputs"]
    with pytest.raises(ConfigError, match=r"inputs\.units"):
        config_from_dict(dict(BASE, inputs={"labels": ["a", "b", "c"], "units": 3}))
