"""Lazy attributes of a package: names whose modules (JAX, matplotlib) load on first use, so
that configs are validated and certificates checked without importing JAX."""

from __future__ import annotations

import importlib
from collections.abc import Callable

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, table: dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` that imports ``table[name]`` (a module path) on first use."""

    def __getattr__(name: str):
        if name in table:
            return getattr(importlib.import_module(table[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
