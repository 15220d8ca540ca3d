"""Distances between laws, in numpy: every divergence's level with its float64 error bound
(:mod:`._divergences`, where each divergence is defined once), and exact optimal transport (POT's
network simplex with its numpy backend only), checked and bounded outward (:mod:`._transport`).

The layer below :mod:`diffpriv.problems` and :mod:`diffpriv.certification`: the problems check
their ground metrics and measure their items with it, the certifier certifies Wasserstein levels
with it. It imports nothing else of diffpriv, and no JAX.
"""
