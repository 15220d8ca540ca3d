"""Same tables, same bounds: a refit of the solver wing must not change what the solvers return.

``record`` runs a fixed set of cases and saves each result (the table, the lower bound, the
objective, the certified loss and the name of the run that ran); ``compare``, at another commit,
runs them again and checks every table entry and bound against the record to 1e-9 (relative to
the larger of 1 and the value). The cases: every config in ``configs/`` with its own options,
twelve seeded problems of ``benchmarks/optimality.py`` (``random_problem``) under ``auto`` and
``pdhg``, and one small case per solver run (HiGHS, Clarabel, PDHG, the linear augmented
Lagrangian, the lifted transport PDHG, the smoothed dual, mirror-prox, the augmented Lagrangian,
cut generation, column generation, Kantorovich cuts, the linear relaxation).

    python benchmarks/refit_check.py compare            # against benchmarks/results/refit_before.npz
    python benchmarks/refit_check.py record --out F     # a new record (at the commit to compare with)

A run's name may change only as :data:`RENAMED` allows (the refit gave column generation, Kantorovich
cuts and the linear augmented Lagrangian names of their own). Exit 1 on any difference.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

import diffpriv as dp
from diffpriv.problems import pairs_within, random_problem

ROOT = Path(__file__).resolve().parent.parent
TOLERANCE = 1e-9
FULL_ENTRIES = 100_000
RECORD = ROOT / "benchmarks" / "results" / "refit_before.npz"
"""The record made at 98f05eb, before the refit began."""
RENAMED = {"cuts": {"cuts", "columns", "transport cuts"}, "al": {"al", "linear al"},
           "relaxation (cuts)": {"relaxation (columns)"}}
"""Names a run had before the refit → the names it may have after."""


def _grid(n: int) -> dp.Domain:
    return dp.Domain.grid(n, n, 1.0)


def _geo(n: int, eps: float = 0.5, seed: int = 0) -> dp.Problem:
    dom = _grid(n)
    prior = np.random.default_rng(seed).dirichlet(np.full(n * n, 2.0))
    return dp.Problem(dom, dom, dom.distances(dom), prior,
                      constraints=(dp.ExtendedDP(eps, pairs=pairs_within(dom, 1.0)),))


def _kl_distp(n: int, seed: int = 0) -> dp.Problem:
    dom = _grid(n)
    rng = np.random.default_rng(seed)
    items = tuple(dp.Item(name, rng.dirichlet(np.ones(n * n))) for name in "ab")
    return dp.Problem(dom, dom, dom.distances(dom), np.mean([i.dist for i in items], axis=0),
                      items=items, constraints=(dp.DivergenceDistP(divergence="kl", epsilon=0.3,
                                                                   pairs=((0, 1),)),))


def _kl_dp(n: int, beside_geo: bool = False) -> dp.Problem:
    base = _geo(n, 1.0)
    kl = dp.DivergenceDP(divergence="kl", epsilon=0.3, pairs=pairs_within(base.inputs, 1.0))
    return dataclasses.replace(base, constraints=((*base.constraints, kl) if beside_geo else (kl,)))


def _wdp_line() -> dp.Problem:
    dom = dp.Domain(("a", "b", "c", "d"), np.arange(4.0)[:, None])
    return dp.Problem(dom, dom, dom.distances(dom), np.full(4, 0.25),
                      constraints=(dp.WassersteinDP(epsilon=1.0, order=1.0),))


def cases() -> dict[str, tuple[dp.Problem, dict]]:
    """Every case: its problem and the keyword arguments of :func:`diffpriv.design`."""
    out: dict[str, tuple[dp.Problem, dict]] = {}
    for path in sorted((ROOT / "configs").glob("*.toml")):
        problem, options = dp.load_config(path)
        out[f"config {path.stem}"] = (problem, options.kwargs())
    for seed in range(12):
        out[f"random {seed} auto"] = (random_problem(seed), {"gap_tol": 1e-5})
        out[f"random {seed} pdhg"] = (random_problem(seed), {"method": "pdhg", "gap_tol": 1e-4})
    out |= {
        "run highs": (random_problem(20), {"method": "exact"}),
        "run clarabel": (_kl_distp(4), {"method": "exact"}),
        "run pdhg": (_geo(4), {"method": "pdhg", "gap_tol": 1e-3}),
        "run linear al": (random_problem(21), {"method": "al", "steps": 4000}),
        "run transport pdhg": (_wdp_line(), {"method": "pdhg", "gap_tol": 1e-3}),
        "run dual": (_kl_distp(4), {"method": "pdhg", "gap_tol": 1e-2}),
        "run mirror": (_kl_dp(3), {"method": "pdhg", "gap_tol": 1e-3}),
        "run al": (_kl_dp(3, beside_geo=True), {"method": "al", "steps": 4000}),
        "run cuts": (_kl_distp(4), {"method": "cuts", "gap_tol": 1e-4}),
        "run columns": (_geo(5), {"method": "cuts", "gap_tol": 1e-4}),
        "run transport cuts": (_wdp_line(), {"method": "cuts", "gap_tol": 1e-6}),
        "run relaxed": (_kl_dp(3, beside_geo=True), {"gap_tol": 1e-3}),
    }
    return out


def run_all() -> dict[str, dict]:
    results = {}
    for name, (problem, kwargs) in cases().items():
        start = time.perf_counter()
        d = dp.design(problem, **kwargs)
        results[name] = {"table": np.asarray(d.table, np.float64), "bound": float(d.result.lower_bound),
                         "objective": float(d.result.objective), "loss": float(d.certificate.loss),
                         "method": d.result.method}
        print(f"{name}: {d.result.method}, loss {d.certificate.loss:.12g}, bound "
              f"{d.result.lower_bound:.12g}, {time.perf_counter() - start:.1f} s", flush=True)
    return results


def _differs(a: float, b: float) -> bool:
    if not (np.isfinite(a) and np.isfinite(b)):
        return not (a == b or (np.isnan(a) and np.isnan(b)))
    return abs(a - b) > TOLERANCE * max(1.0, abs(a), abs(b))


def compare(before: dict[str, dict], after: dict[str, dict]) -> list[str]:
    problems = []
    for name, old in before.items():
        new = after.get(name)
        if new is None:
            problems.append(f"{name}: not run")
            continue
        if new["method"] != old["method"] and new["method"] not in RENAMED.get(old["method"], ()):
            problems.append(f"{name}: ran {new['method']!r}, before {old['method']!r}")
        for key in ("bound", "objective", "loss"):
            if _differs(old[key], new[key]):
                problems.append(f"{name}: {key} {new[key]!r}, before {old[key]!r}")
        if old["table"] is None:  # a large table: its digest, bit for bit
            if old["sha256"] != _digest(new["table"]):
                shape = new["table"].shape
                problems.append(f"{name}: the table of shape {shape} is not the same, bit for bit")
        elif old["table"].shape != new["table"].shape:
            problems.append(f"{name}: table of shape {new['table'].shape}, before {old['table'].shape}")
        elif (diff := float(np.max(np.abs(old["table"] - new["table"]), initial=0.0))) > TOLERANCE:
            problems.append(f"{name}: a table entry moved by {diff:.3g}")
    return problems


def _digest(table: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(table, np.float64).tobytes()).hexdigest()


def save(results: dict[str, dict], path: Path) -> None:
    """The record: tables of at most :data:`FULL_ENTRIES` entries whole, larger ones by the
    SHA-256 of their float64 bytes (compared bit for bit)."""
    meta, tables = {}, {}
    for i, (name, r) in enumerate(results.items()):
        meta[name] = {k: v for k, v in r.items() if k != "table"}
        if r["table"].size <= FULL_ENTRIES:
            tables[f"t{i}"] = r["table"]
        else:
            meta[name] |= {"sha256": _digest(r["table"]), "shape": list(r["table"].shape)}
    np.savez_compressed(path, meta=json.dumps(meta), names=json.dumps(list(results)), **tables)


def load(path: Path) -> dict[str, dict]:
    with np.load(path) as f:
        meta, names = json.loads(str(f["meta"])), json.loads(str(f["names"]))
        return {name: {**meta[name], "table": f[f"t{i}"] if f"t{i}" in f.files else None}
                for i, name in enumerate(names)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("record").add_argument("--out", type=Path, required=True)
    sub.add_parser("compare").add_argument("record", type=Path, nargs="?", default=RECORD)
    args = parser.parse_args()
    results = run_all()
    if args.command == "record":
        save(results, args.out)
        print(f"{len(results)} cases recorded in {args.out}")
        return 0
    problems = compare(load(args.record), results)
    print("\n".join(problems) or f"all {len(results)} cases: the same tables and bounds (to {TOLERANCE:g})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
