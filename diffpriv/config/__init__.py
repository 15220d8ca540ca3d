"""TOML configs: the schema (pydantic) and its translation into a :class:`~diffpriv.Problem`.

numpy only: a config is validated before JAX is loaded.
"""

from diffpriv.config._config import (
    MAX_GRID_CELLS,
    MAX_SEED,
    ConfigError,
    OptimizerOptions,
    config_from_dict,
    load_config,
)

__all__ = ["MAX_GRID_CELLS", "MAX_SEED", "ConfigError", "OptimizerOptions", "config_from_dict",
           "load_config"]
