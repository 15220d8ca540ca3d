"""``sample`` and ``audit``: the commands that deploy a certificate's table (numpy only)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from diffpriv._files import atomic_open
from diffpriv.cli._common import RUN_UTILITY, _check_out_file, _fail, _read_certificate, _user_errors

MAX_DRAWS = 10**9
"""Most reports one ``sample`` command draws (written a million at a time)."""

_CHUNK = 10**6

NOTHING_AUDITED = 3
"""Exit code of ``audit`` when no claim of the certificate is one it can test (not a pass)."""


def _sampler(file: Path, exact: bool, run_utility: bool):
    """The verified :class:`~diffpriv.deploy.Sampler` of FILE, or exit 1 (a claim fails) / 2."""
    from diffpriv.deploy import Sampler, SamplerError
    from diffpriv.problems._user import running_utilities

    with running_utilities(run_utility):
        cert = _read_certificate(file)
    try:
        return Sampler(cert.data, exact=exact, run_utility=run_utility)
    except SamplerError as e:
        _fail(f"{file}: {e}", code=1 if "does not verify" in str(e) else 2)


def sample(
    file: Annotated[Path, typer.Argument(help="certificate.json whose table to sample.")],
    input: Annotated[str | None, typer.Option("--input", help="The true input's label.")] = None,
    point: Annotated[str | None, typer.Option(
        "--point", help="LAT,LON: the true input as a point in degrees (a grid over a bbox): its "
                        "cell.")] = None,
    n: Annotated[int, typer.Option("-n", help="How many reports to draw.")] = 1,
    profile: Annotated[str | None, typer.Option(help="The profile's name (if there are several).")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="File to write [default: stdout].")] = None,
    exact: Annotated[bool, typer.Option(help="Verify in exact arithmetic first.")] = False,
    run_utility: Annotated[bool, RUN_UTILITY] = False,
    coords: Annotated[str | None, typer.Option(
        help="Write each report as LAT,LON (a grid over a bbox): 'centre' of the reported cell, or "
             "'uniform' in it (after the report is drawn: the privacy is the cell's).")] = None,
) -> None:
    """Draw N reports of a user whose true value is INPUT, one output label per line.

    --point LAT,LON gives the true value as a point in degrees instead (the input grid is over a
    bbox: grid = { bbox = [...], cell_km = ... }); --coords centre|uniform writes each report
    as the latitude and longitude of the reported cell's centre, or of a point drawn uniformly
    in that cell.

    The certificate is verified first (exit 1, nothing written, if a claim fails) and must be
    dyadic (optimize, reference and evaluate write such certificates): each report is a uniform
    integer from the operating system's CSPRNG looked up in the row's integer cumulative counts,
    so it is drawn with exactly the certified probability, with no floating-point arithmetic.
    """
    if not 0 <= n <= MAX_DRAWS:
        _fail(f"-n: must be between 0 and {MAX_DRAWS:,}, got {n}")
    if (input is None) == (point is None):
        _fail("--input: give the true input's label (--input) or its point (--point LAT,LON), one of them")
    if coords not in (None, "centre", "uniform"):
        _fail(f"--coords: expected centre or uniform, got {coords!r}")
    if out is not None:
        _check_out_file(out)
    sampler = _sampler(file, exact, run_utility)
    from diffpriv.deploy import SamplerError

    if point is not None:
        input = _point_label(sampler.problem.inputs, point)
    if coords is not None and sampler.problem.outputs.geo is None:
        _fail("--coords: the outputs are not a grid over latitude and longitude (grid = { bbox = [...] })")

    try:
        sampler.sample(input, 0, profile=profile)  # names a bad --input or --profile first
    except SamplerError as e:
        _fail(str(e))

    def chunks():
        for lo in range(0, n, _CHUNK):
            draws = sampler.sample(input, min(_CHUNK, n - lo), profile=profile)
            if coords is None:
                yield "\n".join(map(str, sampler.labels(draws))) + "\n"
                continue
            lat, lon = sampler.problem.outputs.latlon(draws, uniform=coords == "uniform")
            yield "".join(f"{a:.6f},{b:.6f}\n" for a, b in zip(lat, lon, strict=True))

    if out is None:
        for text in chunks():
            typer.echo(text, nl=False)
        return
    with _user_errors(), atomic_open(out) as f:
        for text in chunks():
            f.write(text)
    typer.echo(f"wrote {out} ({n:,} reports of input {input!r})", err=True)


def _point_label(inputs, point: str) -> str:
    """The label of the input cell that holds ``LAT,LON``, or exit 2."""
    try:
        lat, lon = (float(v) for v in point.split(","))
    except ValueError:
        _fail(f"--point: expected LAT,LON in degrees, got {point!r}")
    if inputs.geo is None:
        _fail("--point: the inputs are not a grid over latitude and longitude (grid = { bbox = [...] })")
    cell = int(inputs.cell_of(lat, lon))
    if cell < 0:
        _fail(f"--point: ({lat:g}, {lon:g}) lies outside the grid's bbox")
    return inputs.labels[cell]


def audit(
    file: Annotated[Path, typer.Argument(help="certificate.json whose sampler to audit.")],
    samples: Annotated[int, typer.Option(help="Reports drawn per compared law.")] = 200_000,
    confidence: Annotated[float, typer.Option(help="Joint confidence of the intervals.")] = 0.999,
    seed: Annotated[int, typer.Option(help="Seed of the inputs drawn from an item's distribution.")] = 0,
    run_utility: Annotated[bool, RUN_UTILITY] = False,
) -> None:
    """Estimate each pure or (ε,δ) DistP / local-DP claim of FILE from its sampler alone.

    Every compared law is sampled (a row: its input's reports; an item's law: inputs drawn from
    the item, then their reports); Clopper–Pearson intervals at a joint CONFIDENCE (Bonferroni
    over outputs and laws) bound each output's probability, and a claim is contradicted when
    some output's lower bound exceeds e^ε times the other law's upper bound (pure), or the
    hockey-stick's lower bound exceeds δ. Only these lower bounds decide: a plug-in estimate
    above its claim is sampling noise, said so with the lower bound beside it. Divergence and
    Wasserstein claims are not audited, and the last line names them. Exit 1 if a claim is
    contradicted; exit 3, the last line "nothing audited", if no claim is pure or (ε,δ).
    """
    from diffpriv.deploy import audit as run_audit

    if not 1 <= samples <= 10**8:
        _fail(f"--samples: must be between 1 and 100,000,000, got {samples}")
    if not 0 < confidence < 1:
        _fail(f"--confidence: must be in (0, 1), got {confidence}")
    sampler = _sampler(file, exact=False, run_utility=run_utility)
    report = run_audit(sampler, samples=samples, confidence=confidence, seed=seed)
    for line in report.lines():
        typer.echo(line)
    if not report.audited:  # not a pass: the samples tested nothing
        typer.echo(f"{file}: nothing audited: none of its {len(report.claims)} claim(s) is pure "
                   "or (ε, δ), the only kinds the samples can test", err=True)
        raise typer.Exit(NOTHING_AUDITED)
    names = ", ".join(f"constraints[{c.index}] ({c.name!r})" for c in report.not_audited)
    skipped = f"; not audited: {names}" if names else ""
    if report.contradicted:
        typer.echo(f"{file}: {len(report.contradicted)} claim(s) contradicted by the samples{skipped}",
                   err=True)
        raise typer.Exit(1)
    typer.echo(f"{file}: no claim contradicted by {samples:,} reports per law (confidence {confidence:g}); "
               f"{len(report.audited)} of {len(report.claims)} claim(s) audited{skipped}")


__all__ = ["audit", "sample"]
