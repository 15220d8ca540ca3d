"""optax's L-BFGS (zoom line search) run for a fixed number of steps inside one compiled loop: the
smoothed duals' maximisers (:mod:`._dual`, :mod:`._dual_bound`) share it."""

from __future__ import annotations

from collections.abc import Callable

import jax
import optax

__all__ = ["lbfgs_scan"]


def lbfgs_scan(opt: optax.GradientTransformationExtraArgs, fn: Callable, x, state, length: int,
               project: Callable = lambda x: x):
    """``length`` steps of ``opt`` (an ``optax.lbfgs``) minimising ``fn`` from ``x`` and its
    ``state``, each step's point passed through ``project``; returns ``(x, state, values)``, the
    values of ``fn`` at the points the steps started from. Call it under ``jax.jit``."""
    value_and_grad = optax.value_and_grad_from_state(fn)

    def step(carry, _):
        x, st = carry
        value, grad = value_and_grad(x, state=st)
        updates, st = opt.update(grad, st, x, value=value, grad=grad, value_fn=fn)
        return (project(optax.apply_updates(x, updates)), st), value

    (x, state), values = jax.lax.scan(step, (x, state), None, length=length)
    return x, state, values
