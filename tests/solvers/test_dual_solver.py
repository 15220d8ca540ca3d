"""The smoothed-dual solver of divergence problems (:mod:`diffpriv.solvers._dual`) against the
convex reference (cvxpy + Clarabel), and the two facts its bound rests on: the conjugates in
closed form, and weak duality at every multiplier."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

import diffpriv as dp
from diffpriv.problems import random_problem
from diffpriv.solvers import _dual


def small(seed, *constraints, objective="expected", n=5):
    base = random_problem(seed, n_in=n, n_out=n)
    items = tuple(dp.Item(f"item{i}", np.random.default_rng(seed + 10 * i).dirichlet(np.ones(n)))
                  for i in range(3))
    return dataclasses.replace(base, items=items, constraints=tuple(constraints), objective=objective)


def f_of(fam, t):
    name, alpha = fam
    if name == "kl":
        return t * np.log(np.where(t > 0, t, 1.0))
    return t**alpha if alpha > 1 else -(t**alpha)


@pytest.mark.parametrize("fam", [("kl", 1.0), ("power", 2.0), ("power", 3.5), ("power", 0.5), ("power", 0.2)])
def test_the_conjugates_are_the_supremum_over_ratios(fam):
    """``q = −λ f*(p/λ)``: ``f*(s) = sup_{t ≥ 0} (s t − f(t))`` by brute force on a fine grid of ``t``."""
    t = np.concatenate([np.linspace(0.0, 5.0, 200_001), np.geomspace(5.0, 1e4, 20_000)])
    rng = np.random.default_rng(0)
    z = rng.normal(size=40) * (0.7 if fam[0] != "kl" else 1.0)
    lam = 0.5 + rng.random(40)
    p, q = _dual._laws(fam, jnp.asarray(z), jnp.asarray(lam))
    s = np.asarray(p) / lam
    brute = np.max(s[:, None] * t[None] - f_of(fam, t)[None], axis=1)
    np.testing.assert_allclose(-np.asarray(q) / lam, brute, rtol=2e-4, atol=2e-4)


BOUND_CASES = {
    "kl": dp.DivergenceDistP(pairs=((0, 1), (1, 2)), divergence="kl", epsilon=0.1),
    "chi2-forward": dp.DivergenceDistP(pairs=((0, 1),), divergence="chi2", epsilon=0.2, direction="forward"),
    "hellinger": dp.DivergenceDistP(pairs=((0, 2),), divergence="hellinger", epsilon=0.03),
    "renyi0.3-dp": dp.DivergenceDP(divergence="renyi", alpha=0.3, epsilon=0.2, pairs=((0, 1), (2, 3))),
    "tv-xdistp": dp.ExtendedDistP(pairs=((0, 1),), divergence="tv", epsilon=0.3),
}


@pytest.mark.parametrize("case", sorted(BOUND_CASES))
def test_every_multiplier_gives_a_lower_bound(case):
    """Weak duality, whatever the iterate: random multipliers (ratios, ``λ``, ``u``) never give a
    bound above the convex optimum (the solver's own bounds: below)."""
    problem = small(7, BOUND_CASES[case], dp.DistP(pairs=((1, 2),), epsilon=1.5))
    ref = dp.solvers.convex(problem).value
    data, families, scale = _dual.dual_data(problem, 1e-3)
    params = _dual.init_params(data, families, worst=False)
    rng = np.random.default_rng(1)
    bounds = []
    for _ in range(20):
        noisy = {"groups": tuple((z + rng.normal(size=z.shape) * 2.0, l + rng.normal(size=l.shape) * 2.0)
                                 for z, l in params["groups"]),
                 "u": params["u"] + rng.normal(size=params["u"].shape) * 5.0}
        bounds.append(float(_dual.exact_dual(data, families, noisy, False)) * scale)
    assert max(b for b in bounds if np.isfinite(b)) <= ref * (1 + 1e-7)


SOLVE_CASES = {
    "kl": (0, (dp.DivergenceDistP(pairs=((0, 1), (1, 2)), divergence="kl", epsilon=0.05),), "expected"),
    "reverse_kl-forward": (1, (dp.DivergenceDistP(pairs=((0, 1),), divergence="reverse_kl", epsilon=0.05,
                                                  direction="forward"),), "expected"),
    "chi2": (2, (dp.DivergenceDistP(pairs=((0, 2),), divergence="chi2", epsilon=0.1),), "expected"),
    "hellinger-xdistp-winf": (3, (dp.ExtendedDistP(pairs=((0, 1), (0, 2)), divergence="hellinger",
                                                   epsilon=0.05, transport="winf"),), "expected"),
    "renyi0.5": (4, (dp.DivergenceDistP(pairs=((1, 2),), divergence="renyi", alpha=0.5, epsilon=0.1),),
                 "expected"),
    "tv-xdistp": (6, (dp.ExtendedDistP(pairs=((0, 1),), divergence="tv", epsilon=0.2),), "expected"),
    "kl-beside-hockey-stick": (9, (dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=0.05),
                                   dp.DistP(pairs=((1, 2),), epsilon=0.3, delta=0.05)), "expected"),
    "kl-worst": (7, (dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=0.05),), "worst"),
    "kl-beside-pure-distp": (9, (dp.DivergenceDistP(pairs=((0, 1),), divergence="kl", epsilon=0.05),
                                 dp.DistP(pairs=((1, 2),), epsilon=0.5)), "expected"),
}


FAST = ("kl", "kl-worst", "kl-beside-hockey-stick", "tv-xdistp")
"""In ``make test``; the others (about 6 s each, mostly compilation) in ``make test-slow``."""


@pytest.mark.parametrize("case", [c if c in FAST else pytest.param(c, marks=pytest.mark.slow)
                                  for c in sorted(SOLVE_CASES)])
def test_converges_to_the_convex_optimum(case):
    """Status ``converged`` at ``gap_tol = 10^-3``: the certified table within 0.1 % of a bound
    that is itself at most the optimum (so within 0.1 % of the optimum)."""
    seed, constraints, objective = SOLVE_CASES[case]
    problem = small(seed, *constraints, objective={"expected": dp.ExpectedLoss(), "worst": dp.WorstCaseLoss(),
                                                   "entry": dp.LargestEntry()}[objective])
    ref = dp.solvers.convex(problem).value
    result = dp.optimize(problem, method="pdhg", gap_tol=1e-3)
    assert result.status == "converged" and result.plan == "dual"
    assert result.lower_bound <= ref * (1 + 1e-7)  # Clarabel's value is accurate to ~1e-8
    cert = dp.certify(problem, result.table, repair=True)
    assert cert.ok and cert.repair_t == 0.0
    assert cert.loss <= result.lower_bound * (1 + 1e-3) + 1e-12
    assert cert.loss <= ref * (1 + 1e-3) + 1e-12


@pytest.mark.parametrize("constraint, objective", [
    (dp.DivergenceDP(divergence="kl", epsilon=0.5, pairs=((0, 1),)), dp.ExpectedLoss()),
    (dp.DivergenceDistP(pairs=((0, 1),), divergence="chi2", epsilon=0.1), dp.LargestEntry()),
])
def test_what_the_dual_does_not_converge_on_keeps_the_augmented_lagrangian(constraint, objective):
    """Row pairs and the largest-entry objective did not converge yet
    (:func:`~diffpriv.solvers._dual.applies`): the augmented Lagrangian runs them."""
    from diffpriv.solvers._divergence import divergence_data

    problem = small(0, constraint, objective=objective)
    assert not _dual.applies(problem, divergence_data(problem)[1])


def test_raising_the_multipliers_makes_the_table_hold():
    """:func:`~diffpriv.solvers._dual._repair_by_inflation`: from multipliers of a short run (the
    table violates its budget), the least raise found gives a table every constraint holds in,
    within 0.1 % of the smoothed table's loss, and below what the certifier's mixing costs."""
    from diffpriv.certification._repair import repair, repair_holds

    problem = small(0, dp.DivergenceDistP(pairs=((0, 1), (1, 2)), divergence="kl", epsilon=0.05))
    params = dp.optimize(problem, method="pdhg", steps=300, gap_tol=1e-9).state
    data, families, _ = _dual.dual_data(problem, 1e-6)
    tau = jnp.asarray(1e-3)
    raw = np.asarray(_dual.table_of(data, families, params, False, tau)).reshape(problem.shape)
    assert not np.all(repair_holds(problem, raw))
    fixed = _dual._repair_by_inflation(problem, data, families, False, tau, params)
    assert fixed is not None and np.all(repair_holds(problem, fixed))
    assert dp.certify(problem, fixed, repair=True).repair_t == 0.0
    assert problem.objective_value(fixed) <= problem.objective_value(raw) * 1.001
    assert problem.objective_value(fixed) < problem.objective_value(repair(problem, raw).table)
