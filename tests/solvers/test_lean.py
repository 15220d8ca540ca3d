"""Memory that scales: the gather-based operators, the lean plan (float32, no running averages)
for problems the standard plan cannot hold, and bounds computed column by column."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import diffpriv as dp
from diffpriv.certification import certify
from diffpriv.problems import SizeError, estimate, solver_plan
from diffpriv.problems._known import random_problem
from diffpriv.solvers import _pdhg, _pdhg_run
from diffpriv.solvers._linear import (
    incidence,
    linear_data,
    lower_bound,
    lower_bound_by_columns,
    operator,
    sparse_matrix,
    tighten,
)
from diffpriv.solvers._lp import solve_lp
from diffpriv.solvers._polish import violation
from tests._problems import geo_problem


def grid_xdp(n: int) -> dp.Problem:
    """Geo-indistinguishability on an ``n × n`` grid, a random prior drawn with seed ``n``."""
    return geo_problem(n, 0.5, prior_seed=n)


def dense_g(op) -> np.ndarray:
    g, _ = sparse_matrix(op)
    return g.toarray()


@pytest.mark.parametrize("kind", ["grid", "star", "all"])
def test_transpose_by_gather_or_scatter_is_the_dense_transpose(kind):
    rng = np.random.default_rng(0)
    if kind == "grid":
        problem = grid_xdp(4)
    elif kind == "star":  # degrees too uneven to pad: scatter-adds
        dom = dp.Domain.grid(1, 12, 1.0)
        pairs = tuple((0, j) for j in range(1, 12))
        problem = dp.Problem(dom, dom, dom.distances(dom), np.full(12, 1 / 12),
                             constraints=(dp.LocalDP(1.0, pairs=pairs),))
    else:  # all pairs plus a mixture block
        problem = random_problem(3, extra="ldp")
    data = linear_data(problem)
    op = operator(data)
    assert (op.pair_inc.shape[1] == 0) == (kind == "star")
    u = jnp.asarray(rng.normal(size=(op.delta.shape[0], problem.shape[2])))
    g = dense_g(op)
    np.testing.assert_allclose(op.transpose(u), g.T @ np.asarray(u), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(op.transpose(u, positive=True), g.T @ np.maximum(np.asarray(u), 0),
                               rtol=1e-12, atol=1e-12)


def test_incidence_lists_every_pair_once_per_side():
    a, b = np.array([0, 0, 1, 3]), np.array([1, 2, 2, 0])
    inc, side = incidence(a, b, 4)
    seen = sorted((r, int(inc[r, j]), int(side[r, j])) for r in range(4) for j in range(inc.shape[1])
                  if side[r, j])
    expected = sorted([(a[k], k, 1) for k in range(4)] + [(b[k], k, -1) for k in range(4)])
    assert seen == [tuple(map(int, e)) for e in expected]


def test_bound_by_columns_is_the_bound():
    problem = random_problem(1, delta=0.05)
    data = linear_data(problem)
    u = jnp.abs(jnp.asarray(np.random.default_rng(1).normal(size=(operator(data).delta.shape[0],
                                                                    problem.shape[2]))))
    whole = float(lower_bound(data, u))
    assert lower_bound_by_columns(problem, u, columns=2) == pytest.approx(whole, rel=1e-12, abs=1e-12)
    assert lower_bound_by_columns(problem, u.astype(jnp.float32), columns=3) == pytest.approx(
        whole, rel=1e-6, abs=1e-6)


def test_violation_by_column_slices_is_the_violation():
    problem = random_problem(2, delta=0.05)
    data = linear_data(problem)
    g, delta = sparse_matrix(operator(data))
    table = np.random.default_rng(2).dirichlet(np.ones(problem.shape[2]), size=problem.shape[:2])
    a = table.reshape(-1, problem.shape[2])
    np.testing.assert_allclose(violation(g, delta, a, entries=1), violation(g, delta, a), rtol=1e-12)


def _lean_temp_bytes(problem):
    true = linear_data(problem, jnp.float32, compact=True)
    data = tighten(true)
    steps = _pdhg_run._steps_jit(data, true, False, 0.3, 1.0)
    state = _pdhg.init_state(data, steps, jax.random.PRNGKey(0), slack=False, average=False)
    compiled = _pdhg_run._run.lower(data, true, steps, state, 2, 2, 10, False, 1e-4,
                                     1e-6).compile()
    return compiled.memory_analysis().temp_size_in_bytes, state


def test_compiled_lean_run_holds_no_multiplier_sized_temporary():
    """The structure of the compiled program, not a timing: with twice the pairs (8 neighbours
    instead of 4), the multipliers double but the temporaries stay a few tables' worth."""
    four = grid_xdp(12)
    n = 12
    r = np.arange(n * n).reshape(n, n)
    diagonal = np.concatenate([np.stack([r[:-1, :-1].ravel(), r[1:, 1:].ravel()], 1),
                               np.stack([r[:-1, 1:].ravel(), r[1:, :-1].ravel()], 1)])
    pairs = four.constraints[0].pairs + tuple(map(tuple, diagonal.tolist()))
    eight = dp.Problem(four.inputs, four.outputs, four.loss, four.prior,
                       constraints=(dp.ExtendedDP(0.5, pairs=pairs),))
    temp4, state4 = _lean_temp_bytes(four)
    temp8, state8 = _lean_temp_bytes(eight)
    assert state8.u.nbytes > 1.9 * state4.u.nbytes
    assert temp8 <= 1.1 * temp4
    assert temp8 <= 4 * state8.theta.nbytes


def test_plans_standard_lean_refused():
    problem = grid_xdp(6)
    std, lean = estimate(problem, "optimizer"), estimate(problem, "optimizer", lean=True)
    assert lean < std
    assert solver_plan(problem, std) == "standard"
    assert solver_plan(problem, std - 1) == "lean"
    with pytest.raises(SizeError, match=r"^inputs: 36 inputs × 36 outputs .* for the optimizer"):
        solver_plan(problem, lean - 1)


def test_lean_run_gives_a_valid_bound_and_a_certified_table(monkeypatch):
    problem = grid_xdp(5)
    ref = solve_lp(problem).value
    std, lean = estimate(problem, "optimizer"), estimate(problem, "optimizer", lean=True)
    monkeypatch.setenv("DIFFPRIV_MEMORY_LIMIT", str((std + lean) // 2))
    result = dp.optimize(problem, method="pdhg", steps=20_000)
    monkeypatch.delenv("DIFFPRIV_MEMORY_LIMIT")
    assert result.plan == "lean"
    assert result.state.u.dtype == jnp.float32 and result.state.phi.size == 0  # no slack: δ = 0
    assert result.lower_bound <= ref * (1 + 1e-9)  # weak duality, in float64
    cert = certify(problem, result.table, repair=True)
    assert cert.ok
    assert ref * (1 - 1e-9) <= cert.loss <= ref * 1.05
    assert result.lower_bound >= ref * 0.9
    assert dp.optimize(problem, method="pdhg", steps=500).plan == "standard"



def test_a_lean_design_lets_go_of_its_solver_state_before_certifying(monkeypatch):
    """A lean run's multipliers are as large as the table and more (a 100×100 grid's: 1.6 GB):
    ``dp.design`` drops the state before certifying, so the certifier has that memory (the grid
    at 100 steps under an 8 GB address-space cap ran out of memory after 531 s), and runs no
    continuation that would need it."""
    from diffpriv.solvers import _pdhg_run

    monkeypatch.setattr(_pdhg_run, "solver_plan", lambda problem: "lean")  # as if memory were short
    d = dp.design(grid_xdp(5), method="pdhg", steps=1000, quantize=53)
    assert d.result.plan == "lean" and d.result.state is None
    assert d.certificate.ok and dp.verify(d.certificate).ok


def test_a_pdhg_chunk_moves_its_numbers_to_the_host_in_one_transfer(monkeypatch):
    """The loop, its restarts, the bound and the stopping test run on the device: a chunk's host
    side takes its few numbers (periods run, status, the traces) in one ``jax.device_get``. On the
    CPU a transfer guard cannot see a conversion (the arrays are host memory), so every way a JAX
    array becomes a host value is counted instead."""
    import jax
    import jax.numpy as jnp

    from diffpriv.solvers._options import Options
    from diffpriv.solvers._pdhg_run import PDHGRun

    dom = dp.Domain.grid(4, 4, 1.0)
    problem = dp.Problem(dom, dom, dom.distances(dom), np.full(16, 1 / 16),
                         constraints=(dp.ExtendedDP(0.5, pairs=dp.problems.pairs_within(dom, 1.0)),))
    with jax.enable_x64(True):
        run = PDHGRun(Options(gap_tol=1e-12, steps=4000, period=100, chunk=2), problem, 0)
        run.chunk()  # compiles
        kind, counts, inside = type(jnp.zeros(1)), {"implicit": 0, "device_get": 0}, [False]
        for method in ("__array__", "__float__", "__int__", "__index__", "__bool__", "item", "tolist"):
            original = getattr(kind, method)

            def counted(self, *args, _original=original, **kwargs):
                counts["implicit"] += not inside[0]
                return _original(self, *args, **kwargs)

            monkeypatch.setattr(kind, method, counted)
        get = jax.device_get

        def device_get(tree):
            counts["device_get"] += 1
            inside[0] = True
            try:
                return get(tree)
            finally:
                inside[0] = False

        monkeypatch.setattr(jax, "device_get", device_get)
        chunk = run.chunk()
    assert chunk.status is None and run.periods == 4  # two periods a chunk, not converged
    assert counts == {"implicit": 0, "device_get": 1}
