"""An independent transport solver for the tests: the dense transportation LP (scipy's HiGHS)."""

import numpy as np
import scipy.optimize


def transport_lp(a, b, cost) -> float:
    """``min ⟨cost, π⟩`` over couplings ``π`` of ``a [n]`` and ``b [m]``."""
    cost = np.asarray(cost, dtype=np.float64)
    n, m = cost.shape
    eq = np.zeros((n + m, n * m))
    for i in range(n):
        eq[i, i * m:(i + 1) * m] = 1
    for j in range(m):
        eq[n + j, j::m] = 1
    res = scipy.optimize.linprog(cost.ravel(), A_eq=eq, b_eq=np.concatenate([a, b]), method="highs")
    assert res.status == 0
    return res.fun
