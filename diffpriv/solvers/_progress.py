"""The optimizer's progress bar (rich, on stderr, transient), shared by the API and the CLI, or the
caller's own report (a log line per chunk on a long run whose stderr is a file)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

__all__ = ["progress_bar"]


@contextlib.contextmanager
def progress_bar(show: bool | Callable[[int, int, float], None] = True,
                 ) -> Iterator[Callable[[int, int, float], None] | None]:
    """Yields the ``progress(done, total, gap)`` callback of :class:`diffpriv.solvers.Optimizer`:
    ``show`` itself when it is one; else a bar's, or ``None`` when ``show`` is false or stderr is not
    a terminal (so piped output stays clean)."""
    if callable(show):
        yield show
        return
    from rich.console import Console

    err = Console(stderr=True)
    if not (show and err.is_terminal):
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("optimizing"), BarColumn(), TextColumn("{task.completed}/{task.total} steps"),
               TextColumn("gap {task.fields[gap]:.1e}"), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("optimize", total=None, gap=float("nan"))
        yield lambda done, total, gap: bar.update(task, completed=done, total=total, gap=gap)
