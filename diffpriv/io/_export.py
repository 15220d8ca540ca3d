"""Writing a mechanism table for deployment (csv, npz, json), and JSON summaries.

Every file is written atomically (:func:`diffpriv._files.atomic_open`), so a reader never sees a
half-written file. numpy only.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Literal

import numpy as np

from diffpriv._files import atomic_open, atomic_write, json_number
from diffpriv.problems._problem import Problem

__all__ = ["FORMATS", "jsonable", "repair_floor", "repair_only", "write_json", "write_table"]

Format = Literal["csv", "npz", "json", "csv-sparse", "npz-sparse"]
FORMATS: tuple[Format, ...] = ("csv", "npz", "json", "csv-sparse", "npz-sparse")


def jsonable(data: Any) -> Any:
    """``data`` with every float as the certificate stores it (:func:`json_number`): finite
    floats as numbers, non-finite ones as the strings ``"inf"``, ``"-inf"``, ``"nan"``
    (strict JSON has no such numbers). Tuples become lists."""
    if isinstance(data, dict):
        return {k: jsonable(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [jsonable(v) for v in data]
    if isinstance(data, float):
        return json_number(data)
    return data


def write_json(path: str | Path, data: Any) -> None:
    """Writes ``data`` as indented strict JSON (see :func:`jsonable`), atomically."""
    text = json.dumps(jsonable(data), indent=2, allow_nan=False, ensure_ascii=False)
    atomic_write(path, text + "\n")


def _labels(problem: Problem) -> dict[str, list[str]]:
    return {
        "profiles": list(problem.profiles),
        "inputs": list(problem.inputs.labels),
        "outputs": list(problem.outputs.labels),
    }


def repair_floor(table: np.ndarray, t: float, nu: np.ndarray | None) -> np.ndarray | None:
    """The repair's share of each entry, ``min(t·ν[y], A[s, x, y])`` (the uniform-style mix the
    certifier added so that every budget holds: dropping such an entry, or lowering it below this,
    can break the certificate); ``None`` where there was no repair (``t = 0``)."""
    if not t > 0 or nu is None:
        return None
    return np.minimum(t * np.asarray(nu, np.float64)[None, None, :], table)


def repair_only(table: np.ndarray, floor: np.ndarray) -> int:
    """How many non-zero entries of ``table`` are the repair's mix (:func:`repair_floor`) and
    nothing else, to rounding."""
    return int(np.count_nonzero((table > 0) & (floor >= table * (1.0 - 1e-9))))


def write_table(problem: Problem, table: np.ndarray, fmt: Format, path: str | Path,
                bits: int | None = None, floor: np.ndarray | None = None) -> Path:
    """Writes the ``[n_profiles, n_in, n_out]`` table ``A[s, x, y]`` with its labels.

    * ``csv``: long format, one row per entry: ``profile,input,output,probability``
      (probabilities printed with 17 significant digits, so the float64 table is exact).
    * ``npz``: arrays ``table``, ``profiles``, ``inputs``, ``outputs`` (and ``input_coords``,
      ``output_coords`` where the domains have coordinates).
    * ``json``: ``{"profiles", "inputs", "outputs", "table"}`` with ``table`` nested lists.
    * ``csv-sparse``: the ``csv`` rows of the non-zero entries only; with ``bits`` (a dyadic
      table: :mod:`diffpriv.certification._quantize`) a fifth column ``count``, the entry's
      integer count over ``2^bits``, which is what a sampler in any language needs.
    * ``npz-sparse``: the non-zero entries as arrays ``profile``, ``input``, ``output`` (int64
      indices), ``probability``, and ``count`` with ``bits`` for a dyadic table, plus ``shape``
      and the labels and coordinates of ``npz``: a 100×100 grid's table in megabytes.

    In the sparse formats, ``floor`` (:func:`repair_floor`: the repair's share of each entry,
    where the certified table was repaired) adds the column (array) ``repair``: the part of the
    entry's probability that is the repair's mix, which a deployment must keep, however small.
    """
    table = np.asarray(table, dtype=np.float64)
    if table.shape != problem.shape:
        raise ValueError(f"table: shape {table.shape}, expected {problem.shape}")
    labels = _labels(problem)
    path = Path(path)
    counts = None
    if bits is not None:
        from diffpriv.certification._quantize import dyadic_counts

        counts = dyadic_counts(table, bits)
        if counts is None:
            raise ValueError(f"table: not integer counts over 2^{bits}")
    if fmt == "csv-sparse":
        with atomic_open(path) as f:
            w = csv.writer(f, lineterminator="\n")
            head = ["profile", "input", "output", "probability"]
            head += ["count"] if counts is not None else []
            w.writerow(head + (["repair"] if floor is not None else []))
            for s_, x, y in zip(*np.nonzero(table), strict=True):
                row = [problem.profiles[s_], problem.inputs.labels[x], problem.outputs.labels[y],
                       repr(float(table[s_, x, y]))]
                row += [int(counts[s_, x, y])] if counts is not None else []
                w.writerow(row + ([repr(float(floor[s_, x, y]))] if floor is not None else []))
        return path
    if fmt == "npz-sparse":
        where = np.nonzero(table)
        arrays = {k: np.asarray(v) for k, v in labels.items()}
        for name, dom in (("input_coords", problem.inputs), ("output_coords", problem.outputs)):
            if dom.coords is not None:
                arrays[name] = dom.coords
        if counts is not None:
            arrays.update(count=counts[where], bits=np.int64(bits))
        if floor is not None:
            arrays.update(repair=floor[where])
        with atomic_open(path, "wb") as f:
            np.savez_compressed(f, shape=np.asarray(table.shape, np.int64), profile=where[0],
                                input=where[1], output=where[2], probability=table[where], **arrays)
        return path
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
