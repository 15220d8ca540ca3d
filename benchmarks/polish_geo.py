"""Polishing on geo-indistinguishability: the certified loss of ``dp.optimize(gap_tol=1e-2)`` on the
12×12 grid of ``benchmarks/scaling.py`` with and without polishing (whose last resort for pure
pair bounds is the log-Lipschitz majorant), against the exact LP.

    python benchmarks/polish_geo.py [N]
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from scaling import grid_problem  # noqa: E402

import diffpriv as dp  # noqa: E402

n = int(sys.argv[1]) if len(sys.argv) > 1 else 12
p = grid_problem("geo", n)
lp = dp.solvers.lp(p).value
for polish in (False, True):
    r = dp.optimize(p, method="pdhg", gap_tol=1e-2, polish=polish)
    c = dp.certify(p, r.table, repair=True)
    print(f"polish={polish}: {r.steps} steps, certified {100 * (c.loss / lp - 1):.4f} % above the LP, "
          f"t = {c.repair_t:.2g}")
