"""The relative gap every solver stops by and every result reports, free of JAX: the certify and
evaluate paths that report it import no solver."""

from __future__ import annotations

__all__ = ["GAP_FLOOR", "relative_gap"]

GAP_FLOOR = 1e-6
"""The least ``|bound|`` :func:`relative_gap` divides by, in the loss's units. A bound of 0 (every
row's cheapest output is free, and the multipliers have not raised it yet) certifies a table
only when its loss is at most ``gap_tol · 10⁻⁶``. The gap was absolute there, ``objective − 0 ≤
gap_tol``: on KL-DP between the cells of 4×4 and 5×5 grids with the prior on 4 and 5 cells
(optima 0.0041 and 0.0017 km by Clarabel), mirror-prox stopped ``"converged"`` after 200–400
steps with a bound of 0, its tables 26 % and 62 % above the optima. A floor of 10⁻⁹ made the
exact optimum of a budget every table meets (TV-DP at 1 on the Sacramento sales, 0 by HiGHS,
2·10⁻¹⁰ km once certified) read as a 20 % gap."""


def relative_gap(objective: float, bound: float) -> float:
    """``(objective − bound) / max(|bound|, GAP_FLOOR)``: the rule every solver stops by, on the
    device and on the host (:func:`diffpriv.solvers._pdhg.gap_to` is its JAX twin), and the gap
    results report; ``inf`` where there is no bound (``-inf``: a non-convex objective)."""
    if bound == float("-inf"):
        return float("inf")
    return (objective - bound) / max(abs(bound), GAP_FLOOR)
