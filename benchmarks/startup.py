"""Start-up of the command line: ``diffpriv --version``, a config with a typo (reported in one line)
and ``diffpriv optimize`` on the quickstart (a 10×10 grid, HiGHS runs), each command's wall time in
a fresh process, the median of ``--repeat`` runs; with ``--before DIR`` the same commands on another
checkout (e.g. a ``git worktree`` of an earlier commit), interleaved, so that the two are measured
side by side on the same machine.

    python benchmarks/startup.py --repeat 7 --before /tmp/before
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TYPO = """[inputs]
grid = { rows = 3, cols = 3, cell = 1.0 }
[loss]
kind = "euclidean"
[[profiles]]
name = "u"
prior = { uniform = true }
[[constraints]]
kind = "xdp"
name = "geo"
epsilon = 1.0
[optimizer]
gap_toll = 1e-3
"""


def commands(folder: Path) -> dict[str, list[str]]:
    """The commands timed, by name (run as ``python -m diffpriv.cli ...``)."""
    typo = folder / "typo.toml"
    typo.write_text(TYPO)
    return {"--version": ["--version"],
            "config typo": ["optimize", str(typo), "--out", str(folder / "typo")],
            "optimize quickstart": ["optimize", str(ROOT / "configs" / "quickstart.toml"), "--out",
                                    str(folder / "quickstart")]}


def timed(tree: Path, args: list[str]) -> float:
    """Wall seconds of ``python -m diffpriv.cli ARGS`` with ``tree`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(tree), "DIFFPRIV_COMPILE_CACHE": "off"}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "diffpriv.cli", *args], env=env, cwd=tree, capture_output=True,
                   check=False)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--before", type=Path, help="another checkout, timed side by side")
    args = ap.parse_args()
    trees = {"now": ROOT} if args.before is None else {"before": args.before, "now": ROOT}
    with tempfile.TemporaryDirectory() as tmp:
        cmds = commands(Path(tmp))
        times = {(t, c): [] for t in trees for c in cmds}
        for _ in range(args.repeat):
            for c, cmd in cmds.items():
                for t, tree in trees.items():
                    times[(t, c)].append(timed(tree, cmd))
    print("| command | " + " | ".join(f"{t} s (median of {args.repeat})" for t in trees) + " |")
    print("|---|" + "---:|" * len(trees))
    for c in cmds:
        print(f"| {c} | " + " | ".join(f"{statistics.median(times[(t, c)]):.2f}" for t in trees) + " |")


if __name__ == "__main__":
    main()
