"""The Python examples of the README and of docs/ run as written, each file's blocks standalone,
and nothing user-facing imports private names."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

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
