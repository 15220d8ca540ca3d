"""``evaluate --mechanism tupling``: the parameters checked, the tupling mechanism's report
(exact expected loss, exact and Monte Carlo δ(ε), Theorem 3 of Kawamoto & Murakami 2019, Local
obfuscation mechanisms for hiding probability distributions) and its printed table.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from rich.markup import escape

from diffpriv.cli._common import _fail
from diffpriv.cli._summary import _mechanism_text, _print_rows
from diffpriv.problems._problem import Problem

TUPLING = "tupling"
TUPLING_BASES = ("planar_laplace", "restricted_laplace", "krr")
TUPLING_PARAMS: dict[str, Any] = {"k": None, "base_epsilon": None, "base": "planar_laplace",
                                  "base_radius": None, "dummies": "uniform", "epsilon": None,
                                  "samples": 100_000, "confidence": 0.99, "seed": 0, "pair": 0}
"""Parameters of ``--mechanism tupling`` (``None``: required, except ``epsilon``: the DistP ε, and
``base_radius``: needed by the restricted Laplace base, seed 003's choice). ``dummies``: the law
``ν`` the k dummies are drawn from: ``uniform`` over the outputs, ``population`` (the base table's
output law of the whole prior, ``Σ π[s, x] A[s, x, ·]``: dummies that look like real reports), or
an item's name (that item's output law under the base table)."""
NO_TUPLING_CERTIFICATE = "no certificate: the tupling mechanism reports tuples, not one output of a table"
MAX_TUPLE_ENTRIES = 10**9
"""Largest ``samples·(k+1)`` of the tupling Monte Carlo (about 2.5 minutes on one core)."""
MAX_EXACT_MULTISETS = 200_000
"""Largest number of output multisets enumerated for the tupling mechanism's exact δ(ε)."""


def _number(params: Mapping[str, Any], key: str, what: str, ok: Callable[[float], bool]) -> float:
    """``params[key]``, a float for which ``ok`` holds, or exit 2."""
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, float) or not ok(value):
        _fail(f"--param: {key} must be {what}, got {value!r}")
    return value


def _integer(params: Mapping[str, Any], key: str, low: int) -> int:
    """``params[key]``, an integer ``>= low``, or exit 2."""
    value = params[key]  # a float from --param, an int by default
    if (isinstance(value, bool) or not isinstance(value, int | float) or not float(value).is_integer()
            or value < low):
        _fail(f"--param: {key} must be an integer >= {low}, got {value!r}")
    return int(value)


def _tupling_params(given: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of ``--mechanism tupling``, checked (integers as ``int``), or exit 2."""
    params = {**TUPLING_PARAMS, **given}
    missing = [k for k in ("k", "base_epsilon") if params[k] is None]
    if missing:
        _fail(f"--param: mechanism 'tupling' needs {missing[0]!r} (e.g. --param k=3 "
              "--param base_epsilon=1)")
    for key, low in (("k", 0), ("samples", 1), ("seed", 0), ("pair", 0)):
        params[key] = _integer(params, key, low)
    if params["samples"] * (params["k"] + 1) > MAX_TUPLE_ENTRIES:
        _fail(f"--param: samples·(k+1) = {params['samples'] * (params['k'] + 1):.3g} tuple "
              f"entries, at most {MAX_TUPLE_ENTRIES:.0e}")
    if params["base"] not in TUPLING_BASES:
        _fail(f"--param: base must be one of {', '.join(TUPLING_BASES)}, got {params['base']!r}")
    if params["base"] == "restricted_laplace":
        if params["base_radius"] is None:
            _fail("--param: base restricted_laplace needs base_radius (e.g. --param base_radius=2)")
        _number(params, "base_radius", "a number > 0", lambda v: 0 < v <= math.inf)
    elif params["base_radius"] is not None:
        _fail(f"--param: base_radius applies to base restricted_laplace only, not {params['base']!r}")
    params["dummies"] = str(params["dummies"])
    _number(params, "confidence", "a number in (0, 1)", lambda v: 0 < v < 1)
    for key in ("base_epsilon", "epsilon") if params["epsilon"] is not None else ("base_epsilon",):
        _number(params, key, "a finite number >= 0", lambda v: 0 <= v < math.inf)
    return params


EXACT_MARGIN = 1e-9
"""Relative margin added to the float exact δ(ε) before it is compared with the budget: a float
sum of at most :data:`MAX_EXACT_MULTISETS` non-negative terms, each a product of a few rounded
factors, is within ``(2·10⁵ + 50)·u ≈ 2.2·10⁻¹¹`` relative of the exact sum; 1e-9 covers it
with room."""


def _tupling(problem: Problem, params: dict[str, Any], accept_estimate: bool = False) -> dict[str, Any]:
    """``--mechanism tupling``: :func:`~diffpriv.mechanisms.evaluate_tupling` with the base table
    ``base`` (planar Laplace or k-RR) at ``base_epsilon``, plus the exact δ(ε) where the
    multisets of outputs can be enumerated (at most :data:`MAX_EXACT_MULTISETS`).

    What the exit status rests on (``proved``): the exact δ rounded up by
    :data:`EXACT_MARGIN`; where the tuples are too many to enumerate, only a Monte Carlo upper
    bound at the chosen confidence exists, an estimate: ``ok`` then holds only with
    ``accept_estimate``."""
    from diffpriv.mechanisms import MECHANISMS, Tupling, evaluate_tupling, tuple_delta_exact

    start = time.perf_counter()
    extra = {"radius": params["base_radius"]} if params["base"] == "restricted_laplace" else {}
    try:
        base = MECHANISMS[params["base"]](problem, epsilon=params["base_epsilon"], **extra)
    except ValueError as e:
        other = "krr" if params["base"] != "krr" else "planar_laplace"
        _fail(f"tupling: base table: {e}; or try --param base={other}")
    nu = _dummy_law(problem, base, params["dummies"])
    k = params["k"]
    try:
        with np.errstate(all="ignore"):
            report = evaluate_tupling(problem, k, base, params["epsilon"], samples=params["samples"],
                                      confidence=params["confidence"], rng=params["seed"],
                                      pair=params["pair"], nu=nu)
    except ValueError as e:
        _fail(f"tupling: {e}")
    d = report.delta
    exact = None  # where the multisets are too many to enumerate, the Monte Carlo bound decides
    if math.comb(problem.shape[2] + k, k + 1) <= MAX_EXACT_MULTISETS:
        items = {item.name: item for item in problem.items}
        laws = [Tupling(k, base[items[n].profile], nu).law(items[n].dist) for n in report.items]
        with np.errstate(all="ignore"):
            exact = tuple_delta_exact(*laws, d.epsilon, k, max_multisets=MAX_EXACT_MULTISETS)
    proved = exact is not None
    if proved:
        ok = exact * (1 + EXACT_MARGIN) <= report.delta_budget
    else:
        ok = accept_estimate and d.upper <= report.delta_budget
    return {
        "mechanism": TUPLING,
        "params": {**params, "epsilon": d.epsilon},
        "certificate": None,
        "items": list(report.items),
        "expected_loss": report.expected_loss,
        "base_expected_loss": report.base_loss,
        "epsilon": d.epsilon,
        "delta": {"exact": exact, "estimate": d.estimate, "forward": d.forward,
                  "backward": d.backward, "lower": d.lower, "upper": d.upper,
                  "samples": d.samples, "confidence": d.confidence},
        "delta_budget": report.delta_budget,
        "theorem3": None if report.theorem3 is None else {
            "epsilon": report.theorem3[0], "delta": report.theorem3[1], "beta": report.beta,
            "eta": 0.0},
        "ok": bool(ok),
        "proved": proved,
        "estimate_meets_budget": bool(d.upper <= report.delta_budget),
        "seconds": {"tupling": time.perf_counter() - start},
    }


def _dummy_law(problem: Problem, base: np.ndarray, name: str) -> np.ndarray | None:
    """The dummies' law ``ν`` of :data:`TUPLING_PARAMS`'s ``dummies`` (None: uniform), or exit 2."""
    if name == "uniform":
        return None
    if name == "population":
        nu = np.einsum("sx,sxy->y", problem.prior, base)
    else:
        items = {item.name: item for item in problem.items}
        if name not in items:
            _fail(f"--param: dummies must be uniform, population or an item name "
                  f"({', '.join(items) or 'none'}), got {name!r}")
        nu = items[name].dist @ base[items[name].profile]
    return nu / nu.sum()


def _print_tupling(s: dict[str, Any], title: str) -> None:
    """The tupling report as a rich table (no constraints table: there is no certificate)."""
    d, thm = s["delta"], s["theorem3"]
    pct = f"{100 * d['confidence']:g} %"
    if s["params"].get("dummies", "uniform") != "uniform":
        theorem = "holds for uniform dummies only"
    elif thm is None:
        theorem = "says nothing at this ε (needs k ≥ 1 and ε > ln(1 + β|Y|/k))"
    else:
        theorem = f"δ ≤ {thm['delta']:.4g} (η = 0, β = {thm['beta']:.4g})" + (
            ", vacuous" if thm["delta"] >= 1 else "")
    if d["exact"] is not None:
        verdict = "met (exact δ ≤ budget)" if s["ok"] else "[red]NOT met[/red] (exact δ > budget)"
    elif s["estimate_meets_budget"]:
        verdict = (f"met by the Monte Carlo upper bound at {pct} confidence, an estimate, not a proof"
                   + ("; accepted (--accept-estimate)" if s["ok"] else ": exit 1 unless --accept-estimate"))
    else:
        verdict = "[red]not shown[/red] (upper bound > budget)"
    rows = [
        ("mechanism", escape(_mechanism_text(s["mechanism"], s["params"]))),
        ("protected pair", " vs ".join(s["items"])),
        ("expected loss (least over the tuple)", f"{s['expected_loss']:.6g}"),
        ("expected loss of the base table", f"{s['base_expected_loss']:.6g}"),
        (f"exact δ(ε = {s['epsilon']:g})", "too many tuples to enumerate" if d["exact"] is None
         else f"{d['exact']:.6g}"),
        (f"δ̂(ε = {s['epsilon']:g}), Monte Carlo", f"{d['estimate']:.4g} ({d['samples']} tuples "
                                                   "per direction)"),
        (f"upper confidence bound ({pct})", f"{d['upper']:.4g}"),
        (f"lower confidence bound ({pct})", f"{d['lower']:.4g}"),
        ("δ budget", f"{s['delta_budget']:g}: {verdict}"),
        ("Theorem 3 (Kawamoto & Murakami)", theorem),
        ("time", ", ".join(f"{k} {v:.2f} s" for k, v in s["seconds"].items())),
    ]
    _print_rows(rows, title)
