"""The softmax-parametrised mechanism table."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from diffpriv.solvers._x64 import float64

__all__ = ["Mechanism"]


class Mechanism(eqx.Module):
    """A row-stochastic table ``A[s, x, y] = softmax_y(logits[s, x, y])`` on an allowed support.

    ``logits`` is the trainable leaf. ``support`` (boolean, same shape) masks outputs a row may
    use: masked entries get probability exactly 0. Rows with every output masked are not allowed
    (the problem specification rejects them).

    Example:
      >>> m = Mechanism.uniform((1, 3, 3))
      >>> m.table().sum(-1)  # doctest: +SKIP
      Array([[1., 1., 1.]], dtype=float64)
    """

    logits: Float[Array, "s x y"]
    support: Bool[Array, "s x y"]

    @classmethod
    @float64
    def uniform(cls, shape: tuple[int, int, int], support=None) -> Mechanism:
        """The uniform table on ``support`` (all outputs when ``support`` is None)."""
        sup = jnp.ones(shape, dtype=bool) if support is None else jnp.asarray(support, dtype=bool)
        return cls(jnp.zeros(shape), sup)

    @classmethod
    @float64
    def from_table(cls, table, support=None) -> Mechanism:
        """The mechanism whose table is ``table`` (zeros become masked-out logits)."""
        table = np.asarray(table, dtype=np.float64)
        sup = table > 0 if support is None else np.asarray(support, dtype=bool) & (table > 0)
        logits = np.where(sup, np.log(np.where(sup, table, 1.0)), 0.0)
        return cls(jnp.asarray(logits), jnp.asarray(sup))

    @float64
    def log_table(self) -> Float[Array, "s x y"]:
        """``log A`` computed stably (``-inf`` outside the support)."""
        return jax.nn.log_softmax(jnp.where(self.support, self.logits, -jnp.inf), axis=-1)

    @float64
    def table(self) -> Float[Array, "s x y"]:
        """The row-stochastic table ``A``."""
        return jax.nn.softmax(jnp.where(self.support, self.logits, -jnp.inf), axis=-1)
