"""The solvers' shared driver (:mod:`diffpriv.solvers._driver`): one result type, one status
vocabulary, one relative-gap rule, and solver modules that import each other without a circle."""

import ast
import pathlib
import sys

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.solvers import _driver, _pdhg

SOLVERS = pathlib.Path(dp.__file__).parent / "solvers"


def solver_imports() -> dict[str, set[str]]:
    """Module → the solver modules it imports (at the top or inside a function)."""
    graph = {}
    for path in SOLVERS.glob("_*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module.startswith("diffpriv.solvers."):
                    deps.add(node.module.rsplit(".", 1)[1])
                elif node.module == "diffpriv.solvers":
                    deps |= {a.name for a in node.names if a.name.startswith("_")}
        graph[path.stem] = deps - {path.stem}
    return graph


def test_solver_modules_import_each_other_without_a_circle():
    graph = solver_imports()
    done, active = set(), []

    def visit(m):
        if m in active:
            raise AssertionError(f"import circle: {' -> '.join(active[active.index(m):] + [m])}")
        if m in done:
            return
        active.append(m)
        for d in graph.get(m, ()):
            visit(d)
        active.pop()
        done.add(m)

    for m in graph:
        visit(m)
    # the driver imports no solver (a Mechanism is a table; _x64 and _cache are JAX's settings)
    assert graph["_driver"] <= {"_x64", "_cache", "_mechanism"}


def test_one_relative_gap_rule_on_host_and_device():
    cases = [(1.5, 1.0), (1.0, -2.0), (0.3, 0.0), (0.0, 0.0), (2.0, 2.0), (1e-12, 0.0), (1e-9, -1e-10)]
    for obj, lb in cases:
        assert _driver.relative_gap(obj, lb) == pytest.approx(float(_pdhg.gap_to(obj, lb)), rel=1e-15)
    # relative also at a zero bound: a loss of 0.3 is not within 1 % of a bound of 0; rounding is
    assert _driver.relative_gap(0.3, 0.0) == pytest.approx(3e5) and _driver.relative_gap(2e-10, 0.0) < 1e-3


def test_results_carry_a_known_status_and_their_gap_by_the_rule():
    problem = dp.problems.random_problem(0, n_in=4, n_out=4)
    result = dp.optimize(problem, method="pdhg", steps=2000)
    assert result.status in {s.value for s in _driver.Status}
    assert type(result.status) is str
    assert result.gap == _driver.relative_gap(result.objective, result.lower_bound)
    with pytest.raises(ValueError):
        _driver.make_result(problem, result.table, 0.0, status="done", steps=1, start=0.0, compiled=0.0,
                            seed=0, options=dp.solvers.Optimizer())
    with pytest.raises(FloatingPointError):
        _driver.check_finite(np.array([np.nan]))


class _Counting:
    """A run of ``n`` chunks of 10 steps that ends with ``end`` (``None``: never on its own)."""

    def __init__(self, n: int, end, total: int = 100):
        self.n, self.end, self.total, self.done = n, end, total, 0

    def chunk(self):
        self.done += 10
        status = self.end if self.done >= 10 * self.n else None
        return _driver.Chunk(self.done, 1.0 / self.done, status)

    def finish(self, status):
        table = np.full((1, 2, 2), 0.5)
        return _driver.Outcome(table, 0.25, status, method="al")


def test_drive_stops_on_the_runs_status_or_its_step_limit_and_reports_each_chunk():
    problem = dp.problems.random_problem(0, n_in=2, n_out=2)
    seen = []
    result = _driver.drive(lambda: _Counting(3, _driver.Status.CONVERGED), problem, dp.solvers.Optimizer(), 7,
                           lambda done, total, gap: seen.append((done, total, gap)))
    assert (result.status, result.steps, result.seed, result.method) == ("converged", 30, 7, "al")
    assert seen == [(10, 100, 0.1), (20, 100, 0.05), (30, 100, 1 / 30)]
    assert result.gap == _driver.relative_gap(result.objective, 0.25)
    limited = _driver.drive(lambda: _Counting(50, None), problem, dp.solvers.Optimizer(), 0)
    assert (limited.status, limited.steps) == ("step limit", 100)


def test_design_and_optimize_hand_a_callable_progress_each_chunk():
    problem = dp.problems.random_problem(0, n_in=4, n_out=4)
    for run in (dp.design, dp.optimize):
        seen = []
        out = run(problem, method="pdhg", steps=5000, chunk=1,
                  progress=lambda *report, seen=seen: seen.append(report))
        result = out.result if run is dp.design else out
        assert seen and [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)
        assert seen[-1][0] == result.steps and {t for _, t, _ in seen} == {5000}
        assert result.status == "converged" and seen[-1][2] <= result.options["gap_tol"]


def test_route_names_one_run_per_method_and_the_fallbacks_of_auto():
    from diffpriv.problems._known import k_rr_problem
    from diffpriv.solvers._methods import SOLVERS, route, solver_class
    from tests.solvers.test_methods import _kl

    for name in SOLVERS:  # every solver is a run
        cls = solver_class(name)
        assert callable(cls.chunk) and callable(cls.finish)
    linear = k_rr_problem(4, 1.0)
    assert route(linear, "auto") == ("exact", "columns", "pdhg")  # pure LDP: column generation next
    assert route(linear, "pdhg") == ("pdhg",) and route(linear, "al") == ("linear al",)
    assert route(linear, "auto", warm=True) == ("pdhg",)
    kl = _kl(150)
    assert route(kl, "auto") == ("cuts", "dual") and route(kl, "al") == ("al",)
    assert route(_kl(5), "exact") == ("exact",) and route(_kl(5), "pdhg") == ("dual",)
    assert route(kl, "auto", gap_tol=1e-2) == ("cuts", "dual")  # 150 x 150: not measured for the dual
    assert route(_kl(600), "auto", gap_tol=1e-2) == ("dual", "cuts")  # 24x24 up: the dual converges fast
    assert route(_kl(600), "auto") == ("cuts", "dual")  # at the default gap_tol the dual stalls
    assert route(_kl(5), "auto", gap_tol=1e-2)[0] == "exact"  # small: Clarabel still


def test_auto_hands_a_dual_that_does_not_converge_over_to_cuts(monkeypatch):
    from diffpriv.solvers import _cuts, _methods, _optimizer
    from tests.solvers.test_methods import _kl

    problem = _kl(5, eps=0.05)
    monkeypatch.setattr(_optimizer, "route", lambda *a, **k: ("dual", "cuts"))
    # 20 dual steps cannot converge; 20 LP rounds of cuts do on 5 rows
    result = dp.optimize(problem, method="auto", steps=20, period=10, gap_tol=1e-2)
    assert (result.method, result.status) == ("cuts", "converged")
    assert _methods.solver_class("dual").hands_over

    def fail(*args, **kwargs):
        raise _cuts.CutsSolveError("optimizer: HiGHS found no optimum of the cut model (test)")

    monkeypatch.setattr(_cuts.CutsRun, "__init__", fail)  # cuts fail too: the dual's table stays
    kept = dp.optimize(problem, method="auto", steps=20, period=10, gap_tol=1e-2)
    assert kept.method == "dual" and kept.status != "converged"


def test_float64_is_set_per_call_not_by_importing():
    """Importing every solver module leaves JAX's x64 mode off; ``dp.optimize`` runs in float64
    anyway (its bound and table agree with the exact LP) and leaves the caller's mode as it was;
    a run outside the entry points is refused instead of computing in float32."""
    import os
    import subprocess
    import sys

    code = """
import importlib, pathlib, jax, numpy as np
import diffpriv as dp
for p in sorted((pathlib.Path(dp.__file__).parent / "solvers").glob("_*.py")):
    importlib.import_module("diffpriv.solvers." + p.stem)
assert not jax.config.jax_enable_x64, "an import turned x64 on"
problem = dp.problems.random_problem(3, n_in=5, n_out=5)
lp = dp.solvers.lp(problem).value
res = dp.optimize(problem, method="pdhg", gap_tol=1e-6, steps=20000)
assert not jax.config.jax_enable_x64
loss = problem.objective_value(res.table)
assert res.lower_bound <= lp * (1 + 1e-9) and abs(loss - lp) <= 1e-4 * lp, (loss, res.lower_bound, lp)
assert dp.mechanisms.Mechanism.uniform((1, 2, 2)).table().dtype == np.float64
from diffpriv.solvers import _driver
try:
    _driver.drive(lambda: None, problem, None, 0)
except RuntimeError as e:
    assert "float64" in str(e)
else:
    raise AssertionError("a run without x64 was not refused")
"""
    env = {**os.environ, "JAX_ENABLE_X64": "0"}
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300, env=env)


def _slow_geo():
    """Geo-indistinguishability on an 8×8 grid under PDHG with a gap it cannot reach soon."""
    from tests._problems import geo_problem

    return geo_problem(8, 0.5, prior_seed=3)


def test_a_time_limit_stops_the_run_with_its_best_table_certified():
    """``time_limit``: PDHG asked for 10⁶ steps at a gap of 10⁻⁹ stops after about the limit
    (chunks sized to end by it), with status ``"time limit"``, fewer steps than asked, and a
    table that certifies; the bound holds."""
    import time

    start = time.perf_counter()
    d = dp.design(_slow_geo(), method="pdhg", steps=10**6, period=100, gap_tol=1e-9, time_limit=3.0,
                  quantize=53)
    assert d.result.status == "time limit" and d.result.steps < 10**6
    assert d.result.seconds < 3.0 + 10.0  # compiling counts; a chunk after the first is one period or so
    assert d.result.polish_seconds < 1.0  # a run stopped by the clock is not polished
    assert time.perf_counter() - start < 60
    assert d.certificate.ok and dp.verify(d.certificate).ok
    assert d.result.lower_bound <= d.certificate.loss


def test_ctrl_c_stops_the_run_after_the_chunk_in_flight_with_its_best_table():
    """A first SIGINT during a run (here sent from the progress callback, as from a terminal)
    lets the chunk in flight finish: the run ends ``"interrupted"`` with its table, which
    certifies; a run with no handler of its own then gets Python's back."""
    import os
    import signal

    sent = []

    def progress(done, total, gap):
        if not sent:
            sent.append(done)
            os.kill(os.getpid(), signal.SIGINT)

    # the premise: Python's own handler (in make test's worker another's was found installed, 12-07)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    d = dp.design(_slow_geo(), method="pdhg", steps=10**6, period=100, gap_tol=1e-9, progress=progress,
                  quantize=53)
    assert d.result.status == "interrupted" and d.result.steps < 10**6
    assert d.certificate.ok and dp.verify(d.certificate).ok
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_steps_bound_the_run_even_below_one_period():
    """``steps`` fewer than a period run that many steps (the period is cut to them), and more
    run whole periods, at most ``steps`` in all."""
    from diffpriv.problems._known import k_rr_problem

    problem = k_rr_problem(3, 1.0)
    assert dp.optimize(problem, method="pdhg", steps=100, gap_tol=1e-14, polish=False).steps == 100
    whole = dp.optimize(problem, method="pdhg", steps=1200, period=500, gap_tol=1e-14, polish=False)
    assert whole.steps == 1000


# ---- runs declare what they can do; the driver reads it ----------------------------------------

class _Toy(_driver.Declared):
    """A run of one chunk that gives HiGHS's table (or a uniform one) and records what it got.
    Its capabilities are set per test (a subclass each); nothing else names it."""

    name, labels = "toy", ("toy",)
    total = 1
    status = _driver.Status.STALLED
    got: list = []

    def __init__(self, opt, problem, seed, **kwargs):
        type(self).got.append(kwargs)
        self.problem = problem

    def chunk(self):
        return _driver.Chunk(1, np.inf, self.status)

    def finish(self, status):
        table = dp.solvers.lp(self.problem).table if self.status == "converged" else None
        if table is None:
            ns, nx, ny = self.problem.shape
            table = np.full((ns, nx, ny), 1.0 / ny)
        return _driver.Outcome(table, -np.inf, status, 0.0, method=self.labels[0])


def _toy(monkeypatch, route_names, **declared):
    """A toy run class with ``declared`` capabilities, registered by one row of
    :data:`._methods.SOLVERS`, and ``auto``'s route set to ``route_names``."""
    from diffpriv.solvers import _methods, _optimizer

    cls = type("Toy", (_Toy,), {"got": [], **declared})
    monkeypatch.setattr(sys.modules[__name__], "Toy", cls, raising=False)
    monkeypatch.setitem(_methods.SOLVERS, "toy", f"{__name__}:Toy")
    monkeypatch.setattr(_optimizer, "route", lambda *a, **k: route_names)
    return cls


def test_a_new_run_is_its_class_and_one_row_and_the_driver_reads_its_capabilities(monkeypatch):
    from diffpriv.problems import _size
    from diffpriv.solvers import _optimizer

    problem = dp.problems.random_problem(0, n_in=4, n_out=4)
    # it hands over when it stops short: HiGHS, next in the route, gives the result
    toy = _toy(monkeypatch, ("toy", "exact"), hands_over=True)
    result = dp.optimize(problem, gap_tol=1e-4)
    assert result.method == "highs" and toy.got == [{}]
    # ... and where it does not, its own (stalled) table is the result
    toy = _toy(monkeypatch, ("toy", "exact"))
    assert dp.optimize(problem).method == "toy"
    # a run that takes a start table and a floor gets the table of the try before it
    first = _toy(monkeypatch, ("toy",), hands_over=True)
    second = type("Toy2", (_Toy,), {"got": [], "takes_start": True, "takes_floor": True,
                                    "labels": ("toy2",), "name": "toy2",
                                    "status": _driver.Status.CONVERGED})
    monkeypatch.setattr(sys.modules[__name__], "Toy2", second, raising=False)
    from diffpriv.solvers import _methods

    monkeypatch.setitem(_methods.SOLVERS, "toy2", f"{__name__}:Toy2")
    monkeypatch.setattr(_optimizer, "route", lambda *a, **k: ("toy", "toy2"))
    result = dp.optimize(problem)
    assert result.method == "toy2" and first.got == [{}]
    assert set(second.got[0]) == {"start"} and np.allclose(second.got[0]["start"], 1.0 / 4)
    assert _methods.run_of("toy2") is second
    # a warm start and the lean plan are refused in one line where it does not declare them
    _toy(monkeypatch, ("toy",), warm_starts=False)
    with pytest.raises(ValueError, match="init: warm starts need method 'pdhg'"):
        dp.optimize(problem, init=np.full((1, 4, 4), 0.25))
    _toy(monkeypatch, ("toy",), lean=False, too_large="optimizer: the toy has no lean plan")
    monkeypatch.setattr(_optimizer, "solver_plan", lambda p: "lean")
    with pytest.raises(_size.SizeError, match="the toy has no lean plan"):
        dp.optimize(problem)
    # a deadline and progress reach it only where it declares them
    monkeypatch.undo()
    toy = _toy(monkeypatch, ("toy",), takes_deadline=True, takes_progress=True)
    dp.optimize(problem, time_limit=60.0, progress=lambda *a: None)
    assert set(toy.got[0]) == {"deadline", "progress"}


def test_every_run_declares_a_name_and_labels_of_its_own():
    """``result.method`` names the run that ran, distinctly for every run, and the CLI's summary
    describes every label."""
    from diffpriv.cli._summary import _METHOD_TEXT
    from diffpriv.solvers._methods import SOLVERS, run_of, solver_class

    labels = []
    for name in SOLVERS:
        cls = solver_class(name)
        assert cls.name == name and issubclass(cls, _driver.Declared)
        labels += cls.labels
    assert len(labels) == len(set(labels)), labels
    assert all(run_of(label).labels.count(label) == 1 for label in labels)
    assert set(labels) <= set(_METHOD_TEXT), set(labels) - set(_METHOD_TEXT)
