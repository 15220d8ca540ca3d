"""``dp.leakage``: the quantitative-information-flow measures (:mod:`diffpriv.measures._leakage`)
of a problem's raw data or of a table for it."""

from __future__ import annotations

import numpy as np

from diffpriv.measures._leakage import Leakage, identity_table
from diffpriv.measures._leakage import leakage as _measure
from diffpriv.problems._problem import Problem

__all__ = ["leakage"]


def leakage(problem: Problem, table=None, *, gain: np.ndarray | None = None) -> Leakage:
    """What ``table`` (``[S, X, Y]``, or a :class:`~diffpriv.Certificate`, whose table is taken)
    leaks about the true input under ``problem``'s prior and loss; without a table, the raw data
    (each input reported as itself: the outputs must be the inputs). ``gain`` ``[W, X]`` adds
    g-leakage. The measures: :class:`~diffpriv.measures._leakage.Leakage`.

        dp.leakage(problem).multiplicative_leakage             # the raw data: 1 / max_x π(x)
        dp.leakage(problem, design.certificate).adversary_error

    Raises:
      ValueError: no table and the outputs are not the inputs, or a table or gain of the wrong shape.
    """
    if table is None:
        if problem.outputs.labels != problem.inputs.labels:
            raise ValueError("the raw data report each input as itself, so the outputs must be the inputs")
        table = identity_table(problem.shape)
    table = np.asarray(getattr(table, "table", table), np.float64)
    if table.shape != problem.shape:
        raise ValueError(f"table: expected shape {problem.shape}, got {table.shape}")
    if gain is not None:
        gain = np.asarray(gain, np.float64)
        if gain.ndim != 2 or gain.shape[1] != problem.shape[1]:
            raise ValueError(f"gain: expected one row per guess of {problem.shape[1]} entries (one per "
                             "input), "
                             f"got shape {gain.shape}")
    return _measure(problem.prior, table, problem.loss, gain)
