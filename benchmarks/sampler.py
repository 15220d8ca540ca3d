"""Throughput of the integer-only sampler (``dp.Sampler.sample``, batched), CSPRNG included.

    .venv/bin/python benchmarks/sampler.py [--draws N]

For k-ary randomized response on k = 4, 100 and 10,000 outputs (certified at 53 bits), it
times ``sample(input, N)`` (one ``os.urandom`` call and one ``np.searchsorted``) and prints
draws per second, and the same for a loop of single draws (``N / 1000`` of them).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import diffpriv as dp


def krr_certificate(k: int) -> dp.Certificate:
    X = dp.Domain(tuple(f"v{i}" for i in range(k)))
    problem = dp.Problem(X, X, 1 - np.eye(k), np.ones(k) / k,
                         constraints=(dp.LocalDP(epsilon=1.0, pairs=((0, 1),)),))
    e = math.exp(0.9)
    table = (np.full((k, k), 1.0) + (e - 1) * np.eye(k))[None] / (e + k - 1)
    return dp.certify(problem, table, quantize=53)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=10**7)
    args = ap.parse_args()
    for k in (4, 100, 10_000):
        sampler = dp.Sampler(krr_certificate(k))
        sampler.sample(0, 1000)  # warm
        start = time.perf_counter()
        sampler.sample(0, args.draws)
        batched = args.draws / (time.perf_counter() - start)
        single_n = max(1, args.draws // 1000)
        start = time.perf_counter()
        for _ in range(single_n):
            sampler.sample(0, 1)
        single = single_n / (time.perf_counter() - start)
        print(f"k={k:6d}: batched {batched / 1e6:6.1f} M draws/s; "
              f"one at a time {single / 1e3:6.1f} k draws/s", flush=True)


if __name__ == "__main__":
    main()
