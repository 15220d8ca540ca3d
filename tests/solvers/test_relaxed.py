"""The linear relaxation first (:mod:`diffpriv.solvers._relaxed`): divergence constraints dropped,
the LP solved, its table repaired against every constraint; checked against Clarabel's optimum of
the whole problem and HiGHS's of the relaxation."""

import dataclasses

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.solvers._driver import OptimizeResult, Status
from diffpriv.solvers._methods import relaxes
from diffpriv.solvers._optimizer import _with_relaxation
from diffpriv.solvers._relaxed import relaxation

pytest.importorskip("cvxpy")


def grid(kl_eps: float, ldp: dp.LocalDP, n: int = 3, seed: int = 0) -> dp.Problem:
    """KL-DP between 4-neighbour cells of an ``n × n`` grid at ``kl_eps``, ``ldp`` beside."""
    dom = dp.Domain.grid(n, n, 1.0)
    prior = np.random.default_rng(seed).dirichlet(np.ones(n * n))
    pairs = dp.problems.pairs_within(dom, 1.0)
    kl = dp.DivergenceDP(divergence="kl", epsilon=kl_eps, pairs=pairs)
    return dp.Problem(dom, dom, dom.distances(dom), prior, constraints=(kl, ldp))


def test_the_relaxation_keeps_the_linear_constraints():
    p = grid(0.5, dp.LocalDP(epsilon=0.3))
    relaxed = relaxation(p)
    assert relaxed.constraints == p.constraints[1:] and relaxed.linear
    assert relaxation(relaxed) is None  # nothing to drop
    assert relaxation(dataclasses.replace(p, constraints=p.constraints[:1])) is None  # nothing kept
    assert relaxes(p) and not relaxes(relaxation(p))


@pytest.mark.parametrize(("ldp", "solver"), [(dp.LocalDP(epsilon=0.3), "columns"),
                                             (dp.LocalDP(epsilon=0.3, delta=0.02), "highs")],
                         ids=["pure", "approximate"])
def test_a_slack_divergence_is_solved_by_the_relaxation(ldp, solver):
    """With pure ε-LDP at 0.3 beside KL-DP at 0.5 the KL budget cannot bind (KL ≤ ε where every
    ratio is within e^ε); with δ = 0.02 it is slack here too. ``"auto"`` stops after the
    relaxation (column generation over output columns for pure LDP, HiGHS with δ > 0), its table
    within ``gap_tol`` of Clarabel's optimum of the whole problem."""
    p = grid(0.5, ldp)
    optimum = dp.solvers.convex(p).value
    lp = dp.solvers.lp(relaxation(p)).value
    assert lp == pytest.approx(optimum, rel=1e-6)  # the KL budget is slack
    d = dp.design(p, gap_tol=1e-3)
    assert d.result.method == f"relaxation ({solver})" and d.result.status == "converged"
    assert d.certificate.ok
    assert d.result.lower_bound <= optimum * (1 + 1e-7)
    assert optimum * (1 - 1e-7) <= d.certificate.loss <= optimum * (1 + 1e-3)


def test_the_relaxations_solver_reports_its_progress():
    """The relaxed run is one chunk; the column generation inside it reports its rounds (out of
    :data:`ROUNDS`) to the same callback before the run's own report."""
    from diffpriv.solvers._optimizer import Optimizer
    from diffpriv.solvers._relaxed import ROUNDS

    calls = []
    result = Optimizer(gap_tol=1e-3)(grid(0.5, dp.LocalDP(epsilon=0.3)),
                                     progress=lambda done, total, gap: calls.append((done, total, gap)))
    assert result.method == "relaxation (columns)"
    inner = [c for c in calls if c[1] == ROUNDS]
    assert inner and calls.index(inner[-1]) < len(calls) - 1
    assert calls[-1][1] == 1 and calls[-1][2] <= 1e-3  # the run itself: one chunk


def test_a_binding_divergence_goes_on_with_the_relaxations_bound():
    """KL-DP at 0.05 beside ε-LDP at 1 binds: the relaxation stops short, Clarabel solves the
    problem, and the bound is at least the relaxation's LP optimum and at most Clarabel's."""
    p = grid(0.05, dp.LocalDP(epsilon=1.0))
    optimum = dp.solvers.convex(p).value
    lp = dp.solvers.lp(relaxation(p)).value
    assert lp < optimum * (1 - 1e-2)
    d = dp.design(p, gap_tol=1e-3)
    assert d.result.method == "clarabel" and d.certificate.ok
    assert lp * (1 - 1e-9) <= d.result.lower_bound <= optimum * (1 + 1e-7)


def test_mirror_prox_stops_on_the_relaxations_bound():
    """Approximate LDP beside KL-DP on a 4×4 grid, where mirror-prox alone took 11,600 steps to
    its own bound (and, before its bound at the running average, stopped ``stalled`` after 19,400
    with its bound 1.4 % below its table): started from the relaxation's bound as its floor it
    converges, its table within ``gap_tol`` of Clarabel's optimum."""
    import functools

    from diffpriv.solvers._driver import drive
    from diffpriv.solvers._mirror import MirrorRun
    from diffpriv.solvers._optimizer import Optimizer

    p = grid(2.0, dp.LocalDP(epsilon=0.5, delta=0.02), n=4)
    optimum = dp.solvers.convex(p).value
    floor = dp.solvers.lp(relaxation(p)).bound
    opt = Optimizer(method="pdhg", gap_tol=1e-2)
    result = drive(functools.partial(MirrorRun, opt, p, 0, floor=floor), p, opt, 0)
    assert result.status == "converged" and result.lower_bound == floor <= optimum * (1 + 1e-7)
    cert = dp.certify(p, result.table)
    assert cert.ok and cert.loss <= optimum * (1 + 1e-2)


def _result(objective: float, bound: float, status: str, *, violation: float = 0.0, method: str = "mirror"):
    return OptimizeResult(table=np.full((1, 1, 1), objective), objective=objective, lower_bound=bound,
                          gap=objective / bound - 1, max_violation=violation, steps=1, seconds=1.0, seed=0,
                          status=status, history={}, options={}, method=method)


def test_the_relaxations_bound_and_table_join_the_next_result():
    relaxed = _result(1.10, 0.995, "stalled", method="relaxation (highs)")
    after = _with_relaxation(_result(1.00, 0.95, "stalled"), relaxed, 1e-2)
    assert (after.method, after.lower_bound, after.status) == ("mirror", 0.995, Status.CONVERGED)
    assert after.gap == pytest.approx(1.00 / 0.995 - 1) and after.seconds == 2.0
    better = _with_relaxation(_result(1.20, 1.00, "step limit"), relaxed, 1e-2)
    assert (better.method, better.objective, better.lower_bound) == ("relaxation (highs)", 1.10, 1.00)
    assert better.status == "stalled"  # 10 % apart
    raw = dataclasses.replace(relaxed, max_violation=np.inf)  # its table not repaired
    unrepaired = _with_relaxation(_result(1.20, 1.0, "stalled"), raw, 1e-2)
    assert unrepaired.method == "mirror"
    assert _with_relaxation(_result(1.0, 0.5, "diverged"), relaxed, 1e-2).status == "diverged"
