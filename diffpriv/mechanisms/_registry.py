"""Named mechanisms (the seeds' mechanisms and the classic baselines) built as tables.

A mechanism here is a function ``build(problem, **params) -> table`` returning a row-stochastic
float64 array of shape ``problem.shape`` (``[n_profiles, n_in, n_out]``) that respects
``problem.support_mask()``; the common certifier, exporter and plots accept it unchanged.
Registered with :func:`register_mechanism`, it carries its default parameters and the parameter that
trades privacy for utility (``calibrate``: a larger value means less noise), which
``diffpriv evaluate --calibrate`` bisects on the certified level. numpy only (no JAX).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = ["MECHANISMS", "Named", "ParameterError", "register_mechanism"]


class ParameterError(ValueError):
    """A mechanism's parameter is missing, unknown or out of its range (one line)."""


@dataclasses.dataclass(frozen=True)
class Named:
    """A registered mechanism.

    Attributes:
      name: the name users give (``diffpriv evaluate CONFIG --mechanism NAME``).
      build: ``build(problem, **params) -> [n_profiles, n_in, n_out]`` float64 table.
      params: every parameter with its default (``None``: required).
      calibrate: the parameter ``--calibrate`` bisects (larger = less private), or ``None``.
      summary: one line for ``--help`` and listings.
      details: optional ``details(problem, **params) -> dict``: what the build drew or assumed
        that the table alone does not show (JSON-ready), recorded in the certificate's
        ``meta["mechanism"]["details"]``.
    """

    name: str
    build: Callable[..., np.ndarray]
    params: Mapping[str, Any]
    calibrate: str | None
    summary: str
    details: Callable[..., dict] | None = None

    def __call__(self, problem, **params) -> np.ndarray:
        unknown = sorted(set(params) - set(self.params))
        if unknown:
            raise ParameterError(f"mechanism {self.name!r} has no parameter {unknown[0]!r} "
                             f"(it has {', '.join(self.params) or 'none'})")
        full = {**self.params, **params}
        missing = [k for k, v in full.items() if v is None]
        if missing:
            raise ParameterError(f"mechanism {self.name!r} needs {missing[0]!r}")
        return self.build(problem, **full)


MECHANISMS: dict[str, Named] = {}
"""Every registered mechanism by name."""


def register_mechanism(name: str, *, params: Mapping[str, Any], calibrate: str | None, summary: str,
                       details: Callable[..., dict] | None = None):
    """Decorator registering ``build(problem, **params)`` as the mechanism ``name``."""

    def wrap(build: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
        if name in MECHANISMS:
            raise ValueError(f"mechanism {name!r} is registered twice")
        MECHANISMS[name] = Named(name, build, dict(params), calibrate, summary, details)
        return build

    return wrap
