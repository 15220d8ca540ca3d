"""Every constraint expanded into comparisons of two lifted output distributions.

The one representation that the LP reference, the JAX solvers and the certifier all read.
numpy only.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["Comparisons", "expand"]


@dataclasses.dataclass(frozen=True, eq=False)
class Comparisons:
    """Every constraint expanded to comparisons of two output distributions.

    Comparison ``k`` bounds the divergence between ``P_k = Σ_x wa[k,x] A[sa[k], x]`` and
    ``Q_k = Σ_x wb[k,x] A[sb[k], x]`` in both directions: the hockey-stick divergence
    ``Σ_y max(0, P − e^{eps[k]} Q)`` must be at most ``delta[k]`` (``delta = 0`` is the pure,
    per-output ratio bound). ``group[k]`` is the index of the constraint it comes from and
    ``scale[k]`` divides its level when reporting (``d(x, x')`` for extended DP, else 1).
    """

    sa: np.ndarray  # [K] int
    wa: np.ndarray  # [K, n_in]
    sb: np.ndarray  # [K] int
    wb: np.ndarray  # [K, n_in]
    eps: np.ndarray  # [K]
    delta: np.ndarray  # [K]
    scale: np.ndarray  # [K]
    group: np.ndarray  # [K] int

    def __post_init__(self):
        # Read-only copies: a Problem caches its comparisons, so no caller may change them.
        for f in dataclasses.fields(self):
            dtype = np.int64 if f.name in ("sa", "sb", "group") else np.float64
            a = np.array(getattr(self, f.name), dtype=dtype)
            a.setflags(write=False)
            object.__setattr__(self, f.name, a)

    @property
    def size(self) -> int:
        """``K``, the number of comparisons."""
        return int(self.sa.shape[0])


def expand(problem) -> Comparisons:
    """The comparisons of every constraint of ``problem`` (a :class:`~diffpriv.Problem`):
    DistP pairs of items, and LDP / XDP pairs of inputs in every profile (XDP scaled by
    ``d(x, x')``)."""
    ns, nx, _ = problem.shape
    eye = np.eye(nx)
    rows: list[tuple[int, np.ndarray, int, np.ndarray, float, float, float, int]] = []
    for g, c in enumerate(problem.constraints):
        if c.kind == "distp":
            for i, j in c.pairs:
                a, b = problem.items[i], problem.items[j]
                rows.append((a.profile, a.dist, b.profile, b.dist, c.epsilon, c.delta, 1.0, g))
            continue
        pairs = c.pairs if c.pairs is not None else [
            (x, x2) for x in range(nx) for x2 in range(x + 1, nx)
        ]
        d = problem.metric() if c.kind == "xdp" else None
        for s in range(ns):
            for x, x2 in pairs:
                if d is None:
                    rows.append((s, eye[x], s, eye[x2], c.epsilon, c.delta, 1.0, g))
                else:
                    scale = float(d[x, x2])
                    rows.append((s, eye[x], s, eye[x2], c.epsilon * scale, 0.0, scale, g))
    if not rows:
        z = np.zeros((0,))
        return Comparisons(z.astype(int), np.zeros((0, nx)), z.astype(int), np.zeros((0, nx)),
                           z, z, z, z.astype(int))
    sa, wa, sb, wb, eps, delta, scale, group = zip(*rows, strict=True)
    return Comparisons(
        sa=np.asarray(sa, dtype=np.int64),
        wa=np.stack(wa),
        sb=np.asarray(sb, dtype=np.int64),
        wb=np.stack(wb),
        eps=np.asarray(eps, dtype=np.float64),
        delta=np.asarray(delta, dtype=np.float64),
        scale=np.asarray(scale, dtype=np.float64),
        group=np.asarray(group, dtype=np.int64),
    )
