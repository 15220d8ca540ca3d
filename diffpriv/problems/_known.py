"""Problems with known answers, and a seeded generator of random problems.

Every solver is tested against these: k-ary randomized response is the exact optimum of k-ary
local DP with the 0/1 loss, and the two-profile Bernoulli problem is LP (4) of the
profile-based privacy paper (Geumlek & Chaudhuri, seed 002), whose optimum has a closed form.
numpy only.
"""

from __future__ import annotations

import math

import numpy as np

from diffpriv.problems._problem import DistP, Domain, ExtendedDP, Item, LocalDP, Problem

__all__ = [
    "randomized_response",
    "k_rr_problem",
    "k_rr_loss",
    "bernoulli_two_profile_problem",
    "bernoulli_flip_alpha",
    "observation10_alpha",
    "random_problem",
]


def randomized_response(k: int, eps: float) -> np.ndarray:
    """The ``[k, k]`` k-ary randomized response table: ``e^ε/(e^ε+k−1)`` on the diagonal,
    ``1/(e^ε+k−1)`` elsewhere."""
    e = math.exp(eps)
    table = np.full((k, k), 1.0 / (e + k - 1))
    np.fill_diagonal(table, e / (e + k - 1))
    return table


def k_rr_problem(k: int, eps: float) -> Problem:
    """ε-local DP on ``k`` symbols (all pairs), 0/1 loss, uniform prior, expected loss.

    For ``ε > 0`` its unique optimum is :func:`randomized_response` with loss :func:`k_rr_loss`:
    summing ``A[y, y] ≤ e^ε A[x, y]`` over the off-diagonal of each row gives
    ``Σ_x A[x, x] ≤ k e^ε / (e^ε + k − 1)``, with equality only for randomized response.
    """
    dom = Domain(tuple(str(i) for i in range(k)))
    return Problem(
        inputs=dom,
        outputs=dom,
        loss=1.0 - np.eye(k),
        prior=np.full(k, 1.0 / k),
        constraints=(LocalDP(epsilon=eps),),
    )


def k_rr_loss(k: int, eps: float) -> float:
    """The optimal expected 0/1 loss of :func:`k_rr_problem`: ``(k − 1)/(e^ε + k − 1)``."""
    return (k - 1) / (math.exp(eps) + k - 1)


def bernoulli_two_profile_problem(p_i: float, p_j: float, eps: float) -> Problem:
    """LP (4) of seed 002: one bit, two Bernoulli profiles, one flipping table for both.

    The mechanism does not see the profile, so the problem has a single profile ``"all"`` with
    two protected items ``Bernoulli(p_i)`` and ``Bernoulli(p_j)`` (as ``[1 − p, p]`` on
    ``X = Y = {0, 1}``) and pure ε-DistP between them; 0/1 loss; objective ``"worst"``, i.e.
    minimise ``max(a, b)`` for the flip probabilities ``a = A[0, 1]``, ``b = A[1, 0]``.

    Why the optimum is the symmetric flip α of (4) (:func:`bernoulli_flip_alpha`): with
    ``P_u[1] = a + p_u (1 − a − b)`` the constraint ``P_u[y] ≤ e^ε P_v[y]`` reads
    ``(K + c) a + c b ≥ c`` for ``y = 1`` with ``K = e^ε − 1`` and ``c = p_u − e^ε p_v``
    (``y = 0``: the same with ``a ↔ b`` and ``c = (1 − p_u) − e^ε (1 − p_v)``). If ``c ≤ 0`` it
    holds whenever ``a + b ≤ 1``; if ``c > 0`` both coefficients are positive, so it stays true
    when ``a`` or ``b`` grows. The constant table ``a = b = 1/2`` is feasible, so an optimum
    has ``t = max(a, b) ≤ 1/2``, and ``(t, t)`` dominates ``(a, b)`` with ``2t ≤ 1``: it is
    feasible with the same value. Hence min max(a, b) = the least feasible symmetric flip, the
    α of (4).
    """
    dom = Domain(("0", "1"))
    items = (Item("i", np.array([1.0 - p_i, p_i])), Item("j", np.array([1.0 - p_j, p_j])))
    return Problem(
        inputs=dom,
        outputs=dom,
        loss=1.0 - np.eye(2),
        prior=np.array([0.5, 0.5]),
        items=items,
        constraints=(DistP(pairs=((0, 1),), epsilon=eps),),
        objective="worst",
    )


def bernoulli_flip_alpha(p_i: float, p_j: float, eps: float) -> float:
    """The exact optimum α of LP (4) of seed 002, for every ``p_i, p_j ∈ [0, 1]`` and ``ε ≥ 0``.

    At a symmetric flip α ≤ 1/2 the constraint ``P_u[y] ≤ e^ε P_v[y]`` reads
    ``α (K + 2c) ≥ c`` with ``K = e^ε − 1`` and ``c = p_u − e^ε p_v`` (``y = 1``) or
    ``c = (1 − p_u) − e^ε (1 − p_v)`` (``y = 0``): it binds only if ``c > 0`` and then gives
    ``α ≥ c/(2c + K)``. So α = max(0, c/(2c + K) over the four (u, v, y) with c > 0).
    """
    k = math.expm1(eps)
    e = math.exp(eps)
    alpha = 0.0
    for u, v in ((p_i, p_j), (p_j, p_i)):
        for c in (u - e * v, (1.0 - u) - e * (1.0 - v)):
            if c > 0:
                alpha = max(alpha, c / (2.0 * c + k))
    return alpha


def observation10_alpha(p_i: float, p_j: float, eps: float) -> float:
    """The closed form (7) of Observation 10 (seed 002), as printed:

    ``max{0, (p_j − e^ε p_i)/(2(p_j − e^ε p_i) − (1 − e^ε)),
    (p_i − e^ε p_j + e^ε − 1)/(2(p_i − e^ε p_j) + e^ε − 1)}`` (a term with a zero denominator
    is skipped).

    Where it is exact. With ``K = e^ε − 1``, ``c₁ = p_j − e^ε p_i`` and
    ``c₀ = (1 − p_i) − e^ε (1 − p_j)`` the two terms are ``c₁/(2c₁ + K)`` and ``c₀/(2c₀ + K)``
    (the printed third term is ``(−c₀)/(−(2c₀ + K))``). For ``p_i ≤ p_j`` these are the only two
    constraints that can bind (see :func:`bernoulli_flip_alpha`), each when its ``c > 0``. So (7)
    is the exact optimum of (4) when ``p_i ≤ p_j``, ``2c₁ + K > 0`` and ``2c₀ + K > 0`` — i.e. the
    first printed denominator is positive and the second printed denominator is *negative*
    (it is negative whenever that term binds). Outside that region a term with ``c < −K/2`` is a
    spurious positive number (``p_i = p_j = 0.8``, ``ε = 1`` gives 4/3 where α = 0), and for
    ``p_i > p_j`` the binding constraints are missing (``p_i = 1``, ``p_j = 0`` gives
    ``e^ε/(e^ε+1)`` instead of ``1/(e^ε+1)``). For ``p_i ≤ p_j`` it is always an upper bound on α,
    as the paper states (its hypothesis ``p_j ≤ e^ε p_j`` is vacuous).
    """
    e = math.exp(eps)
    terms = [
        (p_j - e * p_i, 2.0 * (p_j - e * p_i) - (1.0 - e)),
        (p_i - e * p_j + e - 1.0, 2.0 * (p_i - e * p_j) + e - 1.0),
    ]
    return max([0.0] + [num / den for num, den in terms if den != 0.0])


def _choose(rng: np.random.Generator, given, options):
    """``given`` if set, else a draw from ``options`` (the draw is made either way)."""
    draw = options[int(rng.integers(len(options)))]
    return draw if given is None else given


def _distribution(rng: np.random.Generator, n: int, sparse: bool) -> np.ndarray:
    """A Dirichlet distribution on ``n`` points, on a random subset of them if ``sparse``."""
    concentration = rng.uniform(0.3, 2.0)
    weights = rng.gamma(concentration, size=n) + 1e-12
    size = int(rng.integers(1, n + 1))
    if sparse:
        weights[rng.permutation(n)[size:]] = 0.0
    return weights / weights.sum()


def random_problem(
    seed: int,
    *,
    n_in: int | None = None,
    n_out: int | None = None,
    outputs: str | None = None,
    loss: str | None = None,
    n_profiles: int | None = None,
    n_pairs: int | None = None,
    extra: str | None = None,
    epsilon: float | None = None,
    delta: float = 0.0,
    sparse: bool | None = None,
    objective: str = "expected",
) -> Problem:
    """A seeded random problem for the optimality benchmark; keywords force a family.

    Each aspect draws from its own stream of ``seed``, so forcing one keyword leaves the others
    as they would have been (up to sizes it changes).

    Args:
      seed: the seed.
      n_in: ``|X|`` (default: uniform in 3..30); the inputs are random points in the unit square.
      n_out: ``|Y|`` (only with ``outputs="grid"``; default: a grid of at most 30 cells).
      outputs: ``"same"`` (Y = X) or ``"grid"`` (a grid over the unit square).
      loss: ``"euclidean"``, ``"hamming"`` (needs Y = X) or ``"random"`` (uniform in [0, 1]).
      n_profiles: 1, 2 or 3. With one profile the protected items are ``2 n_pairs`` random
        distributions compared in disjoint pairs and the prior is a random distribution. With
        more, each profile has one item (its profile distribution), the pairs are edges between
        profiles (profile-based privacy) and ``π[s, x] = w_s λ_s[x]`` with random weights ``w``.
      n_pairs: number of protected pairs, 1..3 (at most the number of pairs of profiles).
      extra: ``"none"``, ``"ldp"`` (ε_L-local DP on all pairs, ε_L in [0.5, 4]) or ``"xdp"``
        (extended DP on all pairs, ε_X in [1, 8] per unit distance).
      epsilon: the DistP budget (default uniform in [0.1, 3]).
      delta: the DistP δ (pure by default).
      sparse: whether item distributions may have zeros (default: with probability 0.3 each).
      objective: the objective, as for :class:`~diffpriv.Problem` (``"expected"`` by default).

    Every generated problem is feasible: it has no support mask, and the constant table
    ``A[s, x, :] = ν`` gives every item and every input the same output law ``ν``, so every
    divergence is 0.
    """
    streams = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(6)]
    shape_rng, geo_rng, loss_rng, item_rng, budget_rng, prior_rng = streams

    n_in = int(_choose(shape_rng, n_in, list(range(3, 31))))
    if loss == "hamming" and outputs == "grid":
        raise ValueError("random_problem: the hamming loss needs outputs='same'")
    same_first = ["same", "same", "grid"]
    outputs = _choose(shape_rng, outputs, ["same"] if loss == "hamming" else same_first)
    if n_out is not None and outputs == "same" and n_out != n_in:
        raise ValueError(f"random_problem: outputs='same' needs n_out == n_in, got {n_out}")
    loss_options = ["euclidean", "euclidean", "hamming", "random"]
    if outputs == "grid":
        loss_options = ["euclidean", "euclidean", "random"]
    loss = _choose(shape_rng, loss, loss_options)
    n_profiles = int(_choose(shape_rng, n_profiles, [1, 1, 2, 3]))
    max_pairs = 3 if n_profiles == 1 else n_profiles * (n_profiles - 1) // 2
    n_pairs = int(_choose(shape_rng, n_pairs, list(range(1, max_pairs + 1))))
    if not 1 <= n_pairs <= max_pairs:
        raise ValueError(f"random_problem: n_pairs must be in 1..{max_pairs}, got {n_pairs}")
    extra = _choose(shape_rng, extra, ["none", "none", "ldp", "xdp"])
    if extra not in ("none", "ldp", "xdp"):
        raise ValueError(f"random_problem: extra must be 'none', 'ldp' or 'xdp', got {extra!r}")

    inputs = Domain(tuple(f"x{i}" for i in range(n_in)), geo_rng.random((n_in, 2)))
    if outputs == "same":
        out_dom = inputs
    else:
        if n_out is None:
            rows = int(geo_rng.integers(2, 6))
            cols = int(geo_rng.integers(2, min(6, 30 // rows) + 1))
        else:
            rows = max(r for r in range(1, math.isqrt(n_out) + 1) if n_out % r == 0)
            cols = n_out // rows
        out_dom = Domain.grid(rows, cols, cell=1.0 / max(rows, cols))

    if loss == "euclidean":
        loss_matrix = inputs.distances(out_dom)
    elif loss == "hamming":
        loss_matrix = 1.0 - np.eye(n_in)
    elif loss == "random":
        loss_matrix = loss_rng.random((n_in, out_dom.size))
    else:
        raise ValueError(f"random_problem: unknown loss {loss!r}")

    n_items = 2 * n_pairs if n_profiles == 1 else n_profiles
    dists = [
        _distribution(item_rng, n_in, bool(item_rng.random() < 0.3) if sparse is None else sparse)
        for _ in range(n_items)
    ]
    if n_profiles == 1:
        items = tuple(Item(f"item{i}", d) for i, d in enumerate(dists))
        pairs = tuple((2 * i, 2 * i + 1) for i in range(n_pairs))
        prior = prior_rng.dirichlet(np.ones(n_in))[None, :]
        profiles: tuple[str, ...] = ("all",)
    else:
        items = tuple(Item(f"profile{s}", d, profile=s) for s, d in enumerate(dists))
        pairs = ((0, 1), (1, 2), (0, 2))[:n_pairs]
        prior = prior_rng.dirichlet(np.ones(n_profiles))[:, None] * np.stack(dists)
        profiles = tuple(f"p{s}" for s in range(n_profiles))

    eps = budget_rng.uniform(0.1, 3.0)
    eps_ldp = budget_rng.uniform(0.5, 4.0)
    eps_xdp = budget_rng.uniform(1.0, 8.0)
    eps = eps if epsilon is None else epsilon
    constraints: list = [DistP(pairs=pairs, epsilon=eps, delta=delta)]
    if extra == "ldp":
        constraints.append(LocalDP(epsilon=eps_ldp))
    elif extra == "xdp":
        constraints.append(ExtendedDP(epsilon=eps_xdp))

    return Problem(
        inputs=inputs,
        outputs=out_dom,
        loss=loss_matrix,
        prior=prior / prior.sum(),
        items=items,
        constraints=tuple(constraints),
        profiles=profiles,
        objective=objective,
    )
