"""Lazy attributes of a package: names whose modules (JAX, pydantic, scipy's solvers) load on
first use, so that configs are validated and certificates checked without importing them."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, table: dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` that imports ``table[name]`` (a module path) on first use: the
    module itself where the path is ``package.name`` (a subpackage), else its attribute ``name``
    (``"module:attribute"``: that attribute, under the name ``name``).
    The value is then kept in the package, so the next use is a plain attribute."""

    def __getattr__(name: str):
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        path, _, attribute = table[name].partition(":")  # "module:attribute" for another name
        module = importlib.import_module(path)
        value = module if path == f"{package}.{name}" else getattr(module, attribute or name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
