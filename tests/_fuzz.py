"""Random configs with extreme but valid numbers, and what ``diffpriv optimize`` must do with each.

:func:`config` draws one TOML config from a seed: every constraint kind (pure and (ε, δ) DistP,
local and extended DP, divergence DistP and DP in every divergence, extended DistP under W1 and
W∞, Wasserstein DP and DistP of orders up to 1,000), every objective, every method, with
distances from 10⁻³ to 10⁴, near-duplicate coordinates, ε from 10⁻⁶ to 50, item masses down to
10⁻³⁰⁰, profiles and support radii. :func:`run` runs ``optimize`` on it in this process (typer's
runner) and, when a certificate was written, ``certify`` on that; :func:`outcome` sorts the
result: ``"certified"`` (exit 0, and ``certify`` passes), ``"fails"`` (exit 1: a certificate whose
claims do not hold, which ``certify`` confirms, or a one-line solver or infeasibility error),
``"refused"`` (exit 2 with one ``error:`` line and nothing written), or a problem: a traceback,
a certificate that fails its own ``certify``, a refusal that is not one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

KINDS = ("distp", "ldp", "xdp", "divergence_distp", "divergence_dp", "xdistp", "wdp", "wdistp")
DIVERGENCES = ("kl", "reverse_kl", "tv", "chi2", "hellinger", "renyi", "max")
OBJECTIVES = ("expected", "worst", "entry", "transport", "transport-items")
METHODS = ("auto", "auto", "auto", "exact", "cuts", "pdhg", "mirror", "al")


def _num(x: float) -> str:
    """A TOML float (``repr`` keeps every digit; TOML needs a dot or an exponent)."""
    text = repr(float(x))
    return text if any(c in text for c in ".einf") else text + ".0"


def _log_uniform(rng, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def _law(rng, n: int) -> list[float]:
    """A distribution over ``n`` inputs: random, some entries 0 and some down to 10⁻³⁰⁰."""
    w = rng.random(n)
    w[rng.random(n) < 0.3] = 0.0
    tiny = rng.random(n) < 0.2
    w[tiny] = 10.0 ** -rng.uniform(20, 300, int(tiny.sum()))
    if w.sum() <= 0:
        w[rng.integers(n)] = 1.0
    return list(w / w.sum())


@dataclass
class Config:
    """One drawn config: its TOML text and what was drawn (for reports)."""

    text: str
    kinds: tuple[str, ...]
    method: str
    objective: str
    extra: dict = field(default_factory=dict)


def config(seed: int) -> Config:
    """The config of ``seed`` (module docstring)."""
    rng = np.random.default_rng(seed)
    lines: list[str] = []
    scale = 10.0 ** rng.uniform(-3, 4)  # the distances' unit
    n = int(rng.integers(2, 8))
    grid = rng.random() < 0.4
    coords = None
    if grid:
        rows = int(rng.integers(1, 4))
        cols = max(2, int(math.ceil(n / rows)))
        n = rows * cols
        lines += ["[inputs]", f"grid = {{ rows = {rows}, cols = {cols}, cell = {_num(scale)} }}"]
        coords = np.array([((c + 0.5) * scale, (r + 0.5) * scale) for r in range(rows) for c in range(cols)])
    else:
        dim = int(rng.integers(1, 3))
        coords = rng.random((n, dim)) * scale
        if rng.random() < 0.3 and n > 2:  # a near-duplicate of another point
            coords[1] = coords[0] * (1.0 + 1e-9) + 1e-12 * scale
        labels = ", ".join(f'"x{i}"' for i in range(n))
        rows_text = ", ".join("[" + ", ".join(_num(v) for v in c) + "]" for c in coords)
        lines += ["[inputs]", f"labels = [{labels}]", f"coords = [{rows_text}]"]
    loss = rng.choice(["euclidean", "euclidean", "hamming", "matrix"])
    lines += ["", "[loss]", f'kind = "{loss}"']
    if loss == "matrix":
        m = rng.random((n, n)) * 10.0 ** rng.uniform(-3, 3)
        m[rng.random((n, n)) < 0.2] = 0.0
        lines.append("matrix = [" + ", ".join("[" + ", ".join(_num(v) for v in r) + "]" for r in m) + "]")
    profiles = rng.random() < 0.15
    names = ["p0", "p1"] if profiles else [None]
    if profiles:
        for p in names:
            lines += ["", "[[profiles]]", f'name = "{p}"']
    kinds = [str(rng.choice(KINDS)) for _ in range(int(rng.integers(1, 3)))]
    n_items = int(rng.integers(0, 4))
    if any(k in ("distp", "divergence_distp", "xdistp", "wdistp") for k in kinds) and rng.random() < 0.9:
        n_items = max(n_items, 2)  # mostly: a pair to protect (else the refusal is what is tested)
    items = []
    for i in range(n_items):
        items.append(f"i{i}")
        lines += ["", "[[items]]", f'name = "i{i}"']
        if profiles:
            lines.append(f'profile = "{names[i % 2]}"')
        lines.append("distribution = [" + ", ".join(_num(v) for v in _law(rng, n)) + "]")
    for c, kind in enumerate(kinds):
        lines += ["", "[[constraints]]", f'kind = "{kind}"', f'name = "c{c}"']
        eps = _log_uniform(rng, 1e-6, 50.0)
        if kind in ("distp", "divergence_distp", "xdistp", "wdistp"):
            if len(items) >= 2:
                a, b = rng.choice(len(items), 2, replace=False)
                lines.append(f'pairs = [["{items[a]}", "{items[b]}"]]')
        elif rng.random() < 0.5 and kind != "xdp":
            pass  # all pairs of inputs
        elif grid and rng.random() < 0.5:
            lines.append(f'neighbours = "{rng.choice(["grid4", "grid8"])}"')
        elif rng.random() < 0.5:
            lines.append(f"radius = {_num(scale * rng.uniform(0.5, 2.0))}")
        if kind == "xdp":
            eps = eps / scale  # per unit of distance
        if kind in ("wdp", "wdistp"):
            eps = scale * rng.uniform(0.01, 3.0)
            lines.append(f"order = {_num(float(rng.choice([1.0, 1.0, 2.0, 3.5, 100.0, 1000.0])))}")
        lines.append(f"epsilon = {_num(eps)}")
        if kind in ("distp", "ldp") and rng.random() < 0.3:
            lines.append(f"delta = {_num(_log_uniform(rng, 1e-9, 0.5))}")
        if kind in ("divergence_distp", "divergence_dp", "xdistp"):
            div = str(rng.choice(DIVERGENCES))
            lines.append(f'divergence = "{div}"')
            if div == "renyi":
                alpha = float(rng.choice([0.5, 2.0, _log_uniform(rng, 1e-3, 1000.0)]))
                lines.append(f"alpha = {_num(alpha)}")
            if rng.random() < 0.2:
                lines.append('direction = "forward"')
        if kind == "xdistp":
            lines.append(f'transport = "{rng.choice(["w1", "winf"])}"')
    objective = str(rng.choice(OBJECTIVES))
    if objective == "transport-items":
        head = ['objective = { kind = "transport", laws = "items" }']
    else:
        head = [f'objective = "{objective}"']
    if rng.random() < 0.15:
        lines += ["", "[mechanism]", f"support_radius = {_num(scale * rng.uniform(0.5, 3.0))}"]
    method = str(rng.choice(METHODS))
    steps = int(rng.choice([50, 200, 1000]))
    lines += ["", "[optimizer]", f'method = "{method}"', f"steps = {steps}", "period = 50"]
    if rng.random() < 0.3:
        lines.append(f"gap_tol = {_num(_log_uniform(rng, 1e-6, 1e-1))}")
    return Config("\n".join(head + [""] + lines) + "\n", tuple(kinds), method, objective,
                  {"n": n, "scale": scale})


@dataclass
class Outcome:
    """What became of a config: ``kind`` (module docstring) and the detail of a problem."""

    kind: str
    detail: str = ""
    code: int = 0

    @property
    def ok(self) -> bool:
        return self.kind in ("certified", "fails", "refused")


def run(runner, app, cfg: Config, folder: Path) -> Outcome:
    """Runs ``optimize`` on ``cfg`` in ``folder`` and sorts what came of it."""
    path = folder / "config.toml"
    path.write_text(cfg.text)
    out = folder / "out"
    result = runner.invoke(app, ["optimize", str(path), "--out", str(out), "--no-progress"])
    return outcome(runner, app, result, out)


def _one_line(result) -> bool:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    return len(lines) == 1 and lines[0].startswith("error: ")


def outcome(runner, app, result, out: Path) -> Outcome:
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        text = "".join(traceback.format_exception(result.exception))
        return Outcome("traceback", text[-2000:], -1)
    code = result.exit_code
    if "Traceback" in result.output or "Warning" in result.stderr:
        return Outcome("traceback", result.output[-2000:], code)
    written = (out / "certificate.json").exists()
    if code == 2:
        if written:
            return Outcome("refusal wrote a certificate", result.stderr, code)
        return Outcome("refused", result.stderr.strip(), code) if _one_line(result) else \
            Outcome("refusal not one line", result.stderr[-2000:], code)
    if not written:
        if code == 1 and _one_line(result):
            return Outcome("fails", result.stderr.strip(), code)
        return Outcome(f"exit {code} without a certificate", result.output[-2000:], code)
    check = runner.invoke(app, ["certify", str(out / "certificate.json")])
    if check.exception is not None and not isinstance(check.exception, SystemExit):
        return Outcome("certify traceback", repr(check.exception), code)
    if code == 0:
        return Outcome("certified", "", code) if check.exit_code == 0 else \
            Outcome("certificate fails its own certify", check.output[-2000:], code)
    if code == 1:
        return Outcome("fails", "", code) if check.exit_code == 1 else \
            Outcome("exit 1 but certify passes", check.output[-2000:], code)
    return Outcome(f"exit {code}", result.output[-2000:], code)
