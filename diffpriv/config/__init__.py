"""TOML configs: the schema (pydantic, :mod:`._schema`, with the constraint and objective forms
their families declare), its translation into a :class:`~diffpriv.Problem` (:mod:`._build`), and
the guard that reads a TOML file within bounds (:mod:`._toml`).

numpy only: a config is validated before JAX is loaded.
"""

from diffpriv.config._build import OptimizerOptions, config_from_dict, config_gain, load_config
from diffpriv.config._distributions import ConfigError
from diffpriv.config._schema import MAX_GRID_CELLS, MAX_SEED

__all__ = ["MAX_GRID_CELLS", "MAX_SEED", "ConfigError", "OptimizerOptions", "config_from_dict",
           "config_gain", "load_config"]
