"""``diffpriv optimize`` on the command line (start-up, config, solve, certification, files) against
HiGHS on the same LP, on the real-data DistP grid of ``benchmarks/scaling.py`` (the Sacramento sales,
expensive vs cheap homes, pure DistP ε = 1, prior = all sales).

The problem is written as a config (the grid, and the laws as their values: the CLI reads what a
user's config would give, ``gap_tol = 1e-2``); ``diffpriv optimize`` runs in a fresh process, timed
from the shell, ``--repeats`` times; HiGHS solves the whole LP (``dp.solvers.lp``: its dual
simplex, as diffpriv's reference runs it) in this process, after a warm-up, as many times. Both
medians and their ratio are printed and written to ``--out``.

    python benchmarks/cli_vs_highs.py --grid 32 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import diffpriv as dp  # noqa: E402


def config_text(problem: dp.Problem, n: int) -> str:
    """The TOML of ``problem``: an ``n × n`` grid of its cell width, the Euclidean loss, its two
    items and its prior as values."""
    cell = float(problem.inputs.coords[1, 0] - problem.inputs.coords[0, 0])
    def values(a) -> str:
        return json.dumps([float(v) for v in a])

    items = "\n".join(f'[[items]]\nname = "{it.name}"\ndistribution = {values(it.dist)}\n'
                      for it in problem.items)
    c = problem.constraints[0]
    return (f'[inputs]\ngrid = {{ rows = {n}, cols = {n}, cell = {cell!r} }}\nunits = "km"\n\n'
            f'[loss]\nkind = "euclidean"\n\n'
            f'[[profiles]]\nname = "all"\nprior = {values(problem.prior[0])}\n\n'
            f'{items}\n[[constraints]]\nkind = "distp"\nname = "{c.name}"\nepsilon = {c.epsilon!r}\n'
            f'pairs = [["{problem.items[0].name}", "{problem.items[1].name}"]]\n\n'
            '[optimizer]\ngap_tol = 0.01\n')


def main() -> None:
    from scaling import grid_problem

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    problem = grid_problem("sacramento", args.grid)
    exe = str(Path(sys.executable).with_name("diffpriv"))
    cli, highs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "sacramento.toml"
        config.write_text(config_text(problem, args.grid))
        loaded, _ = dp.load_config(config)
        dp.solvers.lp(loaded)  # warm-up: HiGHS loaded
        for r in range(args.repeats):
            start = time.perf_counter()
            subprocess.run([exe, "optimize", str(config), "--out", f"{tmp}/o{r}", "--no-progress"],
                           check=True, capture_output=True)
            cli.append(time.perf_counter() - start)
            start = time.perf_counter()
            value = dp.solvers.lp(loaded).value
            highs.append(time.perf_counter() - start)
        summary = json.loads((Path(tmp) / "o0" / "summary.json").read_text())
    row = {"grid": args.grid, "cli_s": cli, "highs_s": highs, "cli_median": statistics.median(cli),
           "highs_median": statistics.median(highs),
           "ratio": statistics.median(cli) / statistics.median(highs), "method": summary["method"],
           "certified": summary["certified"], "lp": value,
           "excess": summary["certified"] / value - 1, "seconds": summary.get("seconds")}
    print(json.dumps(row, indent=1))
    if args.out is not None:
        args.out.write_text(json.dumps(row, indent=1) + "\n")


if __name__ == "__main__":
    main()
