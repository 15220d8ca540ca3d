"""The certifier goes over the comparisons in chunks (``_laws.CHUNK``): results are bit-identical
to one pass over all the laws at once, and memory stays near the table's size.

Tolerances: none — every comparison is exact (``np.array_equal``, ``==``).
"""

import tracemalloc

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.certification import (
    _laws,
    comparison_levels,
    constraint_levels,
    delta_level,
    identical_rows,
    output_laws,
    pure_level,
    repair,
    tight_epsilon,
)
from diffpriv.problems._blocks import budgets
from tests._problems import geo_problem

WHOLE = 2**62  # one chunk per block


def mixed_blocks_problem(rng, nx=5, ny=6):
    """Two profiles; pair blocks (LDP pure and approximate, extended DP) and mixture blocks
    (DistP pure and approximate, a point item among dense ones)."""
    X = dp.Domain.grid(1, nx)
    Y = dp.Domain.grid(1, ny, cell=nx / ny)
    dists = [rng.dirichlet(np.ones(nx)) for _ in range(3)] + [np.eye(nx)[rng.integers(nx)]]
    items = tuple(dp.Item(f"i{i}", d, profile=i % 2) for i, d in enumerate(dists))
    constraints = (dp.LocalDP(1.0), dp.LocalDP(0.5, delta=0.05, name="ldp approx"),
                   dp.ExtendedDP(0.8), dp.DistP(((0, 1), (1, 2), (2, 3)), 0.4),
                   dp.DistP(((0, 3), (1, 3)), 0.2, delta=0.02, name="distp approx"))
    return dp.Problem(X, Y, X.distances(Y), rng.dirichlet(np.ones(2 * nx)).reshape(2, nx),
                      items=items, constraints=constraints, profiles=("a", "b"))


def random_table(problem, rng):
    """A perturbed geometric table that violates its budgets, with equal rows and a hole."""
    A = np.exp(-3.0 * problem.loss * rng.uniform(0.3, 1.7, problem.shape))
    A[0, 3] = A[0, 1]  # identical rows: levels exactly 0
    A[1, 2, 0] = 0.0  # a hole: infinite pure levels
    return A / A.sum(axis=-1, keepdims=True)


def all_at_once(problem, table):
    """The levels from every law at once (the certifier before chunking)."""
    blocks = problem.blocks()
    bud = budgets(blocks)
    P, Q = output_laws(table, blocks)
    same = identical_rows(table, blocks)
    Q[same] = P[same]
    pure = np.where(same, 0.0, pure_level(P, Q))
    at_delta = pure.copy()
    approx = bud.delta > 0
    at_delta[approx] = tight_epsilon(P[approx], Q[approx], bud.delta[approx])
    return {"P": P, "Q": Q, "pure": pure, "delta": np.where(same, 0.0, delta_level(P, Q, bud.eps)),
            "eps_at_delta": np.where(same, 0.0, at_delta)}


@pytest.mark.parametrize("chunk", [1, 13, WHOLE])  # 1 and 2 comparisons per chunk, whole blocks
def test_chunked_levels_equal_all_at_once_bit_for_bit(monkeypatch, chunk):
    rng = np.random.default_rng(3)
    monkeypatch.setattr(_laws, "CHUNK", chunk)
    for _ in range(3):
        problem = mixed_blocks_problem(rng)
        table = random_table(problem, rng)
        blocks = problem.blocks()
        assert {(b.kind, b.delta > 0) for b in blocks} == {
            ("pair", False), ("pair", True), ("mixture", False), ("mixture", True)}
        lv = comparison_levels(problem, table, blocks)
        want = all_at_once(problem, table)
        for key in ("pure", "delta", "eps_at_delta"):
            np.testing.assert_array_equal(getattr(lv, key), want[key], err_msg=key)
        for k in range(lv.pure.size):
            P, Q = lv.laws.at(k)
            assert np.array_equal(P, want["P"][k]) and np.array_equal(Q, want["Q"][k])
        monkeypatch.setattr(_laws, "CHUNK", WHOLE)
        whole = constraint_levels(problem, table)
        monkeypatch.setattr(_laws, "CHUNK", chunk)
        assert [c.to_dict() for c in constraint_levels(problem, table)] == [
            c.to_dict() for c in whole]


def test_chunked_repair_equals_whole_blocks_bit_for_bit(monkeypatch):
    rng = np.random.default_rng(4)
    for _ in range(2):
        problem = mixed_blocks_problem(rng)
        table = random_table(problem, rng)
        out = {}
        for chunk in (1, 13, WHOLE):
            monkeypatch.setattr(_laws, "CHUNK", chunk)
            out[chunk] = {s: repair(problem, table, strategy=s) for s in ("violation", "uniform")}
        for s, ref in out[WHOLE].items():
            assert 0 < ref.t < 1
            for chunk in (1, 13):
                got = out[chunk][s]
                assert (got.t, got.strategy) == (ref.t, ref.strategy)
                np.testing.assert_array_equal(got.nu, ref.nu)
                np.testing.assert_array_equal(got.table, ref.table)


def test_memory_is_the_tables_not_comparisons_times_outputs(monkeypatch):
    """Extended DP on 4-neighbour pairs of a 20 × 20 grid (760 pairs, 400 outputs): the laws of
    all pairs (2 × 2.4 MB) are never held; levels take a fraction of the table (1.3 MB), a
    repair a few tables."""
    n = 20
    problem = geo_problem(n, 0.5)
    rng = np.random.default_rng(0)
    table = np.exp(-0.25 * problem.loss)[None] * rng.uniform(0.6, 1.4, problem.shape)
    table /= table.sum(axis=-1, keepdims=True)
    monkeypatch.setattr(_laws, "CHUNK", 8 * n * n)  # 8 comparisons at a time
    laws_bytes = 2 * len(problem.constraints[0].pairs) * n * n * 8
    problem.blocks()  # built once, outside the measurement
    tracemalloc.start()
    try:
        lv = comparison_levels(problem, table)
        _, levels_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        fixed = repair(problem, table)
        _, repair_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not lv.pure.max() <= 0.5 and fixed.t > 0
    assert levels_peak < table.nbytes / 2 < laws_bytes
    assert repair_peak < 4 * table.nbytes
