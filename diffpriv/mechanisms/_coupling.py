"""The coupling mechanism (Kawamoto & Murakami 2019, *Local distribution obfuscation via
probability coupling*, Defs. 16–18): every profile's output law is one target ``μ``.

For each profile ``s`` take the known approximation ``λ̂_s ∈ Δ(X)`` of its input distribution, a
target ``μ ∈ Δ(Y)`` and a coupling ``γ_s`` of the two (``γ_s 𝟙 = λ̂_s``, ``γ_sᵀ 𝟙 = μ``); the
mechanism reports ``y`` for input ``x`` with probability

    ``C(s, x)[y] = γ_s[x, y] / λ̂_s[x]``.

* If ``λ̂_s = λ_s`` then ``C[s]#λ_s = μ`` for every ``s``: the output reveals nothing about the
  profile (every divergence between profiles is 0).
* If ``D∞(λ̂_s‖λ_s) ≤ ε`` and ``D∞(λ_s‖λ̂_s) ≤ ε`` for every ``s``, the output laws are
  ``(2ε, D∞)``- and ``(2εe^ε, KL)``-distribution private (their Thm. 3, parts 1–2). Part 3,
  ``(e^ε f(e^{2ε}), D_f)``, holds where ``f(e^{2ε}) ≥ f(e^{−2ε})`` — KL, TV, χ², Hellinger — but
  not for every f-divergence: for reverse KL (``f = −ln t``) the bound ``−2εe^ε`` is negative, and
  fails for any two different laws. Every output ratio lies in ``[e^{−2ε}, e^{2ε}]``, so for any
  convex ``f`` with ``f(1) = 0`` the level is at most ``max(f(e^{2ε}), f(e^{−2ε}))`` (``2ε`` for
  reverse KL), within part 3's bound where that holds (``tests/mechanisms/test_coupling.py``).
* The *utility-optimal* mechanism uses an optimal coupling for the cost ``c = L`` (the problem's
  loss), so its expected loss under ``λ̂_s`` is ``W_c(λ̂_s, μ)`` (their Prop. 2). The
  *worst-case* variant uses a bottleneck coupling: its largest reported cost is ``W∞(λ̂_s, μ)``.

**Rows with** ``λ̂_s[x] = 0`` (where ``γ_s[x, ·] = 0`` and the definition divides 0 by 0) report
the target itself, ``C(s, x) = μ`` (restricted to the row's allowed outputs and renormalised if
the problem has a support mask; uniform on them if ``μ`` gives them no mass). The paper leaves
these rows open. This rule is the privacy-neutral one: such a row is the same for every profile
and keeps every output law inside ``supp μ``; and if a user's true ``λ_s`` does put mass
``m`` where ``λ̂_s`` has none, the output law stays within ``e^ε + m`` times ``μ`` instead of
piling ``m`` on a single output (as "report the cheapest output" would). Under ``λ̂_s`` these
rows carry no weight, so they cost nothing in Prop. 2's loss.

The target ``μ`` is free: :func:`barycenter` gives the one minimising ``Σ_s w_s W_c(λ̂_s, μ)``,
the least total loss over all coupling mechanisms with one target (one LP, HiGHS).

Exact OT is POT's network simplex (``ot.emd``); a plan that is not reported optimal, or whose
marginals are off by more than :data:`MASS_TOLERANCE`, raises :class:`CouplingError`.
numpy, scipy and POT only.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.optimize
import scipy.sparse

from diffpriv.measures._pot import pot
from diffpriv.mechanisms._registry import ParameterError, register_mechanism

__all__ = [
    "MASS_TOLERANCE",
    "CouplingError",
    "barycenter",
    "bottleneck_coupling",
    "coupling_mechanism",
    "optimal_coupling",
    "perturb_distributions",
]

MASS_TOLERANCE = 1e-12
"""Largest absolute error accepted on a coupling's marginals (probability mass)."""

_OPTIMAL, _INFEASIBLE = 1, 0  # POT's network-simplex result codes
_HIGHS_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}


class CouplingError(RuntimeError):
    """An exact transport solve failed (infeasible, stopped early, or inexact marginals)."""


def _distribution(name: str, p, n: int | None = None) -> np.ndarray:
    """``p`` as a float64 distribution (sum within 1e-9 of 1), renormalised exactly."""
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or (n is not None and p.size != n):
        raise ValueError(f"{name}: expected shape ({n if n is not None else 'n'},), got {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError(f"{name}: entries must be finite and non-negative")
    total = p.sum()
    if abs(total - 1.0) > 1e-9:
        raise ValueError(f"{name}: sums to {total:.12g}, expected 1")
    return p / total


def _cost(cost, nx: int, ny: int) -> np.ndarray:
    c = np.asarray(cost, dtype=np.float64)
    if c.shape != (nx, ny):
        raise ValueError(f"cost: shape {c.shape}, expected ({nx}, {ny})")
    if not np.all(np.isfinite(c)):
        raise ValueError("cost: has a NaN or infinite entry")
    return c


def _emd(a: np.ndarray, b: np.ndarray, cost: np.ndarray, allowed: np.ndarray | None):
    """An optimal plan ``[X, Y]`` (only on ``allowed`` cells if given), or ``None`` if no coupling
    lives on ``allowed``. Raises :class:`CouplingError` if POT stops short of optimality.

    The cost is scaled exactly by a power of 2 to a largest entry in ``[½, 1)``: POT's pivoting
    tolerance is absolute, and with costs around 1e-12 it stopped 4 % above the optimum.
    """
    nx, ny = cost.shape
    if cost.size and cost.max() > 0:
        cost = np.ldexp(cost, -int(np.frexp(cost.max())[1]))
    if allowed is None:
        m = np.ascontiguousarray(cost)
    else:
        r, c = np.nonzero(allowed)
        m = scipy.sparse.coo_array((cost[r, c], (r, c)), shape=(nx, ny))
    with warnings.catch_warnings():  # POT warns on non-optimal codes: decided below
        warnings.simplefilter("ignore", UserWarning)
        plan, log = pot().emd(a, b, m, log=True, numItermax=100_000 + 20 * nx * ny)
    code = int(log["result_code"])
    if code == _INFEASIBLE and allowed is not None:
        return None
    if code != _OPTIMAL:
        raise CouplingError(f"ot.emd stopped without an optimal plan (code {code}): {log['warning']}")
    plan = np.asarray(plan.toarray() if scipy.sparse.issparse(plan) else plan, dtype=np.float64)
    plan = np.clip(plan, 0.0, None)
    err = max(np.abs(plan.sum(1) - a).max(), np.abs(plan.sum(0) - b).max())
    if err > MASS_TOLERANCE:
        if allowed is not None:  # POT accepts near-feasible restricted problems: we do not
            return None
        raise CouplingError(f"ot.emd returned a plan whose marginals are off by {err:.3g}")
    return plan


def optimal_coupling(a, b, cost, *, allowed=None) -> np.ndarray:
    """A coupling of ``a`` and ``b`` of least cost ``Σ γ[x, y] c[x, y]`` (exact, ``ot.emd``).

    Args:
      a: ``[X]`` distribution.
      b: ``[Y]`` distribution.
      cost: ``[X, Y]`` finite cost ``c``.
      allowed: optional ``[X, Y]`` boolean mask; the plan is 0 outside it.

    Returns:
      ``[X, Y]`` plan ``γ`` with marginals within :data:`MASS_TOLERANCE` of ``a`` and ``b``;
      its cost is ``W_c(a, b)`` (restricted to ``allowed``).

    Raises:
      CouplingError: no coupling lives on ``allowed``, or the solver failed.
    """
    a = _distribution("a", a)
    b = _distribution("b", b)
    c = _cost(cost, a.size, b.size)
    plan = _emd(a, b, c, None if allowed is None else np.asarray(allowed, dtype=bool))
    if plan is None:
        raise CouplingError("no coupling of the two distributions lives on the allowed cells")
    return plan


def bottleneck_coupling(a, b, cost, *, allowed=None) -> tuple[np.ndarray, float]:
    """A coupling minimising the largest cost it moves mass over, then the total cost.

    ``t* = W∞(a, b)`` is the least threshold such that a coupling supported on
    ``{c ≤ t}`` exists: found by bisection over the sorted distinct costs of the cells with
    ``a[x] > 0`` and ``b[y] > 0``, each step an exact feasibility test (a network-simplex solve
    restricted to the cells, with marginals checked to :data:`MASS_TOLERANCE`). Among the
    couplings on ``{c ≤ t*}`` the one of least total cost is returned.

    Returns:
      ``(γ, t*)``.

    Raises:
      CouplingError: no coupling lives on ``allowed``, or the solver failed.
    """
    a = _distribution("a", a)
    b = _distribution("b", b)
    c = _cost(cost, a.size, b.size)
    mask = np.ones(c.shape, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    mask = mask & (a[:, None] > 0) & (b[None, :] > 0)
    levels = np.unique(c[mask])
    lo, hi = 0, levels.size - 1
    best = _emd(a, b, c, mask & (c <= levels[hi])) if levels.size else None
    if best is None:
        raise CouplingError("no coupling of the two distributions lives on the allowed cells")
    while lo < hi:
        mid = (lo + hi) // 2
        plan = _emd(a, b, c, mask & (c <= levels[mid]))
        if plan is None:
            lo = mid + 1
        else:
            hi, best = mid, plan
    return best, float(levels[hi])


def barycenter(lam_hat, weights, cost) -> np.ndarray:
    """The target ``μ ∈ Δ(Y)`` minimising ``Σ_s w_s W_c(λ̂_s, μ)``, exactly (one LP, HiGHS).

    Variables: a plan ``γ_s ≥ 0`` per profile and ``μ``; rows ``γ_s 𝟙 = λ̂_s`` and
    ``γ_sᵀ 𝟙 = μ``; objective ``Σ_s w_s ⟨c, γ_s⟩``. The minimiser need not be unique (for
    ``W1`` it often is not); HiGHS returns a vertex.

    Args:
      lam_hat: ``[S, X]`` distributions.
      weights: ``[S]`` non-negative weights (not all 0).
      cost: ``[X, Y]`` finite cost.

    Returns:
      ``[Y]`` float64 distribution.

    Raises:
      CouplingError: HiGHS did not return an optimal solution.
    """
    lam = np.atleast_2d(np.asarray(lam_hat, dtype=np.float64))
    ns, nx = lam.shape
    lam = np.stack([_distribution(f"lam_hat[{s}]", lam[s]) for s in range(ns)])
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (ns,) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"weights: expected {ns} non-negative finite weights, not all 0, got {w}")
    c = _cost(cost, nx, np.shape(cost)[-1])
    ny = c.shape[1]
    n_plan = ns * nx * ny
    s, x, y = np.meshgrid(np.arange(ns), np.arange(nx), np.arange(ny), indexing="ij")
    s, x, y = s.ravel(), x.ravel(), y.ravel()
    col = np.arange(n_plan)
    rows = [s * nx + x, ns * nx + s * ny + y, ns * nx + np.arange(ns * ny)]
    cols = [col, col, n_plan + np.tile(np.arange(ny), ns)]
    vals = [np.ones(n_plan), np.ones(n_plan), -np.ones(ns * ny)]
    a_eq = scipy.sparse.coo_array(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(ns * nx + ns * ny, n_plan + ny),
    ).tocsr()
    b_eq = np.concatenate([lam.ravel(), np.zeros(ns * ny)])
    obj = np.concatenate([(w[:, None, None] * c[None]).ravel(), np.zeros(ny)])
    res = scipy.optimize.linprog(obj, A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs",
                                 options=_HIGHS_OPTIONS)
    if res.status != 0 or res.x is None:
        raise CouplingError(f"barycenter: HiGHS did not solve the LP (status {res.status}): "
                            f"{res.message}")
    mu = np.clip(res.x[n_plan:], 0.0, None)
    return mu / mu.sum()


def _target_rows(mu: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """``[X, Y]`` rows for ``λ̂_s[x] = 0``: ``μ`` restricted to each row's allowed outputs and
    renormalised (uniform on them if ``μ`` gives them no mass)."""
    rows = np.where(allowed, mu[None, :], 0.0)
    mass = rows.sum(axis=1, keepdims=True)
    uniform = allowed / allowed.sum(axis=1, keepdims=True)
    return np.where(mass > 0, rows / np.where(mass > 0, mass, 1.0), uniform)


def coupling_mechanism(lam_hat, mu, cost, *, worst: bool = False, allowed=None) -> np.ndarray:
    """The utility-optimal coupling mechanism ``C(s, x)[y] = γ_s[x, y] / λ̂_s[x]``.

    Args:
      lam_hat: ``[S, X]`` known approximations ``λ̂_s`` of the profiles' input distributions
        (a ``[X]`` vector is one profile).
      mu: ``[Y]`` target distribution.
      cost: ``[X, Y]`` finite cost (the utility loss ``L[x, y]``).
      worst: use a bottleneck (``W∞``) coupling instead of an optimal (``W1``) one.
      allowed: optional ``[S, X, Y]`` (or ``[X, Y]``) boolean support mask.

    Returns:
      ``[S, X, Y]`` float64 row-stochastic table. Row ``x`` of profile ``s`` is the plan's row
      divided by its sum (``λ̂_s[x]`` up to :data:`MASS_TOLERANCE`), or the target rule of the
      module docstring where ``λ̂_s[x] = 0``. Its expected loss under ``λ̂_s`` is
      ``W_c(λ̂_s, μ)`` (``worst=False``), and ``C[s]#λ̂_s = μ``.

    Raises:
      CouplingError: no coupling lives on the allowed cells, or the solver failed.

    Example:
      >>> import numpy as np
      >>> lam, mu = np.array([0.2, 0.5, 0.3]), np.array([0.3, 0.2, 0.5])
      >>> cost = np.abs(np.subtract.outer(np.arange(3.0), np.arange(3.0)))
      >>> table = coupling_mechanism(lam, mu, cost)
      >>> table[0, 1].round(2).tolist(), round(float(lam @ (table[0] * cost).sum(1)), 12)
      ([0.2, 0.4, 0.4], 0.3)
    """
    lam = np.atleast_2d(np.asarray(lam_hat, dtype=np.float64))
    ns, nx = lam.shape
    lam = np.stack([_distribution(f"lam_hat[{s}]", lam[s]) for s in range(ns)])
    mu = _distribution("mu", mu)
    c = _cost(cost, nx, mu.size)
    ny = mu.size
    mask = np.ones((ns, nx, ny), dtype=bool)
    if allowed is not None:
        mask = np.broadcast_to(np.asarray(allowed, dtype=bool), (ns, nx, ny))
        if not mask.any(axis=-1).all():
            raise ValueError("allowed: a row has no allowed output")
    table = np.empty((ns, nx, ny))
    for s in range(ns):
        sub = None if allowed is None else mask[s]
        if worst:
            plan, _ = bottleneck_coupling(lam[s], mu, c, allowed=sub)
        else:
            plan = optimal_coupling(lam[s], mu, c, allowed=sub)
        mass = plan.sum(axis=1, keepdims=True)
        known = (lam[s] > 0)[:, None] & (mass > 0)
        table[s] = np.where(known, plan / np.where(known, mass, 1.0), _target_rows(mu, mask[s]))
    return table


def perturb_distributions(lam, eps: float, rng: np.random.Generator) -> np.ndarray:
    """Random approximations ``λ̂ ∝ λ·e^u``, ``u`` uniform in ``[−ε/2, ε/2]`` per entry.

    Then ``|ln λ̂[x] − ln λ[x]| ≤ ε`` on ``supp λ`` (the normaliser's log lies in
    ``[min u, max u]``) and the supports agree, so ``D∞(λ̂‖λ) ≤ ε`` and ``D∞(λ‖λ̂) ≤ ε``: the
    hypothesis of the coupling mechanism's privacy theorem. ``lam``: ``[..., X]``.
    """
    lam = np.asarray(lam, dtype=np.float64)
    u = rng.uniform(-eps / 2.0, eps / 2.0, size=lam.shape)
    out = lam * np.exp(u)
    return out / out.sum(axis=-1, keepdims=True)


# -- the registered mechanism -------------------------------------------------------------


def flag(mech: str, name: str, value) -> bool:
    """A boolean mechanism parameter: a bool, or ``true``/``false``/``1``/``0``/``yes``/``no``
    as text (as ``--param`` passes it); else a ValueError naming it."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ParameterError(f"mechanism {mech!r}: parameter {name!r} must be true or false, got {value!r}")


def profile_distributions(problem, source: str = "items") -> np.ndarray:
    """``[S, X]`` one input distribution per profile; a zero row where there is none.

    ``source="items"``: the distribution of the profile's protected item (several items must
    agree); a profile without items falls back to its prior row. ``source="prior"``: the prior
    row ``π[s, :]`` normalised. A profile whose prior row is 0 and that has no item gets a zero
    row (every one of its rows then reports the target).
    """
    if source not in ("items", "prior"):
        raise ParameterError(f"mechanism 'coupling': source must be 'items' or 'prior', got {source!r}")
    ns, nx, _ = problem.shape
    mass = problem.prior.sum(axis=1, keepdims=True)
    lam = np.where(mass > 0, problem.prior / np.where(mass > 0, mass, 1.0), 0.0)
    if source == "prior":
        return lam
    for s in range(ns):
        dists = [item.dist for item in problem.items if item.profile == s]
        if dists and any(not np.array_equal(d, dists[0]) for d in dists[1:]):
            raise ValueError(f"mechanism 'coupling': profile {problem.profiles[s]!r} has items with "
                             "different distributions; the coupling mechanism needs one per profile "
                             "(use source='prior')")
        if dists:
            lam[s] = dists[0] / dists[0].sum()
    return lam


MAX_ESTIMATE_BYTES = 64 * 2**20
"""Largest estimate file (``estimate=FILE``) read."""


def read_estimate(path, n_profiles: int, n_in: int) -> np.ndarray:
    """``[S, X]`` the known approximations ``λ̂_s`` from a CSV file: one row per profile (in the
    problem's order), one column per input, each row a distribution (sum within 10⁻⁶ of 1,
    renormalised; a row of zeros for a profile with none). ``ParameterError`` names what is
    wrong."""
    import io

    from diffpriv._files import FileFormatError, read_bytes

    where = f"mechanism 'coupling': estimate {str(path)!r}"
    try:
        text = read_bytes(path, limit=MAX_ESTIMATE_BYTES, what="an estimate").decode("utf-8")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            lam = np.loadtxt(io.StringIO(text), delimiter=",", ndmin=2, dtype=np.float64)
    except (FileFormatError, OSError) as e:
        raise ParameterError(f"{where}: {e}") from None
    except (UnicodeDecodeError, ValueError, UserWarning) as e:
        raise ParameterError(f"{where}: not a CSV of numbers ({e})") from None
    if lam.shape != (n_profiles, n_in):
        raise ParameterError(f"{where}: shape {lam.shape}, expected ({n_profiles}, {n_in}): one row "
                             "per profile, one column per input")
    if not np.all(np.isfinite(lam)) or np.any(lam < 0):
        raise ParameterError(f"{where}: entries must be finite and non-negative")
    sums = lam.sum(axis=1)
    bad = np.flatnonzero((sums != 0) & (np.abs(sums - 1.0) > 1e-6))
    if bad.size:
        raise ParameterError(f"{where}: row {bad[0]} sums to {sums[bad[0]]:.9g}, expected 1")
    return np.where(sums[:, None] > 0, lam / np.where(sums > 0, sums, 1.0)[:, None], 0.0)


def _knowledge(problem, source, perturb, seed, estimate) -> tuple[np.ndarray, float]:
    """``(λ̂ [S, X], ε)``: what the mechanism knows of each profile's input law (module docstring
    of :func:`coupling`), and the perturbation ``ε``."""
    try:
        eps = float(perturb)
    except (TypeError, ValueError):
        raise ParameterError(f"mechanism 'coupling': perturb must be a number, got {perturb!r}") from None
    if not np.isfinite(eps) or eps < 0:
        raise ParameterError(f"mechanism 'coupling': perturb must be finite and >= 0, got {eps!r}")
    ns, nx, _ = problem.shape
    lam = (profile_distributions(problem, str(source)) if not estimate
           else read_estimate(estimate, ns, nx))
    has = lam.sum(axis=1) > 0
    if eps > 0:
        lam[has] = perturb_distributions(lam[has], eps, np.random.default_rng(int(seed)))
    return lam, eps


def coupling_details(problem, *, target, source, perturb, seed, worst, estimate) -> dict:
    """What the coupling mechanism knew (``λ̂``, after any perturbation) and its expected loss
    under that knowledge (Prop. 2's ``Σ_s w_s W(λ̂_s, μ)``, ``w`` the prior mass of each
    profile), beside which the certificate's loss is the one under the problem's prior."""
    lam, _ = _knowledge(problem, source, perturb, seed, estimate)
    table = coupling(problem, target=target, source=source, perturb=perturb, seed=seed, worst=worst,
                     estimate=estimate)
    w = problem.prior.sum(axis=1)
    w = w / w.sum() if w.sum() > 0 else np.full(w.size, 1.0 / w.size)
    known = float(np.einsum("s,sx,sxy,xy->", w, lam, table, problem.loss))
    return {"estimate": lam.tolist(), "loss_under_estimate": known}


@register_mechanism(
    "coupling",
    params={"target": "barycenter", "source": "items", "perturb": 0.0, "seed": 0, "worst": False,
            "estimate": ""},
    calibrate=None,
    summary="utility-optimal coupling mechanism: every profile's output law is one target μ "
            "(Kawamoto & Murakami 2019)",
    details=lambda problem, **params: coupling_details(problem, **params),
)
def coupling(problem, *, target, source, perturb, seed, worst, estimate="") -> np.ndarray:
    """The coupling mechanism for a problem, with the problem's loss as the cost.

    Args:
      problem: the problem; its profiles are the auxiliary inputs.
      target: ``"barycenter"`` (the W_L barycenter of the profiles' ``λ̂_s``, weighted by the
        prior mass of each profile), ``"uniform"``, or the name of an item whose distribution
        is the target (needs the outputs to be the inputs: same labels, same order).
      source: where ``λ_s`` comes from (:func:`profile_distributions`).
      perturb: ``ε ≥ 0``: the mechanism knows only ``λ̂_s`` with ``D∞ ≤ ε`` both ways
        (:func:`perturb_distributions`, seeded by ``seed``); 0 uses ``λ̂_s = λ_s``.
      seed: seed of the perturbation.
      worst: bottleneck (``W∞``) couplings instead of optimal (``W1``) ones.
      estimate: a CSV file of the known ``λ̂_s`` (:func:`read_estimate`), given directly rather
        than from the problem (whose items and prior stay the truth the certificate measures);
        ``source`` is then not used, ``perturb`` still applies.
    """
    worst = flag("coupling", "worst", worst)
    lam, _ = _knowledge(problem, source, perturb, seed, estimate)
    has = lam.sum(axis=1) > 0
    ny = problem.shape[2]
    if target == "barycenter":
        if not has.any():
            raise ValueError("mechanism 'coupling': no profile has a distribution to target")
        w = problem.prior.sum(axis=1)[has]
        mu = barycenter(lam[has], w if w.sum() > 0 else np.ones(w.size), problem.loss)
    elif target == "uniform":
        mu = np.full(ny, 1.0 / ny)
    else:
        names = [item.name for item in problem.items]
        if target not in names:
            raise ParameterError(f"mechanism 'coupling': target must be 'barycenter', 'uniform' or an "
                             f"item name ({', '.join(names) or 'none'}), got {target!r}")
        if problem.inputs.labels != problem.outputs.labels:
            raise ValueError("mechanism 'coupling': an item as target needs the outputs to be the "
                             "inputs (same labels, same order)")
        mu = problem.items[names.index(target)].dist
        mu = mu / mu.sum()
    allowed = problem.support_mask()
    table = np.empty(problem.shape)
    for s in np.flatnonzero(~has):  # no distribution known: every row reports the target
        table[s] = _target_rows(mu, allowed[s])
    if has.any():
        table[has] = coupling_mechanism(lam[has], mu, problem.loss, worst=worst,
                                        allowed=None if problem.support is None else allowed[has])
    return table
