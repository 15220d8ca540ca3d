"""The majorant polish (``diffpriv.solvers._majorant.majorant``): a table that slightly violates pure
pair bounds (local / extended DP) is made feasible by raising entries, checked against a brute-force
majorant (all-pairs shortest paths) and by the certifier with no repair."""

import dataclasses

import numpy as np
import pytest
import scipy.sparse.csgraph

import diffpriv as dp
from diffpriv.solvers import _majorant
from diffpriv.solvers._linear import tighten_eps
from tests._problems import geo_problem


def violated(problem, seed, scale=0.05):
    """The LP's optimal table with every entry multiplied by a random factor in [1 − s, 1 + s]."""
    table = dp.solvers.lp(problem).table.reshape(-1, problem.shape[-1])
    noise = np.random.default_rng(seed).uniform(1 - scale, 1 + scale, size=table.shape)
    rows = table * noise
    return rows / rows.sum(axis=1, keepdims=True)


def brute_force(problem, rows):
    """``max_{r'} (log A[r', y] − dist(r', r))`` with all-pairs shortest paths, rows renormalised."""
    ns, nx, ny = problem.shape
    (block,) = problem.blocks()
    ra, rb = block.rows(nx)
    eps = tighten_eps(np.asarray(block.eps, np.float64)) * (1 - _majorant.MAJORANT_MARGINS[0])
    graph = scipy.sparse.coo_array((eps, (ra, rb)), shape=(nx, nx)).tocsr()
    dist = scipy.sparse.csgraph.shortest_path(graph, directed=False)
    with np.errstate(divide="ignore"):
        log_a = np.log(rows)
    raised = np.exp(np.max(log_a[:, None, :] - dist[:, :, None], axis=0))
    return raised / raised.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("seed", range(3))
def test_one_round_is_the_brute_force_majorant(seed, monkeypatch):
    problem = geo_problem(4, 0.7, prior_seed=seed)
    rows = violated(problem, seed)
    monkeypatch.setattr(_majorant, "MAJORANT_ROUNDS", 1)
    monkeypatch.setattr(_majorant, "MAJORANT_MARGINS", _majorant.MAJORANT_MARGINS[:1])
    np.testing.assert_allclose(_majorant.majorant(problem, rows), brute_force(problem, rows), rtol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_raised_tables_certify_without_repair_and_cost_little(seed):
    problem = geo_problem(4, 0.7, prior_seed=seed)
    optimum = dp.solvers.lp(problem).value
    rows = violated(problem, seed)
    assert not dp.certify(problem, rows.reshape(problem.shape)).ok  # the input violates a budget
    raised = _majorant.majorant(problem, rows)
    cert = dp.certify(problem, raised.reshape(problem.shape))
    assert cert.ok and cert.repair_t == 0
    # the raise moves the loss by about the perturbation, and never below the optimum
    assert optimum * (1 - 1e-9) <= cert.loss <= optimum * 1.1


def test_a_feasible_table_with_room_is_unchanged():
    problem = geo_problem(4, 0.7, prior_seed=0)
    uniform = np.full((16, 16), 1 / 16)
    np.testing.assert_array_equal(_majorant.majorant(problem, uniform), uniform)


def test_other_constraints_and_supports_are_left_to_mixing():
    problem = geo_problem(4, 0.7, prior_seed=0)
    rows = violated(problem, 0)
    distp = dataclasses.replace(problem, items=(dp.Item("a", np.full(16, 1 / 16)),
                                                dp.Item("b", np.eye(16)[0])),
                                constraints=(*problem.constraints, dp.DistP(((0, 1),), 2.0)))
    assert _majorant.majorant(distp, rows) is None
    y = int(np.argmax(rows[1]))  # row 1 neighbours row 0: with rows[0, y] = 0 it would rise
    support = np.ones(problem.shape, bool)
    support[0, 0, y] = False
    rows[0, y] = 0.0
    rows /= rows.sum(axis=1, keepdims=True)
    assert _majorant.majorant(dataclasses.replace(problem, support=support), rows) is None
