"""JAX's persistent compilation cache: a second run of the same problem shape, in another process,
reuses the compiled programs instead of compiling them again.

The folder is ``$DIFFPRIV_COMPILE_CACHE`` when set (``off`` turns the cache off), else
``$XDG_CACHE_HOME/diffpriv/jax`` (``~/.cache/diffpriv/jax``). JAX writes a program there once
its compilation took at least :data:`MIN_SECONDS`. The command line turns it on before a run;
the library before its first JAX run of the process (:func:`library_cache`), unless the caller has
pointed JAX's cache somewhere already.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["ENV", "MIN_SECONDS", "cache_dir", "enable_compile_cache", "library_cache"]

ENV = "DIFFPRIV_COMPILE_CACHE"

MIN_SECONDS = 0.2
"""Programs whose compilation took at least this long are cached (JAX's default is 1 s; a
solver's run compiles a few programs of 0.2–9 s on a 2-core CPU)."""


def cache_dir(value: str | None = None) -> Path | None:
    """The cache folder for ``value`` (default: the environment's ``$DIFFPRIV_COMPILE_CACHE``),
    or ``None`` when it is ``off``."""
    value = os.environ.get(ENV) if value is None else value
    if value is not None and value.strip().lower() in ("off", "0", "false", "no", ""):
        return None
    if value:
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "diffpriv" / "jax"


def enable_compile_cache(value: str | None = None) -> Path | None:
    """Points JAX's persistent compilation cache at :func:`cache_dir` (before the first
    compilation of the process, which is when JAX reads it); returns the folder, or ``None``
    when it is off or cannot be created (the run then compiles as usual). Where JAX is not loaded
    yet (a run that needs none never loads it), the settings go to the environment, which JAX reads
    when a run loads it."""
    path = cache_dir(value)
    if path is None:
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    jax = sys.modules.get("jax")
    if jax is None:
        os.environ["JAX_COMPILATION_CACHE_DIR"] = str(path)
        os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = str(MIN_SECONDS)
        return path
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_SECONDS)
    return path


_ASKED = False


def library_cache() -> None:
    """:func:`enable_compile_cache` once per process, for a library call (``dp.design``,
    ``dp.optimize``, ``dp.sweep``), unless JAX's cache folder is already set (by the caller, in
    ``jax.config`` or ``$JAX_COMPILATION_CACHE_DIR``: theirs stays)."""
    global _ASKED
    if _ASKED:
        return
    _ASKED = True
    jax = sys.modules.get("jax")
    theirs = jax is not None and jax.config.jax_compilation_cache_dir
    if os.environ.get("JAX_COMPILATION_CACHE_DIR") or theirs:
        return
    enable_compile_cache()
