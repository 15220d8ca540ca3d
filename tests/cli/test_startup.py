"""Start-up: what the command line and the library load before they need it. Each check runs a
fresh interpreter (this one has JAX loaded by the test settings) and asks it which modules it
loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _fresh(code: str) -> dict:
    """Runs ``code`` in a fresh interpreter (JAX's x64 left at its default, as in a user's
    program); it prints one JSON object as its last line, which is returned."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_version_answers_before_the_command_group_loads():
    out = _fresh("""
        import contextlib, io, json, sys
        from diffpriv.cli import main
        sys.argv = ["diffpriv", "--version"]
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            main()
        print(json.dumps({"printed": buffer.getvalue(), "loaded": sorted(
            m for m in ("typer", "numpy", "scipy", "pydantic", "jax") if m in sys.modules)}))
    """)
    from diffpriv import __version__

    assert out["printed"] == f"diffpriv {__version__}\n" and out["loaded"] == []


def test_the_command_line_on_lp_sized_problems_loads_no_jax(tmp_path):
    """``diffpriv optimize`` on the quickstart (HiGHS runs; column generation when asked) and on a
    grid of concentrated prior (the interior point runs), and a sweep of the quickstart, certify
    without loading JAX."""
    grid = tmp_path / "grid.toml"
    grid.write_text(textwrap.dedent("""
        [inputs]
        grid = { rows = 5, cols = 5, cell = 1.0 }
        [loss]
        kind = "euclidean"
        [[profiles]]
        name = "users"
        prior = [0.3, 0, 0, 0, 0.1, 0, 0, 0, 0, 0, 0, 0, 0.2, 0, 0, 0, 0, 0, 0, 0, 0.15, 0, 0, 0, 0.25]
        [[constraints]]
        kind = "xdp"
        name = "geo"
        epsilon = 1.0
        neighbours = "grid8"
        [optimizer]
        gap_tol = 1e-2
    """))
    cuts = tmp_path / "cuts.toml"  # column generation (auto's choice from 16×16 on such problems)
    cuts.write_text((ROOT / "configs" / "quickstart.toml").read_text().replace(
        "[optimizer]\n", '[optimizer]\nmethod = "cuts"\n'))
    for config, method in ((ROOT / "configs" / "quickstart.toml", "highs"), (grid, "interior point"),
                           (cuts, "cuts")):
        out = _fresh(f"""
            import json, sys
            from diffpriv.cli import main
            sys.argv = ["diffpriv", "optimize", {str(config)!r}, "--out", {str(tmp_path / method)!r}]
            try:
                main()
            except SystemExit as e:
                assert not e.code, e.code
            print(json.dumps({{"jax": "jax" in sys.modules}}))
        """)
        summary = json.loads((tmp_path / method / "summary.json").read_text())
        assert summary["method"] == method and summary["ok"] and not out["jax"], (method, out)
    out = _fresh(f"""
        import json, sys
        from diffpriv.cli import main
        sys.argv = ["diffpriv", "sweep", {str(ROOT / "configs" / "quickstart.toml")!r}, "--budget",
                    "home-vs-out=0.5:2:2", "--out", {str(tmp_path / "sweep")!r}]
        try:
            main()
        except SystemExit as e:
            assert not e.code, e.code
        print(json.dumps({{"jax": "jax" in sys.modules}}))
    """)
    assert not out["jax"] and (tmp_path / "sweep" / "frontier.csv").exists()


def test_a_jax_run_loads_jax_on_demand_in_float64_and_leaves_x64_as_it_was():
    """The optimizer's entry point loads JAX only for a run that needs it; that run computes in
    float64 (its bound is the PDHG's own, near the LP's optimum), and x64 is off again after."""
    out = _fresh("""
        import json, sys
        import numpy as np
        import diffpriv as dp
        from diffpriv.problems import pairs_within

        dom = dp.Domain.grid(3, 3, 1.0)
        problem = dp.Problem(dom, dom, dom.distances(dom), np.full(9, 1 / 9),
                             constraints=(dp.ExtendedDP(1.0, pairs=pairs_within(dom, 1.0)),))
        exact = dp.optimize(problem, method="exact")
        before = "jax" in sys.modules
        run = dp.optimize(problem, method="pdhg", steps=4000, gap_tol=1e-3)
        import jax
        print(json.dumps({"before": before, "lp": exact.objective, "objective": run.objective,
                          "bound": run.lower_bound, "status": run.status, "dtype": str(run.table.dtype),
                          "x64": bool(jax.config.jax_enable_x64)}))
    """)
    assert not out["before"] and not out["x64"] and out["dtype"] == "float64"
    assert out["status"] == "converged"
    assert out["bound"] <= out["lp"] + 1e-9 <= out["objective"] + 2e-9 <= out["lp"] * (1 + 1e-3) + 3e-9


def test_no_third_party_banner_reaches_standard_output(tmp_path):
    """HiGHS writes its banner ("Running HiGHS … Copyright …") from C to the process's standard
    output unless its output is off before the first call: neither a command nor a library call
    that runs HiGHS lets it through (a fresh process, its file descriptor 1 read whole)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    config = str(ROOT / "configs" / "quickstart.toml")
    for args in (["reference", config, "--out", str(tmp_path / "ref")],
                 ["optimize", config, "--out", str(tmp_path / "opt"), "--method", "exact"]):
        proc = subprocess.run([sys.executable, "-m", "diffpriv.cli", *args], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.startswith("diffpriv "), proc.stdout[:200]
        printed = proc.stdout + proc.stderr
        assert "Running HiGHS" not in printed and "Copyright" not in printed
    code = textwrap.dedent(f"""
        import diffpriv as dp
        problem, _ = dp.load_config({config!r})
        d = dp.design(problem, method="exact")
        print("loss", d.certificate.loss)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("loss ") and len(proc.stdout.splitlines()) == 1, proc.stdout[:300]
