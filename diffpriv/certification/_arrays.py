"""A certificate's large arrays, stored beside its JSON in a binary arrays file.

A certificate's *array fields* are its table and the problem's arrays (the loss, the prior, the
items' distributions, coordinates, the support, the input metric:
:data:`diffpriv.problems._json.ARRAY_FIELDS`). One with more than :data:`INLINE_LIMIT` entries
is not written into the JSON as nested lists (a 10⁸-entry table would be gigabytes of text and
of Python floats) but into ``<stem>.arrays.npz`` beside ``<stem>.json`` (:func:`arrays_path`),
an uncompressed ``np.savez`` archive holding one ``.npy`` member per array, named by its field
(``table``, ``problem.loss``, ``problem.items[3].dist``). In the JSON its place holds a
reference::

    {"$array": "problem.loss", "shape": [10000, 10000], "dtype": "float64", "sha256": "9f2c…"}

``"$array"`` names the field the reference stands for (never a path), ``dtype`` is ``"float64"``
(``"bool"`` for the support), and ``sha256`` is the digest of the array's raw little-endian,
C-order bytes (:func:`diffpriv.problems._json.array_digest`). A certificate without large
arrays has no arrays file, and its JSON is exactly the pure-JSON format.

The arrays file is written first and the JSON last, each atomically, so a reader never sees a
JSON whose references point to a half-written file. :func:`read_arrays` reads the arrays a
certificate references (regular files only, bounded, no pickles, each checked against its
reference's shape, dtype and digest); :mod:`._schema` checks the references themselves. numpy
and the standard library only.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from diffpriv._files import FileFormatError, atomic_open, open_regular
from diffpriv.problems._json import (
    DIGEST_LIMIT,
    array_digest,
    array_fields,
    array_ref,
    array_to_list,
    map_arrays,
)

__all__ = ["INLINE_LIMIT", "MAX_ARRAYS_BYTES", "SUFFIX", "arrays_bytes", "arrays_path", "as_read",
           "certificate_arrays", "externalize", "field_dtype", "map_certificate", "read_arrays",
           "remove_stale", "write_arrays"]

INLINE_LIMIT = DIGEST_LIMIT
"""Largest number of entries of an array field written into a certificate's JSON (2¹⁷: a 362 × 362
table); a larger one goes to the arrays file. The same as the limit beyond which
:func:`problem_hash` hashes an array by its digest, so with the default every array hashed by
digest is stored by reference (a reader accepts inline arrays of any size: certificates written
before the limit was lowered from 2²⁰ inline up to that)."""

MAX_ARRAYS_BYTES = 8 * 2**30
"""Largest arrays file read, in bytes: the arrays of a 100 × 100 grid (10⁸-entry table and loss)
with 4 profiles, a support and an input metric, ``4·9·10⁸ + 2·8·10⁸ ≈ 5.2·10⁹``, fit."""

SUFFIX = ".arrays.npz"


def arrays_path(path: str | os.PathLike) -> Path:
    """The arrays file of the certificate ``path``: ``dir/<stem>.arrays.npz`` for ``dir/<stem>.json``
    (always in the certificate's folder)."""
    path = Path(path)
    return path.with_name(path.stem + SUFFIX)


def field_dtype(field: str) -> np.dtype:
    """The dtype an array field is stored in: boolean for the support, float64 otherwise."""
    return np.dtype("|b1") if field == "problem.support" else np.dtype("<f8")


def certificate_arrays(d: Any) -> Iterator[tuple[str, Any]]:
    """``(field, value)`` of every array field present in the certificate dict ``d``."""
    if not isinstance(d, dict):
        return
    if "table" in d:
        yield "table", d["table"]
    for field, box, key in array_fields(d.get("problem")):
        yield f"problem.{field}", box[key]


def map_certificate(d: dict[str, Any], fn: Callable[[str, Any], Any]) -> dict[str, Any]:
    """A copy of the certificate dict ``d`` with each array field's value ``v`` replaced by
    ``fn(field, v)`` (no array is copied)."""
    out = dict(d)
    if "table" in out:
        out["table"] = fn("table", out["table"])
    if isinstance(out.get("problem"), dict):
        out["problem"] = map_arrays(out["problem"], lambda f, v: fn(f"problem.{f}", v))
    return out


def externalize(d: dict[str, Any], limit: int | None = None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The JSON-ready form of the certificate dict ``d`` (``Certificate.to_dict(arrays=True)``)
    and the arrays it references.

    Each numpy array field is written as nested lists if it has at most ``limit`` entries
    (default :data:`INLINE_LIMIT`), else replaced by its reference; a list stays a list.

    Returns:
      ``(json_dict, arrays)``: ``arrays`` maps each referenced field to its C-ordered,
      little-endian array (:func:`field_dtype`), as :func:`write_arrays` stores it.
    """
    limit = INLINE_LIMIT if limit is None else limit
    arrays: dict[str, np.ndarray] = {}

    def store(field: str, value: Any) -> Any:
        if not isinstance(value, np.ndarray):
            return value
        if value.size <= limit:
            return array_to_list(value)
        a = np.ascontiguousarray(value, dtype=field_dtype(field))
        arrays[field] = a
        return array_ref(field, a)

    return map_certificate(d, store), arrays


def as_read(d: dict[str, Any]) -> dict[str, Any]:
    """The certificate dict ``d`` as a reader of its saved form gets it: everything through a
    JSON round trip, except the arrays. Those that go to the arrays file read back as the same
    C-ordered float64 (or boolean) arrays; those written inline read back as the nested lists
    :func:`array_to_list` makes (JSON writes a float by its shortest repr, which reads back as
    the same float64; ``nan`` and ``inf`` are refused either way). Both skip the text: a 32×32
    grid's table and loss took 1.4 s through it."""
    limit = INLINE_LIMIT
    arrays: dict[str, Any] = {}

    def kept(field: str, value: Any) -> Any:
        if not isinstance(value, np.ndarray):
            return value
        if value.size > limit:
            arrays[field] = np.ascontiguousarray(value, dtype=field_dtype(field))
        elif np.all(np.isfinite(value)):
            arrays[field] = array_to_list(value)
        else:  # as the JSON text refuses it
            raise ValueError(f"{field}: Out of range float values are not JSON compliant")
        return 0  # a placeholder the trip keeps (not None: the fields are found again by it)

    back = json.loads(json.dumps(map_certificate(d, kept), allow_nan=False))
    return map_certificate(back, lambda f, v: arrays[f] if f in arrays else v)


def write_arrays(path: str | os.PathLike, arrays: dict[str, np.ndarray]) -> Path:
    """Writes ``arrays`` as an uncompressed npz (no pickles), atomically
    (:func:`diffpriv._files.atomic_open`)."""
    with atomic_open(path, "wb") as f:
        np.savez(f, allow_pickle=False, **arrays)
    return Path(path)


def remove_stale(path: str | os.PathLike) -> None:
    """Removes the regular file ``path`` if there is one (the arrays file of a certificate that
    was saved again without large arrays); a failure leaves it, which is harmless: a JSON
    without references never reads it."""
    with contextlib.suppress(OSError):
        if stat.S_ISREG(os.lstat(path).st_mode):
            os.unlink(path)


_NPZ_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError,
               NotImplementedError, RuntimeError, KeyError)


def read_arrays(path: str | os.PathLike, refs: dict[str, tuple[tuple[int, ...], np.dtype, str]],
                ) -> dict[str, np.ndarray]:
    """The arrays ``refs`` names, read from the arrays file ``path`` and checked.

    Args:
      path: the arrays file (:func:`arrays_path` of the certificate).
      refs: field → ``(shape, dtype, sha256)`` of each reference (checked by :mod:`._schema`).

    The file must be a regular file of at most :data:`MAX_ARRAYS_BYTES` holding exactly the
    referenced members; each member's header must state the reference's shape and dtype (C
    order) before any of its data is read; it is read without pickles and its digest must be
    the reference's.

    Raises:
      FileFormatError: ``"<path>: <why>"``: missing, not a regular file, too large, not an npz
        of these arrays, or an array that differs from its reference (a changed or swapped file).
    """
    path = Path(path)
    try:
        with open_regular(path, limit=MAX_ARRAYS_BYTES, what="a certificate's arrays file") as f:
            return _read_members(path, f, refs)
    except FileFormatError:
        raise
    except _NPZ_ERRORS as e:
        raise FileFormatError(f"{path}: not an arrays file we can read ({type(e).__name__}: {e})"
                              ) from None


def _read_members(path: Path, f, refs) -> dict[str, np.ndarray]:
    out = {}
    with zipfile.ZipFile(f) as zf:
        names = zf.namelist()
        want = {f"{field}.npy" for field in refs}
        if len(names) != len(set(names)) or set(names) != want:
            extra = sorted(set(names) - want)[:3]
            missing = sorted(want - set(names))[:3]
            raise FileFormatError(f"{path}: holds other arrays than the certificate references "
                                  f"(missing {missing or 'none'}, unexpected {extra or 'none'})")
        for field, (shape, dtype, digest) in refs.items():
            info = zf.getinfo(f"{field}.npy")
            with zf.open(info) as m:
                version = np.lib.format.read_magic(m)
                if version == (1, 0):
                    header = np.lib.format.read_array_header_1_0(m)
                elif version == (2, 0):
                    header = np.lib.format.read_array_header_2_0(m)
                else:
                    raise FileFormatError(f"{path}: {field}: npy format version {version} is not "
                                          "one np.save writes for numbers")
            if header != (shape, False, dtype):
                raise FileFormatError(f"{path}: {field}: holds shape {header[0]}, dtype "
                                      f"{header[2]}{' (Fortran order)' if header[1] else ''}; the "
                                      f"reference says {shape}, {dtype}")
            with zf.open(info) as m:
                a = np.lib.format.read_array(m, allow_pickle=False)
            if a.shape != shape or a.dtype != dtype or array_digest(a) != digest:
                raise FileFormatError(f"{path}: {field}: its SHA-256 is not the reference's (the "
                                      "file was changed, or is another certificate's)")
            out[field] = a
    return out


def arrays_bytes(refs: dict[str, tuple[tuple[int, ...], np.dtype, str]]) -> int:
    """Bytes the referenced arrays take in memory."""
    return sum(math.prod(shape) * dtype.itemsize for shape, dtype, _ in refs.values())
