"""The TOML guard: a config file is read within a size limit and its nesting bounded in linear time
before ``tomllib`` (which recurses per level and is quadratic in a dotted key's parts) parses it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import numpy as np

from diffpriv._files import FileFormatError, read_text
from diffpriv.config._distributions import ConfigError

__all__ = ["MAX_CONFIG_BYTES", "MAX_NESTING", "read_toml", "toml_nesting"]

MAX_CONFIG_BYTES = 4 * 2**20
"""Largest config file, in bytes (tomllib reads about 0.4 MB/s of the worst TOML)."""
MAX_NESTING = 64
"""Deepest nesting of arrays and inline tables, and most parts of one dotted key, in a config
(the schema needs 7; tomllib recurses per level and is quadratic in a key's parts)."""


def read_toml(path: str | Path) -> dict[str, Any]:
    """The parsed TOML of the config file ``path``.

    Raises:
      ConfigError: the file is missing, too large, nested too deeply, or not valid TOML.
    """
    path = Path(path)
    try:
        text = read_text(path, limit=MAX_CONFIG_BYTES, what="a config")
    except FileFormatError as e:
        raise ConfigError(str(e)) from None
    depth = toml_nesting(text)
    if depth > MAX_NESTING:
        raise ConfigError(f"{path}: nested {depth} levels deep (arrays, inline tables or the parts "
                          f"of one dotted key), more than the {MAX_NESTING} allowed")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    except RecursionError:  # not reached within MAX_NESTING; a last line of defence
        raise ConfigError(f"{path}: invalid TOML: nested too deeply") from None


# The strings and comments of a TOML text. Each alternative consumes its match in one pass (an
# unterminated string runs to the end of its line, or of the text for a multi-line one), so
# that substituting them is linear in the text even for hostile input.
_TOML_SKIP = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*+(?:"{3,5}|\Z)'  # the closing """ may follow one or two "
    r"|'''(?:[^']|'(?!''))*+(?:'{3,5}|\Z)"
    r'|"(?:[^"\\\n]|\\[^\n])*+(?:"|$)'
    r"|'[^'\n]*+(?:'|$)"
    r"|#[^\n]*+",
    re.DOTALL | re.MULTILINE,
)
_SEPARATORS = np.frombuffer(b",=[]{}\n", dtype=np.uint8)


def toml_nesting(text: str) -> int:
    """An upper bound on how deeply ``text`` nests, found without parsing it (linear time).

    Outside strings and comments: the deepest nesting of ``[``/``{``, and one more than the most
    dots in a run without a separator (``, = [ ] { }`` or a newline), i.e. the parts of a dotted
    key. A valid config nests at most 7 levels.
    """
    plain = _TOML_SKIP.sub("s", text).encode("utf-8", "surrogatepass")
    b = np.frombuffer(plain, dtype=np.uint8)
    at = np.flatnonzero((b == ord("[")) | (b == ord("{")) | (b == ord("]")) | (b == ord("}")))
    steps = np.where((b[at] == ord("[")) | (b[at] == ord("{")), 1, -1)
    depth = int(np.cumsum(steps).max(initial=0))
    dots = np.flatnonzero(b == ord("."))
    if not dots.size:
        return depth
    runs = np.searchsorted(np.flatnonzero(np.isin(b, _SEPARATORS)), dots)
    return max(depth, int(np.bincount(runs).max()) + 1)
