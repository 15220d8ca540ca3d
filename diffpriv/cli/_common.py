"""The CLI's error contract and its reading and writing: one ``error: ...`` line and exit code 2
for a user error (:func:`_fail`, :func:`_user_errors`), the one reader of configs (:func:`_load`)
and of certificates (:func:`_read_certificate`, :func:`_verify`), the checks of output locations
made before anything is computed, and the certificate and its ``meta`` written by ``optimize``
and ``reference``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import typer
from rich.console import Console

from diffpriv._files import FileFormatError, read_bytes
from diffpriv.certification._schema import (
    CertificateFormatError,
    CheckedCertificate,
    check_certificate,
    read_certificate,
)
from diffpriv.config import ConfigError, OptimizerOptions, load_config
from diffpriv.config._toml import MAX_CONFIG_BYTES
from diffpriv.io._export import jsonable
from diffpriv.problems._problem import Problem, SpecError
from diffpriv.problems._size import SizeError

console = Console(highlight=False)


def _fail(msg: str, code: int = 2) -> NoReturn:
    line = " ".join(str(msg).split())  # one line, whatever the message holds
    line = line.encode("utf-8", "backslashreplace").decode("utf-8")  # a lone surrogate, escaped
    typer.echo("error: " + line, err=True)
    raise typer.Exit(code)


@contextlib.contextmanager
def _user_errors() -> Iterator[None]:
    """Turns a bad config or an unwritable file into one ``error:`` line and exit code 2."""
    try:
        yield
    except (ConfigError, SpecError) as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"{e.filename or ''}: {e.strerror or e}")


def _load(config: Path) -> tuple[Problem, OptimizerOptions]:
    with _user_errors():
        try:
            return load_config(config)
        except MemoryError:
            _fail(f"{config}: out of memory while building the problem; use fewer inputs, "
                  "outputs or items")


# -- reading a certificate --------------------------------------------------------------------


def _read_certificate(path: Path) -> CheckedCertificate:
    """The one reader of certificates for every command: the JSON and its arrays file, if it
    references one (within the limits of
    :func:`diffpriv.certification._schema.read_certificate`), the problem and the table (format
    checked by :func:`diffpriv.certification._schema.check_certificate`), or exit 2 with one
    line ``error: <path>: <field>: <problem>``."""
    try:
        return check_certificate(read_certificate(path))
    except FileFormatError as e:
        _fail(str(e))
    except CertificateFormatError as e:
        _fail(f"{path}: {e}")
    except MemoryError:
        _fail(f"{path}: cannot be checked: out of memory while reading it")


MAX_SECONDS = 300.0
"""Default ``--max-seconds`` of the commands that re-check a certificate."""

RUN_UTILITY = typer.Option(help="Run the user utility (Python code) the certificate's objective names, "
                                "to recompute its loss; without it that claim is not checked and the "
                                "certificate does not verify.")
"""``--run-utility`` of the commands that read a certificate (a certificate names code: it runs only
when asked)."""


def _verify(path: Path, cert: CheckedCertificate, exact: bool = False,
            max_seconds: float | None = MAX_SECONDS, max_memory: int | None = None,
            problem: Problem | None = None):
    """``verify`` of a checked certificate; a certificate too large or too slow to check (its
    estimate above ``max_seconds`` or ``max_memory`` bytes), or a verify that raises all the
    same, is exit 2 (its claims were not checked), never a traceback."""
    from diffpriv.certification import verify

    try:
        return verify(cert.data, exact=exact, max_seconds=max_seconds, max_memory=max_memory,
                      problem=problem)
    except SizeError as e:
        _fail(f"{path}: cannot be checked: {e}")
    except MemoryError:
        _fail(f"{path}: cannot be checked: out of memory")
    except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError, RecursionError) as e:
        _fail(f"{path}: certificate: cannot be checked ({type(e).__name__}: {e})")


def _writable_folder(option: str, folder: Path) -> None:
    """Exit 2 unless ``folder`` is, or can be made, a folder this process can write in: its
    nearest existing ancestor is a folder that a file can be created in (tried, and removed)."""
    try:
        if folder.exists() and not folder.is_dir():
            _fail(f"{option}: {folder} exists and is not a folder")
        probe = folder
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if not probe.is_dir():
            _fail(f"{option}: {probe} is not a folder")
    except ValueError:  # an embedded NUL character
        _fail(f"{option}: the path contains a NUL character")
    except OSError as e:  # a folder on the way that cannot be searched
        _fail(f"{option}: cannot write in {folder} ({e.strerror or e})")
    try:
        fd, tmp = tempfile.mkstemp(dir=probe, prefix=".diffpriv-probe-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        _fail(f"{option}: cannot write in {probe} ({e.strerror or e})")


def _check_out_dir(out: Path) -> None:
    _writable_folder("--out", out)


def _check_out_file(target: Path) -> None:
    """A file to write: not a folder, in a folder that can be written."""
    try:
        if target.is_dir():
            _fail(f"--out: {target} is a folder")
    except ValueError:
        _fail("--out: the path contains a NUL character")
    except OSError as e:
        _fail(f"--out: cannot write {target} ({e.strerror or e})")
    _writable_folder("--out", target.parent)


def _certify_and_save(problem: Problem, table: np.ndarray, out: Path, meta: dict, seed: int | None):
    """Certifies ``table`` and writes ``out/certificate.json``; returns the certificate and time."""
    from diffpriv.certification import DEFAULT_BITS, RepairError, TableError, certify  # numpy only

    start = time.perf_counter()
    try:
        cert = certify(problem, table, repair=True, seed=seed, meta=jsonable(meta), quantize=DEFAULT_BITS)
    except (RepairError, TableError) as e:
        _fail(f"certify: {e}", code=1)
    seconds = time.perf_counter() - start
    _save(cert, out / "certificate.json")
    return cert, seconds


def _save(cert, path: Path) -> None:
    """Writes ``cert`` to ``path`` (atomically, its folder made) once it passes the checks of
    ``certify`` that its levels do not settle (:func:`~diffpriv.certification._self_check.
    self_check`); else one line and exit 1, nothing written."""
    from diffpriv.certification._self_check import SelfCheckError, require_self_check

    try:
        require_self_check(cert)
    except SelfCheckError as e:
        _fail(str(e), code=1)
    with _user_errors():
        path.parent.mkdir(parents=True, exist_ok=True)
        cert.save(path)


def _meta(command: str, config: Path, **extra: Any) -> dict[str, Any]:
    with _user_errors():
        try:  # read again (it was validated): the same limits, and no FIFO swapped in meanwhile
            text = read_bytes(config, limit=MAX_CONFIG_BYTES, what="a config")
        except FileFormatError as e:
            _fail(str(e))
    return {
        "command": command,
        "config": str(config),
        "config_sha256": hashlib.sha256(text).hexdigest(),
        **extra,
    }
