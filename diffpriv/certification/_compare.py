"""Whether a certificate is for a given problem: the first field where two problems differ.

A certificate vouches only for the problem stored inside it. :func:`problem_difference` compares
that problem with the one a user meant (their config), by the canonical hash first and, where the
hashes differ, field by field through their JSON forms (:func:`first_difference`), so that the
failure names the first field that differs. numpy only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from diffpriv.problems._json import problem_hash, problem_to_dict
from diffpriv.problems._problem import Problem

__all__ = ["first_difference", "problem_difference"]


def _short(value: Any) -> str:
    text = repr(value.tolist() if isinstance(value, (np.ndarray, np.generic)) else value)
    return text if len(text) <= 60 else text[:57] + "..."


def first_difference(stored: Any, expected: Any, path: str) -> str | None:
    """``"PATH: the certificate has X, the config Y"`` for the first place where two JSON-like
    values differ (dicts key by key, lists and arrays entry by entry), or None when equal."""
    if isinstance(stored, Mapping) and isinstance(expected, Mapping):
        for key in [*stored, *(k for k in expected if k not in stored)]:
            if key not in stored or key not in expected:
                side = "the config" if key not in stored else "the certificate"
                return f"{path}.{key}: only {side} has it"
            found = first_difference(stored[key], expected[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(stored, np.ndarray) or isinstance(expected, np.ndarray):
        a, b = np.asarray(stored), np.asarray(expected)
        if a.shape != b.shape:
            return f"{path}: the certificate has shape {a.shape}, the config {b.shape}"
        differ = np.argwhere(a != b)
        if differ.size == 0:
            return None
        at = tuple(int(i) for i in differ[0])
        return f"{path}{list(at)}: the certificate has {_short(a[at])}, the config {_short(b[at])}"
    if isinstance(stored, (list, tuple)) and isinstance(expected, (list, tuple)):
        if len(stored) != len(expected):
            return f"{path}: the certificate has {len(stored)} entries, the config {len(expected)}"
        for i, (u, v) in enumerate(zip(stored, expected, strict=True)):
            found = first_difference(u, v, f"{path}[{i}]")
            if found:
                return found
        return None
    if type(stored) is not type(expected) or stored != expected:
        return f"{path}: the certificate has {_short(stored)}, the config {_short(expected)}"
    return None


def problem_difference(stored: Problem, expected: Problem) -> str | None:
    """None when the two are the same problem (equal canonical hashes), else the first field of
    ``problem`` that differs (:func:`first_difference` of their JSON forms)."""
    if problem_hash(stored) == problem_hash(expected):
        return None
    return first_difference(problem_to_dict(stored, arrays=True), problem_to_dict(expected, arrays=True),
                            "problem") or "problem: differs from the config's (its hash)"
