"""diffpriv's JAX side computes in float64: ratios of small probabilities and the certified lower
bound need the precision (the certifier, numpy, is float64 anyway). The public entry points that
run JAX are wrapped in :func:`float64`, which turns JAX's x64 mode on for the call (its thread)
and back off after it, so importing diffpriv changes nothing in the importing program;
:func:`require` is the check of the one driver every run goes through. Where a solver's steps
need less (mirror-prox on linear constraints alone, :mod:`._mirror`, and the L-BFGS bound beside
it, :mod:`._dual_bound`), they run in float32 on copies made by :func:`cast`, and what is
certified is computed in float64 again."""

from __future__ import annotations

import contextlib
import functools
import sys
import threading


def cast(tree, dtype):
    """``tree`` with its floating-point arrays as ``dtype``, its other leaves as they are."""
    import jax
    import jax.numpy as jnp

    def one(x):
        return x.astype(dtype) if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating) else x

    return jax.tree.map(one, tree)


_THREAD = threading.local()


def float64(fn):
    """``fn`` run with JAX's x64 mode on (``jax.enable_x64``), whatever the caller's setting (JAX
    loads with the first call, not with this module)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import jax

        with jax.enable_x64(True):
            return fn(*args, **kwargs)

    return wrapper


def float64_on_demand(fn):
    """:func:`float64` for an entry point whose runs may need no JAX (the optimizer's route: the
    exact, column-generation and interior-point runs never load it): where JAX is not loaded yet,
    ``fn`` runs without it, and x64 turns on for the rest of the call once a run that needs JAX
    has loaded it (:func:`require`, which the driver calls before each run)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if "jax" in sys.modules:
            import jax

            with jax.enable_x64(True):
                return fn(*args, **kwargs)
        outer = getattr(_THREAD, "later", None)
        with contextlib.ExitStack() as later:
            _THREAD.later = later
            try:
                return fn(*args, **kwargs)
            finally:
                _THREAD.later = outer

    return wrapper


def require() -> None:
    """Checks that JAX's x64 mode is on where JAX is loaded: turns it on for the rest of the
    :func:`float64_on_demand` call that loaded it, else raises ``RuntimeError`` (a run outside
    :func:`float64`). Nothing to check where JAX is not loaded."""
    if "jax" not in sys.modules:
        return
    import jax

    if jax.config.jax_enable_x64:
        return
    later = getattr(_THREAD, "later", None)
    if later is None:
        raise RuntimeError("internal: a JAX solver ran without float64 (wrap its entry point in "
                           "diffpriv.solvers._x64.float64)")
    later.enter_context(jax.enable_x64(True))


def on_this_thread() -> None:
    """Turns x64 on for the calling thread for good: for a host callback (``jax.pure_callback``),
    which XLA may run on a worker thread of its own, where the caller's :func:`float64` context
    does not reach; JAX then casts the callback's float64 result to float32 and rejects it
    ("Incorrect output dtype", seen under the augmented Lagrangian on a 1×4 grid). Only that
    thread is touched, once; diffpriv's callbacks are the float64 ones run there."""
    if not getattr(_THREAD, "on", False):
        import jax

        jax.enable_x64(True).__enter__()
        _THREAD.on = True
