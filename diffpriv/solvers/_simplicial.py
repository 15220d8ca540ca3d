"""Simplicial decomposition for the entropic transport objective under linear constraints.

**The problem.** ``min_A T(A) = Σ_k c_k S_ε(λ_k, ν_k(A))`` over the tables that meet linear
budgets (DistP, local and extended DP: a polytope ``P``), where ``ν_k(A) = Σ_{s,x} w_k[s,x]
A[s,x,·]`` is the output law of law ``k`` (:class:`~diffpriv.problems.SinkhornLoss`). ``T`` is
smooth and convex, and depends on the table only through the ``K`` output laws.

**The method.** Simplicial decomposition (von Hohenbalken 1977; Holloway 1974): the column
generation of convex programming. It keeps a few vertices ``V_i`` of ``P`` and the best mixture
``A = Σ_i w_i V_i`` of them (the *master*: ``min_{w ∈ Δ} F(w)``, ``F(w) = T(Σ_i w_i V_i)``, a
smooth convex problem in a few dozen weights whose every evaluation is ``K`` entropic transport
solves on the stored ``ν_k(V_i)``: Newton's method on the semi-dual in numpy, :func:`newton_terms`,
with ott-jax's Sinkhorn where it stops short; projected gradient with backtracking, Beck & Teboulle
2009). At the master's
point the gradient ``∇T(A)[s,x,y] = Σ_k c_k w_k[s,x] g_k[y]`` (``g_k``: the Sinkhorn potential of
the outputs, the derivative of ``S_ε`` in its second law, :func:`._utilities.sinkhorn_terms`) is a
linear cost; the LP ``min_{V ∈ P} ⟨∇T(A), V⟩`` (HiGHS, warm-started from the last basis: the
polytope never changes, only the cost) gives the next vertex and, by convexity, a lower bound on
the optimum,

    ``T(A*) ≥ T(A) + min_{V ∈ P} ⟨∇T(A), V − A⟩``,

with the LP's minimum replaced by its weak-duality bound (:func:`._lp._dual_bound`, valid for any
multipliers). The run ends when the table is within ``gap_tol`` of the best such bound; Frank–Wolfe
(the same oracle, one step along ``V − A``) stalled at 3.4 % after 40 rounds on the quick start's
city, where the master's exact re-weighting gets there in a few dozen.

**Precision.** The bound is as exact as the potentials: Newton's method runs to a marginal error
of 10⁻¹¹ (Sinkhorn, where it runs, to :data:`THRESHOLD`), whose effect on the bound is of that
order relative to the cost scale.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from diffpriv.problems._objectives import ExpectedLoss
from diffpriv.problems._problem import Problem
from diffpriv.solvers import _lp
from diffpriv.solvers._driver import Chunk, Declared, Outcome, Status, relative_gap
from diffpriv.solvers._highs import quiet_highs
from diffpriv.solvers._utilities import sinkhorn_terms, utility_data

__all__ = ["SimplicialRun", "applies", "project_simplex"]

THRESHOLD, MASTER_THRESHOLD = 1e-9, 1e-6
"""Sinkhorn's marginal error for the potentials of the bound and the next vertex, and in the
master's steps (each from the last call's potentials)."""
MASTER_STEPS = 40
"""Projected-gradient steps on the vertices' weights per round (15, each round going on from the
last step length, did not finish Sacramento's 16×16 grid in 15 minutes, where 40 from a fresh
step took 121 rounds, 359 s)."""
KEEP = 1e-12
"""Vertices whose weight falls to this are dropped from the master."""


def applies(problem: Problem) -> bool:
    """The entropic transport objective under linear constraints, with every table entry allowed
    or masked (the LP takes both)."""
    return problem.objective.kind == "sinkhorn" and problem.linear


def project_simplex(v: np.ndarray) -> np.ndarray:
    """The Euclidean projection of ``v`` onto the probability simplex (Held, Wolfe & Crowder 1974;
    Duchi et al. 2008: sort, find the threshold)."""
    u = np.sort(v)[::-1]
    cumulative = np.cumsum(u) - 1.0
    ranks = np.arange(1, v.size + 1)
    rho = np.flatnonzero(u - cumulative / ranks > 0)[-1]
    return np.maximum(v - cumulative[rho] / (rho + 1), 0.0)


@jax.jit(static_argnums=(3,))
def _terms(utility, outputs, start, threshold):
    return sinkhorn_terms(utility, outputs, threshold, start)


def newton_terms(cost: np.ndarray, epsilon: float, inputs: np.ndarray, outputs: np.ndarray,
                 starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(S_ε(λ_k, ν_k) [K], ∂S_ε/∂ν_k [K, Y], g [K, Y])`` of the input laws ``inputs [K, X]`` and
    output laws ``outputs [K, Y]``, each by Newton's method on its semi-dual (the certifier's
    :func:`~diffpriv.measures._utilities.newton_solve`, from the potentials ``starts``), in numpy:
    the derivative is the c-transform ``−ε ln Σ_i λ_i e^{(f_i − C_ij)/ε}`` of the rows' potentials
    (equal to ``g_j`` where ``ν_j > 0``, and the one-sided rate where ``ν_j = 0``), as
    :func:`._utilities.sinkhorn_terms` gives it up to a constant per law. None where Newton's
    method stops short (then ott's Sinkhorn runs). On the city's 10×10 grid a master's
    evaluation took 5–10 ms, where ott's Sinkhorn under ``vmap`` took 40–70."""
    from diffpriv.measures._utilities import logsumexp, newton_solve, plan_value

    values, grads, gs = np.empty(len(inputs)), np.empty(outputs.shape), np.array(starts, np.float64)
    for k, (a, b) in enumerate(zip(inputs, outputs, strict=True)):
        rows, cols = np.flatnonzero(a > 0), np.flatnonzero(b > 0)
        c = cost[np.ix_(rows, cols)]
        solved = newton_solve(a[rows], b[cols], c, epsilon, gs[k, cols] - gs[k, cols].max())
        if solved is None:
            return None
        plan, g = solved
        values[k] = plan_value(plan, a[rows], b[cols], c, epsilon)
        f = -epsilon * logsumexp((g - c) / epsilon + np.log(b[cols]), axis=1)
        exponent = (f[:, None] - cost[rows]) / epsilon + np.log(a[rows])[:, None]
        grads[k] = -epsilon * logsumexp(exponent, axis=0)
        gs[k] = grads[k]  # the next call's start (g where ν_j > 0)
    return values, grads, gs


class SimplicialRun(Declared):
    """Simplicial decomposition (module docstring) as a :class:`._driver.Run`: one round a step."""

    name, labels = "simplicial", ("simplicial",)
    lean = False
    too_large = "optimizer: this problem is too large for simplicial decomposition's float64 LP"

    @classmethod
    def accepts(cls, problem) -> bool:
        return applies(problem)

    def __init__(self, opt, problem: Problem, seed: int, init=None):
        self.opt, self.problem = opt, problem
        self.utility = utility_data(problem)
        self.start = (jnp.zeros_like(self.utility.inputs),  # the last Sinkhorn potentials
                      jnp.zeros((self.utility.inputs.shape[0], problem.shape[-1])))
        self.laws = np.asarray(self.utility.laws)  # [K, S, X]
        self.inputs, self.cost = np.asarray(self.utility.inputs), np.asarray(self.utility.cost)
        self.epsilon = float(self.utility.epsilon)
        self.starts = np.zeros((self.inputs.shape[0], problem.shape[-1]))  # Newton's last potentials
        self.shares = np.asarray(self.utility.shares)
        expected = dataclasses.replace(problem, objective=ExpectedLoss())
        self.lp = _lp._build(expected, expected.blocks())
        model, self.m_ub, _, _ = _lp._highs_model(self.lp)
        self.highs = quiet_highs()
        for key in ("primal_feasibility_tolerance", "dual_feasibility_tolerance"):
            self.highs.setOptionValue(key, _lp._TOLERANCE)
        self.highs.passModel(model)
        self.mask = problem.support_mask()
        self.entries = int(self.mask.sum())
        self.vertices: list[np.ndarray] = []  # each vertex's table entries (the support's, in order)
        self.images = np.zeros((0, *self.utility.inputs.shape[:1], problem.shape[-1]))  # [m, K, Y]
        self._vertex(self.lp.c)  # the expected loss's LP optimum: the first vertex
        self.weights = np.ones(1)
        self.bound, self.value, self.done = -math.inf, math.inf, 0
        self.total = max(1, opt.steps)

    def _vertex(self, cost: np.ndarray) -> float:
        """Solves the LP at ``cost`` (warm from the last basis), keeps its vertex and returns the
        weak-duality bound on its minimum."""
        import highspy

        columns = np.arange(cost.size, dtype=np.int32)
        self.highs.changeColsCost(cost.size, columns, np.asarray(cost, np.float64))
        self.highs.run()
        if self.highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise _lp.ReferenceSolveError(f"HiGHS did not solve the vertex LP: "
                                          f"{self.highs.modelStatusToString(self.highs.getModelStatus())}")
        sol = self.highs.getSolution()
        x = np.clip(np.asarray(sol.col_value)[: self.entries], 0.0, None)
        table = np.zeros(self.problem.shape)
        table[self.mask] = x
        table /= table.sum(axis=-1, keepdims=True)
        self.vertices.append(table[self.mask])
        self.images = np.concatenate([self.images, np.einsum("ksx,sxy->ky", self.laws, table)[None]])
        duals = np.asarray(sol.row_dual)
        return _lp._dual_bound(self.lp._replace(c=np.asarray(cost, np.float64)),
                               duals[: self.m_ub] if self.lp.a_ub is not None else None, duals[self.m_ub:])

    def _evaluate(self, weights: np.ndarray, threshold: float = MASTER_THRESHOLD
                  ) -> tuple[float, np.ndarray, np.ndarray]:
        """``(T, ∂T/∂w [m], potentials [K, Y])`` at the mixture of the vertices with ``weights``."""
        images = self.images
        outputs = np.einsum("m,mky->ky", weights, images)
        solved = newton_terms(self.cost, self.epsilon, self.inputs, outputs, self.starts)
        if solved is not None:
            values, potentials, self.starts = solved
        else:
            values, potentials, self.start = _terms(self.utility, jnp.asarray(outputs), self.start, threshold)
            values, potentials = np.asarray(values), np.asarray(potentials)
        grad = np.einsum("k,ky,mky->m", self.shares, potentials, images)
        return float(self.shares @ values), grad, potentials

    def _master(self) -> None:
        """Projected gradient with backtracking on the weights (:data:`MASTER_STEPS` steps)."""
        w = self.weights
        value, grad, _ = self._evaluate(w)
        step = 1.0 / max(np.ptp(grad), 1e-12)
        for _ in range(MASTER_STEPS):
            while True:
                trial = project_simplex(w - step * grad)
                moved = trial - w
                if not np.any(moved):
                    break
                t_value, t_grad, _ = self._evaluate(trial)
                if t_value <= value + grad @ moved + (moved @ moved) / (2 * step) + 1e-15 * abs(value):
                    break
                step /= 2
            if not np.any(moved):
                break
            w, value, grad = trial, t_value, t_grad
            step *= 1.5
        keep = w > KEEP
        self.weights = w[keep] / w[keep].sum()
        self.vertices = [v for v, k in zip(self.vertices, keep, strict=True) if k]
        self.images = self.images[keep]

    def chunk(self) -> Chunk:
        self._master()
        value, _, potentials = self._evaluate(self.weights, THRESHOLD)
        gradient = np.einsum("k,ksx,ky->sxy", self.shares, self.laws, potentials)
        cost = np.zeros(self.lp.c.size)
        cost[: self.entries] = gradient[self.mask]
        inner = float(np.einsum("k,ky,ky->", self.shares, potentials,
                                np.einsum("m,mky->ky", self.weights, self.images)))
        bound = value - inner + self._vertex(cost)
        self.weights = np.append(self.weights, 0.0)
        self.value, self.bound = value, max(self.bound, bound)
        self.done += 1
        gap = relative_gap(value, self.bound)
        status = Status.CONVERGED if gap <= self.opt.gap_tol else None
        return Chunk(self.done, gap, status)

    def table(self) -> np.ndarray:
        """The master's mixture of the vertices."""
        table = np.zeros(self.problem.shape)
        table[self.mask] = np.einsum("m,mn->n", self.weights[: len(self.vertices)], np.stack(self.vertices))
        table[~self.mask] = 0.0
        return table / table.sum(axis=-1, keepdims=True)

    def finish(self, status: Status) -> Outcome:
        return Outcome(self.table(), self.bound, status, method=self.name)
