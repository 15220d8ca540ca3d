"""``design``: optimize, then certify, in one call — what the CLI, the experiments and the
benchmarks run."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from diffpriv._files import json_number
from diffpriv._gap import relative_gap
from diffpriv.certification import Certificate, certify
from diffpriv.problems._problem import Problem
from diffpriv.problems._user import runs_utilities
from diffpriv.solvers._methods import declares
from diffpriv.solvers._optimizer import Optimizer, OptimizeResult
from diffpriv.solvers._progress import phase, progress_bar

__all__ = ["Design", "InfeasibleError", "design"]


class InfeasibleError(ValueError):
    """The optimizer's certified lower bound proves that no table meets the constraints."""


@dataclasses.dataclass(frozen=True, eq=False)
class Design:
    """An optimized and certified mechanism.

    Attributes:
      result: the optimizer's :class:`~diffpriv.solvers.OptimizeResult` (its table, lower bound, status).
      certificate: the :class:`~diffpriv.Certificate` of the (possibly repaired) table.
      seconds: wall times, ``{"compile": …, "solve": …, "certify": …}``: JAX's tracing and
        compilation, the rest of the optimizer's runs, and certification.
    """

    result: OptimizeResult
    certificate: Certificate
    seconds: dict[str, float]

    @property
    def table(self):
        """The certified table ``[n_profiles, n_in, n_out]``."""
        return self.certificate.table

    @property
    def gap(self) -> float:
        """Certified relative gap ``(certified loss − lower bound) / max(|lower bound|, 10⁻⁶)``
        (:func:`diffpriv._gap.relative_gap`): how far the deployed table can be from optimal."""
        return relative_gap(self.certificate.loss, self.result.lower_bound)


@runs_utilities  # the caller's own problem: a utility it names is theirs to run
def design(problem: Problem, *, seed: int = 0, steps: int | None = None,
           progress: bool | Callable[[int, int, float], None] = False, init=None,
           meta: dict[str, Any] | None = None, quantize: int | None = None,
           utility: Callable | None = None, **options) -> Design:
    """Optimizes ``problem`` and certifies the table (repairing it if needed).

    Args:
      problem: the problem.
      seed, steps, progress, init, **options: as for :func:`diffpriv.optimize` (``method``:
        ``"auto"`` by default, which runs the exact reference where it is predicted faster;
        ``result.method`` names the solver that ran; ``time_limit``: seconds after which the
        optimizer stops with its best table, status ``"time limit"``; Ctrl-C stops it the same
        way, status ``"interrupted"``, and that table is certified too). The run stops
        at a certified gap: when the optimizer has converged but the certified (possibly
        repaired) table is not within ``gap_tol`` of the lower bound, the run continues from
        where it stopped with a 10x smaller ``viol_factor`` (at most three times, within
        ``steps`` in all).
      meta: JSON-ready information recorded in the certificate (the optimizer's settings and
        results are added under ``"optimizer"``).
      quantize: certify the table rounded to integer counts over ``2^quantize`` per row, the
        table :class:`diffpriv.Sampler` draws exactly (:func:`diffpriv.certification.certify`).
      utility: a JAX-differentiable ``fn(table, arrays) -> scalar`` to minimise in place of the
        problem's objective (:class:`diffpriv.problems.PythonUtility`: ``table`` ``[S, X, Y]``,
        ``arrays`` the prior, loss and population law), by the gradient search; the privacy is
        certified exactly as for any objective. A wrong signature, or a function JAX cannot
        differentiate, is refused in one line (:class:`diffpriv.problems.SpecError`).

    Raises:
      InfeasibleError: the certified lower bound proves the constraints cannot all hold.
      diffpriv.certification.RepairError: a repair is needed and impossible.

    Example:
      >>> import numpy as np, diffpriv as dp
      >>> X = dp.Domain(("a", "b", "c"))
      >>> problem = dp.Problem(X, X, 1 - np.eye(3), np.ones(3) / 3,
      ...                      constraints=(dp.LocalDP(epsilon=1.0),))
      >>> d = dp.design(problem)
      >>> d.certificate.ok, d.result.status, d.gap <= 1e-4
      (True, 'converged', True)
    """
    if steps is not None:
        options["steps"] = steps
    if utility is not None:
        from diffpriv.problems._user import PythonUtility

        problem = dataclasses.replace(problem, objective=PythonUtility.of(utility))
    opt = Optimizer(**options)
    budget, seconds = opt.steps, {"compile": 0.0, "solve": 0.0, "certify": 0.0}
    optimize_seconds = 0.0

    def count(result: OptimizeResult) -> None:
        nonlocal optimize_seconds
        optimize_seconds += result.seconds
        seconds["compile"] += result.compile_seconds
        seconds["solve"] += result.seconds - result.compile_seconds

    def certified(result: OptimizeResult) -> Certificate:
        info = {"method": result.method, "steps": int(result.steps), "seed": int(result.seed),
                "status": result.status,
                "seconds": optimize_seconds, "objective": float(result.objective),
                "lower_bound": json_number(result.lower_bound),
                "max_violation": json_number(result.max_violation), "options": result.options}
        if result.presolve is not None:
            info["presolve"] = result.presolve
        if result.prices is not None:
            info["prices"] = result.prices
        start = time.perf_counter()
        phase(report, "certifying")
        cert = certify(problem, result.table, repair=True, seed=seed,
                       meta={**(meta or {}), "optimizer": info},
                       quantize=quantize)
        seconds["certify"] += time.perf_counter() - start
        return cert

    with progress_bar(progress, opt.gap_tol) as report:
        result = opt(problem, seed=seed, init=init, progress=report)
        count(result)
        if result.plan == "lean":  # its multipliers alone are GBs (a 100×100 grid's: 1.6 GB), which
            result = dataclasses.replace(result, state=None)  # certifying needs; no continuation
        if result.infeasible:
            raise InfeasibleError(
                f"the constraints cannot all hold: the optimizer's certified lower bound "
                f"{result.lower_bound:.6g} exceeds the largest loss any table can have")
        cert = certified(result)
        # Stop at a *certified* gap: if repairing the table costs more than the gap allows,
        # continue the run (warm start) with a 10x stricter violation tolerance.
        for _ in range(3):
            left = opt.time_limit - optimize_seconds if opt.time_limit > 0 else 0.0
            if (result.status != "converged" or result.steps >= budget
                    or relative_gap(cert.loss, result.lower_bound) <= opt.gap_tol
                    or not problem.linear or result.state is None
                    or not declares(result.method, "takes_init")  # PDHG goes on from its iterate
                    or (opt.time_limit > 0 and left <= 0)):
                break
            opt = dataclasses.replace(opt, steps=budget - result.steps, viol_factor=opt.viol_factor / 10,
                                      time_limit=left)
            phase(report, "optimizing")
            more = opt(problem, seed=seed, init=result, progress=report)
            count(more)
            result = dataclasses.replace(more, steps=result.steps + more.steps,
                                         seconds=optimize_seconds,
                                         compile_seconds=seconds["compile"])
            cert = certified(result)
    result, cert = _true_bound(problem, result, cert)
    return Design(result, cert, seconds)


def _true_bound(problem: Problem, result: OptimizeResult, cert: Certificate):
    """``(result, cert)`` with a lower bound that ``verify`` accepts: a stated bound above the loss
    of the certified table (beyond :data:`~diffpriv.certification._verify.RTOL`) is false, since
    that table meets every budget, and is replaced, in the result and the certificate's
    ``meta.optimizer``, by the objective's least value over all tables (a bound whatever the
    constraints), with a note saying so. Every solver's bound is weak duality recomputed in
    float64 with outward margins; this is the guard that a bug in one cannot reach a user."""
    from diffpriv.certification._verify import ATOL, RTOL
    from diffpriv.solvers._rows import smallest_objective

    bound, loss = float(result.lower_bound), float(cert.loss)
    if not cert.ok or not bound > loss + RTOL * abs(loss) + ATOL:
        return result, cert
    floor = smallest_objective(problem)
    info = dict(cert.meta["optimizer"])
    info["lower_bound"] = json_number(floor)
    info["lower_bound_dropped"] = (f"the solver's bound {bound!r} is above the certified loss "
                                   f"{loss!r}: not stated")
    cert = dataclasses.replace(cert, meta={**cert.meta, "optimizer": info})
    return dataclasses.replace(result, lower_bound=floor, gap=relative_gap(result.objective, floor)), cert
