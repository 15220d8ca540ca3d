"""diffpriv's JAX side computes in float64: ratios of small probabilities and the certified lower
bound need the precision (the certifier, numpy, is float64 anyway). The public entry points that
run JAX are wrapped in :func:`float64`, which turns JAX's x64 mode on for the call (its thread)
and back off after it, so importing diffpriv changes nothing in the importing program;
:func:`require` is the check of the one driver every run goes through. Where a solver's steps
need less (mirror-prox on linear constraints alone, :mod:`._mirror`, and the L-BFGS bound beside
it, :mod:`._dual_bound`), they run in float32 on copies made by :func:`cast`, and what is
certified is computed in float64 again."""

from __future__ import annotations

import functools
import threading

import jax
import jax.numpy as jnp


def cast(tree, dtype):
    """``tree`` with its floating-point arrays as ``dtype``, its other leaves as they are."""
    def one(x):
        return x.astype(dtype) if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating) else x

    return jax.tree.map(one, tree)


def float64(fn):
    """``fn`` run with JAX's x64 mode on (``jax.enable_x64``), whatever the caller's setting."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with jax.enable_x64(True):
            return fn(*args, **kwargs)

    return wrapper


def require() -> None:
    """Raises ``RuntimeError`` unless JAX's x64 mode is on (a run outside :func:`float64`)."""
    if not jax.config.jax_enable_x64:
        raise RuntimeError("internal: a JAX solver ran without float64 (wrap its entry point in "
                           "diffpriv.solvers._x64.float64)")


_THREAD = threading.local()


def on_this_thread() -> None:
    """Turns x64 on for the calling thread for good: for a host callback (``jax.pure_callback``),
    which XLA may run on a worker thread of its own, where the caller's :func:`float64` context
    does not reach; JAX then casts the callback's float64 result to float32 and rejects it
    ("Incorrect output dtype", seen under the augmented Lagrangian on a 1×4 grid). Only that
    thread is touched, once; diffpriv's callbacks are the float64 ones run there."""
    if not getattr(_THREAD, "on", False):
        jax.enable_x64(True).__enter__()
        _THREAD.on = True
