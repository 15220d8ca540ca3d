"""The ``diffpriv`` command line: ``optimize``, ``sweep``, ``certify``, ``export``, ``plot``, ``sample``,
``audit``, ``reference``, ``evaluate``.

Exit codes: 0 success; 1 a certificate's claims do not hold (or a solver failed); 2 a user
error — a bad config, a bad option value, a missing, malformed or too large file, an output
location that cannot be written — reported as one line ``error: ...`` on stderr, without a
traceback and without writing any output; 3 ``audit`` could test none of a certificate's claims
(not a pass); 130 interrupted (Ctrl-C). Every command that reads a certificate reads it
with :func:`~diffpriv.cli._common._read_certificate`, which checks its size, keys, types and
shapes (:mod:`diffpriv.certification._schema`) before :func:`diffpriv.certification.verify`
checks its claims. Output locations are checked before anything is computed. JAX is imported
only once a run that needs it starts (never for the exact, column-generation and interior-point
runs); matplotlib only inside ``plot``. ``diffpriv --version`` answers before any of the commands
load (:mod:`~diffpriv.cli._app` holds them).

The modules: :mod:`~diffpriv.cli._common` (the error contract, reading configs and
certificates, checking and writing outputs), :mod:`~diffpriv.cli._summary` (the printed and
saved summaries), :mod:`~diffpriv.cli._optimize` (``optimize``, ``reference``),
:mod:`~diffpriv.cli._sweep` (``sweep``),
:mod:`~diffpriv.cli._certificate` (``certify``, ``export``, ``plot``),
:mod:`~diffpriv.cli._deploy` (``sample``, ``audit``),
:mod:`~diffpriv.cli._evaluate` (``evaluate``) and :mod:`~diffpriv.cli._tupling` (its
``--mechanism tupling``).
"""

from __future__ import annotations

import sys

__all__ = ["app", "main"]


def main() -> None:
    """The console-script entry point. ``diffpriv --version`` alone is answered before the
    command group (typer, the config schema, the certifier) loads."""
    if sys.argv[1:] == ["--version"]:
        from diffpriv import __version__

        print(f"diffpriv {__version__}")
        return
    from diffpriv.cli._app import app

    app()


def __getattr__(name: str):
    if name == "app":  # the typer application, loaded on first use
        from diffpriv.cli._app import app

        return app
    raise AttributeError(f"module 'diffpriv.cli' has no attribute {name!r}")
