"""The ``diffpriv`` command group (:mod:`diffpriv.cli`): its commands, the error contract of bad
options, and ``--version``."""


from __future__ import annotations

import typer
from typer.core import TyperGroup, TyperOption

from diffpriv.cli._certificate import certify, export, plot
from diffpriv.cli._common import _fail
from diffpriv.cli._compose import compose
from diffpriv.cli._deploy import audit, sample
from diffpriv.cli._evaluate import evaluate
from diffpriv.cli._leakage import leakage
from diffpriv.cli._optimize import optimize, reference
from diffpriv.cli._sweep import sweep

__all__ = ["app", "main"]


class _Commands(TyperGroup):
    """The command group. A bad option value or a missing argument is reported like any bad
    input, as one ``error: <option>: <problem>`` line and exit code 2 (not a usage panel)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except typer.BadParameter as e:  # a bad option value, or a missing one (a subclass)
            msg = e.format_message()  # "Missing argument 'config'."
            if isinstance(e.param, TyperOption) and e.message:  # "--seed: input should be ..."
                msg = f"{e.param.opts[0]}: {e.message[:1].lower()}{e.message[1:]}"
            _fail(msg.removesuffix("."))
        except MemoryError:  # the last line of defence: inputs are bounded before they are read
            _fail("out of memory: the input is too large for this machine")


app = typer.Typer(
    cls=_Commands,
    name="diffpriv",
    help="Optimal local obfuscation mechanisms under distribution privacy, certified exactly.\n\n"
    "Typical use: diffpriv optimize CONFIG --out DIR; diffpriv certify DIR/certificate.json;"
    " diffpriv export DIR/certificate.json --format csv; diffpriv plot DIR/certificate.json."
    " Exit codes: 0 ok, 1 a claim fails, 2 bad input, 3 nothing audited, 130 interrupted.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# the order of --help
for _command in (optimize, sweep, certify, export, plot, sample, audit, leakage, compose, reference,
                 evaluate):
    app.command()(_command)


def _version(value: bool) -> None:
    if value:
        from diffpriv import __version__

        typer.echo(f"diffpriv {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Optimal local obfuscation mechanisms under distribution privacy, certified exactly."""


def main() -> None:
    """The console-script entry point."""
    app()
