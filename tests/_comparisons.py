"""Every comparison of a problem as dense numpy weights, and the worst violation of a table: plain
numpy checks for the tests, independent of the solvers."""

from typing import NamedTuple

import numpy as np

from diffpriv.problems._blocks import PairBlock, budgets
from diffpriv.problems._problem import Problem


class _Dense(NamedTuple):
    sa: np.ndarray
    wa: np.ndarray
    sb: np.ndarray
    wb: np.ndarray
    eps: np.ndarray
    delta: np.ndarray

    @property
    def size(self) -> int:
        return self.sa.size


def dense_comparisons(problem: Problem) -> _Dense:
    """Every comparison of ``problem.blocks()`` as dense normalised weights (plain numpy, for
    checks on small problems)."""
    nx = problem.inputs.size
    sa, wa, sb, wb = [], [], [], []
    for b in problem.blocks():
        if isinstance(b, PairBlock):
            sa += [b.s]
            sb += [b.s]
            wa += [np.eye(nx)[b.a]]
            wb += [np.eye(nx)[b.b]]
        else:
            sa += [b.sa]
            sb += [b.sb]
            wa += [b.wa / b.wa.sum(1, keepdims=True)]
            wb += [b.wb / b.wb.sum(1, keepdims=True)]
    bud = budgets(problem.blocks())
    if not sa:
        z = np.zeros(0, int)
        return _Dense(z, np.zeros((0, nx)), z, np.zeros((0, nx)), bud.eps, bud.delta)
    return _Dense(np.concatenate(sa), np.concatenate(wa), np.concatenate(sb), np.concatenate(wb),
                  bud.eps, bud.delta)


def worst_violation(problem: Problem, table: np.ndarray) -> float:
    """The largest violation of any constraint: ratio excess (δ = 0) or hockey-stick excess."""
    c = dense_comparisons(problem)
    if c.size == 0:
        return 0.0
    p = np.einsum("kx,kxy->ky", c.wa, table[c.sa])
    q = np.einsum("kx,kxy->ky", c.wb, table[c.sb])
    growth = np.exp(c.eps)[:, None]
    worst = 0.0
    for a, b in ((p, q), (q, p)):
        excess = a - growth * b
        pure = c.delta == 0
        if pure.any():
            worst = max(worst, float(excess[pure].max()))
        hockey = np.maximum(excess, 0.0).sum(axis=1) - c.delta
        worst = max(worst, float(hockey[~pure].max(initial=0.0)))
    return worst


def central_difference(f, table: np.ndarray, index: tuple, h: float = 1e-6) -> float:
    """``(f(table + h·e_index) − f(table − h·e_index)) / 2h``: a gradient entry to compare with."""
    up, down = table.copy(), table.copy()
    up[index] += h
    down[index] -= h
    return (f(up) - f(down)) / (2 * h)
