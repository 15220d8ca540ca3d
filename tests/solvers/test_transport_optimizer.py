"""The optimizer under the transport objective ``T(A) = OT_L(λ, A#λ)``: its plan table and
marginal comparison (:mod:`diffpriv.solvers._linear`) in PDHG, in the augmented Lagrangian and in
``solve_batch``, against the LP and convex references (each tested on its own in
``test_transport_objective.py``)."""

import dataclasses

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.problems import random_problem
from diffpriv.solvers._linear import linear_data, table_rows


def transport(problem: dp.Problem, laws: str = "prior") -> dp.Problem:
    return dataclasses.replace(problem, objective=dp.TransportLoss(laws=laws))


@pytest.mark.parametrize("seed, laws, options", [
    pytest.param(0, "items", {"n_in": 5, "n_out": 5}, marks=pytest.mark.slow),
    (3, "profiles", {"n_in": 6, "outputs": "grid", "n_out": 9, "n_profiles": 2}),
    (5, "items", {"n_in": 5, "n_out": 5, "delta": 0.02}),
    pytest.param(6, "prior", {"n_in": 5, "n_out": 5}, marks=pytest.mark.slow),
])
def test_pdhg_certifies_within_a_fifth_of_a_percent_of_the_lp(seed, laws, options):
    problem = transport(random_problem(seed, **options), laws)
    ref = dp.solvers.lp(problem).value
    design = dp.design(problem, method="pdhg")
    cert = design.certificate
    assert cert.ok and dp.verify(cert.to_dict()).ok
    assert ref * (1 - 1e-7) - 1e-12 <= cert.loss <= ref * 1.002 + 1e-9
    assert design.result.lower_bound <= ref * (1 + 1e-7) + 1e-12  # weak duality
    if laws == "prior":  # the transport cost never exceeds the expected loss (one coupling)
        assert cert.loss <= problem.expected_loss(np.asarray(design.result.table)) + 1e-12


@pytest.mark.parametrize("laws", ["prior", "items"])
def test_the_plan_rows_and_the_marginal_comparisons(laws):
    problem = transport(random_problem(1, n_in=4, n_out=4, n_profiles=2), laws)
    ns, nx, ny = problem.shape
    lifts, inputs, shares = problem.objective.transport_laws(problem)
    k = shares.size
    assert k == (1 if laws == "prior" else len(problem.items))
    data = linear_data(problem)
    assert table_rows(problem) == (ns + k) * nx == data.cost.shape[0]
    np.testing.assert_allclose(np.asarray(data.cost[:ns * nx]), 0.0)
    for j in range(k):
        plan = slice(ns * nx + j * nx, ns * nx + (j + 1) * nx)
        np.testing.assert_allclose(np.asarray(data.cost[plan]), shares[j] * inputs[j][:, None] * problem.loss)
        # The comparison of law j: its output law against its plan's, at ε = δ = 0.
        row = data.mix_a.shape[0] - k + j
        np.testing.assert_allclose(np.asarray(data.mix_a[row, :ns * nx]), lifts[j].ravel())
        np.testing.assert_allclose(np.asarray(data.mix_b[row, plan]), inputs[j])
        assert float(np.asarray(data.mix_b[row]).sum()) == pytest.approx(1.0)
        assert float(data.mix_eps[row]) == 0.0 and float(data.mix_delta[row]) == 0.0
    assert bool(np.all(np.asarray(data.mask[ns * nx:])))


@pytest.mark.slow
def test_warm_start_and_the_optimizers_table_shape():
    problem = transport(random_problem(2, n_in=5, n_out=5), "items")
    first = dp.optimize(problem, method="pdhg", steps=2000)
    assert first.table.shape == problem.shape
    again = dp.optimize(problem, method="pdhg", steps=2000, init=first.table)
    assert again.table.shape == problem.shape
    assert again.lower_bound <= dp.solvers.lp(problem).value * (1 + 1e-7)


@pytest.mark.slow
def test_solve_batch_bounds_below_each_lp():
    problem = transport(random_problem(4, n_in=5, n_out=5), "items")
    scales = [0.5, 1.0, 2.0]
    tables, bounds = dp.solvers.solve_batch(problem, scales, steps=4000)
    assert tables.shape == (3, *problem.shape)
    np.testing.assert_allclose(tables.sum(axis=-1), 1.0, atol=1e-12)
    for scale, bound in zip(scales, bounds, strict=True):
        scaled = dataclasses.replace(problem, constraints=tuple(
            dataclasses.replace(c, epsilon=c.epsilon * scale) for c in problem.constraints))
        assert bound <= dp.solvers.lp(scaled).value * (1 + 1e-7) + 1e-12


@pytest.mark.slow
def test_under_a_divergence_constraint_within_one_percent_of_the_convex_optimum():
    base = random_problem(0, n_in=5, n_out=5)
    items = tuple(dp.Item(f"item{i}", np.random.default_rng(10 * i).dirichlet(np.ones(5))) for i in range(3))
    problem = dataclasses.replace(
        base, items=items, objective=dp.TransportLoss(laws="items"),
        constraints=(dp.DivergenceDistP(pairs=((0, 1), (1, 2)), divergence="kl", epsilon=0.05),))
    ref = dp.solvers.convex(problem).value
    design = dp.design(problem, method="pdhg")
    assert design.certificate.ok
    assert ref * (1 - 1e-7) <= design.certificate.loss <= ref * 1.01
    assert design.result.lower_bound <= ref * (1 + 1e-7)
