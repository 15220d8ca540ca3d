"""``dp.compose``: the privacy of ``K`` reports through a certified table, claim by claim, from
the levels the certifier recomputes (:mod:`diffpriv.measures._composition`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from diffpriv.measures import _composition as rules
from diffpriv.problems._blocks import MixtureBlock
from diffpriv.problems._problem import Problem

__all__ = ["Composed", "compose"]

MAX_REPORTS = 10**6
"""Most reports :func:`compose` takes (the (ε, δ) rule sums ``K + 1`` terms per evaluation)."""
PLD_PAIRS = 512
"""Most comparisons of a claim whose own privacy-loss distributions :func:`compose` composes
(:func:`diffpriv.measures._composition.pld_epsilon`, one FFT per pair and direction); a claim with
more gets the optimal composition theorem's figure alone."""


@dataclasses.dataclass(frozen=True)
class Composed:
    """One claim of ``K`` reports.

    Attributes:
      name, kind: the constraint's.
      per_report: its certified level per report: ``{"epsilon": ε}`` (pure; per unit of distance for
        extended DP), ``{"epsilon": ε, "delta": δ}`` ((ε, δ): δ the certified level at the budget ε)
        or ``{"level": D}`` (a divergence).
      composed: the same for ``K`` reports (``epsilon``, ``delta``, or ``level``), plus, where a
        target δ' is asked, ``epsilon_at_delta``: an ε' whose δ_K(ε') is at most δ', the smaller of
        the optimal composition theorem's (``theorem_epsilon``: every mechanism meeting the claim)
        and that of the table's own privacy-loss distributions (``pld_epsilon``, where the claim
        has at most :data:`PLD_PAIRS` comparisons; ``None`` otherwise).
      rule: how (the rules of :mod:`diffpriv.measures._composition`); ``None``: no rule applies.
      exact: whether ``composed`` is the level of the product (else an upper bound on it).
      same_input: distribution privacy only: the pure level of ``K`` reports that all come from
        the same input, exact where the tuples of outputs are few enough to enumerate, else an
        upper bound (:func:`_same_input`); ``None`` elsewhere.
      same_input_exact: whether ``same_input`` is exact.
    """

    name: str
    kind: str
    per_report: dict
    composed: dict
    rule: str | None
    exact: bool
    same_input: float | None = None
    same_input_exact: bool = False

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


ENUMERATE = 10**7
"""Largest ``|X| · |Y|^K`` whose same-input laws :func:`_same_input` enumerates exactly."""


def _item_pairs(problem: Problem, index: int) -> list[tuple[int, int]]:
    """The pairs of items constraint ``index`` compares."""
    pairs = set()
    for block in problem.blocks():
        if isinstance(block, MixtureBlock) and block.constraint == index:
            pairs |= {(int(i), int(j)) for i, j in np.sort(block.items, axis=1)}
    return sorted(pairs)


def _same_input(problem: Problem, table: np.ndarray, index: int, k: int) -> tuple[float, bool] | None:
    """The pure level of ``k`` reports that all come from one input drawn from each compared
    item (its law ``Σ_x λ(x) Π_i A[x, y_i]`` over tuples of outputs): exact by enumerating the
    tuples where they are few (:data:`ENUMERATE`), else at most ``k`` times the largest
    ``|ln A[s, x, y] − ln A[s', x', y]|`` over ``x`` in one item's support and ``x'`` in the
    other's (a ratio of two mixtures is at most the largest ratio of their parts);
    ``(level, exact)``, or ``None`` where the constraint compares no items."""
    from diffpriv.certification._levels import pure_level

    pairs = _item_pairs(problem, index)
    if not pairs:
        return None
    ns, nx, ny = problem.shape
    worst = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        if nx * float(ny) ** k <= ENUMERATE:
            laws = {}
            for s in {problem.items[i].profile for pair in pairs for i in pair}:
                rows = np.ones((nx, 1))
                for _ in range(k):  # [X, Y^k]: each input's law of k reports
                    rows = (rows[:, :, None] * table[s][:, None, :]).reshape(nx, -1)
                laws[s] = rows
            for i, j in pairs:
                a, b = problem.items[i], problem.items[j]
                worst = max(worst, float(pure_level(a.dist @ laws[a.profile], b.dist @ laws[b.profile])))
            return worst, True
        logs = np.log(table)
        for i, j in pairs:
            a, b = problem.items[i], problem.items[j]
            la, lb = logs[a.profile][a.dist > 0], logs[b.profile][b.dist > 0]
            top = np.maximum(la.max(axis=0) - lb.min(axis=0), lb.max(axis=0) - la.min(axis=0))
            worst = max(worst, float(np.max(np.where(np.isnan(top), np.inf, top), initial=0.0)))
    return k * worst, False


def compose(problem: Problem, table, reports: int, *, delta: float | None = None) -> list[Composed]:
    """Each claim of ``problem`` for ``reports`` independent reports through ``table`` (``[S, X,
    Y]`` or a :class:`~diffpriv.Certificate`, whose table is taken), from the table's certified
    per-report levels; with ``delta``, also the least ε' whose δ_K(ε') is at most ``delta`` for
    pure and (ε, δ) claims between items or inputs (module docstring of
    :mod:`diffpriv.measures._composition`).

    Raises:
      ValueError: ``reports`` outside ``1 … 10⁶``, ``delta`` outside ``[0, 1]``, or a table of the
        wrong shape.
    """
    from diffpriv.certification._laws import output_laws
    from diffpriv.certification._summary import constraint_levels
    from diffpriv.problems._blocks import budgets

    if not (isinstance(reports, int | np.integer) and 1 <= reports <= MAX_REPORTS):
        raise ValueError(f"reports: must be an integer from 1 to {MAX_REPORTS:,}, got {reports!r}")
    if delta is not None and not 0 <= delta <= 1:
        raise ValueError(f"delta: must be in [0, 1], got {delta!r}")
    table = np.asarray(getattr(table, "table", table), np.float64)
    if table.shape != problem.shape:
        raise ValueError(f"table: expected shape {problem.shape}, got {table.shape}")
    k = int(reports)
    out = []
    blocks = problem.blocks()
    owner = budgets(blocks).constraint
    with np.errstate(all="ignore"):
        levels = constraint_levels(problem, table)

    def at_delta(c, eps: float, per_delta: float) -> dict:
        theorem = rules.dp_epsilon(eps, per_delta, k, delta)
        pld = None
        if np.count_nonzero(owner == c.index) <= PLD_PAIRS:  # the claim's own comparisons' laws
            P, Q = output_laws(table, tuple(b for b in blocks if b.constraint == c.index))
            pld = rules.pld_epsilon(P, Q, k, delta)
        best = theorem if pld is None else min(theorem, pld)
        return {"epsilon_at_delta": best, "theorem_epsilon": theorem, "pld_epsilon": pld}

    for c in levels:
        family = problem.constraints[c.index]
        divergence = getattr(family, "divergence", None)
        same = None, False
        if c.kind in ("distp", "ldp") and c.delta == 0:
            per, comp = {"epsilon": c.level}, {"epsilon": k * c.level, "delta": 0.0}
            rule, exact = "K·ε (pure levels add)", True
            if delta is not None:
                comp |= at_delta(c, c.level, 0.0)
        elif c.kind in ("distp", "ldp"):
            per = {"epsilon": c.epsilon, "delta": c.level}
            comp = {"epsilon": k * c.epsilon, "delta": rules.dp_delta(c.epsilon, c.level, k, k * c.epsilon)}
            rule, exact = "optimal composition (Kairouz, Oh & Viswanath 2015)", False
            if delta is not None:
                comp |= at_delta(c, c.epsilon, c.level)
        elif c.kind == "xdp":
            per, comp = {"epsilon": c.level}, {"epsilon": k * c.level, "delta": 0.0}
            rule, exact = "K·ε per unit of distance (pure levels add)", True
        elif c.kind in ("divergence_distp", "divergence_dp") and divergence in (*rules.ADDITIVE, "chi2",
                                                                              "hellinger", "tv"):
            value, exact = rules.divergence_level(divergence, c.level, k)
            per, comp = {"level": c.level}, {"level": value}
            rule = {"chi2": "(1 + χ²)^K − 1", "hellinger": "1 − (1 − H)^K",
                    "tv": "at most 1 − (1 − TV)^K"}.get(divergence, f"K·{divergence} (levels add)")
        else:
            per, comp, rule, exact = {"level": c.level}, {}, None, False
        if rule is not None and getattr(family, "pairs_of", "") == "items":
            same = _same_input(problem, table, c.index, k) or (None, False)
        out.append(Composed(c.name, c.kind, per, comp, rule, exact, *same))
    return out
