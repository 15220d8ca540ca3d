"""A black-box audit: do a sampler's reports contradict the certificate's privacy claims?

The audit sees only what a deployment sees: reports drawn by :meth:`Sampler.sample`. For every
law a pure or (ε, δ) comparison names — a row ``A[s, x]`` (local and extended DP: that input's
reports) or an item's lifted law (distribution privacy: inputs drawn from the item's
distribution, then their reports) — it draws ``N`` reports and bounds each output's
probability by a Clopper–Pearson interval (Clopper & Pearson 1934), at a joint confidence by
Bonferroni over every output of every law. A comparison's claim is **contradicted** when

* pure (``δ = 0``): some output has ``lower(P[y]) > e^ε·upper(Q[y])`` (either direction);
* approximate: ``Σ_y max(0, lower(P[y]) − e^ε·upper(Q[y])) > δ`` (either direction), a lower
  bound of the hockey-stick divergence.

With probability at least the confidence, a sampler that draws the certified table contradicts
nothing; a sampler that deviates far enough (a bug in its lookup, a swapped table) is caught at
a number of samples that grows as the deviation shrinks. Divergence and Wasserstein claims are
listed as not audited.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

__all__ = ["AuditReport", "ClaimAudit", "audit"]


ESTIMATE_MIN = 1000
"""Reports an output needs on both sides to enter the point estimate of ε (the confidence
bounds use every output)."""


@dataclasses.dataclass(frozen=True)
class ClaimAudit:
    """One constraint: ``estimate`` (the largest point estimate of its ε over its comparisons,
    from the empirical frequencies of outputs with at least :data:`ESTIMATE_MIN` reports on each
    side), ``lower`` (the largest lower confidence bound of ε),
    ``contradicted`` comparisons, or ``audited = False`` for a claim the audit cannot test."""

    index: int
    name: str
    kind: str
    epsilon: float
    delta: float
    audited: bool
    comparisons: int = 0
    contradicted: int = 0
    estimate: float = 0.0
    lower: float = 0.0


@dataclasses.dataclass(frozen=True)
class AuditReport:
    samples: int
    confidence: float
    claims: tuple[ClaimAudit, ...]

    @property
    def contradicted(self) -> tuple[ClaimAudit, ...]:
        return tuple(c for c in self.claims if c.contradicted)

    def lines(self) -> list[str]:
        out = []
        for c in self.claims:
            head = f"constraints[{c.index}] ({c.name!r}, {c.kind}, ε={c.epsilon:g}, δ={c.delta:g})"
            if not c.audited:
                out.append(f"{head}: not audited (only pure and (ε, δ) claims are)")
            else:
                verdict = f"CONTRADICTED in {c.contradicted} of {c.comparisons}" if c.contradicted else \
                    f"consistent over {c.comparisons} comparisons"
                out.append(f"{head}: {verdict}; estimated ε {c.estimate:.4g}, lower bound {c.lower:.4g}")
        return out


def _intervals(counts: np.ndarray, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Clopper–Pearson ``(lower, upper)`` of each probability from ``counts`` out of ``n``."""
    from scipy.stats import beta

    lo = np.where(counts > 0, beta.ppf(alpha / 2, counts, n - counts + 1), 0.0)
    hi = np.where(counts < n, beta.ppf(1 - alpha / 2, counts + 1, n - counts), 1.0)
    return lo, hi


def audit(sampler, *, samples: int = 200_000, confidence: float = 0.999, seed: int = 0) -> AuditReport:
    """Audits ``sampler`` (a :class:`~diffpriv.deploy.Sampler`) against its certificate's pure
    and (ε, δ) claims (module docstring); ``samples`` reports per compared law; ``seed`` seeds
    the inputs drawn from an item's distribution (not the reports: those are the sampler's)."""
    from diffpriv.problems._blocks import MixtureBlock, PairBlock

    problem = sampler.problem
    rng = np.random.default_rng(seed)
    n_out = problem.shape[2]
    blocks = problem.blocks()
    laws: dict[tuple, np.ndarray] = {}

    def row(s: int, x: int) -> tuple:
        key = ("row", s, x)
        if key not in laws:
            laws[key] = np.bincount(sampler.sample(x, samples, profile=s), minlength=n_out)
        return key

    def mixture(s: int, w: np.ndarray) -> tuple:
        key = ("mix", s, w.tobytes())
        if key not in laws:
            nonzero = np.flatnonzero(w > 0)
            per_input = rng.multinomial(samples, w[nonzero] / w[nonzero].sum())
            counts = np.zeros(n_out, dtype=np.int64)
            for x, k in zip(nonzero, per_input, strict=True):
                if k:
                    counts += np.bincount(sampler.sample(int(x), int(k), profile=s), minlength=n_out)
            laws[key] = counts
        return key

    pairs: list[tuple[int, tuple, tuple, float, float]] = []  # (constraint, P key, Q key, ε, δ)
    for block in blocks:
        if not block.linear:
            continue
        for k in range(block.size):
            if isinstance(block, PairBlock):
                a, b = row(int(block.s[k]), int(block.a[k])), row(int(block.s[k]), int(block.b[k]))
            elif isinstance(block, MixtureBlock):
                a = mixture(int(block.sa[k]), np.asarray(block.wa[k], np.float64))
                b = mixture(int(block.sb[k]), np.asarray(block.wb[k], np.float64))
            else:
                continue
            pairs.append((block.constraint, a, b, float(block.eps[k]), float(block.delta)))

    alpha = (1 - confidence) / max(1, len(laws) * n_out)
    bounds = {key: _intervals(c, samples, alpha) for key, c in laws.items()}
    stats: dict[int, list] = {}
    for index, a, b, eps, delta in pairs:
        (lo_p, hi_p), (lo_q, hi_q) = bounds[a], bounds[b]
        scale = math.exp(min(eps, 700.0))
        if delta == 0:
            broken = bool(np.any(lo_p > scale * hi_q) or np.any(lo_q > scale * hi_p))
        else:
            broken = (np.maximum(0, lo_p - scale * hi_q).sum() > delta
                      or np.maximum(0, lo_q - scale * hi_p).sum() > delta)
        p_hat, q_hat = laws[a] / samples, laws[b] / samples
        both = (laws[a] >= ESTIMATE_MIN) & (laws[b] >= ESTIMATE_MIN)  # rare outputs: too noisy
        estimate = float(np.abs(np.log(p_hat[both]) - np.log(q_hat[both])).max(initial=0.0))
        with np.errstate(divide="ignore"):
            lower = float(max(np.log(lo_p / hi_q).max(initial=0.0), np.log(lo_q / hi_p).max(initial=0.0)))
        entry = stats.setdefault(index, [0, 0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += broken
        entry[2] = max(entry[2], estimate)
        entry[3] = max(entry[3], lower)
    claims = []
    for index, c in enumerate(problem.constraints):
        eps, delta = float(getattr(c, "epsilon", math.nan)), float(getattr(c, "delta", 0.0) or 0.0)
        if index in stats:
            n, broken, estimate, lower = stats[index]
            claims.append(ClaimAudit(index, c.name, c.kind, eps, delta, True, n, broken, estimate, lower))
        else:
            claims.append(ClaimAudit(index, c.name, c.kind, eps, delta, False))
    return AuditReport(samples, confidence, tuple(claims))
