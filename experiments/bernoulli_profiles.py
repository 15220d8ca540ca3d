"""Bernoulli-Couplet and Bernoulli-Chain (Geumlek & Chaudhuri 2019, *Profile-based privacy for
locally private computations*, Sec. 6, Figs. 2a and 3), against diffpriv's certified optimum.

**Fig. 2a, Bernoulli-Couplet.** Two Bernoulli profiles ``p_i = (1 − d)/2`` and ``p_j = (1 + d)/2``
(the paper does not say how its pairs are placed; these are centred on 1/2), one flipping
probability α for both (their LP (4)), for each difference ``d = |p_i − p_j|`` and budget ε: α by
LP (4) (``dp.mechanisms.flip_probability``), diffpriv's certified optimum of the same problem (the
least ``max(A[0, 1], A[1, 0])`` over every table, not only symmetric flips:
``dp.problems.bernoulli_two_profile_problem`` with ``dp.design``, which must equal α), the
paper's Observation 10 bound, and local DP's ``1/(1 + e^ε)`` (randomized response).

**Fig. 3, Bernoulli-Chain-6 and -21.** ``k`` profiles with ``p`` evenly spaced on [0, 1], a chain
of edges, ε-profile-based privacy on each edge. Per profile and ε, the probability that the output
is 1, ``P_i[1] = Σ_x P_i[x] A_i[x, 1]``, for randomized response (local DP), Smooth One Bit
(their LP (5): a symmetric flip per profile minimising the largest) and diffpriv's certified
optimum of the same objective over every table per profile (``dp.mechanisms.categorical_chain_problem``
with the ``entry`` objective: the largest flip probability). The spread of ``P_i[1]`` over the
profiles at ε = 0.2 (their vertical line) measures how much signal survives.

    python experiments/bernoulli_profiles.py --out out/bernoulli

Writes ``couplet.csv``, ``chain.csv``, ``couplet.pdf/.png`` and ``chain.pdf/.png``. Exit 1 if
diffpriv's optimum and LP (4) disagree, a certificate fails, or diffpriv's chain optimum is
above Smooth One Bit's.
"""

from __future__ import annotations

import argparse
import math
import pathlib

import numpy as np
from matplotlib.figure import Figure

import diffpriv as dp
from diffpriv.io import write_csv

AGREE = 1e-6
"""LP (4)'s α and diffpriv's certified optimum agree to this (absolute)."""


def observation10(p_i: float, p_j: float, eps: float) -> float:
    """The bound (7) of Observation 10 on LP (4)'s α, for ``p_i ≤ p_j``."""
    e = math.exp(eps)
    terms = [0.0]
    num, den = p_j - e * p_i, 2 * (p_j - e * p_i) - (1 - e)
    if den != 0:
        terms.append(num / den)
    num, den = p_i - e * p_j + e - 1, 2 * (p_i - e * p_j) + e - 1
    if den != 0:
        terms.append(num / den)
    return max(terms)


def couplet(epsilons, diffs) -> list[dict]:
    rows = []
    for eps in epsilons:
        for d in diffs:
            p_i, p_j = (1 - d) / 2, (1 + d) / 2
            alpha = dp.mechanisms.flip_probability(p_i, p_j, eps)
            design = dp.design(dp.problems.bernoulli_two_profile_problem(p_i, p_j, eps))
            rows.append({"epsilon": eps, "difference": d, "p_i": p_i, "p_j": p_j, "lp4_alpha": alpha,
                         "diffpriv_certified": design.certificate.loss, "ok": design.certificate.ok,
                         "observation10": observation10(p_i, p_j, eps), "ldp": 1 / (1 + math.exp(eps))})
    return rows


def chain(k: int, epsilons) -> list[dict]:
    p = np.linspace(0.0, 1.0, k)
    dists = np.stack([1 - p, p], axis=1)
    edges = [(i, i + 1) for i in range(k - 1)]
    rows = []
    for eps in epsilons:
        smooth = dp.mechanisms.smooth_one_bit(p, edges, eps)
        rr = 1 / (1 + math.exp(eps))
        problem = dp.mechanisms.categorical_chain_problem(eps, objective="entry", profiles=dists, edges=edges)
        design = dp.design(problem)
        table = design.certificate.table
        for i in range(k):
            rows.append({"chain": k, "epsilon": eps, "profile": i, "p": p[i],
                         "rr_p1": p[i] * (1 - rr) + (1 - p[i]) * rr,
                         "smooth_one_bit_p1": p[i] * (1 - smooth[i]) + (1 - p[i]) * smooth[i],
                         "diffpriv_p1": float(dists[i] @ table[i][:, 1]),
                         "smooth_one_bit_max_flip": float(smooth.max()),
                         "diffpriv_max_flip": design.certificate.loss, "ok": design.certificate.ok})
    return rows


def spread(rows: list[dict], k: int, eps: float, key: str) -> float:
    values = [r[key] for r in rows if r["chain"] == k and r["epsilon"] == eps]
    return max(values) - min(values)


def plot_couplet(rows: list[dict], epsilons, paths) -> None:
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    for n, eps in enumerate(epsilons):
        sel = [r for r in rows if r["epsilon"] == eps]
        d = [r["difference"] for r in sel]
        ax.plot(d, [r["diffpriv_certified"] for r in sel], "o-", color=f"C{n}", ms=3,
                label=f"ε = {eps:g}: optimal flip (LP (4) = diffpriv)")
        ax.plot(d, [r["observation10"] for r in sel], ":", color=f"C{n}", label=f"ε = {eps:g}: Obs. 10 bound")
        ax.axhline(sel[0]["ldp"], color=f"C{n}", lw=1, ls="--", alpha=0.8)
    ax.plot([], [], "k--", lw=1, label="local DP (randomized response)")
    ax.set_xlabel("difference of the profiles' parameters |p_i − p_j|")
    ax.set_ylabel("flip probability α")
    ax.set_title("Bernoulli-Couplet (seed 002, Fig. 2a)")
    ax.set_ylim(0, 0.5)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small", ncol=2)
    fig.tight_layout()
    for path in paths:
        fig.savefig(path, dpi=150)


def plot_chain(rows: list[dict], ks, paths) -> None:
    keys = (("rr_p1", "local DP: randomized response"), ("smooth_one_bit_p1", "Smooth One Bit (LP (5))"),
            ("diffpriv_p1", "diffpriv's certified optimum"))
    fig = Figure(figsize=(4.0 * len(ks), 3.0 * len(keys)))
    axes = fig.subplots(len(keys), len(ks), squeeze=False)
    for c, k in enumerate(ks):
        sel = [r for r in rows if r["chain"] == k]
        eps = sorted({r["epsilon"] for r in sel})
        for r_, (key, name) in enumerate(keys):
            ax = axes[r_][c]
            for i in range(k):
                ax.plot(eps, [r[key] for r in sel if r["profile"] == i], lw=1,
                        color=matplotlib_colour(i, k))
            ax.axvline(0.2, color="k", lw=0.8, ls="--")
            ax.set_xscale("log")
            ax.set_ylim(0, 1)
            ax.set_title(f"Bernoulli-Chain-{k}: {name}", fontsize=9)
            ax.set_xlabel("ε")
            ax.set_ylabel("P(output = 1) per profile")
            ax.grid(alpha=0.3)
    fig.tight_layout()
    for path in paths:
        fig.savefig(path, dpi=150)


def matplotlib_colour(i: int, k: int):
    from matplotlib import colormaps

    return colormaps["viridis"](i / max(k - 1, 1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/bernoulli", help="output folder")
    ap.add_argument("--epsilons", default="0.5,1,2", help="Fig. 2a's budgets, comma-separated")
    ap.add_argument("--chain-eps", type=int, default=25, help="budgets per chain, log-spaced in [0.02, 3]")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    epsilons = [float(e) for e in args.epsilons.split(",")]
    rows = couplet(epsilons, np.linspace(0.0, 0.95, 20))
    write_csv(out / "couplet.csv", rows)
    plot_couplet(rows, epsilons, [out / "couplet.pdf", out / "couplet.png"])
    bad = [r for r in rows if abs(r["lp4_alpha"] - r["diffpriv_certified"]) > AGREE or not r["ok"]
           or r["lp4_alpha"] > r["ldp"] + 1e-12]
    chain_eps = sorted({float(e) for e in np.geomspace(0.02, 3.0, args.chain_eps)} | {0.2})
    crows = chain(6, chain_eps) + chain(21, chain_eps)
    write_csv(out / "chain.csv", crows)
    plot_chain(crows, (6, 21), [out / "chain.pdf", out / "chain.png"])
    bad += [r for r in crows if not r["ok"] or r["diffpriv_max_flip"] > r["smooth_one_bit_max_flip"] + 1e-6]
    print("Fig. 2a: the optimal flip α at |p_i − p_j| = 0.5 (LP (4) = diffpriv) against local DP's")
    for eps in epsilons:
        r = min((r for r in rows if r["epsilon"] == eps), key=lambda r: abs(r["difference"] - 0.5))
        print(f"  ε = {eps:g}: α = {r['lp4_alpha']:.4f}, diffpriv {r['diffpriv_certified']:.4f}, "
              f"Obs. 10 bound {r['observation10']:.4f}, local DP {r['ldp']:.4f}")
    print("Fig. 3: spread of P(output = 1) over the profiles at ε = 0.2 (higher: more signal)")
    for k in (6, 21):
        at = next(r for r in crows if r["chain"] == k and r["epsilon"] == 0.2)
        print(f"  Bernoulli-Chain-{k}: randomized response {spread(crows, k, 0.2, 'rr_p1'):.4f}, "
              f"Smooth One Bit {spread(crows, k, 0.2, 'smooth_one_bit_p1'):.4f}, "
              f"diffpriv {spread(crows, k, 0.2, 'diffpriv_p1'):.4f}; largest flip: Smooth One Bit "
              f"{at['smooth_one_bit_max_flip']:.4f}, diffpriv {at['diffpriv_max_flip']:.4f}")
    print(f"wrote {out}/couplet.csv, chain.csv and their figures (.pdf, .png)")
    if bad:
        print(f"{len(bad)} rows disagree: {bad[:3]}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
