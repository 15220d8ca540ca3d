"""Mechanisms as objects: the softmax-parametrised table (JAX, loaded on first use)."""

_LAZY = {"Mechanism": "diffpriv.mechanisms._mechanism"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'diffpriv.mechanisms' has no attribute {name!r}")


__all__ = ["Mechanism"]
