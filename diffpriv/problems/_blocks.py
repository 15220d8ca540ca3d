"""Typed comparison blocks: what every constraint expands into (numpy only).

A privacy constraint bounds a divergence between two output laws, many times over. A *block*
holds ``K`` such comparisons of one constraint, all of one shape, as index or weight arrays —
never as dense rows over the whole table:

* :class:`PairBlock` compares two **rows** of the table, ``P_k = A[s_k, a_k]`` and
  ``Q_k = A[s_k, b_k]`` (local and extended DP: pairs of adjacent inputs). Its memory is
  ``O(K)``; solvers apply it by gathering rows and scatter-adding the transpose.
* :class:`MixtureBlock` compares two **lifted laws**, ``P_k = Σ_x ŵa[k, x] A[sa_k, x]`` with
  ``ŵa = wa / Σ wa`` (and ``Q_k`` likewise): distribution privacy between protected items,
  profile-graph edges. Its memory is ``O(K · n_in)``; solvers apply it densely.

Every block carries the divergence its comparisons are measured in (``"max"``: the pure bound
``max_y |ln P − ln Q| ≤ ε``; ``"hockey_stick"``: ``Σ_y max(0, P − e^ε Q) ≤ δ`` both ways; or
``D(P‖Q) ≤ ε`` for one of the divergences of :mod:`diffpriv.measures._divergences` —
``"kl"``, ``"reverse_kl"``, ``"tv"``, ``"chi2"``, ``"hellinger"``, ``"renyi"`` with its order
``alpha`` — in both directions unless ``directed``), its budgets, the scale its level is reported
in (``d(a, b)`` for extended DP, ``W(λ_a, λ_b)`` for extended DistP: the level is ``ε`` per unit
of distance), and its provenance: the index of the constraint it comes from and,
per comparison, what is compared (:meth:`describe`). Nothing depends on the order in which
blocks were built. Only the max-divergence and the hockey-stick in both directions are linear in
the table (:attr:`PairBlock.linear`); the linear solvers refuse the other blocks.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, NamedTuple

import numpy as np

from diffpriv.measures._divergences import DIVERGENCES as MEASURES
from diffpriv.measures._divergences import NAMES

__all__ = ["DIVERGENCES", "PairBlock", "MixtureBlock", "Block", "Budgets", "budgets", "vacuous"]

DIVERGENCES = ("max", "hockey_stick", *(n for n in NAMES if n != "max"), "wasserstein")
"""Divergences a block can be measured in (the first two are linear in the table; the others of
:data:`diffpriv.measures._divergences.NAMES`, and Wasserstein)."""

LINEAR = ("max", "hockey_stick")


def _freeze(block, ints: tuple[str, ...], floats: tuple[str, ...]) -> None:
    """Read-only copies of a block's arrays (a Problem caches its blocks), ``delta`` as a float,
    and the divergence checked against it."""
    for names, dtype in ((ints, np.int64), (floats, np.float64)):
        for name in names:
            a = np.array(getattr(block, name), dtype=dtype)
            a.setflags(write=False)
            object.__setattr__(block, name, a)
    object.__setattr__(block, "delta", float(block.delta))
    if block.ground is not None:
        ground = np.array(block.ground, dtype=np.float64)
        ground.setflags(write=False)
        object.__setattr__(block, "ground", ground)
    _check_divergence(block.divergence, block.delta, block.alpha, block.directed)
    if (block.divergence == "wasserstein") != (block.ground is not None):
        raise ValueError("divergence: a ground metric goes with 'wasserstein' (and only with it)")


def _check_divergence(divergence: str, delta: float, alpha, directed: bool) -> None:
    if divergence not in DIVERGENCES:
        raise ValueError(f"divergence: must be one of {DIVERGENCES}, got {divergence!r}")
    if (divergence == "hockey_stick") != (delta != 0):
        raise ValueError(f"divergence: {divergence!r} does not match delta = {delta!r}")
    if (divergence in ("renyi", "wasserstein")) != (alpha is not None):
        raise ValueError(f"divergence: {divergence!r} with alpha = {alpha!r}")
    if directed and divergence == "hockey_stick":
        raise ValueError("divergence: the hockey-stick is bounded in both directions")


class _Measure:
    """What the blocks share about the divergence they are measured in."""

    @property
    def linear(self) -> bool:
        """Whether the comparisons are linear constraints on the table (max-divergence or
        hockey-stick, both directions): what the LP and PDHG solve."""
        return self.divergence in LINEAR and not self.directed


@dataclasses.dataclass(frozen=True, eq=False)
class PairBlock(_Measure):
    """``K`` comparisons of two rows of one profile: ``P_k = A[s_k, a_k]``, ``Q_k = A[s_k, b_k]``.

    Attributes:
      constraint: index of the constraint in ``problem.constraints``.
      s, a, b: ``[K]`` int64 profile and the two inputs of each comparison.
      eps: ``[K]`` the exponent budget of each comparison (``ε · d(a, b)`` for extended DP).
      scale: ``[K]`` the unit the level is reported in (``d(a, b)`` for extended DP, else 1).
      delta: the δ of every comparison (0 for the pure bound).
      divergence: ``"hockey_stick"`` (δ > 0), ``"max"`` or another divergence of
        :data:`DIVERGENCES` (δ = 0).
      alpha: the Rényi order (``"renyi"``), or the Wasserstein order ``μ ≥ 1``
        (``"wasserstein"``: ``W_μ(P, Q) ≤ ε`` under ``ground``).
      directed: bound ``D(P‖Q)`` only (else both directions).
      scaled: whether ``scale`` is a distance (reported in the witness).
      ground: ``[n_out, n_out]`` the ground metric of the outputs (``"wasserstein"`` only).
    """

    constraint: int
    s: np.ndarray
    a: np.ndarray
    b: np.ndarray
    eps: np.ndarray
    scale: np.ndarray
    delta: float = 0.0
    divergence: str = "max"
    alpha: float | None = None
    directed: bool = False
    scaled: bool = False
    ground: np.ndarray | None = None
    kind: ClassVar[str] = "pair"

    def __post_init__(self):
        _freeze(self, ("s", "a", "b"), ("eps", "scale"))

    @property
    def size(self) -> int:
        """``K``, the number of comparisons."""
        return int(self.s.shape[0])

    def rows(self, n_in: int) -> tuple[np.ndarray, np.ndarray]:
        """``([K], [K])`` the two rows of each comparison in the table flattened to
        ``[n_profiles · n_in, n_out]``."""
        return self.s * n_in + self.a, self.s * n_in + self.b

    def describe(self, k: int, problem) -> dict[str, Any]:
        """What comparison ``k`` compares, in the problem's labels."""
        out: dict[str, Any] = {
            "profile": problem.profiles[int(self.s[k])],
            "inputs": [problem.inputs.labels[int(self.a[k])], problem.inputs.labels[int(self.b[k])]],
        }
        if self.scaled:
            out["distance"] = float(self.scale[k])
        return out


@dataclasses.dataclass(frozen=True, eq=False)
class MixtureBlock(_Measure):
    """``K`` comparisons of two lifted laws of protected items.

    ``P_k = Σ_x (wa[k, x] / Σ wa[k]) · A[sa_k, x]`` and ``Q_k`` likewise with ``sb``, ``wb``.

    Attributes:
      constraint: index of the constraint in ``problem.constraints``.
      sa, sb: ``[K]`` int64 profiles of the two sides.
      wa, wb: ``[K, n_in]`` non-negative weights (item distributions).
      items: ``[K, 2]`` int64 the two items compared (indices into ``problem.items``).
      eps: ``[K]`` exponent budgets.
      scale: ``[K]`` the unit the level is reported in (``W(λ_a, λ_b)`` for extended DistP,
        else 1).
      delta: the δ of every comparison (0 for the pure bound).
      divergence, alpha, directed, ground: as for :class:`PairBlock`.
      scaled: whether ``scale`` is a distance (reported in the witness).
    """

    constraint: int
    sa: np.ndarray
    wa: np.ndarray
    sb: np.ndarray
    wb: np.ndarray
    items: np.ndarray
    eps: np.ndarray
    scale: np.ndarray
    delta: float = 0.0
    divergence: str = "max"
    alpha: float | None = None
    directed: bool = False
    scaled: bool = False
    ground: np.ndarray | None = None
    kind: ClassVar[str] = "mixture"

    def __post_init__(self):
        _freeze(self, ("sa", "sb", "items"), ("wa", "wb", "eps", "scale"))

    @property
    def size(self) -> int:
        """``K``, the number of comparisons."""
        return int(self.sa.shape[0])

    def describe(self, k: int, problem) -> dict[str, Any]:
        """What comparison ``k`` compares, in the problem's labels."""
        i, j = (int(v) for v in self.items[k])
        a, b = problem.items[i], problem.items[j]
        out: dict[str, Any] = {"items": [a.name, b.name],
                               "profiles": [problem.profiles[a.profile], problem.profiles[b.profile]]}
        if self.scaled:
            out["distance"] = float(self.scale[k])
        return out


Block = PairBlock | MixtureBlock


class Budgets(NamedTuple):
    """Per-comparison arrays of a tuple of blocks, in block order (``K`` = total size).

    ``eps``, ``delta``, ``scale``: ``[K]`` float64; ``constraint``: ``[K]`` the constraint each
    comparison belongs to; ``block``, ``local``: ``[K]`` which block and which comparison in it;
    ``divergent``: ``[K]`` bool, measured in a divergence other than the max-divergence and the
    hockey-stick in both directions (its level is ``ComparisonLevels.divergence``).
    """

    eps: np.ndarray
    delta: np.ndarray
    scale: np.ndarray
    constraint: np.ndarray
    block: np.ndarray
    local: np.ndarray
    divergent: np.ndarray

    @property
    def size(self) -> int:
        return int(self.eps.shape[0])


def budgets(blocks: tuple[Block, ...]) -> Budgets:
    """The per-comparison budgets of ``blocks`` (:class:`Budgets`), concatenated in order."""
    def cat(parts, dtype):
        return np.concatenate([np.asarray(p, dtype=dtype) for p in parts]) if parts else \
            np.zeros(0, dtype=dtype)

    return Budgets(
        eps=cat([b.eps for b in blocks], np.float64),
        delta=cat([np.full(b.size, b.delta) for b in blocks], np.float64),
        scale=cat([b.scale for b in blocks], np.float64),
        constraint=cat([np.full(b.size, b.constraint) for b in blocks], np.int64),
        block=cat([np.full(b.size, i) for i, b in enumerate(blocks)], np.int64),
        local=cat([np.arange(b.size) for b in blocks], np.int64),
        divergent=cat([np.full(b.size, not b.linear) for b in blocks], bool),
    )


def divergence_kinds(blocks: tuple[Block, ...]) -> tuple[tuple[str, float | None], ...]:
    """The nonlinear divergences ``(name, α)`` of ``blocks``, each once, in order."""
    return tuple(dict.fromkeys((b.divergence, b.alpha) for b in blocks if not b.linear))


def row_divergences(blocks: tuple[Block, ...]) -> bool:
    """Whether ``blocks`` bound scalar divergences between pairs of rows beside linear bounds
    between item laws only: at least one :class:`PairBlock` in a divergence (not Wasserstein, not
    the max-divergence) or the hockey-stick, every nonlinear block such a pair block, every linear
    one a :class:`MixtureBlock` or a hockey-stick pair block. Each comparison then has one scalar
    multiplier per direction (mirror-prox's problems: :func:`diffpriv.solvers._mirror.applies`)."""
    def scalar_pair(b) -> bool:
        return isinstance(b, PairBlock) and (b.divergence == "hockey_stick" if b.linear
                                             else b.divergence not in ("wasserstein", "max"))

    return any(scalar_pair(b) for b in blocks) and all(
        scalar_pair(b) or (b.linear and isinstance(b, MixtureBlock)) for b in blocks)


def vacuous(block: Block) -> np.ndarray:
    """``[K]`` bool: the comparisons of ``block`` that every pair of laws meets, whatever the
    table: a hockey-stick at ``δ ≥ 1`` (``Σ_y max(0, P − e^ε Q) ≤ Σ_y P = 1``), a divergence
    bounded by 1 (TV, squared Hellinger) at a budget ``≥ 1``, a Wasserstein budget at least the
    ground metric's largest distance (``W_μ(P, Q)`` never exceeds it)."""
    if block.divergence == "hockey_stick":
        return np.full(block.size, block.delta >= 1.0)
    if block.divergence == "wasserstein":
        return block.eps >= np.max(block.ground, initial=0.0)
    if block.divergence in MEASURES and MEASURES[block.divergence].bounded:
        return block.eps >= 1.0
    return np.zeros(block.size, bool)
