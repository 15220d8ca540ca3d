"""Every registered run against the same small problems of every kind it accepts
(:meth:`diffpriv.solvers._driver.Declared.accepts`), each through the driver alone (the route set
to that run): the certificate holds, the result names the run, the bound is below the independent
optimum (HiGHS, or Clarabel for divergence and Wasserstein constraints), and a converged run's
certified loss is within ``gap_tol`` of it. The first-order runs are slow."""

import dataclasses

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.problems import k_rr_problem, pairs_within
from diffpriv.solvers import _methods, _optimizer

GAP_TOL = 1e-3
FIRST_ORDER = {"pdhg", "linear al", "transport pdhg", "dual", "mirror", "al"}
SLOW = {("gradient", "distp-sinkhorn")}  # (Sinkhorn inside every evaluation of the search: 95 s)


def _grid(n: int = 3, seed: int = 0) -> dp.Problem:
    dom = dp.Domain.grid(n, n, 1.0)
    prior = np.random.default_rng(seed).dirichlet(np.full(n * n, 2.0))
    return dp.Problem(dom, dom, dom.distances(dom), prior, constraints=())


def _items(p: dp.Problem) -> tuple[dp.Item, ...]:
    rng = np.random.default_rng(7)
    return tuple(dp.Item(name, rng.dirichlet(np.ones(p.inputs.size))) for name in "ab")


def problems() -> dict[str, dp.Problem]:
    g = _grid()
    near = pairs_within(g.inputs, 1.0)
    items = _items(g)
    line = dp.Domain(("a", "b", "c", "d"), np.arange(4.0)[:, None])
    with_items = dict(items=items)
    kl_dp = dp.DivergenceDP(divergence="kl", epsilon=0.3, pairs=near)
    return {
        "distp": dataclasses.replace(g, constraints=(dp.DistP(pairs=((0, 1),), epsilon=0.5),),
                                     **with_items),
        "distp-delta": dataclasses.replace(
            g, constraints=(dp.DistP(pairs=((0, 1),), epsilon=0.2, delta=0.05),), **with_items),
        "k-rr": k_rr_problem(4, 1.0),
        "geo": dataclasses.replace(g, constraints=(dp.ExtendedDP(0.7, pairs=near),)),
        "ldp-delta": dataclasses.replace(g, constraints=(dp.LocalDP(0.5, delta=0.05, pairs=near),)),
        "kl-distp": dataclasses.replace(g, constraints=(dp.DivergenceDistP(divergence="kl", epsilon=0.2,
                                                                           pairs=((0, 1),)),), **with_items),
        "kl-dp": dataclasses.replace(g, constraints=(kl_dp,)),
        "kl-dp+geo": dataclasses.replace(g, constraints=(dp.ExtendedDP(1.0, pairs=near), kl_dp)),
        "wdp": dp.Problem(line, line, line.distances(line), np.full(4, 0.25),
                          constraints=(dp.WassersteinDP(epsilon=1.0, order=1.0),)),
        "rr-information": dataclasses.replace(k_rr_problem(2, 1.0), objective=dp.InformationLoss()),
        "distp-sinkhorn": dataclasses.replace(g, constraints=(dp.DistP(pairs=((0, 1),), epsilon=0.5),),
                                              objective=dp.SinkhornLoss(laws="items", epsilon=0.5),
                                              **with_items),
    }


PROBLEMS = problems()
CASES = [pytest.param(name, kind, id=f"{name}-{kind}",
                      marks=[pytest.mark.slow] if name in FIRST_ORDER or (name, kind) in SLOW else [])
         for name in _methods.SOLVERS for kind, p in PROBLEMS.items()
         if _methods.solver_class(name).accepts(p)]


def _entropic_optimum(p: dp.Problem) -> float:
    """The entropic transport objective's optimum under DistP between two item laws of one profile,
    by cvxpy's exponential cone (``rel_entr(γ, λ⊗ν)`` is jointly convex, ``ν = λᵀA`` affine)."""
    import cvxpy as cp

    (_, nx, ny), eps = p.shape, p.objective.epsilon
    table = cp.Variable((nx, ny), nonneg=True)
    (a, b), growth = (item.dist / item.dist.sum() for item in p.items), np.exp(p.constraints[0].epsilon)
    rows = [cp.sum(table, axis=1) == 1, a @ table <= growth * (b @ table), b @ table <= growth * (a @ table)]
    cost = 0
    for law in (a, b):
        plan = cp.Variable((nx, ny), nonneg=True)
        outputs = law @ table
        rows += [cp.sum(plan, axis=1) == law, cp.sum(plan, axis=0) == outputs]
        outer = cp.reshape(law, (nx, 1), order="C") @ cp.reshape(outputs, (1, ny), order="C")
        cost += 0.5 * (cp.sum(cp.multiply(plan, p.loss)) + eps * cp.sum(cp.rel_entr(plan, outer)))
    return cp.Problem(cp.Minimize(cost), rows).solve(solver=cp.CLARABEL)


def _optimum(p: dp.Problem) -> float:
    if p.objective.kind == "sinkhorn":
        return _entropic_optimum(p)
    if p.objective.smooth:  # binary inputs: randomized response is optimal (Kairouz, Oh & Viswanath 2014)
        eps = float(p.constraints[0].epsilon)
        rr = np.array([[np.exp(eps), 1.0], [1.0, np.exp(eps)]]) / (np.exp(eps) + 1.0)
        return p.objective_value(rr[None])
    return dp.solvers.lp(p).value if p.linear else dp.solvers.convex(p).value


def test_every_run_accepts_some_kind_and_every_kind_has_runs():
    runs = {name for name, _ in (c.values for c in CASES)}
    kinds = {kind for _, kind in (c.values for c in CASES)}
    assert runs == set(_methods.SOLVERS) and kinds == set(PROBLEMS)


@pytest.mark.parametrize(("name", "kind"), CASES)
def test_a_run_alone_certifies_below_the_optimum_and_within_gap_tol(name, kind, monkeypatch):
    problem = PROBLEMS[kind]
    original, calls = _optimizer.route, []

    def route(*args, **kwargs):  # the run alone; what it runs inside (the relaxation's solver) as usual
        calls.append(args)
        return (name,) if len(calls) == 1 else original(*args, **kwargs)

    monkeypatch.setattr(_optimizer, "route", route)
    d = dp.design(problem, gap_tol=GAP_TOL, method="auto")
    run = _methods.solver_class(name)
    ref = _optimum(problem)
    assert d.certificate.ok and dp.verify(d.certificate).ok
    assert d.result.method in run.labels
    assert d.result.lower_bound <= ref + 1e-7 * max(1.0, abs(ref))
    assert d.certificate.loss >= ref - 1e-7 * max(1.0, abs(ref))
    if d.result.status == "converged":
        assert d.certificate.loss <= ref + 1.5 * GAP_TOL * max(abs(ref), 1e-6) + 1e-9


@pytest.mark.slow  # about a minute of compiling in a fresh interpreter
def test_every_run_and_entry_point_runs_in_float64_with_x64_off():
    """The suite turns JAX's x64 mode on; a user's process has it off. In a fresh interpreter
    without it, every run (once, on the first kind it accepts, few steps), a batch of budgets and a
    sweep go through the entry points (``dp.design``, ``solve_batch``, ``dp.sweep``), which set
    float64 per call: a missing one is refused by the driver, and would fail here."""
    import os
    import pathlib
    import subprocess
    import sys

    code = """
import jax, numpy as np
import diffpriv as dp
from diffpriv.solvers import _methods, _optimizer
from tests.solvers import test_conformance as t
assert not jax.config.jax_enable_x64
done, original = set(), _optimizer.route
for case in t.CASES:
    name, kind = case.values
    if name in done:
        continue
    done.add(name)
    calls = []
    def route(*a, name=name, calls=calls, **k):
        calls.append(a)
        return (name,) if len(calls) == 1 else original(*a, **k)
    _optimizer.route = route
    d = dp.design(t.PROBLEMS[kind], gap_tol=1e-2, steps=300)
    _optimizer.route = original
    assert d.certificate.ok and d.table.dtype == np.float64, (name, kind)
assert done == set(_methods.SOLVERS), done
for kind in ("geo", "kl-distp"):
    tables, bounds = dp.solvers.solve_batch(t.PROBLEMS[kind], [0.5, 1.0], steps=300)
    assert tables.dtype == np.float64 and np.all(np.isfinite(bounds)), kind
frontier = dp.sweep(t.PROBLEMS["geo"], [0.5, 1.0], gap_tol=1e-2)
assert all(r["ok"] for r in frontier.rows), frontier.rows
assert not jax.config.jax_enable_x64
"""
    env = {**os.environ, "JAX_ENABLE_X64": "0"}
    root = pathlib.Path(__file__).parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, timeout=600, env=env, cwd=root)
