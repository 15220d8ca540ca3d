"""Wasserstein constraints by Kantorovich cuts (``diffpriv.solvers._transport_cuts``): every cut
is met by every feasible table (checked at the convex reference's optimum), the bound stays below
that optimum at every round, and the certified tables reach it."""

import dataclasses

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.solvers import _transport_cuts
from diffpriv.solvers._methods import route

ITEMS = (dp.Item("i0", np.array([0.5, 0.2, 0.1, 0.1, 0.1, 0.0])),
         dp.Item("i1", np.array([0.0, 0.1, 0.1, 0.2, 0.2, 0.4])))


def grid_problem(constraint, seed=0, objective=None):
    """Six inputs and outputs on a 3×2 grid of the unit square, random prior and Euclidean loss."""
    dom = dp.Domain(tuple(f"c{i}" for i in range(6)),
                    np.array([(i / 2, j) for i in range(3) for j in range(2)], dtype=np.float64))
    prior = np.random.default_rng(seed).dirichlet(np.ones(6))
    extra = {} if objective is None else {"objective": objective}
    return dp.Problem(dom, dom, dom.distances(dom), prior, items=ITEMS, constraints=(constraint,), **extra)


CASES = {
    "wdp": dp.WassersteinDP(epsilon=0.3),
    "wdp-order2": dp.WassersteinDP(epsilon=0.4, order=2.0),
    "wdp-neighbours": dp.WassersteinDP(epsilon=0.2, pairs=((0, 1), (1, 3), (2, 3), (4, 5))),
    "wdistp": dp.WassersteinDistP(pairs=((0, 1),), epsilon=0.15),
}


def drive(problem, gap_tol=1e-4):
    """The run, round by round: ``(run, [bound after each round])``."""
    run = _transport_cuts.TransportCutsRun(dp.solvers.Optimizer(method="cuts", gap_tol=gap_tol), problem, 0)
    bounds = []
    for _ in range(run.total):
        chunk = run.chunk()
        bounds.append(run.bound)
        if chunk.status is not None:
            break
    return run, chunk, bounds


@pytest.mark.parametrize("case", sorted(CASES))
def test_certified_tables_reach_the_convex_optimum_and_every_bound_stays_below(case):
    problem = grid_problem(CASES[case], seed=1)
    ref = dp.solvers.convex(problem).value
    run, chunk, bounds = drive(problem)
    assert chunk.status == "converged"
    assert max(bounds) <= ref * (1 + 1e-6) + 1e-9
    design = dp.design(problem, method="cuts")
    assert design.result.method == "transport cuts" and design.result.status == "converged"
    assert design.certificate.ok
    assert design.certificate.loss == pytest.approx(ref, rel=2e-4, abs=1e-7)


@pytest.mark.parametrize("case", ["wdp", "wdp-order2"])
def test_every_cut_holds_at_the_optimum(case):
    """A cut is a dual-feasible pair of potentials: the convex reference's optimal table (feasible
    up to Clarabel's tolerance) meets each, at the true budget."""
    problem = grid_problem(CASES[case], seed=2)
    best = dp.solvers.convex(problem).table
    run, _, _ = drive(problem)
    model = run.model
    rows = best.reshape(-1, best.shape[-1])
    p, q = run.terms.wp @ rows, run.terms.wq @ rows
    k = model.cut_term
    assert k.size
    lhs = (model.cut_f * p[k]).sum(1) + (model.cut_g * q[k]).sum(1)
    assert np.all(lhs <= run._budget(0.0)[k] + 1e-6)


def test_the_worst_case_objective_and_a_linear_constraint_beside():
    problem = grid_problem(CASES["wdp"], seed=3, objective=dp.WorstCaseLoss())
    problem = dataclasses.replace(problem, constraints=(*problem.constraints, dp.LocalDP(epsilon=2.0)))
    ref = dp.solvers.convex(problem).value
    design = dp.design(problem, method="cuts")
    assert design.result.status == "converged" and design.certificate.ok
    assert design.certificate.loss == pytest.approx(ref, rel=2e-4)


def test_method_cuts_routes_wasserstein_problems_to_kantorovich_cuts():
    assert route(grid_problem(CASES["wdp"]), "cuts") == ("transport cuts",)
    kl = grid_problem(dp.DivergenceDistP(divergence="kl", epsilon=0.1, pairs=((0, 1),)))
    assert route(kl, "cuts") == ("cuts",)
    transport = grid_problem(CASES["wdp"], objective=dp.TransportLoss(laws="prior"))
    with pytest.raises(ValueError, match="'cuts' needs"):
        route(transport, "cuts")


def test_a_support_with_no_common_output_still_reaches_the_optimum():
    """Reports within distance 1.05 of the input: no output is allowed in every row, so the best
    feasible table comes from the LP alone (and the certifier's repair where it must)."""
    problem = grid_problem(dataclasses.replace(CASES["wdp-neighbours"], epsilon=0.6), seed=4)
    coords = problem.inputs.coords
    near = np.sqrt(((coords[:, None] - coords[None]) ** 2).sum(-1)) <= 1.05
    problem = dataclasses.replace(problem, support=near[None])
    assert not problem.support_mask().all(axis=(0, 1)).any()
    ref = dp.solvers.convex(problem).value
    design = dp.design(problem, method="cuts")
    assert design.certificate.ok and design.result.method == "transport cuts"
    assert design.result.lower_bound <= ref * (1 + 1e-6)
    assert design.certificate.loss == pytest.approx(ref, rel=1e-3)


def test_high_orders_over_long_distances_certify_without_overflow():
    """Wasserstein DP of order 100 between four points 2,000 units apart (ε = 5,000): every
    ``d^100`` is beyond float64 (10³³⁰), so the cuts work in units of the largest distance. The
    run converges to a table that certifies, where ``res.value**order`` raised OverflowError."""
    dom = dp.Domain(("a", "b", "c", "d"), np.array([[0.0], [2000.0], [4000.0], [6000.0]]))
    problem = dp.Problem(dom, dom, dom.distances(dom), np.full(4, 0.25),
                         constraints=(dp.WassersteinDP(epsilon=5000.0, order=100.0),))
    assert route(problem, "auto", gap_tol=1e-4)[0] == "transport cuts"
    d = dp.design(problem, quantize=53)
    assert d.certificate.ok and dp.verify(d.certificate).ok
    assert d.result.method == "transport cuts" and d.result.status == "converged"
    assert d.result.lower_bound <= d.certificate.loss
