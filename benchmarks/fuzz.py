"""Random configs with extreme but valid numbers through ``diffpriv optimize`` and ``certify``.

Every config of seeds ``--start`` … ``--start + --n − 1`` (``tests/_fuzz.py``: every constraint
kind, objective and method; distances 10⁻³…10⁴, ε 10⁻⁶…50, masses down to 10⁻³⁰⁰, orders up
to 1,000, near-duplicate coordinates) is run in this process; the tally of outcomes is printed
(certified, claims that fail, one-line refusals) with every problem in full: a traceback, a
certificate that fails its own ``certify``, a refusal that is not one line. Exit 1 if any.

    python benchmarks/fuzz.py --n 2000
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' shared config drawer

from typer.testing import CliRunner  # noqa: E402

from diffpriv.cli import app  # noqa: E402
from tests._fuzz import config, run  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--show", type=int, default=20, help="refusal messages to print, most common first")
    args = parser.parse_args()
    runner = CliRunner()
    tally: collections.Counter = collections.Counter()
    by_kind: collections.Counter = collections.Counter()
    refusals: collections.Counter = collections.Counter()
    problems = []
    start = time.perf_counter()
    for seed in range(args.start, args.start + args.n):
        cfg = config(seed)
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            res = run(runner, app, cfg, Path(tmp))
            seconds = time.perf_counter() - t0
        tally[res.kind] += 1
        for kind in cfg.kinds:
            by_kind[(kind, res.kind)] += 1
        if res.kind == "refused":
            refusals[res.detail.split(":")[0] + ": " + ":".join(res.detail.split(":")[1:2]).strip()[:60]] += 1
        if not res.ok:
            problems.append((seed, cfg, res))
            print(f"seed {seed}: {res.kind} ({cfg.kinds}, {cfg.method}, {cfg.objective})\n{res.detail}\n",
                  flush=True)
        if (seed - args.start + 1) % 50 == 0:
            import jax

            jax.clear_caches()  # thousands of compiled shapes exhaust the process's memory maps
            print(f"{seed - args.start + 1} configs, {time.perf_counter() - start:.0f} s: {dict(tally)}",
                  file=sys.stderr, flush=True)
        if seconds > 120:
            print(f"seed {seed}: {seconds:.0f} s", file=sys.stderr, flush=True)
    total = time.perf_counter() - start
    print(f"{args.n} configs (seeds {args.start}-{args.start + args.n - 1}) in {total:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in tally.most_common()))
    print("by constraint kind:")
    for kind in sorted({k for k, _ in by_kind}):
        row = {o: c for (k, o), c in by_kind.items() if k == kind}
        print(f"  {kind}: " + ", ".join(f"{o} {c}" for o, c in sorted(row.items())))
    print("most common refusals:")
    for text, count in refusals.most_common(args.show):
        print(f"  {count:4d}  {text}")
    print(f"problems: {len(problems)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
