"""Writing a mechanism table for deployment (csv, npz, json), and atomic file writes.

Every file is written to a temporary file in the target folder and moved into place with
``os.replace``, so a reader never sees a half-written file. numpy only.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np

from ._problem import Problem

__all__ = ["FORMATS", "atomic_open", "jsonable", "write_json", "write_table"]

Format = Literal["csv", "npz", "json"]
FORMATS: tuple[Format, ...] = ("csv", "npz", "json")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Opens a temporary file next to ``path``; on success it replaces ``path``, else vanishes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None
    try:
        text = {} if "b" in mode else {"encoding": "utf-8", "newline": ""}
        with os.fdopen(fd, mode, **text) as f:
            yield f
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def jsonable(data: Any) -> Any:
    """``data`` with non-finite floats as the strings ``"inf"``, ``"-inf"``, ``"nan"``
    (the certificate's convention: strict JSON has no such numbers)."""
    if isinstance(data, dict):
        return {k: jsonable(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [jsonable(v) for v in data]
    if isinstance(data, float) and not np.isfinite(data):
        return str(data)
    return data


def write_json(path: str | Path, data: Any) -> None:
    """Writes ``data`` as indented strict JSON (see :func:`jsonable`), atomically."""
    text = json.dumps(jsonable(data), indent=2, allow_nan=False, ensure_ascii=False)
    with atomic_open(path) as f:
        f.write(text + "\n")


def _labels(problem: Problem) -> dict[str, list[str]]:
    return {
        "profiles": list(problem.profiles),
        "inputs": list(problem.inputs.labels),
        "outputs": list(problem.outputs.labels),
    }


def write_table(problem: Problem, table: np.ndarray, fmt: Format, path: str | Path) -> Path:
    """Writes the ``[n_profiles, n_in, n_out]`` table ``A[s, x, y]`` with its labels.

    * ``csv``: long format, one row per entry: ``profile,input,output,probability``
      (probabilities printed with 17 significant digits, so the float64 table is exact).
    * ``npz``: arrays ``table``, ``profiles``, ``inputs``, ``outputs`` (and ``input_coords``,
      ``output_coords`` where the domains have coordinates).
    * ``json``: ``{"profiles", "inputs", "outputs", "table"}`` with ``table`` nested lists.
    """
    table = np.asarray(table, dtype=np.float64)
    if table.shape != problem.shape:
        raise ValueError(f"table: shape {table.shape}, expected {problem.shape}")
    labels = _labels(problem)
    path = Path(path)
    if fmt == "csv":
        with atomic_open(path) as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["profile", "input", "output", "probability"])
            for (s, x, y), p in np.ndenumerate(table):
                w.writerow([problem.profiles[s], problem.inputs.labels[x],
                            problem.outputs.labels[y], repr(float(p))])
    elif fmt == "npz":
        arrays = {k: np.asarray(v) for k, v in labels.items()}
        for name, dom in (("input_coords", problem.inputs), ("output_coords", problem.outputs)):
            if dom.coords is not None:
                arrays[name] = dom.coords
        with atomic_open(path, "wb") as f:
            np.savez_compressed(f, table=table, **arrays)
    elif fmt == "json":
        write_json(path, {**labels, "table": table.tolist()})
    else:
        raise ValueError(f"format: must be one of {', '.join(FORMATS)}, got {fmt!r}")
    return path
