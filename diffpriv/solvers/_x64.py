"""diffpriv's JAX side computes in float64: importing any of its modules turns on JAX's x64 mode
(``jax_enable_x64``), once, here. Ratios of small probabilities and the certified lower bound
need the precision; the certifier (numpy) is float64 anyway."""

import jax

jax.config.update("jax_enable_x64", True)
