"""Small configs shared by the CLI, hostile-input and sidecar tests, and the loader of the
experiment scripts."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def experiment(name: str):
    """The module ``experiments/<name>.py``, loaded from its file (the folder is no package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

BASE_TOML = """\
[inputs]
labels = ["a", "b", "c"]

[loss]
kind = "hamming"

[[items]]
name = "p"
distribution = [0.5, 0.3, 0.2]

[[items]]
name = "q"
distribution = [0.2, 0.3, 0.5]

[[constraints]]
kind = "distp"
epsilon = 0.5
pairs = [["p", "q"]]
"""
"""Three labels, Hamming loss, pure DistP between two items."""


def grid_toml(rows: int, cols: int, center: tuple[float, float]) -> str:
    """A ``rows × cols`` grid of 1 km cells, Euclidean loss, pure DistP ε = 0.5 between a
    Gaussian item at ``center`` and a uniform one."""
    return f"""\
[inputs]
grid = {{ rows = {rows}, cols = {cols}, cell = 1.0 }}

[loss]
kind = "euclidean"

[[items]]
name = "p"
distribution = {{ gaussians = [{{ center = [{center[0]}, {center[1]}], scale = 1.0 }}] }}

[[items]]
name = "q"
distribution = {{ uniform = true }}

[[constraints]]
kind = "distp"
epsilon = 0.5
pairs = [["p", "q"]]
"""
