"""The optimizer's settings, declared once (no JAX): the :class:`~diffpriv.solvers.Optimizer` takes them,
and the config schema ``[optimizer]`` is derived from them field by field.

Each field's metadata states its bounds (``ge``, ``gt``, ``le``) and its meaning; the pydantic
schema of :mod:`diffpriv.config` and the checks of :meth:`Options.check` both read them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

from diffpriv.solvers._methods import METHODS

__all__ = ["Options", "METHODS"]

Method = Literal[tuple(METHODS)]
"""The values of ``optimizer.method``: the keys of :data:`METHODS`."""


def _f(default, doc: str, **bounds) -> Any:
    return dataclasses.field(default=default, metadata={"doc": doc, **bounds})


@dataclasses.dataclass(frozen=True)
class Options:
    """Settings of the optimizer (see :class:`diffpriv.solvers.Optimizer`)."""

    method: Method = _f(
        "auto", "; ".join(f"'{k}': {v}" for k, v in METHODS.items()))
    steps: int = _f(100_000, "maximum number of optimizer steps", ge=1, le=10**9)
    period: int = _f(500, "steps between restarts and stopping checks (the optimizer runs whole "
                     "periods, at most steps in all: a period longer than steps is cut to it)",
                     ge=1, le=100_000)
    omega: float = _f(0.1, "initial primal weight, relative to the problem's natural scale",
                      gt=0, le=1e6)
    omega_range: float = _f(9.0, "at each restart the primal weight adapts (PDLP's update) within "
                            "[omega, omega · omega_range]; 1 keeps it fixed", ge=1.0, le=1e3)
    gap_tol: float = _f(1e-4, "stop once the relative gap (objective − certified lower bound) / "
                        "lower bound of the restart iterate is at most this", gt=0, le=1.0)
    viol_factor: float = _f(1e-2, "... and its largest constraint violation (normalised units) is at "
                            "most viol_factor · gap_tol; the polished table must then be within the "
                            "gap, with violations that small, else the run goes on with a 10x "
                            "smaller factor", gt=0, le=1.0)
    chunk: int = _f(20, "periods per compiled call (the progress bar advances between calls)",
                    ge=1, le=10**6)
    jitter: float = _f(1e-3, "scale of the seeded perturbation of the uniform starting logits",
                       ge=0, le=10.0)
    polish: bool = _f(True, "project the final table onto its guessed active face")
    time_limit: float = _f(0.0, "stop the optimizer after this many seconds with the best table so far "
                           "(certified as any other; the result's status says 'time limit'); 0: no "
                           "limit", ge=0, le=1e9)
    presolve: bool = _f(True, "drop the rows no prior or compared law weighs, and the outputs no row "
                        "may use, before the solver runs (put back exactly for certification); "
                        "under method 'auto', also the constraints every table meets")

    def __post_init__(self):
        self.check()

    def check(self) -> None:
        """Raises ``ValueError`` naming ``optimizer.<field>`` for a value out of its bounds."""
        if self.method not in METHODS:
            names = [repr(k) for k in METHODS]
            raise ValueError(f"optimizer.method: must be {', '.join(names[:-1])} or {names[-1]}, "
                             f"got {self.method!r}")
        for name in ("polish", "presolve"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"optimizer.{name}: must be true or false, got {getattr(self, name)!r}")
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.type == "int" and (isinstance(v, bool) or not isinstance(v, int)):
                raise ValueError(f"optimizer.{f.name}: must be an integer, got {v!r}")
            if f.type == "float" and (isinstance(v, bool) or not isinstance(v, (int, float))
                                      or not math.isfinite(v)):
                raise ValueError(f"optimizer.{f.name}: must be a finite number, got {v!r}")
            m = f.metadata
            if ("ge" in m and v < m["ge"]) or ("gt" in m and v <= m["gt"]):
                low = f">= {m['ge']}" if "ge" in m else f"> {m['gt']}"
                raise ValueError(f"optimizer.{f.name}: must be {low}, got {v!r}")
            if "le" in m and v > m["le"]:
                raise ValueError(f"optimizer.{f.name}: must be <= {m['le']:g}, got {v!r}")
