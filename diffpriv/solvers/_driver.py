"""What every solver of the optimizer shares: the result type, its statuses, the one relative-gap
rule, the finiteness check, the compilation clock, and the loop that drives a run.

A solver is a :class:`Run`: its constructor is the *init* (data, starting point), :meth:`Run.chunk`
runs a chunk of steps and says whether the run has ended, :meth:`Run.finish` hands back the
table and bound as an :class:`Outcome`. :func:`drive` is the one loop around them: the clock,
the progress reports between chunks, the step limit, and the :class:`OptimizeResult`, built by
:func:`make_result` so that the gap is computed one way and the status is one of
:class:`Status`. The runs: restarted mirror PDHG (:class:`._pdhg_run.PDHGRun`), the lifted
transport PDHG (:class:`._transport_pdhg.TransportRun`), the smoothed dual
(:class:`._dual.DualRun`), mirror-prox (:class:`._mirror.MirrorRun`), the augmented Lagrangian
(:class:`._nonlinear.ALRun`,
:class:`._pdhg_run.LinearALRun`), column-and-cut generation (:class:`._cuts.CutsRun`,
:class:`._transport_cuts.TransportCutsRun`, :class:`._columns.ColumnsRun`), the linear
relaxation (:class:`._relaxed.RelaxedRun`) and the exact references (:class:`._exact.ExactRun`);
each declares its name, labels and capabilities (:class:`Declared`), :data:`._methods.SOLVERS`
names them and :func:`._methods.route` picks them. This module imports no other solver module: the solvers
import it, never each other in a circle.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import ClassVar, NamedTuple, Protocol

import numpy as np

from diffpriv._gap import relative_gap
from diffpriv.solvers._cache import library_cache
from diffpriv.solvers._x64 import require

__all__ = ["Chunk", "Declared", "OptimizeResult", "Outcome", "Run", "Status", "check_finite",
           "compile_seconds", "drive", "make_result", "relative_gap"]


class Status(enum.StrEnum):
    """How a run ended (the values are what :attr:`OptimizeResult.status` holds)."""

    CONVERGED = "converged"
    """The relative gap of the (certifiable) table to the certified bound reached ``gap_tol``
    (PDHG: and the violation ``viol_factor · gap_tol``; the gradient search, which has no bound:
    its best certified value moved by less than ``gap_tol`` of itself in its last chunks)."""
    STEP_LIMIT = "step limit"
    """``steps`` ran out first."""
    INFEASIBLE = "infeasible"
    """The lower bound exceeds the largest objective any table can have: by weak duality no
    table meets the constraints."""
    DIVERGED = "diverged"
    """An iterate became non-finite."""
    TIME_LIMIT = "time limit"
    """``time_limit`` seconds ran out first (the best table so far)."""
    INTERRUPTED = "interrupted"
    """Stopped by the user (Ctrl-C): the best table so far."""
    STALLED = "stalled"
    """No further progress (the augmented Lagrangian: a round no longer moves the objective, or
    threw the table off; the smoothed dual: its temperature reached its floor; column-and-cut
    generation: no cut or column to add at the tightest margin). The best table so far is kept."""


def check_finite(table: np.ndarray) -> None:
    """Raises ``FloatingPointError`` (one line) when ``table`` has a non-finite entry."""
    if not np.all(np.isfinite(table)):
        raise FloatingPointError("optimizer: the table became non-finite (diverged); "
                                 "try a smaller optimizer.omega")


class _CompileClock:
    """JAX's tracing and compilation seconds counted while a run is driven: :meth:`listening`
    (entered by :func:`drive`, nested runs within) registers one listener and removes it when the
    outermost run ends, so that no listener stays behind in the caller's process."""

    def __init__(self):
        self._seconds = 0.0
        self._depth = 0

    def _count(self, event: str, seconds: float, **_) -> None:
        if event.startswith("/jax/core/compile/"):
            self._seconds += seconds

    @contextlib.contextmanager
    def listening(self) -> Iterator[None]:
        """Counts while runs are driven, where JAX is loaded (a run that needs it loads it with its
        module, before it is driven; the others compile nothing)."""
        jax = sys.modules.get("jax")
        if self._depth == 0 and jax is not None:
            jax.monitoring.register_event_duration_secs_listener(self._count)
            self._jax = jax
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0 and getattr(self, "_jax", None) is not None:
                self._jax.monitoring.unregister_event_duration_listener(self._count)
                self._jax = None

    def __call__(self) -> float:
        return self._seconds


compile_seconds = _CompileClock()
"""``compile_seconds()``: JAX's compilation time counted so far (while runs were driven); a run
reports the difference between its end and its start."""


@dataclasses.dataclass(frozen=True)
class OptimizeResult:
    """What the optimizer found.

    Attributes:
      table: ``[n_profiles, n_in, n_out]`` float64 row-stochastic table (not yet certified).
      objective: the problem's objective for ``table``.
      lower_bound: a certified lower bound on the optimal objective (weak duality).
      gap: :func:`relative_gap` of ``objective`` to ``lower_bound``; meaningful once the table
        is certified (a repair can only raise the objective by a little).
      max_violation: the largest constraint violation of ``table`` in the solver's units
        (ℓ1-normalised rows of G; ≤ 0 means feasible).
      steps: steps taken.
      seconds: wall time, compilation included.
      compile_seconds: the part of ``seconds`` JAX spent tracing and compiling (0 when every
        program was already compiled).
      seed: the seed used.
      status: a :class:`Status` value: ``"converged"``, ``"step limit"``, ``"infeasible"``,
        ``"diverged"`` or ``"stalled"``.
      history: per-period traces, ``{"kkt": [...], "lower_bound": [...], "gap": [...]}``.
      options: the optimizer's settings.
      state: the solver's final state (PDHG: logits and multipliers, before polishing, so that
        ``optimize(..., init=result)`` continues where this run stopped; the smoothed dual: its
        multipliers).
      plan: ``"standard"``, or ``"lean"`` for a problem whose standard plan does not fit in
        memory (:func:`diffpriv.problems.solver_plan`): float32 iterates, no running averages,
        no polishing, the bound computed in float64 from the final multipliers; ``"transport"``
        for the lifted PDHG of Wasserstein constraints (:mod:`diffpriv.solvers._transport_pdhg`);
        ``"dual"`` for the smoothed dual of divergence constraints (:mod:`diffpriv.solvers._dual`:
        the table is already repaired by the certifier's mixing, so ``max_violation`` is 0);
        ``"exact"`` for a run of the exact reference; ``"cuts"`` for column-and-cut generation
        (:mod:`diffpriv.solvers._cuts`: ``steps`` counts its linear programs).
      polish_seconds: the part of ``seconds`` spent polishing tables on the host (PDHG), compiling
        for it left out (that is in ``compile_seconds``).
      presolve: ``{"inputs": [kept, all], "outputs": [kept, all]}`` where presolve dropped
        rows or outputs before the solver ran (:mod:`diffpriv.solvers._presolve`; ``table`` is of
        the whole problem), with ``"constraints": [kept, all]`` where it dropped constraints
        every table meets, else ``None``.
      method: the run that ran (one of its :attr:`Declared.labels`, distinct for every run):
        ``"pdhg"``, ``"linear al"``, ``"transport pdhg"``, ``"dual"``, ``"mirror"``, ``"al"``,
        ``"cuts"`` (cut generation on f-divergences), ``"columns"`` (column generation),
        ``"transport cuts"`` (Kantorovich cuts), or an exact one (``"highs"``, ``"clarabel"``:
        :mod:`diffpriv.solvers._exact`, ``steps`` 0, ``lower_bound`` from the solver's multipliers,
        ``max_violation`` in its own rows); ``"relaxation (highs)"`` or ``"relaxation (columns)"``
        where the table is the linear relaxation's, repaired (:mod:`diffpriv.solvers._relaxed`).
      starts: the gradient search's starts, ``{"start": the start whose table won, "restarts": how
        many ran}`` (it states no bound: this is what it reports instead); ``None`` for the others.
      prices: the price of privacy where HiGHS solved the LP, column generation over table
        entries (linear constraints) or the interior point ran:
        ``{constraint name: {"epsilon": dV/dε, "delta": dV/dδ}}``, the rate at which the optimal
        loss falls as each budget grows, from the multipliers (:mod:`diffpriv.solvers._price`);
        ``None`` for the other runs.
    """

    table: np.ndarray
    objective: float
    lower_bound: float
    gap: float
    max_violation: float
    steps: int
    seconds: float
    seed: int
    status: str
    history: dict[str, np.ndarray]
    options: dict
    state: object = None
    plan: str = "standard"
    compile_seconds: float = 0.0
    method: str = "pdhg"
    presolve: dict | None = None
    polish_seconds: float = 0.0
    starts: dict | None = None
    prices: dict | None = None

    @property
    def converged(self) -> bool:
        """Whether the stopping rule was met before the step limit."""
        return self.status == Status.CONVERGED

    @property
    def infeasible(self) -> bool:
        """Whether the lower bound proves that no table meets the constraints."""
        return self.status == Status.INFEASIBLE

    @property
    def mechanism(self):
        """The table as a :class:`~diffpriv.mechanisms.Mechanism` (logits ``log A``, zeros masked out)."""
        from diffpriv.solvers._mechanism import Mechanism

        return Mechanism.from_table(self.table)


def make_result(problem, table: np.ndarray, bound: float, *, status: str, steps: int, start: float,
                compiled: float, seed: int, options, violation: float = 0.0, state=None,
                plan: str = "standard", history: dict | None = None,
                method: str = "pdhg", polish_seconds: float = 0.0,
                starts: dict | None = None, prices: dict | None = None) -> OptimizeResult:
    """The :class:`OptimizeResult` of a run that began at ``time.perf_counter() == start`` with
    ``compile_seconds() == compiled``: ``table`` ``[S, X, Y]`` (checked finite), its objective,
    and its :func:`relative_gap` to ``bound``; ``options`` a dataclass of the settings."""
    check_finite(table)
    objective = problem.objective_value(table)
    return OptimizeResult(
        table=table, objective=objective, lower_bound=bound, gap=relative_gap(objective, bound),
        max_violation=violation, steps=steps, seconds=time.perf_counter() - start, seed=seed,
        status=Status(status).value, history={} if history is None else history,
        options=dataclasses.asdict(options), state=state, plan=plan,
        compile_seconds=compile_seconds() - compiled, method=method, polish_seconds=polish_seconds,
        starts=starts, prices=prices)


class Chunk(NamedTuple):
    """What :meth:`Run.chunk` reports."""

    done: int
    """Steps taken so far, in the run's own unit (PDHG steps, L-BFGS steps, LP rounds)."""
    gap: float
    """The gap to report as progress (the best table's relative gap to the bound so far)."""
    status: Status | None = None
    """How the run ended, or ``None`` while it goes on."""


class Outcome(NamedTuple):
    """What :meth:`Run.finish` hands back: the fields of :class:`OptimizeResult` a run decides."""

    table: np.ndarray
    """``[S, X, Y]`` row-stochastic table."""
    bound: float
    status: Status
    violation: float = 0.0
    state: object = None
    history: dict | None = None
    plan: str = "standard"
    method: str = "pdhg"
    polish_seconds: float = 0.0
    starts: dict | None = None
    prices: dict | None = None


class Declared:
    """What a run declares of itself, as class variables: the route's driver
    (:meth:`._optimizer.Optimizer`) reads them and never compares solver names. A new run sets
    :attr:`name` and :attr:`labels` and the capabilities it has; the rest keep these defaults."""

    name: ClassVar[str]
    """Its key in :data:`._methods.SOLVERS` and in the routes of :func:`._methods.route`."""
    labels: ClassVar[tuple[str, ...]]
    """The ``result.method`` values it gives (each run's its own: the certificate names the run)."""
    takes_init: ClassVar[bool] = False
    """Continues a run from a result of its own (``init=``: a warm start, another budget)."""
    takes_basis: ClassVar[bool] = False
    """Starts from a simplex basis (``basis=``: an exact run's result, warm-starting HiGHS)."""
    takes_iterate: ClassVar[bool] = False
    """Starts from the last iterate of a run of its own at another budget (``iterate=``: its
    result's ``state``, an :class:`._interior.Iterate`; a sweep's next budget)."""
    takes_start: ClassVar[bool] = False
    """Starts from a table (``start=``): the table of the route's run before it that stopped short."""
    takes_floor: ClassVar[bool] = False
    """Stops on a lower bound known already (``floor=``: the linear relaxation's)."""
    takes_deadline: ClassVar[bool] = False
    """Stops by a deadline within its one chunk (``deadline=``); runs of many chunks stop between
    them (:func:`drive`)."""
    takes_progress: ClassVar[bool] = False
    """Reports its own progress (``progress=``) within its one chunk."""
    hands_over: ClassVar[bool] = False
    """Under ``"auto"``, gives way to the route's next run when it stops without converging."""
    relaxation: ClassVar[bool] = False
    """Solves a relaxation of the problem: its bound holds for the problem, and so does its
    infeasibility (the route ends there)."""
    warm_starts: ClassVar[bool] = True
    """Runs where a warm start (``init``) was asked for; those that do not, refuse it in one line."""
    lean: ClassVar[bool] = True
    """Runs a problem whose standard plan does not fit in memory (the lean plan,
    :func:`diffpriv.problems.solver_plan`); those that do not, refuse it in one line:"""
    too_large: ClassVar[str] = ("optimizer: this problem is too large for the float64 solvers that "
                                "divergence and Wasserstein constraints need")
    resumable: ClassVar[bool] = False
    """Its result's ``state`` warm-starts a next run (a sweep's next budget, :func:`diffpriv.design`
    continuing a run whose repair cost more than the gap allows)."""
    budgets: ClassVar[bool] = False
    """Runs one budget after another of a batch (``budget_scale=``, ``init=`` the previous state)."""
    @classmethod
    def accepts(cls, problem) -> bool:
        """Whether the run runs ``problem`` at all (``"auto"``'s table says when it should)."""
        raise NotImplementedError

    batch: ClassVar[Callable | None] = None
    """Or solves a batch of budgets at once: ``batch(opt, problem, scales, seed) → (tables,
    bounds)`` (:func:`._optimizer.solve_batch`)."""


class Run(Protocol):
    """One solver's run of one problem (the constructor is its init: data and starting point)."""

    total: int
    """The step limit, in the unit of :attr:`Chunk.done`."""

    def chunk(self) -> Chunk:
        """Runs a chunk of steps."""
        ...

    def finish(self, status: Status) -> Outcome:
        """The run's table and bound, once it ended with ``status`` (:attr:`Status.STEP_LIMIT`
        when the steps ran out); a run may overrule the status (e.g. ``"infeasible"``)."""
        ...


@contextlib.contextmanager
def _deferred_interrupt() -> Iterator[Callable[[], bool]]:
    """Within it, a first Ctrl-C (SIGINT) only raises a flag, read by the callable it yields, so
    that a chunk in flight finishes and its state stays whole (a compiled chunk donates its input
    buffers: interrupted half-way, the run would have no table left); a second raises
    ``KeyboardInterrupt`` as usual. Only in the main thread, and only where Python's own
    handler is installed (a program that handles SIGINT itself keeps its handler)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield lambda: False
        return
    asked: list[bool] = []

    def handler(signum, frame):
        if asked:
            raise KeyboardInterrupt
        asked.append(True)
        sys.stderr.write("\ninterrupted: stopping after this chunk with the best table so far "
                         "(Ctrl-C again to stop at once)\n")

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield lambda: bool(asked)
    finally:
        signal.signal(signal.SIGINT, previous)


def drive(make: Callable[[], Run], problem, options, seed: int,
          progress: Callable[[int, int, float], None] | None = None,
          deadline: float | None = None) -> OptimizeResult:
    """Runs ``make()`` (the clock starts before it, so that building the run's data and compiling
    count) chunk by chunk until it ends, its steps run out or ``time.perf_counter()`` passes
    ``deadline`` (after at least one chunk: status ``"time limit"``), calling
    ``progress(done, total, gap)`` after each chunk; returns the :class:`OptimizeResult` of its
    :class:`Outcome` (``options``: the settings recorded in it). Ctrl-C (``KeyboardInterrupt``)
    during a chunk ends the run with its best table so far, status ``"interrupted"``; during
    ``make()``, or when the run has no table to give, it propagates."""
    with compile_seconds.listening():
        return _drive(make, problem, options, seed, progress, deadline)


def _drive(make, problem, options, seed, progress, deadline) -> OptimizeResult:
    """:func:`drive` while the compile clock listens."""
    require()  # float64: the bound's precision
    if "jax" in sys.modules:  # (a JAX run's module is loaded by now; HiGHS's runs never load it)
        library_cache()  # JAX's persistent compilation cache, where the caller has set none
    start, compiled = time.perf_counter(), compile_seconds()
    run = make()
    if hasattr(run, "deadline"):  # a run that sizes its chunks to end by then
        run.deadline = deadline
    done, status = 0, None
    try:
        with _deferred_interrupt() as interrupted:
            while status is None and done < run.total:
                done, gap, status = run.chunk()
                if progress is not None:
                    progress(min(done, run.total), run.total, gap)
                if status is None and interrupted():
                    status = Status.INTERRUPTED
                elif status is None and deadline is not None and time.perf_counter() >= deadline:
                    status = Status.TIME_LIMIT
    except KeyboardInterrupt:  # a second Ctrl-C, or one where none can wait for the chunk
        try:
            out = run.finish(Status.INTERRUPTED)
            check_finite(out.table)
        except Exception:  # noqa: BLE001  (no table to hand back, e.g. before a first round: it stands)
            raise KeyboardInterrupt from None
        return _result(problem, out, done, start, compiled, seed, options, Status.INTERRUPTED)
    out = run.finish(Status.STEP_LIMIT if status is None else status)
    return _result(problem, out, done, start, compiled, seed, options)


def _result(problem, out: Outcome, done: int, start: float, compiled: float, seed: int, options,
            status: Status | None = None) -> OptimizeResult:
    """The :class:`OptimizeResult` of a run's :class:`Outcome` (``status`` overrules its own)."""
    return make_result(problem, out.table, out.bound, status=status or out.status, steps=done, start=start,
                       compiled=compiled, seed=seed, options=options, violation=out.violation,
                       state=out.state, plan=out.plan, history=out.history, method=out.method,
                       polish_seconds=out.polish_seconds, starts=out.starts, prices=out.prices)
