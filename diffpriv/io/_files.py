"""Files: atomic writes with the permissions of a new file, and strict JSON reading.

Every file diffpriv writes goes through :func:`atomic_open`: a temporary file in the target
folder, flushed to disk and moved into place with ``os.replace``, so a reader never sees a
half-written file and a failed write leaves the target as it was. :func:`read_json` reads the
JSON files diffpriv writes (certificates, summaries) back, turning anything unreadable into
one :class:`FileFormatError` line. Standard library only: the certifier imports this module.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["FileFormatError", "atomic_open", "atomic_write", "read_json", "umask"]


class FileFormatError(ValueError):
    """A file is missing, unreadable or malformed; the message is one line naming the file."""


def umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux ``/proc``).

    ``os.umask`` can only be read by setting it; that set-and-restore, the fallback, briefly
    changes the mask for every thread of the process.
    """
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o077)  # the most restrictive value while it is briefly set
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w") -> Iterator[IO[Any]]:
    """Opens a temporary file next to ``path``; on success it replaces ``path``, else vanishes.

    Missing parent folders are created. Text modes write UTF-8 without newline translation.
    The file gets the permissions of any newly created file, ``0o666 & ~umask`` (``mkstemp``
    makes ``0o600``), and is flushed to disk before it is moved into place.

    Raises:
      OSError: the temporary file cannot be created or written (``filename`` is ``path``).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None
    try:
        text = {} if "b" in mode else {"encoding": "utf-8", "newline": ""}
        with os.fdopen(fd, mode, **text) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_csv(path: str | os.PathLike, rows: list[dict[str, Any]]) -> Path:
    """Writes ``rows`` (dicts with the same keys) as CSV with a header, atomically."""
    with atomic_open(path, "w") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return Path(path)


def atomic_write(path: str | os.PathLike, data: str | bytes) -> Path:
    """Writes ``data`` (text as UTF-8) to ``path`` atomically (:func:`atomic_open`)."""
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    return Path(path)


def _no_constant(name: str) -> None:
    raise FileFormatError(f"{name} is not a JSON number (non-finite numbers are stored as strings)")


def _too_large(data: Any) -> str | None:
    """Path (``table[0][2]``, ``repair.t``) of the first integer no float64 can hold, if any."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:  # a loop, not recursion: json nests deeper than Python's recursion limit
        where, value = stack.pop()
        if isinstance(value, dict):
            stack += [(f"{where}.{k}" if where else str(k), v) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(f"{where}[{i}]", v) for i, v in enumerate(value)]
        elif isinstance(value, int) and not isinstance(value, bool):
            try:
                float(value)
            except OverflowError:
                return where or "value"
    return None


def read_text(path: str | os.PathLike) -> str:
    """The UTF-8 text of the file ``path``.

    Raises:
      FileFormatError: ``"<path>: no such file"`` or ``"<path>: cannot read (<why>)"``.
    """
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileFormatError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise FileFormatError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None


def read_json(path: str | os.PathLike) -> Any:
    """The strict JSON in the file ``path``: no ``NaN``/``Infinity``, every number a float64.

    Raises:
      FileFormatError: ``"<path>: <problem>"`` when the file is missing or unreadable, is not
        JSON, has a non-finite number literal or an integer too large for a float64.
    """
    path = Path(path)
    text = read_text(path)
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except FileFormatError as e:
        raise FileFormatError(f"{path}: not strict JSON: {e}") from None
    except RecursionError:
        raise FileFormatError(f"{path}: not a JSON file we can read (nested too deeply)") from None
    except ValueError as e:  # JSONDecodeError, or an integer of more than 4300 digits
        raise FileFormatError(f"{path}: not a JSON file ({e})") from None
    where = _too_large(data)
    if where is not None:
        raise FileFormatError(f"{path}: {where}: integer too large for a float64 "
                              f"(beyond ±{sys.float_info.max:.3g})")
    return data
