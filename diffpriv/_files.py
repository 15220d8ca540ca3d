"""Files: atomic writes with the permissions of a new file, and bounded, strict reading.

Every file diffpriv writes goes through :func:`atomic_open`: a temporary file in the target
folder, flushed to disk and moved into place with ``os.replace``, so a reader never sees a
half-written file and a failed write leaves the target as it was. Every file diffpriv reads
(configs, point files, certificates) goes through :func:`open_regular`: regular files only
(never a FIFO, which would block, or a device such as ``/dev/zero``), at most a stated number
of bytes, so that no input can hang the reader or exhaust memory. :func:`read_json` reads the
JSON files diffpriv writes back, turning anything unreadable into one :class:`FileFormatError`
line. Standard library only: the certifier imports this module.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["FileFormatError", "FileTooLargeError", "atomic_open", "atomic_write", "file_size",
           "human_bytes", "json_number", "open_regular", "parse_json", "read_bytes", "read_json", "read_text",
           "umask"]


def json_number(x: float | None) -> float | str | None:
    """``x`` as a JSON value: finite floats as numbers, ``±inf``/``nan`` as strings."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else str(x)


class FileFormatError(ValueError):
    """A file is missing, unreadable or malformed; the message is one line naming the file.

    ``reason`` is the message without the file's name, where the reader gave one."""

    def __init__(self, message: str, reason: str | None = None):
        super().__init__(message)
        self.reason = message if reason is None else reason


def _unreadable(path: Path, reason: str) -> FileFormatError:
    return FileFormatError(f"{_shown(path)}: {reason}", reason)


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


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object; a key given twice is an error (``json`` would keep the last silently)."""
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise FileFormatError(f"duplicate key {_short(key)} in an object")
            seen.add(key)
    return d


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


# -- reading: regular files only, of bounded size ------------------------------------------------


def _short(value: Any, width: int = 40) -> str:
    """``repr(value)``, cut to ``width`` characters (a message stays one short line)."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def human_bytes(n: int) -> str:
    """``n`` bytes in words: ``"512 bytes"``, ``"3.0 MB"``, ``"1.2 GB"`` (powers of 1024)."""
    if n >= 2**30:
        return f"{n / 2**30:.1f} GB"
    if n >= 2**20:
        return f"{n / 2**20:.1f} MB"
    if n >= 2**10:
        return f"{n / 2**10:.1f} KB"
    return f"{n} bytes"


def _shown(path: Path) -> str:
    """The path as a message shows it (a NUL character as ``\\0``)."""
    return str(path).replace("\0", "\\0")


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _check_regular(path: Path, st: os.stat_result, limit: int, what: str) -> int:
    """``st.st_size``, after checking the file is a regular one of at most ``limit`` bytes."""
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        raise _unreadable(path, f"cannot read ({kind}, not a regular file)")
    if st.st_size > limit:
        raise FileTooLargeError(path, st.st_size, limit, what)
    return st.st_size


class FileTooLargeError(FileFormatError):
    """A file is larger than diffpriv reads for its purpose (``what``: "a config", ...)."""

    def __init__(self, path: Path, size: int, limit: int, what: str):
        self.path, self.size, self.limit, self.what = path, size, limit, what
        reason = (f"{what} may have at most {human_bytes(limit)}, this file has "
                  f"{human_bytes(size) if size > limit else 'more'}")
        super().__init__(f"{_shown(path)}: {reason}", reason)


def file_size(path: str | os.PathLike, *, limit: int, what: str = "a file") -> int:
    """The size of the regular file ``path``, checked to be at most ``limit`` bytes.

    Raises:
      FileFormatError: ``"<path>: no such file"``, ``"<path>: cannot read (<why>)"`` (also for a
        folder, a FIFO, a device), or :class:`FileTooLargeError`.
    """
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise _unreadable(path, "no such file") from None
    except ValueError:  # an embedded NUL character
        raise _unreadable(path, "cannot read (the path contains a NUL character)") from None
    except OSError as e:
        raise _unreadable(path, f"cannot read ({e.strerror or e})") from None
    return _check_regular(path, st, limit, what)


@contextlib.contextmanager
def open_regular(path: str | os.PathLike, *, limit: int, what: str = "a file") -> Iterator[IO[bytes]]:
    """Opens the regular file ``path`` of at most ``limit`` bytes for reading, as bytes.

    The file is checked with ``os.stat`` before it is opened (a device is never opened) and
    opened with ``O_NONBLOCK`` (a FIFO swapped in meanwhile cannot block), then checked again
    on the open descriptor. A reader must still stop after ``limit`` bytes: a file can grow.

    Raises:
      FileFormatError: as :func:`file_size`.
    """
    path = Path(path)
    file_size(path, limit=limit, what=what)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise _unreadable(path, "no such file") from None
    except OSError as e:
        raise _unreadable(path, f"cannot read ({e.strerror or e})") from None
    try:
        _check_regular(path, os.fstat(fd), limit, what)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f


def read_bytes(path: str | os.PathLike, *, limit: int, what: str = "a file") -> bytes:
    """The bytes of the regular file ``path``; at most ``limit`` of them (:func:`open_regular`)."""
    with open_regular(path, limit=limit, what=what) as f:
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise _unreadable(Path(path), f"cannot read ({e.strerror or e})") from None
    if len(data) > limit:  # it grew since it was checked
        raise FileTooLargeError(Path(path), len(data), limit, what)
    return data


def read_text(path: str | os.PathLike, *, limit: int, what: str = "a file") -> str:
    """The UTF-8 text of the regular file ``path`` of at most ``limit`` bytes; a leading
    byte-order mark (``EF BB BF``, which some editors write) is dropped.

    Raises:
      FileFormatError: ``"<path>: no such file"``, ``"<path>: cannot read (<why>)"`` (also for a
        folder, a FIFO, a device, text that is not UTF-8), or :class:`FileTooLargeError`.
    """
    data = read_bytes(path, limit=limit, what=what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise _unreadable(Path(path), f"cannot read ({e})") from None


def parse_json(text: str, name: str | os.PathLike) -> Any:
    """Strict JSON: no ``NaN``/``Infinity``, no key twice in an object, every number a float64.

    Raises:
      FileFormatError: ``"<name>: <problem>"``.
    """
    name = _shown(Path(name))
    wide = []

    def integer(literal: str) -> int:  # (only an integer of 309 digits or more can overflow a float)
        value = int(literal)
        if len(literal) > 308 and abs(value) > sys.float_info.max:
            wide.append(literal)
        return value

    try:
        data = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_object, parse_int=integer)
    except FileFormatError as e:
        raise FileFormatError(f"{name}: not strict JSON: {e}") from None
    except RecursionError:
        raise FileFormatError(f"{name}: not a JSON file we can read (nested too deeply)") from None
    except ValueError as e:  # JSONDecodeError, or an integer of more than 4300 digits
        raise FileFormatError(f"{name}: not a JSON file ({e})") from None
    where = _too_large(data) if wide else None  # the path of the first, found by a walk
    if where is not None:
        raise FileFormatError(f"{name}: {where}: integer too large for a float64 "
                              f"(beyond ±{sys.float_info.max:.3g})")
    return data


def read_json(path: str | os.PathLike, *, limit: int, what: str = "a JSON file") -> Any:
    """The strict JSON (:func:`parse_json`) in the regular file ``path`` of at most ``limit``
    bytes (:func:`read_text`).

    Raises:
      FileFormatError: ``"<path>: <problem>"`` when the file is missing, unreadable or too
        large, is not JSON, has a non-finite number literal, a key twice in an object or an
        integer too large for a float64.
    """
    return parse_json(read_text(path, limit=limit, what=what), path)
