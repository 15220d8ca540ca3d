"""Evaluating named mechanisms: build, certify, calibrate to a budget.

* :func:`evaluate` — the certificate of a registered mechanism at given parameters;
* :func:`calibrate` — the least noisy setting of its privacy parameter that meets every budget
  (bisection on the certified levels).

numpy only: the certifier checks every claim. Comparing them with the optimum
(:func:`diffpriv.mechanisms.compare`) runs the optimizer: :mod:`diffpriv._compare`, above the
solvers, which start from these baselines (:mod:`diffpriv.solvers._gradient`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from diffpriv.certification import Certificate, certify
from diffpriv.mechanisms import _baselines  # noqa: F401  (registers the baselines)
from diffpriv.mechanisms._registry import MECHANISMS, Named

__all__ = ["Evaluation", "evaluate", "calibrate"]

LOWEST = 1e-9
"""Default lower end of :func:`calibrate`'s search (in the parameter's own units)."""
HIGHEST = 1e9
"""Default upper end of :func:`calibrate`'s search."""


@dataclasses.dataclass(frozen=True, eq=False)
class Evaluation:
    """A named mechanism at given parameters, with its certificate.

    Attributes:
      name: the registered mechanism's name.
      params: every parameter, defaults included (JSON-ready floats).
      certificate: the :class:`~diffpriv.Certificate` of its table (repaired only when asked).
      bracket: for :func:`calibrate`'s result, ``(passing, failing)`` values of the calibrated
        parameter: ``passing`` is this evaluation's, ``failing`` the least value seen to fail
        (``inf`` if none failed up to the search's upper end); ``None`` otherwise.
    """

    name: str
    params: dict[str, Any]
    certificate: Certificate
    bracket: tuple[float, float] | None = None

    @property
    def loss(self) -> float:
        """The certified objective value of the (possibly repaired) table."""
        return self.certificate.loss

    @property
    def ok(self) -> bool:
        """Whether every constraint holds (with the certifier's float64 margin)."""
        return self.certificate.ok

    @property
    def levels(self) -> tuple[float, ...]:
        """Each constraint's certified level, in constraint order (ε, or δ(ε) when δ > 0)."""
        return tuple(c.level for c in self.certificate.constraints)

    @property
    def table(self):
        """The certified table ``[n_profiles, n_in, n_out]``."""
        return self.certificate.table

    @property
    def parameter(self) -> float | None:
        """The value of the mechanism's calibrated parameter (``None`` if it has none)."""
        key = _named(self.name).calibrate
        return None if key is None else self.params[key]


def _named(name: str) -> Named:
    if name not in MECHANISMS:
        raise ValueError(f"unknown mechanism {name!r} (known: {', '.join(sorted(MECHANISMS))})")
    return MECHANISMS[name]


def _json_param(value):
    """A parameter as a plain float where it is a number (numpy scalars included)."""
    if isinstance(value, bool | str) or value is None:
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def _json_safe(value):
    """Strict JSON for the certificate's meta: non-finite floats as ``"inf"``, ``"-inf"``,
    ``"nan"`` (the certificate's own convention)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def evaluate(problem, name: str, *, repair: bool = False, **params) -> Evaluation:
    """Builds the registered mechanism ``name`` for ``problem`` and certifies its table.

    Args:
      problem: the :class:`~diffpriv.Problem`.
      name: a key of ``MECHANISMS`` (``"krr"``, ``"planar_laplace"``, ...).
      repair: let the certifier repair a violating table (mixing with a data-independent
        channel); by default the mechanism is certified as is and ``ok`` may be False.
      **params: the mechanism's parameters (missing ones take their defaults).

    Returns:
      An :class:`Evaluation`; its certificate records ``meta["mechanism"] = {"name", "params"}``
      (a non-finite parameter, e.g. ``radius = inf``, as the string ``"inf"``).

    Raises:
      ValueError: an unknown mechanism or parameter, a missing or invalid parameter, or a
        problem the mechanism does not apply to.

    Example:
      >>> import numpy as np, diffpriv as dp
      >>> X = dp.Domain(("a", "b", "c"))
      >>> problem = dp.Problem(X, X, 1 - np.eye(3), np.ones(3) / 3,
      ...                      constraints=(dp.LocalDP(epsilon=1.0),))
      >>> ev = evaluate(problem, "krr", epsilon=0.5)
      >>> ev.ok, round(ev.levels[0], 12), round(ev.loss, 12)  # loss (k−1)/(e^ε+k−1)
      (True, 0.5, 0.548137238122)
    """
    named = _named(name)
    table = named(problem, **params)
    full = {k: _json_param(v) for k, v in {**named.params, **params}.items()}
    meta = {"mechanism": {"name": name, "params": {k: _json_safe(v) for k, v in full.items()}}}
    if named.details is not None:
        meta["mechanism"]["details"] = named.details(problem, **{**named.params, **params})
    cert = certify(problem, table, repair=repair, meta=meta)
    return Evaluation(name, full, cert)


def calibrate(problem, name: str, *, lo: float | None = None, hi: float | None = None,
              tol: float = 1e-6, **fixed) -> Evaluation:
    """The least noisy setting of mechanism ``name`` that meets every budget of ``problem``.

    Finds the largest value ``p`` of the mechanism's ``calibrate`` parameter (ε for
    ``planar_laplace``, ``precision = 1/σ`` for ``planar_gaussian``, ...) in ``[lo, hi]`` whose
    certificate without repair has every constraint ``ok``. It brackets ``p`` geometrically
    (factors of 10 from 1, clipped to ``[lo, hi]``), then bisects on ``log p`` until the passing
    and failing values are within a relative ``tol``.

    **Assumption:** every certified level is non-decreasing in the parameter (more privacy for
    less of it), so that the passing values form an interval ``[lo, p]``. This holds for
    randomized response and is checked on grids for the other baselines in the tests; if it
    fails, the result still passes (it is certified), but need not be the largest such value.

    Args:
      problem: the problem whose budgets must be met.
      name: a registered mechanism with a ``calibrate`` parameter.
      lo, hi: the search interval, default ``[1e-9, 1e9]`` in the parameter's units.
      tol: relative precision: the returned value ``p`` passes and ``p·(1 + tol)`` is at least
        a value seen to fail (unless ``hi`` passes, which is returned as is).
      **fixed: the mechanism's other parameters (e.g. ``radius`` of ``restricted_laplace``).

    Returns:
      The :class:`Evaluation` at ``p`` (``ok`` is True), with ``bracket = (p, failing)``.

    Raises:
      ValueError: the mechanism is unknown or has no calibrate parameter, the calibrate
        parameter is given in ``fixed``, the interval or ``tol`` is invalid, or even ``lo``
        does not meet the budgets (the message names the constraint and its level).
    """
    named = _named(name)
    key = named.calibrate
    if key is None:
        raise ValueError(f"mechanism {name!r} has no parameter to calibrate")
    if key in fixed:
        raise ValueError(f"calibrate: {key!r} of mechanism {name!r} is what calibrate finds; "
                         "do not pass it")
    lo = LOWEST if lo is None else float(lo)
    hi = HIGHEST if hi is None else float(hi)
    if not (0 < lo < hi < math.inf):
        raise ValueError(f"calibrate: need 0 < lo < hi < inf, got lo={lo!r}, hi={hi!r}")
    if not (0 < tol < 1):
        raise ValueError(f"calibrate: tol must be in (0, 1), got {tol!r}")

    def at(value: float) -> Evaluation:
        return evaluate(problem, name, **fixed, **{key: value})

    # Bracket: a passing value `good` and a failing value `bad` (inf if none fails up to hi).
    start = min(max(1.0, lo), hi)
    ev = at(start)
    if ev.ok:
        good, best, bad = start, ev, math.inf
        while bad == math.inf and good < hi:
            value = min(good * 10.0, hi)
            trial = at(value)
            if trial.ok:
                good, best = value, trial
            else:
                bad = value
    else:
        bad, good, best, failed = start, None, None, ev
        while good is None:
            if bad <= lo:
                raise ValueError(_nothing_passes(problem, name, key, lo, failed))
            value = max(bad / 10.0, lo)
            trial = at(value)
            if trial.ok:
                good, best = value, trial
            else:
                bad, failed = value, trial
    if bad == math.inf:
        return dataclasses.replace(best, bracket=(good, math.inf))
    # Bisection on log p: `good` passes, `bad` fails.
    while bad > good * (1.0 + tol):
        mid = math.sqrt(good * bad)
        if not good < mid < bad:  # float resolution reached
            break
        trial = at(mid)
        if trial.ok:
            good, best = mid, trial
        else:
            bad = mid
    return dataclasses.replace(best, bracket=(good, bad))


def _nothing_passes(problem, name: str, key: str, lo: float, ev: Evaluation) -> str:
    failing = [c for c in ev.certificate.constraints if not c.ok]
    c = failing[0] if failing else None
    why = "" if c is None else (f": constraint {c.name!r} has level {c.level:.6g} at {key}={lo:g}, "
                                f"budget ε={c.epsilon:g}" + (f", δ={c.delta:g}" if c.delta else ""))
    return (f"calibrate: mechanism {name!r} meets the budgets at no {key} in the search interval "
            f"(not even at {key}={lo:g}){why}")
