"""WDP of the Laplace and Gaussian mechanisms: the certifier's exact ``W_μ`` on fine grids against
the continuous value, and against Table 1 of Yang, Qi & Zhou (2024), *Wasserstein differential
privacy* (seed ``001_0e6bbcac305777f8.txt``).

(μ, ε)-WDP (seed Def. 3, lines 63–66) bounds ``W_μ`` (Def. 1, line 47, ground metric
``ρ(x, y) = ‖x − y‖``, line 49) between the output laws of adjacent inputs. For ``M(x) = x + Z`` on
the real line and ``|x − x'| = Δ`` the two output laws are translates, so ``W_μ = Δ`` for every
``μ ≥ 1`` whatever the noise scale (the quantile functions differ by exactly ``Δ``). Four parts:

1. the continuous ``W_μ`` from the quantile formula ``W_μ^μ = ∫_0^1 |F^{-1}(u) − G^{-1}(u)|^μ du``;
2. each output law discretised on ``N`` cells of ``[−L, L]``, ``L = Δ + K·scale`` (``K``: each tail
   beyond ``K·scale`` has mass ``--tail``; tails go to the end cells), cell masses from the CDF;
   the certifier's exact transport (``wasserstein``: POT network simplex) certified by
   ``check_coupling`` (upper bound) and ``check_dual`` (lower bound), as ``N`` grows;
3. the seed's Table 1 WDP formulas next to the true and the certified values;
4. the mechanisms as finite diffpriv tables on ``[0, 1]`` (``A[x, y] ∝ exp(−|x − y|/b)`` or
   ``exp(−(x − y)²/(2σ²))``): the WDP level, max of ``W_μ(A[x], A[x'])`` over adjacent grid points.

    python experiments/wdp_continuous.py --out out/wdp_continuous/table.md

Prints the write-up (markdown) and writes it atomically to ``--out``. Exit 1 if, at the finest
grid, the certified upper or lower bound is not within ``--tol`` (relative) of the continuous
``W_μ = Δ``, if a lower bound exceeds an upper bound, or if the 1-D quantile value and the network
simplex disagree.
"""

from __future__ import annotations

import argparse
import math
import pathlib
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
from scipy.special import ndtr, ndtri

from diffpriv.certification import check_coupling, check_dual, wasserstein, wasserstein_1d
from diffpriv.io import atomic_write

SEED = "001_0e6bbcac305777f8.txt"
SOLVER_RTOL = 1e-9
"""Largest relative gap accepted between ``wasserstein_1d`` and the network simplex."""


# -- the two noise laws (standardised: location 0, scale 1) -----------------------------------


def _laplace_cdf(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(F(z), 1 − F(z))`` of the standard Laplace law, each without cancellation."""
    half = 0.5 * np.exp(-np.abs(z))
    return np.where(z < 0, half, 1.0 - half), np.where(z < 0, 1.0 - half, half)


def _laplace_quantile(u: np.ndarray) -> np.ndarray:
    return np.where(u < 0.5, np.log(2 * u), -np.log(2 * (1 - u)))


class Noise(NamedTuple):
    """An additive noise law with a scale: standard CDF/quantile, closed forms, Table 1 entry.

    (A NamedTuple, not a dataclass: the tests load this script without registering it as a module.)
    """

    name: str
    scale_name: str
    cdf: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    quantile: Callable[[np.ndarray], np.ndarray]
    log_kernel: Callable[[np.ndarray], np.ndarray]
    tail_k: Callable[[float], float]
    """``K`` with ``P(Z > K) = tail`` for the standard law."""
    kl: Callable[[float, float], float]
    """``KL(law(0) ‖ law(Δ))`` at ``(scale, Δ)``."""
    tv: Callable[[float, float], float]
    """``TV = sup_A |P(A) − Q(A)| = ½‖P − Q‖₁`` between the laws at 0 and ``Δ``."""
    table1: Callable[[float, float, float], float]
    """The seed's Table 1 WDP entry at ``(scale, Δ_p f, μ)``, as printed (line 126)."""
    table1_text: str


LAPLACE = Noise(
    "laplace", "b", _laplace_cdf, _laplace_quantile, lambda z: -np.abs(z),
    tail_k=lambda t: math.log(1 / (2 * t)),
    kl=lambda s, d: d / s + math.exp(-d / s) - 1,
    tv=lambda s, d: -math.expm1(-d / (2 * s)),
    table1=lambda s, d, mu: 0.5 * d * math.sqrt(2 * (1 / s + math.exp(-1 / s) - 1)) ** (1 / mu),
    table1_text="½ Δ_p f (√(2[1/λ + exp(−1/λ) − 1]))^{1/μ}  (M_L = f(x) + Lap(0, λ); λ = b)",
)
GAUSSIAN = Noise(
    "gaussian", "σ", lambda z: (ndtr(z), ndtr(-z)), ndtri, lambda z: -0.5 * z * z,
    tail_k=lambda t: float(-ndtri(t)),
    kl=lambda s, d: d * d / (2 * s * s),
    tv=lambda s, d: math.erf(d / (2 * math.sqrt(2) * s)),
    table1=lambda s, d, mu: 0.5 * (d / s) ** (1 / mu),
    table1_text="½ (Δ_p f/σ)^{1/μ}  (M_G = f(x) + N(0, σ²))",
)
NOISES = {n.name: n for n in (LAPLACE, GAUSSIAN)}


def seed_chain(noise: Noise, scale: float, delta: float, mu: float) -> float:
    """The seed's own chain (eqs. (38)/(47)) with the KL taken at ``Δ``: ``½Δ(√(2 KL))^{1/μ}``."""
    return 0.5 * delta * math.sqrt(2 * noise.kl(scale, delta)) ** (1 / mu)


# -- 1. the continuous value -------------------------------------------------------------------


def continuous_w(noise: Noise, scale: float, delta: float, mu: float, m: int = 1 << 16) -> dict:
    """``W_μ`` of ``law(0)`` and ``law(Δ)`` by the quantile formula, midpoint rule on ``m`` cells
    of ``(0, 1)``; ``deviation``: the largest ``|G^{-1}(u) − F^{-1}(u) − Δ|`` seen."""
    u = (np.arange(m) + 0.5) / m
    q0 = scale * noise.quantile(u)
    q1 = delta + scale * noise.quantile(u)
    gap = np.abs(q1 - q0)
    return {"value": float(np.mean(gap**mu)) ** (1 / mu), "deviation": float(np.max(np.abs(gap - delta)))}


# -- 2. discretised on a grid ------------------------------------------------------------------


def discretise(noise: Noise, scale: float, delta: float, n: int, tail: float) -> dict:
    """The laws of ``0 + Z`` and ``Δ + Z`` on ``n`` cells of ``[−L, L]``, ``L = Δ + K·scale``.

    Cell ``k`` (edges ``e_k < e_{k+1}``, point its midpoint) gets ``F(e_{k+1}) − F(e_k)`` (from the
    survival function right of the location: no cancellation); the end cells also take the tails.
    """
    half = delta + noise.tail_k(tail) * scale
    edges = np.linspace(-half, half, n + 1)

    def masses(loc: float) -> tuple[np.ndarray, float]:
        F, S = noise.cdf((edges - loc) / scale)
        m = np.where(edges[1:] <= loc, np.diff(F), -np.diff(S))
        m[0], m[-1] = F[1], S[-2]
        m = np.maximum(m, 0.0)
        return m / m.sum(), float(max(F[0], S[-1]))

    a, ta = masses(0.0)
    b, tb = masses(delta)
    return {"points": (edges[:-1] + edges[1:]) / 2, "a": a, "b": b, "half": half,
            "h": 2 * half / n, "tail": max(ta, tb)}


def certify_pair(a: np.ndarray, b: np.ndarray, points: np.ndarray, mu: float) -> dict:
    """``W_μ(a, b)`` on ordered points: the quantile value (``wasserstein_1d``), the network
    simplex's, and the certified bounds from its plan (``check_coupling``) and dual (``check_dual``)."""
    ground = np.abs(points[:, None] - points[None, :])
    line = wasserstein_1d(a, b, points, mu)
    t = wasserstein(a, b, ground, mu)
    return {"line": line.value, "simplex": t.value,
            "upper": check_coupling(a, b, ground, t.plan, mu),
            "lower": check_dual(a, b, ground, *t.dual, mu)}


def two_point_model(delta: float, h: float, mu: float) -> float:
    """What the grid alone predicts: with ``Δ = (m + θ)h`` the discrete quantile gap is ``(m + 1)h``
    on a fraction ``≈ θ`` of ``u`` and ``mh`` on the rest (exact for μ = 1: ``= Δ``; for μ > 1 above
    ``Δ`` by ``≈ (μ − 1)θ(1 − θ)h²/(2Δ) ≤ (μ − 1)h²/(8Δ)``, Jensen)."""
    m = math.floor(delta / h)
    theta = delta / h - m
    return (theta * ((m + 1) * h) ** mu + (1 - theta) * (m * h) ** mu) ** (1 / mu)


def convergence(noise: Noise, scale: float, delta: float, mus: Sequence[float], ns: Sequence[int],
                tail: float) -> list[dict]:
    """One row per ``(μ, N)``: the certified values on the ``N``-cell grid against ``W_μ = Δ``."""
    rows = []
    for n in ns:
        g = discretise(noise, scale, delta, n, tail)
        for mu in mus:
            r = certify_pair(g["a"], g["b"], g["points"], mu)
            rows.append({"noise": noise.name, "scale": scale, "delta": delta, "mu": mu, "n": n,
                         "half": g["half"], "h": g["h"], "tail": g["tail"], **r,
                         "error": r["upper"] - delta, "model": two_point_model(delta, g["h"], mu) - delta})
    return rows


# -- 3. the seed's Table 1 ---------------------------------------------------------------------


def verdict(formula: float, truth: float, rtol: float) -> str:
    ratio = formula / truth
    if abs(ratio - 1) <= rtol:
        return "agrees"
    if ratio > 1:
        return f"upper bound, loose ×{ratio:.3g}"
    return f"disagrees: ×{1 / ratio:.3g} below W_μ (not a bound)"


def compare(noise: Noise, scale: float, delta: float, mus: Sequence[float], n: int, tail: float,
            rtol: float) -> list[dict]:
    """Per μ: the true and certified ``W_μ``, Table 1 as printed, the verdict, the seed's chain at
    ``Δ``, and ``Δ·TV^{1/μ}`` (``W_μ`` under the ground metric ``Δ·1[y ≠ y']``): closed form and
    certified on the same grid (one network-simplex plan serves every μ: the cost is 0/1)."""
    g = discretise(noise, scale, delta, n, tail)
    zero_one = delta * (1.0 - np.eye(n))
    plan01 = wasserstein(g["a"], g["b"], zero_one, 1.0).plan
    rows = []
    for mu in mus:
        r = certify_pair(g["a"], g["b"], g["points"], mu)
        t1 = noise.table1(scale, delta, mu)
        rows.append({"noise": noise.name, "scale": scale, "delta": delta, "mu": mu, "n": n,
                     "truth": continuous_w(noise, scale, delta, mu)["value"], **r, "table1": t1,
                     "verdict": verdict(t1, delta, rtol), "chain": seed_chain(noise, scale, delta, mu),
                     "tv_closed": delta * noise.tv(scale, delta) ** (1 / mu),
                     "tv_certified": check_coupling(g["a"], g["b"], zero_one, plan01, mu)})
    return rows


# -- 4. finite diffpriv tables on [0, 1] -------------------------------------------------------


def grid_table(noise: Noise, scale: float, points: int) -> tuple[np.ndarray, np.ndarray]:
    """``(y, A)``: ``points`` equally spaced inputs = outputs on ``[0, 1]``,
    ``A[x] ∝ kernel((y − x)/scale)``."""
    y = np.linspace(0.0, 1.0, points)
    logk = noise.log_kernel((y[None, :] - y[:, None]) / scale)
    k = np.exp(logk - logk.max(axis=1, keepdims=True))
    return y, k / k.sum(axis=1, keepdims=True)


def grid_level(noise: Noise, scale: float, points: int, mu: float) -> dict:
    """The WDP level of the table: ``max_i W_μ(A[i], A[i+1])`` (adjacent grid points, ``Δ`` = step).

    Every pair is solved by ``wasserstein_1d`` and its plan certified by ``check_coupling``: the
    level is at most the largest of those bounds; the network simplex's dual at the worst pair
    (``check_dual``) bounds it from below.
    """
    y, A = grid_table(noise, scale, points)
    ground = np.abs(y[:, None] - y[None, :])
    values, uppers = [], []
    for i in range(points - 1):
        t = wasserstein_1d(A[i], A[i + 1], y, mu)
        values.append(t.value)
        uppers.append(check_coupling(A[i], A[i + 1], ground, t.plan, mu))
    values = np.array(values)
    worst, least = int(np.argmax(values)), int(np.argmin(values))
    t = wasserstein(A[worst], A[worst + 1], ground, mu)
    step = float(y[1] - y[0])
    return {"noise": noise.name, "scale": scale, "mu": mu, "points": points, "step": step,
            "value": float(values[worst]), "upper": float(max(uppers)),
            "lower": check_dual(A[worst], A[worst + 1], ground, *t.dual, mu),
            "worst": worst, "least": least, "least_value": float(values[least]),
            "centre": float(values[(points - 1) // 2]), "table1": noise.table1(scale, step, mu)}


# -- markdown --------------------------------------------------------------------------------


def _g(x: float, digits: int = 6) -> str:
    return f"{x:.{digits}g}"


def continuous_table(rows: Sequence[dict]) -> list[str]:
    """One line per (noise, scale, Δ): W_μ for each μ, and the largest quantile deviation."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["noise"], r["scale"], r["delta"]), []).append(r)
    mus = [r["mu"] for r in next(iter(groups.values()))] if groups else []
    lines = ["| noise | scale | Δ | " + " | ".join(f"W_{_g(mu)} (quantile rule)" for mu in mus)
             + " | max \\|G⁻¹(u) − F⁻¹(u) − Δ\\| |",
             "|---|---:|---:|" + "---:|" * (len(mus) + 1)]
    for (noise, scale, delta), group in groups.items():
        lines.append(f"| {noise} | {_g(scale)} | {_g(delta)} | "
                     + " | ".join(f"{r['value']:.15g}" for r in group)
                     + f" | {max(r['deviation'] for r in group):.2e} |")
    return lines


def convergence_table(rows: Sequence[dict]) -> list[str]:
    lines = ["| noise | scale | Δ | μ | N | L | h | tail mass | W_μ 1-D (quantile) | certified upper "
             "| certified lower | upper − Δ | grid model − Δ |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['noise']} | {_g(r['scale'])} | {_g(r['delta'])} | {_g(r['mu'])} | {r['n']} "
                     f"| {r['half']:.4g} | {r['h']:.4g} | {r['tail']:.1e} | {r['line']:.10f} "
                     f"| {r['upper']:.10f} | {r['lower']:.10f} | {r['error']:.3e} | {r['model']:.3e} |")
    return lines


def comparison_table(rows: Sequence[dict]) -> list[str]:
    lines = ["| noise | scale | Δ | μ | W_μ continuous | certified [lower, upper] (N) | Table 1 (line 126) "
             "| Table 1 / W_μ | verdict | seed chain, KL at Δ "
             "| Δ·TV^{1/μ}: closed form / grid (certified upper) |",
             "|---|---:|---:|---:|---:|---|---:|---:|---|---:|---|"]
    for r in rows:
        lines.append(f"| {r['noise']} | {_g(r['scale'])} | {_g(r['delta'])} | {_g(r['mu'])} "
                     f"| {r['truth']:.6f} | [{r['lower']:.6f}, {r['upper']:.6f}] ({r['n']}) "
                     f"| {r['table1']:.6f} | {r['table1'] / r['truth']:.4f} | {r['verdict']} "
                     f"| {r['chain']:.6f} | {r['tv_closed']:.6f} / {r['tv_certified']:.6f} |")
    return lines


def grid_level_table(rows: Sequence[dict]) -> list[str]:
    lines = ["| noise | scale | μ | Δ = step | level: certified [lower, upper] | level / Δ | worst pair "
             "| centre pair / Δ | least pair: W_μ / Δ | Table 1 at (scale, Δ) | Table 1 / level |",
             "|---|---:|---:|---:|---|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        d = r["step"]
        lines.append(f"| {r['noise']} | {_g(r['scale'])} | {_g(r['mu'])} | {_g(d)} "
                     f"| [{r['lower']:.8g}, {r['upper']:.8g}] | {r['upper'] / d:.6f} "
                     f"| x = {r['worst'] * d:.3f}, {(r['worst'] + 1) * d:.3f} | {r['centre'] / d:.6f} "
                     f"| {r['least_value'] / d:.4f} at x = {r['least'] * d:.3f}, {(r['least'] + 1) * d:.3f} "
                     f"| {r['table1']:.4g} | {r['table1'] / r['upper']:.3g} |")
    return lines


def plot_fig1(paths, delta: float = 1.0) -> None:
    """The seed's Fig. 1 (WDP budget against the order μ for the Laplace and Gaussian mechanisms at
    several scales, from Table 1) beside the true ``W_μ = Δ`` of every order and scale."""
    from matplotlib.figure import Figure

    mus = np.linspace(1.0, 10.0, 91)
    fig = Figure(figsize=(8.0, 3.2))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, noise in ((axes[0], LAPLACE), (axes[1], GAUSSIAN)):
        for scale in (0.25, 0.5, 1.0, 2.0):
            ax.plot(mus, [noise.table1(scale, delta, mu) for mu in mus], lw=1.2,
                    label=f"Table 1, {noise.scale_name} = {scale:g}")
        ax.axhline(delta, color="k", lw=1.5, ls="--", label="true W_μ = Δ (every scale)")
        ax.set_title(f"{noise.name} mechanism, Δ = {delta:g}", fontsize=9)
        ax.set_xlabel("order μ")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small")
    axes[0].set_ylabel("ε of (μ, ε)-WDP")
    fig.suptitle("Wasserstein DP: the seed's budgets (001, Table 1 / Fig. 1) against the true level",
                 fontsize=10)
    fig.tight_layout()
    for path in paths:
        fig.savefig(path, dpi=150)


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/wdp_continuous/table.md", help="markdown file to write")
    ap.add_argument("--noise", default="laplace,gaussian", help="comma-separated: laplace, gaussian")
    ap.add_argument("--scale", type=float, default=1.0, help="noise scale b or σ for the convergence table")
    ap.add_argument("--delta", type=float, default=1.0, help="sensitivity Δ = |x − x'| for it")
    ap.add_argument("--mu", default="1,2,3", help="orders μ (default 1,2,3)")
    ap.add_argument("--n", default="250,500,1000,2000", help="grid sizes N, the last the finest")
    ap.add_argument("--tail", type=float, default=1e-12, help="mass of each tail beyond the grid")
    ap.add_argument("--tol", type=float, default=1e-3, help="relative tolerance at the finest grid")
    ap.add_argument("--compare-scales", default="0.25,1,2,5", help="scales for the Table 1 comparison")
    ap.add_argument("--compare-deltas", default="1,2", help="sensitivities for the Table 1 comparison")
    ap.add_argument("--n-compare", type=int, default=1000, help="grid size N for the Table 1 comparison")
    ap.add_argument("--agree-rtol", type=float, default=0.01, help="Table 1 'agrees' within this ratio")
    ap.add_argument("--grid-points", type=int, default=201, help="points of the [0, 1] table (0: skip)")
    ap.add_argument("--grid-scales", default="0.02,0.05,0.1,0.2,1", help="scales for the [0, 1] table")
    args = ap.parse_args(argv)
    noises = [NOISES[name.strip()] for name in args.noise.split(",") if name.strip()]
    mus, ns = _floats(args.mu), sorted(int(n) for n in _floats(args.n))
    delta = args.delta

    cont = [{"noise": nz.name, "scale": s, "delta": d, "mu": mu, **continuous_w(nz, s, d, mu)}
            for nz in noises for s in sorted({args.scale, *_floats(args.compare_scales)})
            for d in sorted({delta, *_floats(args.compare_deltas)}) for mu in mus]
    conv = [r for nz in noises for r in convergence(nz, args.scale, delta, mus, ns, args.tail)]
    comp = [r for nz in noises for s in _floats(args.compare_scales) for d in _floats(args.compare_deltas)
            for r in compare(nz, s, d, mus, args.n_compare, args.tail, args.agree_rtol)]
    grid = ([grid_level(nz, s, args.grid_points, mu) for nz in noises for s in _floats(args.grid_scales)
             for mu in mus] if args.grid_points > 1 else [])

    cont_ok = all(abs(r["value"] - r["delta"]) <= 1e-12 * r["delta"] for r in cont)
    finest = [r for r in conv if r["n"] == ns[-1]]
    conv_ok = all(abs(r["upper"] - delta) <= args.tol * delta and abs(r["lower"] - delta) <= args.tol * delta
                  for r in finest)
    worst = max(max(abs(r["upper"] - delta), abs(r["lower"] - delta)) / delta for r in finest)
    bracket_ok = all(r["lower"] <= r["upper"] for r in [*conv, *comp, *grid])
    solver_ok = all(abs(r["line"] - r["simplex"]) <= SOLVER_RTOL * max(1.0, r["line"])
                    for r in [*conv, *comp])
    ok = cont_ok and conv_ok and bracket_ok and solver_ok

    counts = {"agrees": 0, "upper bound": 0, "disagrees": 0}
    for r in comp:
        counts[next(k for k in counts if r["verdict"].startswith(k))] += 1
    below = [r["truth"] / r["table1"] for r in comp if r["verdict"].startswith("disagrees")]
    above = [r["table1"] / r["truth"] for r in comp if r["verdict"].startswith("upper")]
    unit = [r for r in comp if r["delta"] == 1]
    tv_mu1 = [r["table1"] >= r["tv_closed"] for r in unit if r["mu"] == 1]
    tv_high = [r["table1"] >= r["tv_closed"] for r in unit if r["mu"] > 1]
    text = "\n".join([
        "# WDP of the Laplace and Gaussian mechanisms: certified W_μ against the continuous value "
        "and the seed's Table 1",
        "",
        f"Seed: Yang, Qi & Zhou, *Wasserstein differential privacy* (`{SEED}`). (μ, ε)-WDP (Def. 3, "
        "lines 63–66): W_μ(Pr_M(D), Pr_M(D')) ≤ ε for adjacent D, D', with W_μ of Def. 1 (line 47) "
        "under the ground metric ρ(x, y) = ‖x − y‖ (line 49). Here M(x) = x + Z on the real line, "
        "Z ~ Lap(0, b) or N(0, σ²), and |x − x'| = Δ (the sensitivity Δ_p f).",
        "",
        "## 1. The continuous W_μ: exactly Δ",
        "",
        "The two output laws are translates: G⁻¹(u) = Δ + F⁻¹(u), so the quantile formula "
        "W_μ^μ = ∫₀¹ |F⁻¹(u) − G⁻¹(u)|^μ du gives W_μ = Δ for every μ ≥ 1 and every scale. "
        "Equivalently: the coupling y ↦ y + Δ costs Δ, and W_μ ≥ W_1 ≥ E[M(x')] − E[M(x)] = Δ "
        "(Kantorovich–Rubinstein, eq. (2) line 57, with φ(y) = y; monotonicity, Prop. 4 line 102). "
        "Checked numerically (midpoint rule, 65,536 cells of u):",
        "",
        *continuous_table(cont),
        "",
        f"{'all equal Δ to 1e-12' if cont_ok else 'NOT all equal to Δ'}.",
        "",
        "## 2. Discretised on a grid: the certifier's W_μ converges to Δ",
        "",
        f"Each law on N cells of [−L, L], L = Δ + K·scale with each tail beyond K·scale of mass "
        f"{args.tail:g} (put into the end cells); cell masses from the CDF. Certified upper: "
        "`check_coupling` on the network simplex's plan (`wasserstein`); certified lower: `check_dual` "
        "on its dual (both bound W_μ of the *discretised* laws). Grid model: with Δ = (m + θ)h the "
        "discrete quantile gap is (m + 1)h on a fraction ≈ θ of u and mh elsewhere, so the grid adds "
        "nothing at μ = 1 and ≈ (μ − 1)θ(1 − θ)h²/(2Δ) ≤ (μ − 1)h²/(8Δ) at μ > 1 (O(h²); not monotone "
        "in N, as θ varies).",
        "",
        *convergence_table(conv),
        "",
        (f"At the finest grid (N = {ns[-1]}) both certified bounds are within {worst:.2e} (relative) of "
         f"the continuous W_μ = Δ: {'within' if conv_ok else 'NOT within'} the tolerance {args.tol:g}."),
        "",
        "## 3. The seed's Table 1 against the true and the certified W_μ",
        "",
        "Table 1 (lines 122–127), row 'WDP for order μ' (line 126), transcribed as printed:",
        "",
        f"- Laplace mechanism (Prop. 7, line 114): ε = {LAPLACE.table1_text}",
        f"- Gaussian mechanism (Prop. 8, line 118): ε = {GAUSSIAN.table1_text}",
        "",
        "The caption (line 127) says Δ_p f 'can be an arbitrary positive constant'. Verdict: "
        f"'agrees' if Table 1 is within {args.agree_rtol:g} (relative) of the true W_μ = Δ, 'upper "
        "bound' if above, 'disagrees' if below (then the claimed (μ, ε)-WDP is false). 'Seed chain, KL "
        "at Δ': the seed's own eqs. (38)/(47), ½Δ(√(2 KL(law(0) ‖ law(Δ))))^{1/μ}, with the KL at Δ "
        "rather than at 1 (the two differ from Table 1 only for Δ ≠ 1). Δ·TV^{1/μ}: W_μ under the "
        "ground metric Δ·1[y ≠ y'] (TV = ½‖P − Q‖₁ = inf_γ P(Y ≠ Y')), what eqs. (36)–(37) compute.",
        "",
        *comparison_table(comp),
        "",
        (f"Table 1 as printed: agrees at {counts['agrees']}, is a valid upper bound at "
         f"{counts['upper bound']}"
         + (f" (loose by ×{min(above):.3g}–×{max(above):.3g})" if above else "")
         + f", and is below the true W_μ at {counts['disagrees']} of {len(comp)} points"
         + (f" (by ×{min(below):.3g}–×{max(below):.3g})" if below else "") + "."),
        "",
        (f"Against Δ·TV^{{1/μ}}, the quantity its derivation bounds, Table 1 (at Δ = 1, where its KL is "
         f"the right one) is above at {sum(tv_mu1)} of {len(tv_mu1)} points with μ = 1 (Pinsker) and at "
         f"{sum(tv_high)} of {len(tv_high)} with μ > 1 (the ½ outside the power 1/μ)."),
        "",
        "Where the formulas come from (proof of Prop. 7, lines 473–494, eqs. (33)–(41); Prop. 8, "
        "lines 502–523, eqs. (42)–(50)): eqs. (34)–(35) bound the cost by the translation coupling, "
        "Δ·(∫1 dγ)^{1/μ} = Δ — the true value. Eq. (36) (line 476; (45), line 505) then replaces "
        "∫1 dγ = 1 by E 1[X ≠ Y], the cost under the 0/1 metric, so from there on the chain bounds "
        "W_μ under the ground metric Δ·1[y ≠ y'], not under ρ = ‖x − y‖; eq. (37) puts the ½ of "
        "inf P(X ≠ Y) = ½‖P − Q‖_TV outside the power 1/μ; eq. (38) is Pinsker. Table 1's Laplace "
        "entry takes the KL at sensitivity 1 (eq. (40), line 490) but keeps the factor Δ_p f; its "
        "Gaussian entry keeps Δ_p f inside the power and drops the outer factor (eq. (50), line 523). "
        "So the formulas decrease with the noise scale, while the WDP level of an additive mechanism "
        "under ρ = |x − y| is Δ whatever the noise: Table 1 is an upper bound only when the noise is "
        "small (at Δ = μ = 1: b ≤ 0.339, σ ≤ 0.5), and an 'agrees' is a coincidence of one parameter point.",
        "",
        "## 4. The mechanisms as finite diffpriv tables on [0, 1]",
        "",
        (f"X = Y = {args.grid_points} equally spaced points of [0, 1], A[x, y] ∝ exp(−|x − y|/b) "
         "(discrete Laplace) or exp(−(x − y)²/(2σ²)) (discrete Gaussian), rows normalised on the grid; "
         "adjacent inputs are neighbouring grid points (Δ = step). Level = max over adjacent pairs of "
         "W_μ(A[x], A[x']): upper bound = the largest `check_coupling` bound of the pairs' 1-D plans, "
         "lower bound = `check_dual` at the worst pair. 'Table 1 at (scale, Δ)': the printed formula "
         "with λ = b (or σ) and Δ_p f = step." if grid else "(skipped: --grid-points 0)"),
        "",
        *(grid_level_table(grid) if grid else []),
        "",
        (("Rows of the finite table are truncated translates: where the noise is small against the "
          "domain, the interior pairs are near-translates and the level is Δ (the worst pair sits "
          "mid-domain); as the noise reaches the boundaries, the normalisation on [0, 1] pins the mass, "
          "the level falls below Δ, and pairs at the boundary move far less than Δ (least pair at x = 0 "
          f"or 1). Largest exact W_μ / Δ over these rows: {max(r['value'] / r['step'] for r in grid):.12f}"
          f" (certified upper bounds: at most {max(r['upper'] / r['step'] for r in grid):.9f}); on a "
          "bounded grid the noise lowers the WDP level only through the boundary.") if grid else ""),
        "",
        f"Result: {'converged and consistent' if ok else 'FAILED'} (continuous = Δ: {cont_ok}; "
        f"finest grid within {args.tol:g}: {conv_ok}; lower ≤ upper: {bracket_ok}; 1-D = simplex: "
        f"{solver_ok}).",
        "",
    ])
    print(text, end="")
    out = pathlib.Path(args.out)
    atomic_write(out, text)
    figures = [out.with_name("fig1.pdf"), out.with_name("fig1.png")]
    plot_fig1(figures)
    print(f"wrote {out} and {figures[0].name} (.png)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
