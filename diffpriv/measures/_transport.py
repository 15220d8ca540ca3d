"""Exact optimal transport between two histograms, and numpy checks of its witnesses.

``W_p(a, b) = (min_{π ∈ Π(a, b)} Σ_ij π_ij d_ij^p)^{1/p}`` for ``p ∈ [1, ∞)`` and
``W∞(a, b) = min_{π ∈ Π(a, b)} max{d_ij : π_ij > 0}``, where ``Π(a, b)`` holds the couplings
(non-negative ``[X, Y]`` plans with row sums ``a`` and column sums ``b``) and ``d`` is the ground
cost: a metric on the outputs for Wasserstein DP (Yang, Qi & Zhou 2024, *Wasserstein differential
privacy*: ``W_μ`` between the output laws of adjacent inputs), a metric on the inputs for extended
distribution privacy (Kawamoto & Murakami 2019, *Local distribution obfuscation via probability
coupling*: ``D(P_i‖P_j) ≤ ε·W(λ_i, λ_j)``). WDP needs *upper* bounds of ``W`` (a coupling);
extended DistP has ``W`` on the budget side and needs *lower* bounds (a dual pair or a Hall set).

**Solvers find, numpy checks.** :func:`wasserstein`, :func:`w_infinity` (POT's network simplex
``ot.emd``, imported on first use with its numpy backend only: :mod:`._pot`) and
:func:`wasserstein_1d` return a :class:`Transport` with witnesses. The checks use numpy and exact
rationals only: :func:`check_coupling` (plan → upper bound of ``W_p``, ``p ≤ ∞``),
:func:`check_dual` (potentials → lower bound of ``W_p``), :func:`check_hall` (rows → lower bound
of ``W∞``), :func:`check_metric`.

**What is certified.** The distributions are the stored vectors divided by their exact sums,
``â = a / Σa`` and ``b̂ = b / Σb`` (as the certifier treats every weight vector); the cost is the
stored ``ground`` raised to ``p``. Float64 bounds are rounded outward with first-order error
bounds, doubled (``u = 2^-53``, ``n = X + Y``, ``N = X·Y``; pairwise or not, a float sum of
``k`` non-negative terms is within ``(k − 1)·u`` relative of the exact one).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import hashlib
import math
import warnings
from collections.abc import Iterator
from fractions import Fraction

import numpy as np

from diffpriv.measures._pot import pot

__all__ = ["MASS_TOLERANCE", "Transport", "TransportError", "check_coupling", "check_dual", "check_hall",
           "check_metric", "check_triangle", "deferred_triangle_checks", "power_sum_upper", "root_upper",
           "scaled_power", "w_infinity", "wasserstein", "wasserstein_1d"]

U = 2.0**-53
MASS_TOLERANCE = 1e-12
"""Largest marginal error (per entry) accepted from the solver before its plan is returned."""


class TransportError(RuntimeError):
    """The solver stopped early or returned a plan with wrong marginals."""


@dataclasses.dataclass(frozen=True)
class Transport:
    """A transport solve: ``value`` (float64, not outward-rounded: the checks certify), ``plan``
    ``[X, Y]`` (a coupling; for ``W∞`` supported on ``{ground ≤ value}``), ``dual`` ``(f [X], g [Y])``
    with ``f_i + g_j ≤ ground_ij^p`` (:func:`wasserstein`) and ``hall`` ``[X]`` rows for
    :func:`check_hall` (:func:`w_infinity`), or None. ``slack`` ``[X, Y]`` (:func:`wasserstein`):
    the reduced costs ``c_ij − f_i − g_j`` of the solver's own dual, in the cost it solved (0 on
    its basis, so the cells where an optimal plan may move mass; ``+∞`` off the supports)."""

    value: float
    plan: np.ndarray
    dual: tuple[np.ndarray, np.ndarray] | None = None
    hall: np.ndarray | None = None
    slack: np.ndarray | None = None


# -- validation -------------------------------------------------------------------------------


def _distribution(name: str, x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"{name}: expected a non-empty vector, got shape {x.shape}")
    if not np.all(np.isfinite(x)) or np.any(x < 0):
        raise ValueError(f"{name}: entries must be finite and non-negative")
    if abs(x.sum() - 1.0) > 1e-9:
        raise ValueError(f"{name}: sums to {x.sum():.12g}, expected 1")
    return x


def _ground(ground, nx: int, ny: int, field: str = "ground") -> np.ndarray:
    d = np.asarray(ground, dtype=np.float64)
    if d.shape != (nx, ny):
        raise ValueError(f"{field}: shape {d.shape}, expected ({nx}, {ny})")
    if not np.all(np.isfinite(d)) or np.any(d < 0):
        raise ValueError(f"{field}: entries must be finite and non-negative")
    return d


def _order(p, allow_inf: bool = False) -> float:
    p = float(p)
    if not (p >= 1.0 and (math.isfinite(p) or allow_inf)):
        raise ValueError(f"p: expected 1 <= p < inf{' or inf' if allow_inf else ''}, got {p!r}")
    return p


def check_metric(ground, field: str = "ground") -> None:
    """Raise a one-line ValueError unless ``ground`` is a (pseudo)metric on ``n`` points.

    Checks: square, finite, ``≥ 0``, zero diagonal, symmetric (exactly), and ``d_ik ≤ d_ij + d_jk``
    up to ``1e-12·d_ik`` for every triple (:func:`check_triangle`, ``O(n³)``: n = 1000 takes
    ~0.4 s). Zero distances between distinct points are accepted (a pseudometric; ``W_p`` is then
    a pseudometric). Within :func:`deferred_triangle_checks`, the triangle check is queued for
    the caller instead of run.
    """
    d = np.asarray(ground, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise ValueError(f"{field}: a metric needs a square matrix, got shape {d.shape}")
    n = d.shape[0]
    _ground(d, n, n, field)
    if np.any(np.diag(d) != 0):
        raise ValueError(f"{field}: nonzero diagonal entry d[{int(np.argmax(np.diag(d) != 0))}]")
    if not np.array_equal(d, d.T):
        i, j = np.argwhere(d != d.T)[0]
        raise ValueError(f"{field}: not symmetric: d[{i},{j}]={d[i, j]!r} != d[{j},{i}]={d[j, i]!r}")
    pending = _PENDING.get()
    if pending is None:
        check_triangle(d, field)
    elif not any(q.args[0] is d for q in pending):  # one metric, named by many constraints: once
        pending.append(functools.partial(check_triangle, d, field))


_PENDING: contextvars.ContextVar[list[functools.partial] | None] = contextvars.ContextVar(
    "diffpriv_pending_triangle_checks", default=None)

_CHECKED: dict[tuple, None] = {}
"""Digests (shape, BLAKE2b of the bytes) of the last :data:`_CHECKED_KEEP` metrics that passed
:func:`check_triangle`: a metric met again (a problem rebuilt by ``dataclasses.replace`` or
``Problem.scaled``, a certificate loaded and then verified, several constraints naming it) is not
checked again. Keyed on the content, so a changed array is checked."""
_CHECKED_KEEP = 16


@contextlib.contextmanager
def deferred_triangle_checks() -> Iterator[list[functools.partial]]:
    """Within it, :func:`check_metric` runs its ``O(n²)`` checks and queues the ``O(n³)``
    triangle check on the yielded list (one entry per distinct array) instead of running it:
    :func:`diffpriv.certification.verify` builds a certificate's problem, admits its estimated
    cost (which counts these checks), and only then runs each entry (``entry()`` raises the
    one-line ValueError :func:`check_metric` would have raised). Dropping the list skips the
    checks: only for a problem that is never used (a config compared with a certificate)."""
    pending: list[functools.partial] = []
    token = _PENDING.set(pending)
    try:
        yield pending
    finally:
        _PENDING.reset(token)


def check_triangle(d: np.ndarray, field: str = "ground") -> None:
    """Raise a one-line ValueError unless ``d_ik·(1 − 1e-12) ≤ d_ij + d_jk`` for every triple
    of the square, symmetric ``d`` (:func:`check_metric` checks those first).

    Only ``i ≤ k`` is checked (the sum is symmetric in ``i``, ``k`` when ``d`` is, exactly), as
    ``min_j (d_ij + d_jk)`` over blocks of 32 rows ``i`` and runs of middle points ``j``, in
    one preallocated buffer of ``2^18`` entries (2 MB: in cache, so no page faults): about
    ``0.37 ns · n³`` on the 2-core CPU (``benchmarks/certify_cost.py --stages``; the former
    check, all triples in chunks of ``2^22`` entries, took 2 ns). A metric that passed is
    remembered by its digest (:data:`_CHECKED`) and not checked again.
    """
    key = (d.shape, hashlib.blake2b(np.ascontiguousarray(d), digest_size=16).digest())
    if key in _CHECKED:
        return
    _triangle(d, field)
    _CHECKED[key] = None
    while len(_CHECKED) > _CHECKED_KEEP:
        del _CHECKED[next(iter(_CHECKED))]


def _triangle(d: np.ndarray, field: str) -> None:
    """:func:`check_triangle`'s ``O(n³)`` pass, uncached."""
    n = d.shape[0]
    rows = 32
    run = max(1, 2**18 // (rows * max(1, n)))
    buf = np.empty(rows * run * n)
    for i0 in range(0, n, rows):
        i1 = min(n, i0 + rows)
        best = np.full((i1 - i0, n - i0), np.inf)  # min_j d[i, j] + d[j, k], for k ≥ i0
        for j0 in range(0, n, run):
            j1 = min(n, j0 + run)
            through = buf[:(i1 - i0) * (j1 - j0) * (n - i0)].reshape(i1 - i0, j1 - j0, n - i0)
            np.add(d[i0:i1, j0:j1, None], d[None, j0:j1, i0:], out=through)
            np.minimum(best, through.min(axis=1), out=best)
        bad = np.argwhere(d[i0:i1, i0:] * (1.0 - 1e-12) > best)
        if bad.size:
            i, k = int(bad[0][0]) + i0, int(bad[0][1]) + i0
            j = int(np.argmin(d[i] + d[:, k]))
            raise ValueError(f"{field}: triangle inequality fails: d[{i},{k}]={float(d[i, k])!r} > "
                             f"d[{i},{j}] + d[{j},{k}] = {float(d[i, j] + d[j, k])!r}")


# -- solvers ----------------------------------------------------------------------------------


def _emd(a: np.ndarray, b: np.ndarray, cost: np.ndarray):
    """``(plan, f, g)``: an optimal plan and dual of ``min ⟨cost, π⟩`` (``ot.emd``), checked.

    The cost is scaled by a power of 2 (exactly) to a maximum in ``[½, 1)``: POT's pivoting
    tolerance is absolute, and at costs ~1e-12 it stopped 4 % above the optimum (measured).
    """
    e = int(np.frexp(cost.max())[1]) if cost.size and cost.max() > 0 else 0
    with warnings.catch_warnings():  # POT warns on non-optimal codes: decided below
        warnings.simplefilter("ignore", UserWarning)
        plan, log = pot().emd(a, b, np.ascontiguousarray(np.ldexp(cost, -e)), log=True,
                           numItermax=100_000 + 20 * cost.size)
    if int(log["result_code"]) != 1:  # POT's code for an optimal plan
        raise TransportError(f"ot.emd stopped without an optimal plan (code {log['result_code']}): "
                             f"{log['warning']}")
    plan = np.maximum(np.asarray(plan, dtype=np.float64), 0.0)
    err = max(np.abs(plan.sum(1) - a).max(), np.abs(plan.sum(0) - b).max())
    if err > MASS_TOLERANCE:
        raise TransportError(f"ot.emd returned a plan whose marginals are off by {err:.3g}")
    return plan, np.ldexp(np.asarray(log["u"], np.float64), e), np.ldexp(np.asarray(log["v"], np.float64), e)


def _supports(a, b, ground):
    a, b = _distribution("a", a), _distribution("b", b)
    return a, b, _ground(ground, a.size, b.size), np.flatnonzero(a), np.flatnonzero(b)


def wasserstein(a, b, ground, p=1.0) -> Transport:
    """``W_p(a, b)`` exactly: network simplex on the cost ``ground^p``, restricted to the supports.

    ``a [X]``, ``b [Y]``: distributions (sums within 1e-9 of 1; divided by them); ``ground [X, Y]``:
    finite, non-negative, usually a metric (:func:`check_metric`); ``1 ≤ p < ∞``.
    Returns ``Transport(value, plan, dual)``, ``value = (Σ plan·ground^p)^{1/p}``, the dual made
    feasible on every cell by c-transforms (``None`` when the scale ``t^p`` below is not a normal
    float64). Raises
    :class:`TransportError` if the solver stopped early or its marginals are off by more than
    :data:`MASS_TOLERANCE`.

    **Large orders.** ``ground^p`` is never formed: the solver sees ``(ground / t)^p``
    (:func:`scaled_power`), first with ``t = D``, the largest distance between the supports. Its
    pivoting tolerance is absolute, so costs far below ``D^p`` (``(½)^100 ≈ 8e-31`` of it) look
    free to it, and the plan can move more mass than needed at a shorter distance. So for
    ``p > 2`` it solves again at ``t`` = the largest distance the plan uses (costs beyond ``t``
    capped at ``2^20``), up to three rounds while ``t`` shrinks, also starting from ``t ≈ W∞``
    (:func:`_bottleneck`, near the longest move of an optimal plan at large orders), and keeps
    the plan of least cost (compared in logarithms). Every plan is a coupling: the choice changes the value's
    tightness, never its validity.
    """
    p = _order(p)
    a, b, d, ia, jb = _supports(a, b, ground)
    a_s, b_s, d_s = a[ia] / a.sum(), b[jb] / b.sum(), d[np.ix_(ia, jb)]
    top = float(d_s.max())

    def full(sub: np.ndarray, fill: float = 0.0) -> np.ndarray:
        plan = np.full_like(d, fill)
        plan[np.ix_(ia, jb)] = sub
        return plan

    if top == 0.0:  # every support pair at distance 0: any coupling is optimal
        return Transport(0.0, full(np.outer(a_s, b_s)), dual=(np.zeros(a.size), np.zeros(b.size)))
    if p == 1.0:
        sub, f_s, g_s = _emd(a_s, b_s, d_s)
        f = (d[:, jb] - g_s[None, :]).min(axis=1)  # c-transforms: = (f_s, g_s) on the supports up to
        f[ia] = np.minimum(f[ia], f_s)               # rounding, and feasible on every cell
        g = (d - f[:, None]).min(axis=0)
        plan = full(sub)
        slack = full(d_s - f_s[:, None] - g_s[None, :], np.inf)
        return Transport(float(np.sum(plan * d)), plan, dual=(f, g), slack=slack)
    best, best_log = None, math.inf
    for scale in (top, _bottleneck(a_s, b_s, d_s)) if p > 2.0 else (top,):
        for _ in range(3 if p > 2.0 else 1):
            cost = np.minimum(scaled_power(d_s, scale, p), 2.0**20)
            sub, f_s, g_s = _emd(a_s, b_s, cost)
            log_cost = _log_cost(sub, d_s, p)
            if log_cost < best_log:
                best, best_log = (sub, f_s, g_s, scale, cost), log_cost
            used = float(d_s[sub > 0].max(initial=0.0))
            if not 0.0 < used < scale:
                break
            scale = used
    sub, f_s, g_s, scale, cost = best
    # The dual of the capped cost (below the true one) in units of scale^p, made feasible on every
    # cell by c-transforms, then rescaled when scale^p is a normal float64.
    c = np.minimum(scaled_power(d, scale, p), 2.0**20)
    f = (c[:, jb] - g_s[None, :]).min(axis=1)
    f[ia] = np.minimum(f[ia], f_s)
    g = (c - f[:, None]).min(axis=0)
    unit = math.exp(p * math.log(scale)) if abs(p * math.log(scale)) < 700 else 0.0
    dual = (f * unit, g * unit) if unit > 0 else None
    return Transport(math.exp(best_log / p) if best_log > -math.inf else 0.0, full(sub),
                     dual=dual, slack=full(cost - f_s[:, None] - g_s[None, :], np.inf))


def _bottleneck(a: np.ndarray, b: np.ndarray, d: np.ndarray) -> float:
    """About ``W∞(a, b)``: the least distance whose cells carry a coupling up to
    :data:`MASS_TOLERANCE` (bisection over the distinct distances; a scale for the solver, not a
    certified value). At large orders the optimal plan's longest move is near it."""
    levels = np.unique(d)
    lo, hi = 0, levels.size - 1
    while lo < hi:
        mid = (lo + hi) // 2
        plan, _, _ = _emd(a, b, (d > levels[mid]).astype(np.float64))
        if plan[d > levels[mid]].sum() > MASS_TOLERANCE:
            lo = mid + 1
        else:
            hi = mid
    return float(levels[hi]) if levels[hi] > 0 else float(levels[-1])


def _log_cost(plan: np.ndarray, d: np.ndarray, p: float) -> float:
    """``ln Σ plan·d^p`` by a log-sum-exp (``−∞`` for a zero cost); float64, not rounded outward."""
    used = (plan > 0) & (d > 0)
    if not used.any():
        return -math.inf
    z = np.log(plan[used]) + p * np.log(d[used])
    top = float(z.max())
    return top + math.log(float(np.exp(z - top).sum()))


def w_infinity(a, b, ground) -> Transport:
    """``W∞(a, b)``: the least ``t`` such that a coupling supported on ``{ground ≤ t}`` exists.

    Bisection over the sorted distinct distances between ``supp a`` and ``supp b``. At a level
    ``t`` the solver computes the *deficiency* ``min_π π({ground > t})`` (network simplex, 0/1
    cost) and its dual ``f``; some prefix ``S`` of the rows sorted by decreasing ``f`` then has
    ``â(S) > b̂(N_t(S))`` (Hall's condition fails; ``N_t(S)`` = columns within ``t`` of ``S``) if the
    deficiency is positive. ``t`` counts as infeasible only if that ``S`` passes the exact check of
    :func:`check_hall`; so the returned ``hall`` set certifies ``W∞ ≥ value`` exactly.

    Not an integer max-flow: ``scipy.sparse.csgraph.maximum_flow`` takes int32 capacities (int64
    ones wrap silently: ``2^31 + 5`` gives flow 0), and float masses are dyadic rationals of up to
    ~1100 bits: no exact integer scaling fits in general.

    Returns ``Transport(value, plan, hall=S)``: ``plan`` supported on ``{ground ≤ value}``
    (marginals within :data:`MASS_TOLERANCE`); ``S`` is None if ``value`` is the least distance.
    """
    a, b, d, ia, jb = _supports(a, b, ground)
    a_s, b_s, d_s = a[ia] / a.sum(), b[jb] / b.sum(), d[np.ix_(ia, jb)]
    levels = np.unique(d_s)

    def probe(k: int):  # (plan, rows): rows is an exactly verified Hall set, or None
        allowed = d_s <= levels[k]
        plan, f, _ = _emd(a_s, b_s, (~allowed).astype(np.float64))
        order = np.argsort(-f, kind="stable")
        covered = np.logical_or.accumulate(allowed[order], axis=0)
        gap = np.cumsum(a_s[order]) - covered.astype(np.float64) @ b_s
        rows = np.zeros(ia.size, dtype=bool)
        rows[order[:int(np.argmax(gap)) + 1]] = True
        if gap.max() > 0 and check_hall(a[ia], b[jb], d_s, rows) > levels[k]:  # exact, as stored
            return plan, rows
        if plan[~allowed].sum() > MASS_TOLERANCE:
            raise TransportError(f"w_infinity: no Hall set found at level {levels[k]!r}")
        return np.where(allowed, plan, 0.0), None

    lo, hi, hall = 0, levels.size - 1, None
    while lo < hi:
        mid = (lo + hi) // 2
        _, rows = probe(mid)
        if rows is None:
            hi = mid
        else:
            lo, hall = mid + 1, rows
    sub, _ = probe(hi)
    plan = np.zeros_like(d)
    plan[np.ix_(ia, jb)] = sub
    rows = None if hall is None else np.isin(np.arange(a.size), ia[hall])
    return Transport(float(levels[hi]), plan, hall=rows)


def wasserstein_1d(a, b, points, p=1.0) -> Transport:
    """``W_p`` on ordered points of a line, ``ground = |x_i − x_j|``, from the quantile functions.

    ``W_p^p = ∫_0^1 |F_a^{-1}(u) − F_b^{-1}(u)|^p du``: both quantile functions are steps between
    the merged cumulative sums, so the integral is a finite sum; the plan is the monotone
    (north-west corner) coupling, optimal for every ``p ≥ 1``. For ``p = 1`` the value is the CDF
    formula ``Σ_k |F_a(x_k) − F_b(x_k)|·(x_{k+1} − x_k)`` instead. ``a``, ``b``: ``[Y]``
    distributions on ``points [Y]`` (finite, non-decreasing); ``1 ≤ p < ∞``.
    """
    p = _order(p)
    x = np.asarray(points, dtype=np.float64)
    a, b = _distribution("a", a), _distribution("b", b)
    if x.shape != a.shape or b.shape != a.shape:
        raise ValueError(f"points, a, b: shapes {x.shape}, {a.shape}, {b.shape} differ")
    if not np.all(np.isfinite(x)) or np.any(np.diff(x) < 0):
        raise ValueError("points: must be finite and sorted (non-decreasing)")
    ca = np.minimum(np.cumsum(a / a.sum()), 1.0)
    cb = np.minimum(np.cumsum(b / b.sum()), 1.0)
    ca[-1] = cb[-1] = 1.0
    edges = np.concatenate([[0.0], np.union1d(ca, cb)])
    du = np.diff(edges)
    mid = edges[:-1] + du / 2
    i = np.minimum(np.searchsorted(ca, mid), x.size - 1)
    j = np.minimum(np.searchsorted(cb, mid), x.size - 1)
    plan = np.zeros((x.size, x.size))
    np.add.at(plan, (i, j), du)
    if p == 1.0:
        value = float(np.sum(np.abs(ca - cb)[:-1] * np.diff(x)))
    else:  # in units of the largest distance moved: no overflow, and underflow only below 2^-1074
        moved = np.abs(x[i] - x[j])
        top = float(moved.max(initial=0.0))
        value = 0.0 if top == 0.0 else top * float(np.sum(du * (moved / top) ** p)) ** (1.0 / p)
    return Transport(value, plan)


# -- checks (numpy and fractions only) -------------------------------------------------------


def _exact_sum(x) -> Fraction:
    return sum(map(Fraction, np.asarray(x, np.float64).tolist()), Fraction(0))


def _exact_marginals(a: np.ndarray, b: np.ndarray, plan: np.ndarray) -> bool:
    """Whether the plan's row and column sums are ``â`` and ``b̂`` exactly (``O(nnz)`` rationals)."""
    sa, sb = _exact_sum(a), _exact_sum(b)
    rows, cols = [Fraction(0)] * a.size, [Fraction(0)] * b.size
    for i, j, v in zip(*np.nonzero(plan), plan[plan != 0].tolist(), strict=True):
        rows[i] += Fraction(v)
        cols[j] += Fraction(v)
    return (all(r * sa == Fraction(x) for r, x in zip(rows, a.tolist(), strict=True))
            and all(c * sb == Fraction(y) for c, y in zip(cols, b.tolist(), strict=True)))


def check_coupling(a, b, ground, plan, p=1.0, *, tol: float = 1e-9, defect: float = 0.0) -> float:
    """A certified upper bound of ``W_p(â, b̂)`` from a plan (``1 ≤ p ≤ ∞``).

    **Marginal defect.** Let ``π ≥ 0`` have row sums ``r``, column sums ``c``, ``η = ½(‖r − â‖₁ +
    ‖c − b̂‖₁)`` and ``D = max{d_ij : a_i > 0, b_j > 0}``. Then ``W_p(â, b̂)^p ≤ Σ π d^p + η·D^p``.
    *Proof.* Scale down the rows of ``π`` where ``r > â``, then the columns where the sum exceeds
    ``b̂``: the result ``π' ≤ π`` has mass ``≥ 1 − Σ(â − r)₊ − Σ(c − b̂)₊ = 1 − η`` (as ``Σ(â − r)₊ −
    Σ(r − â)₊ = Σ(b̂ − c)₊ − Σ(c − b̂)₊``); couple the leftovers of ``â`` and ``b̂`` (mass ``≤ η``,
    on ``supp â × supp b̂``) as a product, at cost ``≤ η·D^p``. ∎ ``defect`` is added to ``η``: a
    caller whose exact marginals differ from ``â``, ``b̂`` by at most that much (half the ℓ1
    distances) gets a bound for its own marginals.

    **No overflow or underflow.** The bound is computed in units of ``D``: ``W_p ≤ D·(Σ π
    (d/D)^p + η)^{1/p}``, each power as ``exp(p·(ln d − ln D))`` rounded up
    (:func:`power_sum_upper`), the root in logarithms (:func:`root_upper`). So ``d^p`` is never
    formed: order 1000 at distances of ``1e-300`` or ``1e300`` is bounded as soundly as order 2
    at distances near 1. (In float64, ``d^p`` underflows to 0 below ``d = 2^{-1074/p}``, 0.47 for
    ``p = 1000``, and overflows above ``2^{1024/p}``.)

    **Rounding.** ``η ≤ η̃·(1 + 2nu) + 2nu·(1 + 2m̃)`` from the float ``η̃`` (``â`` formed as
    ``fl(a / fl(Σa))``, within ``(X + 1)·u``; row sums within ``(Y − 1)·u``; ``m̃`` the plan's float
    mass; ``u = 2^-53``, ``n = X + Y``). ``p = ∞``: ``W∞`` is not continuous in the marginals, so the
    bound is ``max{d_ij : π_ij > 0}`` only if the marginals are exactly ``â, b̂`` and ``defect`` is
    0 (checked in rationals over the plan's non-zeros); otherwise it is ``max`` of that and ``D``.

    ``a [X]``, ``b [Y]``: distributions; ``ground [X, Y]``; ``plan [X, Y]``; ``1 ≤ p ≤ ∞``.
    Raises ValueError for a negative or non-finite plan entry, wrong shapes, or a plan defect
    ``η > tol`` (after rounding up: ``tol`` only guards against a wrong plan, ``η`` is charged in
    any case). The result may be ``+∞`` (a bound beyond float64), never NaN.
    """
    p = _order(p, allow_inf=True)
    a, b = _distribution("a", a), _distribution("b", b)
    d = _ground(ground, a.size, b.size)
    plan = np.asarray(plan, dtype=np.float64)
    if plan.shape != d.shape:
        raise ValueError(f"plan: shape {plan.shape}, expected {d.shape}")
    if not np.all(np.isfinite(plan)) or np.any(plan < 0):
        bad = np.argwhere(~(plan >= 0) | ~np.isfinite(plan))[0]
        raise ValueError(f"plan: entry {tuple(int(k) for k in bad)} is {plan[tuple(bad)]!r}, "
                         "expected finite and >= 0")
    if not (math.isfinite(defect) and defect >= 0):
        raise ValueError(f"defect: expected a finite number >= 0, got {defect!r}")
    n, m = a.size + b.size, float(plan.sum())
    gap = np.abs(plan.sum(1) - a / a.sum()).sum() + np.abs(plan.sum(0) - b / b.sum()).sum()
    eta = 0.5 * (gap * (1 + 2 * n * U) + 2 * n * U * (1 + 2 * m))
    if eta > tol:
        raise ValueError(f"plan: marginals are off by {eta:.3g} (half the l1 defect), above tol={tol:g}")
    diam = float(d[np.ix_(a > 0, b > 0)].max())
    if p == math.inf:
        t = float(d[plan > 0].max(initial=0.0))
        return t if defect == 0.0 and _exact_marginals(a, b, plan) else max(t, diam)
    if diam == 0.0:  # every pair of the supports at distance 0: W_p(â, b̂) = 0 exactly
        return 0.0
    total = (power_sum_upper(plan, d, p, diam) + (eta + defect) * (1 + 2 * U)) * (1 + 2 * U)
    return root_upper(total, p, diam)


GAMMA = 8 * U
"""Relative error bound of ``np.log``, ``np.exp``, ``math.log`` and ``math.exp`` (4 ulp)."""

_TINY_ABS = 2.0**-1074
"""The smallest positive float64: the absolute error of a result rounded among subnormals."""


def scaled_power(d, top: float, p: float) -> np.ndarray:
    """``(d / top)^p`` as ``exp(p·(ln d − ln top))``, 0 where ``d = 0`` (float64, not rounded
    outward: the cost a solver sees; ``+∞`` beyond float64). ``top > 0``."""
    d = np.asarray(d, np.float64)
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        return np.where(d > 0, np.exp(p * (np.log(np.where(d > 0, d, 1.0)) - math.log(top))), 0.0)


def power_sum_upper(w, d, p: float, top: float) -> float:
    """A float64 number ``≥ Σ w·(d/top)^p`` (exact, for the stored ``w``, ``d``, ``top``).

    ``w ≥ 0`` (entries at most 2), ``d ≥ 0`` finite, same shape; ``top > 0``; ``p ≥ 1``. Terms
    with ``w = 0`` or ``d = 0`` are exactly 0. For ``p > 1`` each power is
    ``exp(p·(ln d − ln top))`` with its exponent rounded up: with ``l = fl(ln d − ln top)`` and
    ``np.log`` within ``γ = 8u``, ``ln d − ln top ≤ l + 1.01u|l| + 1.01γ(|ln d| + |ln top|)``;
    ``exp``, the product and the sum of ``n`` terms add ``γ + (n + 1)·u`` relative and, among
    subnormals, at most ``16·2^-1074`` a term. The result doubles that slack. ``+∞`` where a
    power exceeds float64 (only for ``d > top``).
    """
    w, d = np.asarray(w, np.float64).ravel(), np.asarray(d, np.float64).ravel()
    keep = (w > 0) & (d > 0)
    w, d = w[keep], d[keep]
    n = w.size
    if n == 0:
        return 0.0
    with np.errstate(over="ignore", under="ignore"):
        if p == 1.0:
            total = float(np.sum(w * (d / top)))
        else:
            ld, lt = np.log(d), math.log(top)
            ell = ld - lt
            up = ell + (2 * U * np.abs(ell) + 1.05 * GAMMA * (np.abs(ld) + abs(lt)))
            up = up + 3 * U * np.abs(up)  # ≥ ln(d / top), exactly
            x = p * up
            x = x + 3 * U * np.abs(x)  # ≥ p·ln(d / top), exactly
            total = float(np.sum(w * np.exp(x)))
    rel = (n + 12) * U + GAMMA
    return total * (1 + 2 * rel) + 32 * n * _TINY_ABS


def root_upper(total: float, p: float, top: float) -> float:
    """A float64 number ``≥ top·total^{1/p}`` (exact, for the given floats ``total ≥ 0``,
    ``top > 0``, ``p ≥ 1``), through ``exp(ln(total)/p)`` rounded up; ``+∞`` beyond float64."""
    if total == 0.0:
        return 0.0
    if not math.isfinite(total):
        return math.inf
    if p == 1.0:
        return top * total * (1 + 4 * U)
    y = math.log(total) / p
    y = y + abs(y) * (1.05 * GAMMA + 3 * U)  # ≥ ln(total)/p
    root = max(math.exp(y), 2.0**-1000)  # a subnormal result keeps no relative accuracy: lift it
    return top * root * (1 + 2 * GAMMA + 4 * U)


def check_dual(a, b, ground, f, g, p=1.0) -> float:
    """A certified lower bound of ``W_p(â, b̂)`` from potentials ``f [X]``, ``g [Y]``.

    If ``f_i + g_j ≤ d_ij^p + v`` on ``supp â × supp b̂``, every coupling ``π`` of ``â, b̂`` has
    ``Σ π d^p ≥ Σ π (f_i + g_j − v) = Σ f â + Σ g b̂ − v`` (weak duality): so any finite ``f, g``
    certify ``W_p^p ≥ Σ f â + Σ g b̂ − v`` with ``v`` their largest violation (0 for a feasible pair;
    a negative ``v`` is allowed). Rounding: every float step above is within
    ``4(n + 3)·u·(F + G + C)`` (``F, G`` the largest ``|f|, |g|`` and ``C`` the largest cost on the
    supports), subtracted twice; the root is rounded down by ``4u``.
    """
    p = _order(p)
    a, b = _distribution("a", a), _distribution("b", b)
    d = _ground(ground, a.size, b.size)
    f, g = np.asarray(f, np.float64), np.asarray(g, np.float64)
    if f.shape != a.shape or g.shape != b.shape:
        raise ValueError(f"f, g: shapes {f.shape}, {g.shape}, expected {a.shape}, {b.shape}")
    ia, jb = a > 0, b > 0
    f, g, a, b = f[ia], g[jb], a[ia], b[jb]
    if not (np.all(np.isfinite(f)) and np.all(np.isfinite(g))):
        raise ValueError("f, g: potentials must be finite on the supports")
    with np.errstate(over="ignore", invalid="ignore"):  # d^p beyond float64: the bound is 0
        c = d[np.ix_(ia, jb)] ** p
        v = float((f[:, None] + g[None, :] - c).max())
        scale = float(np.abs(f).max() + np.abs(g).max() + c.max())
        value = float(f @ (a / a.sum()) + g @ (b / b.sum()))
        low = value - v - 8 * (a.size + b.size + 3) * U * scale
    if not math.isfinite(low):
        return 0.0
    return max(low, 0.0) ** (1.0 / p) * (1 - 4 * U)


def check_hall(a, b, ground, rows) -> float:
    """A certified lower bound of ``W∞(â, b̂)`` from a row set ``S`` (exact rationals).

    With ``m_j = min_{i ∈ S} d_ij``, every coupling supported on ``{d ≤ w}`` sends all of ``S``'s mass
    to the columns with ``m_j ≤ w``, so ``â(S) ≤ b̂({m_j ≤ w})``; hence ``W∞ ≥ w*``, the least ``m_j``
    at which ``b̂({m ≤ w*}) ≥ â(S)`` — compared exactly as ``b(T)·Σa ≥ a(S)·Σb`` in rationals
    (``O(Y)`` additions). A set with ``â(S) > b̂(N_t(S))`` (Hall's condition failing at ``t``) gives
    ``w* > t``. ``S`` without mass gives 0.
    """
    a, b = _distribution("a", a), _distribution("b", b)
    d = _ground(ground, a.size, b.size)
    rows = np.asarray(rows, dtype=bool)
    if rows.shape != a.shape:
        raise ValueError(f"rows: shape {rows.shape}, expected {a.shape}")
    s, cols = rows & (a > 0), np.flatnonzero(b > 0)
    if not s.any():
        return 0.0
    m = d[np.ix_(s, b > 0)].min(axis=0)
    need = _exact_sum(a[s]) * _exact_sum(b)
    scale, have = _exact_sum(a), Fraction(0)
    for w in np.unique(m):
        have += _exact_sum(b[cols[m == w]])
        if have * scale >= need:
            return float(w)
    return float(m.max())  # not reached: T = supp b has b(T)·Σa = Σb·Σa ≥ a(S)·Σb
