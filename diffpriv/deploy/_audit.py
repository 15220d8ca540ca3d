"""A black-box audit: do a sampler's reports contradict the certificate's privacy claims?

The audit sees only what a deployment sees: reports drawn by :meth:`Sampler.sample`. For every
law a pure or (ε, δ) comparison names — a row ``A[s, x]`` (local and extended DP: that input's
reports) or an item's lifted law (distribution privacy: inputs drawn from the item's
distribution, then their reports) — it draws ``N`` reports and bounds each output's
probability by a Clopper–Pearson interval (Clopper & Pearson 1934), at a joint confidence by
Bonferroni over every output of every law. A comparison's claim is **contradicted** when

* pure (``δ = 0``): some output has ``lower(P[y]) > e^ε·upper(Q[y])`` (either direction), that
  is when the lower confidence bound of ε, ``max_y ln(lower(P[y]) / upper(Q[y]))``, exceeds the
  claim;
* approximate: ``Σ_y max(0, lower(P[y]) − e^ε·upper(Q[y])) > δ`` (either direction), a lower
  confidence bound of the hockey-stick divergence.

Only these lower bounds decide. The plug-in estimates (the same quantities from the empirical
frequencies) are reported beside them. A claim that holds with equality is estimated above
itself in about half of its comparisons, so the largest estimate nearly always is (ε̂ = 1.03
against a certified 1): sampling noise, and :meth:`AuditReport.lines` says so, with the lower
bound that decides.

With probability at least the confidence, a sampler that draws the certified table contradicts
nothing; a sampler that deviates far enough (a bug in its lookup, a swapped table) is caught at
a number of samples that grows as the deviation shrinks. Divergence and Wasserstein claims are
listed as not audited; a certificate with none but those is not audited at all
(:attr:`AuditReport.audited` is empty), which is not a pass.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

__all__ = ["AuditReport", "ClaimAudit", "audit"]


ESTIMATE_MIN = 1000
"""Reports an output needs on both sides to enter the plug-in estimate of a pure claim's ε (the
confidence bounds use every output)."""


@dataclasses.dataclass(frozen=True)
class ClaimAudit:
    """One constraint, ``budget`` its claim as the certificate states it, ``epsilon`` and
    ``delta`` as the audit tests it (ε per unit of distance for extended DP; total variation
    ``≤ δ`` is (0, δ)). The audit measures a level: ε for a pure claim, the hockey-stick δ at the
    claim's ε for an (ε, δ) one. ``estimate`` is the largest plug-in level over its comparisons
    (for ε, from outputs with at least :data:`ESTIMATE_MIN` reports on each side), ``lower`` the
    largest lower confidence bound (what the samples prove, and what decides), ``contradicted``
    the comparisons whose lower bound exceeds the claim, ``above`` those whose plug-in estimate
    does while their lower bound does not (sampling noise); ``audited = False`` for a claim the
    audit cannot test."""

    index: int
    name: str
    kind: str
    budget: str
    epsilon: float
    delta: float
    audited: bool
    comparisons: int = 0
    contradicted: int = 0
    estimate: float = 0.0
    lower: float = 0.0
    above: int = 0

    @property
    def level(self) -> str:
        """What ``estimate`` and ``lower`` measure: ``"ε"``, or ``"δ(ε=…)"`` for an (ε, δ) claim."""
        return f"δ(ε={self.epsilon:g})" if self.delta else "ε"

    @property
    def claimed(self) -> float:
        """The claim's value of :attr:`level`: ε, or δ."""
        return self.delta if self.delta else self.epsilon


@dataclasses.dataclass(frozen=True)
class AuditReport:
    samples: int
    confidence: float
    claims: tuple[ClaimAudit, ...]

    @property
    def contradicted(self) -> tuple[ClaimAudit, ...]:
        return tuple(c for c in self.claims if c.contradicted)

    @property
    def audited(self) -> tuple[ClaimAudit, ...]:
        """The claims the samples tested; empty when none is pure or (ε, δ): nothing was audited."""
        return tuple(c for c in self.claims if c.audited)

    @property
    def not_audited(self) -> tuple[ClaimAudit, ...]:
        return tuple(c for c in self.claims if not c.audited)

    def lines(self) -> list[str]:
        """One line per claim (its verdict, plug-in estimate and lower confidence bound), and an
        indented line after a claim that holds although its plug-in estimate is above it."""
        out = []
        for c in self.claims:
            head = f"constraints[{c.index}] ({c.name!r}, {c.kind}, {c.budget})"
            if not c.audited:
                out.append(f"{head}: not audited (only pure and (ε, δ) claims are)")
                continue
            verdict = f"CONTRADICTED in {c.contradicted} of {c.comparisons}" if c.contradicted else \
                f"consistent over {c.comparisons} comparisons"
            out.append(f"{head}: {verdict}; plug-in {c.level} {c.estimate:.4g}, "
                       f"lower confidence bound {c.lower:.4g}")
            if c.above and not c.contradicted:
                out.append(f"  the plug-in {c.level} {c.estimate:.4g} is above the claimed "
                           f"{c.claimed:g} (in {c.above} of {c.comparisons} comparisons) by sampling "
                           f"noise: the samples prove only {c.level} ≥ {c.lower:.4g} (confidence "
                           f"{self.confidence:g}), which is what decides, and the claim allows it")
        return out


def _intervals(counts: np.ndarray, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Clopper–Pearson ``(lower, upper)`` of each probability from ``counts`` out of ``n``."""
    from scipy.stats import beta

    lo = np.where(counts > 0, beta.ppf(alpha / 2, counts, n - counts + 1), 0.0)
    hi = np.where(counts < n, beta.ppf(1 - alpha / 2, counts + 1, n - counts), 1.0)
    return lo, hi


def _hockey_stick(p_lo, p_hi, q_lo, q_hi, scale: float) -> float:
    """``max(Σ max(0, p_lo − e^ε q_hi), Σ max(0, q_lo − e^ε p_hi))``, ``scale = e^ε``: the
    hockey-stick in both directions, a lower bound of it from interval bounds of ``P`` and ``Q``
    (the plug-in value from point estimates, ``p_lo = p_hi``)."""
    return float(max(np.maximum(0, p_lo - scale * q_hi).sum(), np.maximum(0, q_lo - scale * p_hi).sum()))


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

    # (constraint, P key, Q key, ε, δ, the unit of ε: the distance for extended DP, else 1)
    pairs: list[tuple[int, tuple, tuple, float, float, float]] = []
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
            unit = float(block.scale[k]) if block.scaled and block.scale[k] > 0 else 1.0
            pairs.append((block.constraint, a, b, float(block.eps[k]), float(block.delta), unit))

    alpha = (1 - confidence) / max(1, len(laws) * n_out)
    bounds = {key: _intervals(c, samples, alpha) for key, c in laws.items()}
    stats: dict[int, list] = {}
    for index, a, b, eps, delta, unit in pairs:
        (lo_p, hi_p), (lo_q, hi_q) = bounds[a], bounds[b]
        p_hat, q_hat = laws[a] / samples, laws[b] / samples
        scale = math.exp(min(eps, 700.0))
        if delta == 0:
            broken = bool(np.any(lo_p > scale * hi_q) or np.any(lo_q > scale * hi_p))
            both = (laws[a] >= ESTIMATE_MIN) & (laws[b] >= ESTIMATE_MIN)  # rare outputs: too noisy
            estimate = float(np.abs(np.log(p_hat[both]) - np.log(q_hat[both])).max(initial=0.0)) / unit
            with np.errstate(divide="ignore"):
                lower = float(max(np.log(lo_p / hi_q).max(initial=0.0),
                                  np.log(lo_q / hi_p).max(initial=0.0))) / unit
            above = estimate > eps / unit
        else:
            lower = _hockey_stick(lo_p, hi_p, lo_q, hi_q, scale)
            broken = lower > delta
            estimate = _hockey_stick(p_hat, p_hat, q_hat, q_hat, scale)
            above = estimate > delta
        entry = stats.setdefault(index, [0.0, 0, 0, 0.0, 0.0, 0])
        entry[0] = max(entry[0], eps / unit)
        entry[1] += 1
        entry[2] += broken
        entry[3] = max(entry[3], estimate)
        entry[4] = max(entry[4], lower)
        entry[5] += above and not broken
    claims = []
    for index, c in enumerate(problem.constraints):
        delta = float(getattr(c, "delta", 0.0) or 0.0)
        if index in stats:
            eps, *found = stats[index]
            claims.append(ClaimAudit(index, c.name, c.kind, c.budget_text(), eps, delta, True, *found))
        else:
            eps = float(getattr(c, "epsilon", math.nan))
            claims.append(ClaimAudit(index, c.name, c.kind, c.budget_text(), eps, delta, False))
    return AuditReport(samples, confidence, tuple(claims))
