"""A faster-rising bound for linear constraints: L-BFGS on their smoothed dual, from another
solver's multipliers.

For hockey-stick and ratio bounds ``G A ≤ 0`` / ``Σ_y max(0, (G A)_y) ≤ δ`` (:mod:`._linear`) and
the expected loss, weak duality makes

    ``d(u) = Σ_r min_y (C + Gᵀu)[r, y] − Σ δ max_y u``

a lower bound on the optimum for every ``u ≥ 0`` (:func:`._linear.lower_bound`). Mirror-prox's
multipliers follow its table, so the bound at them rises at the table's pace: on approximate
local DP between the 4-neighbour cells of a 16×16 grid (seed 0) it was 1.198 after 2,000 steps
and 1.216 after 6,000, where the table's loss had been within 0.05 % of its last value since
the 1,400th. Maximising ``d`` itself from the multipliers is far quicker: ``min_y`` smoothed into
``−τ_r ln Σ_y e^{−z_y/τ_r}`` (``τ_r`` a fraction :data:`TAU` of the row's mean cost; the smoothed
dual is below ``d``), each step projected on ``u ≥ 0``, 300 L-BFGS steps (optax) from the 1,000th
step's multipliers raised the bound from 0.98 to 1.216. The bound reported is ``d`` itself at the
multipliers found, so it holds whatever L-BFGS did.

A step of optax's L-BFGS (memory 10) costs about 9 ms on a 16×16 grid, nearly all of it the
memory's update, where the smoothed dual's value and gradient cost 0.4 ms. Plain gradient steps
with a backtracking line search cost a quarter as much and rise faster at first, but level off
(from the 1,200th step's multipliers on 24×24, 600 steps gave 1.282 against L-BFGS's 1.288 on
approximate LDP); in the runs they took TV-DP on 24×24 (seed 0) from 185 to 142 s but doubled
approximate LDP's steps (3,600 to 8,400 over seeds 0 and 1), so L-BFGS stays. Rescaling each row
of ``u`` after a call (L-BFGS over one scale per row, the row's shape kept) raised a call's bound
further (TV-DP on 24×24: 3.333 to 3.486) but saved no time in the runs, so it is not done.

The steps run in float32 (:func:`._x64.cast`), the bound at their end in float64. From the
1,200th step's multipliers of TV-DP on a 24×24 grid (seed 0), 100 and 300 steps took 2.97 and
9.55 s against 7.51 and 22.51 s in float64, to bounds of 3.5133 and 3.5874 against 3.5128 and
3.5848.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from diffpriv.solvers._lbfgs import lbfgs_scan
from diffpriv.solvers._linear import LinearData, Operator, lower_bound, soft_min
from diffpriv.solvers._x64 import cast

__all__ = ["DualBound"]

TAU = 1e-4
"""The smoothing temperature per row, relative to the row's mean cost on its support (at
least a thousandth of the rows' mean). From the 1,000th step's multipliers of the run above,
300 steps raised the bound to 1.216 at 10⁻⁴, to 1.213 at 10⁻⁵ and to 1.169 at 10⁻³."""

STEPS, RESTART = 100, 3
"""L-BFGS steps per call (every other mirror-prox chunk), and a fresh start from the run's
multipliers every third call: the start matters more than the steps (300 steps from the
multipliers of the 400th, 1,000th and 2,000th mirror-prox step gave 1.200, 1.216 and 1.220, and
1,000 from the 400th only 1.214), and the run's own multipliers keep improving. In float64 a call
cost about 1 s on a 16×16 grid (a chunk of 200 mirror-prox steps: 0.6 s) and 4.2 s on 24×24 (6 s);
in float32 (module docstring) 3 s on 24×24 and 14 s on 32×32 (a float32 chunk: 5 and 19 s), where
calling it on every chunk instead took TV-DP on 24×24 (seed 0) 141 s against 129 s. Against
every chunk with a restart every fifth, five seeds of TV-DP and approximate LDP took 47 and 43 s
against 60 and 40 s (16×16 grids), 16 and 8 s against 17 and 9 s (the Sacramento sales on 10×10
cells), and on 24×24 (seed 1) 54 and 68 s against 70 and 68 s."""

_OPT = optax.lbfgs(memory_size=10)


def _smoothed(data: LinearData, op: Operator, tau, u):
    """The smoothed dual at ``u ≥ 0`` (module docstring)."""
    mins = soft_min(data.cost + op.transpose(u), data.mask, tau)
    return jnp.sum(mins) - jnp.sum(op.delta * jnp.max(u, axis=1, initial=0.0))


@jax.jit
def _steps(data, op, tau, u, state):
    """:data:`STEPS` L-BFGS steps on the negated smoothed dual, each projected on ``u ≥ 0``."""

    def fn(x):
        return -_smoothed(data, op, tau, x)

    u, state, _ = lbfgs_scan(_OPT, fn, u, state, STEPS, project=lambda x: jnp.maximum(x, 0.0))
    return u, state


@jax.jit
def _exact(data, op, u):
    return lower_bound(data, u, op=op)


class DualBound:
    """The smoothed dual's L-BFGS run beside another solver (module docstring), on ``data``
    (real budgets, the expected loss, linear constraints only) with the operator ``op``."""

    def __init__(self, data: LinearData, op: Operator):
        self.data, self.op = data, op
        mask = data.mask
        mean = jnp.sum(jnp.where(mask, data.cost, 0.0), axis=1) / jnp.maximum(jnp.sum(mask, axis=1), 1)
        self.tau = TAU * jnp.maximum(mean, 1e-3 * jnp.maximum(jnp.mean(mean), 1e-300))
        self.stepping = cast((data, op, self.tau), jnp.float32)  # the steps' (module docstring)
        self.u = self.state = None  # float32
        self.value = -float("inf")  # the bound at self.u
        self.calls = 0

    def raised(self, u) -> float:
        """The bound after :data:`STEPS` more steps: from the multipliers ``u`` (real scale) on the
        first call, every :data:`RESTART`-th, and where their bound is above this run's, else
        from where this run stopped."""
        u = jnp.maximum(u, 0.0)
        start = float(_exact(self.data, self.op, u))
        self.calls += 1
        if self.u is None or self.calls % RESTART == 0 or start > self.value:
            self.u = u.astype(jnp.float32)
            self.state = _OPT.init(self.u)
        self.u, self.state = _steps(*self.stepping, self.u, self.state)
        self.value = float(_exact(self.data, self.op, self.u.astype(jnp.float64)))
        return max(self.value, start)
