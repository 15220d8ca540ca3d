"""Pairs of inputs within a radius: the neighbour relation of extended DP on coordinates.

Outside the specification module because it uses scipy's k-d tree: the certifier, which
imports the specification, stays numpy-only.
"""

from __future__ import annotations

import numpy as np

from diffpriv.problems._checks import SpecError
from diffpriv.problems._problem import Domain

__all__ = ["count_pairs_within", "pairs_within"]


def _tree(domain: Domain, radius: float, what: str):
    if domain.coords is None:
        raise SpecError(f"domain.{what}: needs coordinates")
    if not np.isfinite(radius) or radius < 0:
        raise SpecError(f"domain.{what}: radius must be finite and >= 0, got {radius!r}")
    import scipy.spatial  # (0.5 s to import: only where pairs are found)

    return scipy.spatial.cKDTree(domain.coords), radius * (1 + 1e-9)


def count_pairs_within(domain: Domain, radius: float) -> int:
    """How many pairs :func:`pairs_within` would list, without listing them."""
    tree, r = _tree(domain, radius, "count_pairs_within")
    return (int(tree.count_neighbors(tree, r)) - domain.size) // 2


def pairs_within(domain: Domain, radius: float) -> tuple[tuple[int, int], ...]:
    """Every pair ``(i, j)``, ``i < j``, of ``domain``'s points at most ``radius`` apart (with a
    relative ``10^-9`` of slack for rounding), sorted. On :meth:`Domain.grid` cells of side
    ``c``, radius ``c`` gives the 4-neighbour pairs and ``c·√2`` the 8-neighbour ones (the
    config's ``neighbours = "grid4"``, ``"grid8"``). Found by a k-d tree: no ``[n, n]`` distance
    matrix is formed.

    >>> import diffpriv as dp
    >>> dp.problems.pairs_within(dp.Domain.grid(2, 2), 1.0)
    ((0, 1), (0, 2), (1, 3), (2, 3))
    """
    tree, r = _tree(domain, radius, "pairs_within")
    found = np.sort(tree.query_pairs(r, output_type="ndarray").reshape(-1, 2), axis=1)
    found = found[np.lexsort((found[:, 1], found[:, 0]))]
    return tuple((int(i), int(j)) for i, j in found)
