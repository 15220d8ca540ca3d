"""The progress bar follows the gap to its target and estimates the time left from its fall."""

import math

import pytest

from diffpriv.solvers._progress import Estimate, left, phase, progress_bar


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_estimate_extrapolates_the_gaps_fall_on_a_log_scale():
    clock = _Clock()
    estimate = Estimate(1e-2, clock)
    assert estimate(1.0) is None  # one point: no rate yet
    for t in range(1, 5):  # the gap halves each second
        clock.now = float(t)
        seconds = estimate(0.5 ** t)
    assert seconds == pytest.approx(math.log(0.5 ** 4 / 1e-2) / math.log(2))
    assert estimate.fraction(0.5 ** 4) == pytest.approx(4 * math.log(2) / math.log(100))
    clock.now = 5.0
    assert estimate(1e-3) == 0.0 and estimate.fraction(1e-3) == 1.0  # within the target


def test_estimate_states_nothing_while_the_gap_does_not_fall():
    clock = _Clock()
    estimate = Estimate(1e-2, clock)
    for t, gap in enumerate([0.5, 0.4, 0.6, 0.9, 1.2]):  # a run starting again: the gap rises
        clock.now = float(t)
        seconds = estimate(gap)
    assert seconds is None
    assert estimate(float("inf")) is None and estimate.fraction(float("nan")) == 0.0
    assert Estimate(0.0, clock)(0.5) is None  # no target: no estimate


@pytest.mark.parametrize(("seconds", "text"), [(None, ""), (0.2, "about 1 s left"), (40.4, "about 40 s left"),
                                              (200, "about 3 min left"), (7200, "about 2.0 h left")])
def test_time_left_reads_in_words(seconds, text):
    assert left(seconds) == text


def test_bar_shows_the_gap_against_its_target(capsys, monkeypatch):
    for var in ("FORCE_COLOR", "COLUMNS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich: treat stderr as a terminal
    monkeypatch.setenv("COLUMNS", "160")
    with progress_bar(True, 1e-2) as report:
        report(12, 200, 3.5e-2)
    out, err = capsys.readouterr()
    assert out == "" and "12 steps" in err and "gap 3.5e-02 of 1e-02" in err and "/200" not in err
    assert "optimizing" in err and "certifying" not in err
    with progress_bar(True, 1e-2) as report:
        report(12, 200, 3.5e-2)
        phase(report, "certifying")  # the table checked and repaired: the bar says so
    out, err = capsys.readouterr()
    assert out == "" and "certifying" in err
    phase(lambda done, total, gap: None, "certifying")  # a caller's own callback: left alone


def test_progress_lines_write_one_line_every_few_seconds_with_the_gap_and_the_time_left():
    import io

    from diffpriv.solvers._progress import progress_lines

    clock, stream = _Clock(), io.StringIO()
    report = progress_lines(1e-2, stream, every=5.0, clock=clock)
    for t in range(13):  # the gap halves each second
        clock.now = float(t)
        report(10 * t, 200, 0.5 ** t)
    phase(report, "certifying")  # a line of its own, at once
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4  # at 0, 5 and 10 s, and the phase
    assert lines == ["optimizing: 0 steps, gap 1.0e+00 of 1e-02, 0 s",
                     "optimizing: 50 steps, gap 3.1e-02 of 1e-02, 5 s, about 2 s left",
                     "optimizing: 100 steps, gap 9.8e-04 of 1e-02, 10 s",  # within the target: no time left
                     "certifying: 12 s"]
