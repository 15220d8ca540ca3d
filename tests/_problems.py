"""The small problems several test modules build: labelled and line domains, randomized response's
k-label problem, a line with |i − j| loss, three random items on five inputs, and
geo-indistinguishability on a grid. Public API only; each builder is deterministic."""

import numpy as np

import diffpriv as dp


def labels(k: int, prefix: str = "v", coords=None) -> dp.Domain:
    """``k`` labels ``prefix0 … prefix{k−1}`` (with ``coords`` where given)."""
    return dp.Domain(tuple(f"{prefix}{i}" for i in range(k)), coords)


def line(n: int, prefix: str = "x", scale: float = 1.0) -> dp.Domain:
    """``n`` points ``prefix{i}`` on a line, at ``scale · i``."""
    return labels(n, prefix, scale * np.arange(n, dtype=float)[:, None])


def ldp_problem(k: int, eps: float, *, names=None) -> dp.Problem:
    """``k`` labels (``names`` or ``v0 … v{k−1}``), 0/1 loss, uniform prior, ``ε``-LDP: randomized
    response, with ``e^ε / (e^ε + k − 1)`` on the diagonal, is optimal."""
    dom = dp.Domain(tuple(names[:k])) if names is not None else labels(k)
    return dp.Problem(dom, dom, 1 - np.eye(k), np.ones(k) / k, constraints=(dp.LocalDP(epsilon=eps),))


def line_problem(n: int, *constraints, outputs: int | None = None, items=(), scale: float = 1.0,
                 prefix: str = "x") -> dp.Problem:
    """``n`` inputs on a line at ``scale · i``, uniform prior, the loss ``|i − j|`` in index units.

    ``outputs``: a count ``m`` of outputs ``y0 … y{m−1}`` spread evenly over ``[0, n − 1]``
    (times ``scale``); ``None``: the outputs are the inputs."""
    inputs = line(n, prefix, scale)
    at = np.arange(n, dtype=float) if outputs is None else np.linspace(0, n - 1, outputs)
    ys = inputs if outputs is None else labels(outputs, "y", scale * at[:, None])
    loss = np.abs(np.subtract.outer(np.arange(n, dtype=float), at))
    return dp.Problem(inputs, ys, loss, np.full((1, n), 1 / n), items=items, constraints=constraints)


ITEMS_IN, ITEMS_OUT = 5, 4
"""The inputs and outputs of :func:`three_items_problem`."""


def three_items_problem(constraints, *, objective="expected", coords: bool = True) -> dp.Problem:
    """5 inputs on a line (or bare labels), 4 outputs, three random items and a random loss
    (seed 7), uniform prior: the divergence families' test bed."""
    xs = line(ITEMS_IN) if coords else labels(ITEMS_IN, "x")
    rng = np.random.default_rng(7)
    items = tuple(dp.Item(f"item{i}", d) for i, d in enumerate(rng.dirichlet(np.ones(ITEMS_IN), size=3)))
    return dp.Problem(xs, labels(ITEMS_OUT, "y"), rng.random((ITEMS_IN, ITEMS_OUT)),
                      np.full((1, ITEMS_IN), 1 / ITEMS_IN), items=items, constraints=constraints,
                      objective=objective)


def geo_problem(n: int, eps: float = 0.5, *, prior_seed: int | None = None) -> dp.Problem:
    """Geo-indistinguishability (``ε``-extended DP between 4-neighbour cells) on an ``n × n`` grid
    of unit cells, Euclidean loss; the prior uniform, or Dirichlet(1) drawn with ``prior_seed``."""
    dom = dp.Domain.grid(n, n, 1.0)
    prior = (np.full(n * n, 1 / n**2) if prior_seed is None
             else np.random.default_rng(prior_seed).dirichlet(np.ones(n * n)))
    return dp.Problem(dom, dom, dom.distances(dom), prior,
                      constraints=(dp.ExtendedDP(eps, pairs=dp.problems.pairs_within(dom, 1.0)),))
