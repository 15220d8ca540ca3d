"""A utility of the user's own (``objective = { kind = "python", … }``, ``dp.design(utility=fn)``):
its value against numpy, the search against the LP optimum where the utility is linear, the
certificate re-reading the file, and the one-line refusals of what cannot serve."""

import json
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import diffpriv as dp
from diffpriv.problems import PythonUtility, SpecError
from diffpriv.solvers._lp import solve_lp
from diffpriv.solvers._utilities import utility_data, utility_value

UTILITY = textwrap.dedent('''
    import jax.numpy as jnp

    def loss(table, arrays):
        """The expected squared index distance between the input and the report."""
        nx, ny = table.shape[1], table.shape[2]
        d = (jnp.arange(nx)[:, None] - jnp.arange(ny)[None, :]) ** 2
        return jnp.sum(arrays.prior[:, :, None] * table * d)

    def one_argument(table):
        return jnp.sum(table)

    def rounded(table, arrays):
        return jnp.sum(jnp.round(table * arrays.loss))

    def through_numpy(table, arrays):
        import numpy as np
        return float(np.asarray(table).sum())

    def per_row(table, arrays):
        return table.sum(axis=-1)

    def broken(table, arrays):
        return jnp.log(table[0, 0, 0] - 1.0)
    ''')


def _rr_table(k: int, eps: float) -> np.ndarray:
    table = np.full((1, k, k), 1.0 / (np.exp(eps) + k - 1))
    table[0][np.diag_indices(k)] = np.exp(eps) / (np.exp(eps) + k - 1)
    return table


def _squared(k: int) -> np.ndarray:
    i = np.arange(k)
    return (i[:, None] - i[None, :]).astype(float) ** 2


def _problem(objective="expected", k: int = 4, loss=None, eps: float = 1.0) -> dp.Problem:
    x = dp.Domain(tuple(f"v{i}" for i in range(k)))
    prior = np.array([0.5, 0.3, 0.15, 0.05])[:k]
    return dp.Problem(x, x, _squared(k) if loss is None else loss, prior / prior.sum(),
                      constraints=(dp.LocalDP(epsilon=eps),), objective=objective)


@pytest.fixture
def utility_file(tmp_path):
    path = tmp_path / "utility.py"
    path.write_text(UTILITY)
    return path


def test_a_user_utility_is_its_function_at_the_table_and_its_gradient_is_jaxs(utility_file):
    """The certifier's value is the function in float64 (here the expected squared distance, which
    numpy computes independently); the search's twin returns the same value and JAX's gradient,
    checked against central finite differences."""
    problem = _problem(PythonUtility(file=str(utility_file), function="loss"))
    rng = np.random.default_rng(0)
    table = rng.dirichlet(np.ones(4), size=(1, 4))
    expected = float(np.sum(problem.prior[:, :, None] * table * _squared(4)))
    assert problem.objective_value(table) == pytest.approx(expected, rel=1e-14)
    with jax.enable_x64(True):
        data = utility_data(problem)
        kind = problem.objective
        rows = jnp.asarray(table.reshape(4, 4))
        assert float(utility_value(kind, data, rows)) == pytest.approx(expected, rel=1e-14)
        grad = np.asarray(jax.grad(lambda a: utility_value(kind, data, a))(rows))
        h, e = 1e-6, np.zeros((4, 4))
        e[1, 2] = h
        up, down = float(utility_value(kind, data, rows + e)), float(utility_value(kind, data, rows - e))
        numeric = (up - down) / (2 * h)
    assert grad[1, 2] == pytest.approx(numeric, rel=1e-6)


@pytest.mark.slow  # (a compile of the vmapped search: make test-slow)
def test_the_search_on_a_linear_user_utility_reaches_the_lp_optimum(utility_file):
    """The function is the expected loss under the squared distance, so HiGHS's optimum of that LP
    is the optimum here: the certified value is within 10⁻³ of it and not below it; the search's
    starts include that optimum, so this checks that the search keeps it (or finds its equal)."""
    fn_problem = _problem()
    lp = solve_lp(fn_problem).value
    namespace: dict = {}
    exec(compile(UTILITY, str(utility_file), "exec"), namespace)  # the same function, given directly
    d = dp.design(fn_problem, utility=namespace["loss"], steps=2000)
    assert d.certificate.ok and d.result.method == "gradient" and d.gap == float("inf")
    assert lp - 1e-9 <= d.certificate.loss <= lp * (1 + 1e-3)


def test_the_shipped_user_utility_runs_through_the_cli_and_certify_calls_it_again(runner, tmp_path):
    """``configs/user_utility.toml`` (copied with its ``utility.py``): the file resolves against the
    config, the table keeps the age law closer than the expected loss's LP optimum does (scored by
    the same function), the certificate names the file, and ``certify`` recomputes the objective
    by calling the function again: changed, the claim no longer holds."""
    import dataclasses
    import shutil
    from pathlib import Path

    from diffpriv.cli import app

    configs = Path(__file__).resolve().parents[2] / "configs"
    for name in ("user_utility.toml", "utility.py"):
        shutil.copy(configs / name, tmp_path / name)
    out = tmp_path / "out"
    result = runner.invoke(app, ["optimize", str(tmp_path / "user_utility.toml"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["no_bound"].startswith("no optimality bound: a user utility, not known to be convex")
    assert summary["method"] == "gradient" and "lower_bound" not in summary
    problem, _ = dp.load_config(tmp_path / "user_utility.toml")
    lp_table = solve_lp(dataclasses.replace(problem, objective="expected")).table
    assert summary["certified"] < 0.9 * problem.objective_value(lp_table)
    cert = json.loads((out / "certificate.json").read_text())
    shipped = str((tmp_path / "utility.py").resolve())
    assert cert["problem"]["objective"] == {"kind": "python", "file": shipped, "function": "loss"}
    check = runner.invoke(app, ["certify", str(out / "certificate.json"), "--run-utility"])
    assert check.exit_code == 0, check.output
    changed = (configs / "utility.py").read_text().replace("WEIGHT = 10.0", "WEIGHT = 1.0")
    (tmp_path / "utility.py").write_text(changed)
    check = runner.invoke(app, ["certify", str(out / "certificate.json"), "--run-utility"])
    assert check.exit_code != 0


def test_a_certificates_utility_file_is_not_run_unless_asked(runner, tmp_path, utility_file):
    """A certificate names code: ``certify`` without ``--run-utility`` checks every privacy claim,
    fails the loss claim in one line saying what to pass, and never runs the file (it would leave
    a mark); ``export`` and ``sample`` likewise refuse until told to run it."""
    from diffpriv.cli import app

    problem = _problem(PythonUtility(file=str(utility_file), function="loss"))
    path = tmp_path / "certificate.json"
    dp.certify(problem, _rr_table(4, 0.99), quantize=53).save(path)  # (any table: what matters is its file)
    mark = tmp_path / "ran"
    utility_file.write_text(f"open({str(mark)!r}, 'w').close()\n" + UTILITY)
    check = runner.invoke(app, ["certify", str(path)])
    assert check.exit_code == 1 and not mark.exists()
    assert "FAIL objective: a user utility, loss in" in check.output and "--run-utility" in check.output
    assert "1 claim(s) do not hold" in check.output
    report = dp.verify(path)
    assert not report.ok and len(report.failures) == 1 and not mark.exists()
    table = ["export", str(path), "--format", "csv", "--out", str(tmp_path / "t.csv")]
    refused = runner.invoke(app, table)
    assert refused.exit_code == 1 and "--run-utility" in refused.output and not mark.exists()
    exported = runner.invoke(app, [*table, "--run-utility"])
    assert exported.exit_code == 0, exported.output
    mark.unlink()
    draw = ["sample", str(path), "--input", "v0", "-n", "3"]
    refused = runner.invoke(app, draw)
    assert refused.exit_code == 1 and "--run-utility" in refused.output and not mark.exists()
    drawn = runner.invoke(app, [*draw, "--run-utility"])
    assert drawn.exit_code == 0, drawn.output
    mark.unlink()
    assert dp.verify(path, run_utility=True).ok and mark.exists()


@pytest.mark.parametrize(("function", "message"), [
    ("one_argument", r"objective\.function: one_argument must take \(table, arrays\)"),
    ("rounded", r"gradient is 0 at the uniform table and at a random one"),
    ("through_numpy", r"JAX cannot differentiate through_numpy: TracerArrayConversionError"),
    ("per_row", r"must return one real number, got an array of shape \(1, 4\)"),
    ("broken", r"objective\.function: broken is nan at the uniform table"),
    ("absent", r"objective\.function: '.*utility\.py' defines no function 'absent'"),
])
def test_a_utility_that_cannot_serve_is_refused_in_one_line(utility_file, function, message):
    with pytest.raises(SpecError, match=message) as info:
        _problem(PythonUtility(file=str(utility_file), function=function))
    assert "\n" not in str(info.value)


def test_a_missing_file_and_a_non_function_are_refused_in_one_line(tmp_path):
    with pytest.raises(SpecError, match=r"objective\.file: no Python file"):
        PythonUtility(file=str(tmp_path / "nowhere.py"))
    (tmp_path / "bad.py").write_text("raise RuntimeError('no data here')\n")
    with pytest.raises(SpecError, match=r"failed to run: RuntimeError: no data here"):
        PythonUtility(file=str(tmp_path / "bad.py"))
    with pytest.raises(SpecError, match=r"utility: must be a function"):
        dp.design(_problem(), utility=3.0)
