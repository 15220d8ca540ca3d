"""Mechanisms as objects: the softmax-parametrised table (JAX, loaded on first use)."""

from diffpriv._lazy import lazy_getattr

_LAZY = {"Mechanism": "diffpriv.mechanisms._mechanism"}

__getattr__ = lazy_getattr("diffpriv.mechanisms", _LAZY)


__all__ = ["Mechanism"]
