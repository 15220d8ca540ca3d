"""A utility of your own for diffpriv's gradient search (`configs/user_utility.toml`).

`loss(table, arrays)` returns the number to minimise: the expected distance between the true and
the reported age band (the config's loss), plus a penalty on how far the law of the reports moves
from the population's own, so that the reports also keep the age distribution (a published
histogram of reports stays close to the truth). Not linear in the table: no LP takes it.
`table` is the mechanism [S, X, Y]; `arrays.prior` [S, X], `arrays.loss` [X, Y] and
`arrays.population` [X] are the problem's arrays, all float64 `jax.Array`s.
"""

import jax.numpy as jnp

WEIGHT = 10.0


def loss(table, arrays):
    expected = jnp.einsum("sx,sxy,xy->", arrays.prior, table, arrays.loss)
    reported = jnp.einsum("sx,sxy->y", arrays.prior, table)  # the law of the reports
    return expected + WEIGHT * jnp.sum((reported - arrays.population) ** 2)
