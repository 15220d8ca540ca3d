"""The optimizer's progress bar (rich, on stderr, transient), shared by the API and the CLI, or the
caller's own report (a log line per chunk on a long run whose stderr is a file).

The bar follows the gap, not the step limit: it fills as the gap the run reports (its table's
relative gap to its bound) falls from its first value towards the target (``gap_tol``, on a log
scale), and states the time left at the rate the gap fell over the last part of the run
(:class:`Estimate`)."""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Callable, Iterator

__all__ = ["Estimate", "phase", "progress_bar", "progress_lines"]

WINDOW = 0.5
"""The rate of the gap's fall is measured over this share of the time elapsed (the latest part)."""
SHORTEST = 2.0
"""... and over at least this many seconds."""
EVERY = 5.0
"""Seconds between two lines of :func:`progress_lines`."""


class Estimate:
    """The time left to a gap of ``target``, at the rate ``log gap`` fell over the latest
    :data:`WINDOW` of the run (at least :data:`SHORTEST` seconds): ``None`` until the gap has
    fallen over such a span, and while it does not fall (a run starting again, a stall)."""

    def __init__(self, target: float, clock: Callable[[], float] = time.perf_counter):
        self.target, self.clock = target, clock
        self.start = clock()
        self.seen: list[tuple[float, float]] = []  # (seconds, log gap)

    def __call__(self, gap: float) -> float | None:
        """Records ``gap`` now; the seconds left (0 once the gap is within the target)."""
        now = self.clock() - self.start
        if not (math.isfinite(gap) and gap > 0 and self.target > 0):
            return 0.0 if gap == 0 else None
        if gap <= self.target:
            return 0.0
        self.seen.append((now, math.log(gap)))
        since = now - max(WINDOW * now, SHORTEST)
        old = next(((t, g) for t, g in self.seen if t >= since), None)
        if old is None or now - old[0] < SHORTEST / 2:
            return None
        rate = (old[1] - self.seen[-1][1]) / (now - old[0])
        return (math.log(gap) - math.log(self.target)) / rate if rate > 0 else None

    def fraction(self, gap: float) -> float:
        """How far the gap has come from its first value to the target, on a log scale, in ``[0, 1]``."""
        if not self.seen or not (math.isfinite(gap) and gap > 0):
            return 1.0 if gap == 0 else 0.0
        first, goal = self.seen[0][1], math.log(self.target)
        if first <= goal:
            return 1.0
        return min(max((first - math.log(gap)) / (first - goal), 0.0), 1.0)


def left(seconds: float | None) -> str:
    """``seconds`` left as the bar states them: ``"about 40 s left"``, ``"about 3 min left"``."""
    if seconds is None:
        return ""
    if seconds < 90:
        return f"about {max(round(seconds), 1)} s left"
    if seconds < 5400:
        return f"about {round(seconds / 60)} min left"
    return f"about {seconds / 3600:.1f} h left"


@contextlib.contextmanager
def progress_bar(show: bool | Callable[[int, int, float], None] = True, target: float = 0.0,
                 ) -> Iterator[Callable[[int, int, float], None] | None]:
    """Yields the ``progress(done, total, gap)`` callback of :class:`diffpriv.solvers.Optimizer`:
    ``show`` itself when it is one; else a bar's, or ``None`` when ``show`` is false or stderr is not
    a terminal (so piped output stays clean). The bar shows the phase (``optimizing``, then
    ``certifying``: :func:`phase`), the steps taken, the gap against ``target`` and, where
    ``target > 0``, the time left (:class:`Estimate`)."""
    if callable(show):
        yield show
        return
    from rich.console import Console

    err = Console(stderr=True)
    if not (show and err.is_terminal):
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    goal = f" of {target:.0e}" if target > 0 else ""
    columns = (TextColumn("{task.fields[phase]}"), BarColumn(), TextColumn("{task.fields[done]} steps"),
               TextColumn("gap {task.fields[gap]}" + goal), TimeElapsedColumn(),
               TextColumn("{task.fields[left]}"))
    estimate = Estimate(target)
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("optimize", total=1.0 if target > 0 else None, gap="–", done=0, left="",
                            phase="optimizing")

        def report(done: int, total: int, gap: float) -> None:
            seconds = estimate(gap)
            if target > 0:
                bar.update(task, completed=estimate.fraction(gap), gap=f"{gap:.1e}", done=done,
                           left=left(seconds))
            else:
                bar.update(task, completed=done, total=total, gap=f"{gap:.1e}", done=f"{done}/{total}")

        report.phase = lambda text: bar.update(task, phase=text, left="")  # type: ignore[attr-defined]
        yield report


def progress_lines(target: float = 0.0, stream=None, every: float = EVERY,
                   clock: Callable[[], float] = time.perf_counter) -> Callable[[int, int, float], None]:
    """A ``progress(done, total, gap)`` callback that writes one line to ``stream`` (stderr) at most
    every ``every`` seconds: the steps taken, the gap against ``target``, the seconds elapsed and,
    where ``target > 0``, the time left (:class:`Estimate`) — the bar's content, for a pipe or a log
    file (``diffpriv optimize --progress``)."""
    estimate, start, last = Estimate(target, clock), clock(), [-math.inf]
    goal = f" of {target:.0e}" if target > 0 else ""

    def report(done: int, total: int, gap: float) -> None:
        seconds = estimate(gap)
        now = clock()
        if now - last[0] < every:
            return
        last[0] = now
        rest = left(seconds) if target > 0 and seconds else ""  # (0: within the target)
        line = f"optimizing: {done} steps, gap {gap:.1e}{goal}, {now - start:.0f} s"
        print(line + (f", {rest}" if rest else ""), file=stream or sys.stderr, flush=True)

    def change(text: str) -> None:
        print(f"{text}: {clock() - start:.0f} s", file=stream or sys.stderr, flush=True)

    report.phase = change  # type: ignore[attr-defined]
    return report


def phase(report, text: str) -> None:
    """Tells ``report`` (a callback of :func:`progress_bar` or :func:`progress_lines`) that the
    run is now ``text`` (``"certifying"``: the bar stops reading ``optimizing`` while the table is
    checked and repaired); a caller's own callback is left alone."""
    change = getattr(report, "phase", None)
    if callable(change):
        change(text)
