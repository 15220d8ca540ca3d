"""What certification costs beside the solve: ``dp.design``'s certify seconds, writing the
certificate, and ``dp.verify`` of the file (a fresh read, as ``diffpriv certify`` does), on the
benchmark grids, for this checkout or another (``--root``), so two commits run side by side.

    python benchmarks/certify_time.py                    # this checkout
    python benchmarks/certify_time.py --root /tmp/before # a worktree of another commit
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = (("distp", 32), ("sacramento", 32), ("distp", 48), ("sinkhorn", 10))


def _problem(kind: str, n: int):
    import diffpriv as dp

    if kind == "sinkhorn":  # the shipped entropic-transport config (the city, 10×10)
        root = Path(dp.__file__).resolve().parents[1]
        return dp.load_config(root / "configs" / "sinkhorn.toml")[0]
    sys.path.insert(0, str(HERE))
    from scaling import grid_problem

    return grid_problem(kind, n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=HERE.parent, help="the checkout to import diffpriv from")
    parser.add_argument("--out", type=Path, default=None, help="JSON file of the rows")
    parser.add_argument("--cases", nargs="+", default=None, help="e.g. distp:32 sinkhorn:10 (default: all)")
    args = parser.parse_args()
    sys.path.insert(0, str(args.root))
    import diffpriv as dp
    from diffpriv.certification import verify

    rows = []
    cases = CASES if args.cases is None else [(c.split(":")[0], int(c.split(":")[1])) for c in args.cases]
    for kind, n in cases:
        problem = _problem(kind, n)
        design = dp.design(problem, gap_tol=1e-2)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "certificate.json")
            start = time.perf_counter()
            design.certificate.save(path)
            saved = time.perf_counter() - start
            start = time.perf_counter()
            report = verify(path)
            verified = time.perf_counter() - start
        row = {"problem": f"{kind} {n}x{n}" if kind != "sinkhorn" else "sinkhorn city 10x10",
               "root": str(args.root), "method": design.result.method,
               "solve_s": round(design.seconds["solve"], 3), "certify_s": round(design.seconds["certify"], 3),
               "save_s": round(saved, 3), "verify_s": round(verified, 3), "ok": bool(report.ok)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
