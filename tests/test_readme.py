"""The README's Python examples run as written, and nothing user-facing imports private names."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_readme_python_blocks_run(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert blocks
    script = "\n".join(blocks).replace('"out/api/', f'"{tmp_path}/api/')
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                         check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "converged" in run.stdout and "['PairBlock']" in run.stdout


def test_nothing_user_facing_imports_private_modules():
    """README, experiments and benchmarks use the public API only."""
    paths = [ROOT / "README.md", *(ROOT / "experiments").glob("*.py"),
             *(ROOT / "benchmarks").glob("*.py")]
    for path in paths:
        for line in path.read_text().splitlines():
            assert not re.search(r"diffpriv(\.\w+)*\._\w", line), (path.name, line)
