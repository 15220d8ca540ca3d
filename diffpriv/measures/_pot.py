"""POT (Python Optimal Transport) imported with its numpy backend only.

On import POT loads every array library it finds (JAX, PyTorch, CuPy, TensorFlow) to offer them
as backends. The certifier passes numpy arrays only, so those backends are switched off for the
import through POT's own environment switches (``POT_BACKEND_DISABLE_*``), and the certifier runs
no JAX code even when it solves a transport problem. If POT was imported already (by the user,
or after JAX), it is used as it is.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

__all__ = ["pot"]

_SWITCHES = ("POT_BACKEND_DISABLE_JAX", "POT_BACKEND_DISABLE_PYTORCH", "POT_BACKEND_DISABLE_CUPY",
             "POT_BACKEND_DISABLE_TENSORFLOW")


def pot() -> ModuleType:
    """The ``ot`` module, imported on first use with the numpy backend only."""
    if "ot" not in sys.modules:
        saved = {k: os.environ.get(k) for k in _SWITCHES}
        os.environ.update(dict.fromkeys(_SWITCHES, "1"))
        try:
            import ot  # noqa: F401
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return sys.modules["ot"]
