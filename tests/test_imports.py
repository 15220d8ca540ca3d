"""The package's import graph: no module of diffpriv imports another that (directly or not)
imports it back, whether at the top or inside a function."""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "diffpriv"


def import_graph(package: pathlib.Path) -> dict[str, set[str]]:
    """Module → the modules of ``package`` it imports anywhere in its text: ``from pkg import
    sub`` counts as importing ``pkg.sub`` where that is a module, else as importing ``pkg``."""
    mods = {}
    for path in package.rglob("*.py"):
        name = ".".join(path.relative_to(package.parent).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = path
    graph = {}
    for name, path in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    deps.add(sub if sub in mods else node.module)
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
        graph[name] = (deps & mods.keys()) - {name}
    return graph


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (its modules in order, the first repeated), or None."""
    done, active = set(), []

    def visit(m):
        if m in active:
            return active[active.index(m):] + [m]
        if m in done:
            return None
        active.append(m)
        for d in sorted(graph[m]):
            found = visit(d)
            if found:
                return found
        active.pop()
        done.add(m)
        return None

    for m in sorted(graph):
        found = visit(m)
        if found:
            return found
    return None


def test_no_import_circle_among_the_modules():
    graph = import_graph(PACKAGE)
    assert len(graph) > 80 and "diffpriv.solvers._driver" in graph["diffpriv.solvers._coarse"]
    found = circle(graph)
    assert found is None, "import circle: " + " -> ".join(found)


def test_the_packages_form_a_stack():
    """No circle between the packages either (each module counted as its top-level package or
    module under diffpriv): measures and the file helpers at the bottom, then problems, the
    certifier, the mechanisms (baselines and their calibration, which the gradient search starts
    from), solvers, the entry points (design, sweep, compare), the CLI at the top."""
    graph = import_graph(PACKAGE)

    def top(m):
        return ".".join(m.split(".")[:2])

    packages: dict[str, set[str]] = {}
    for m, deps in graph.items():
        packages.setdefault(top(m), set()).update(top(d) for d in deps if top(d) != top(m))
    found = circle(packages)
    assert found is None, "package circle: " + " -> ".join(found)
    assert packages["diffpriv.measures"] <= {"diffpriv._files"} and not packages["diffpriv._files"]
    assert "diffpriv.certification" not in packages["diffpriv.problems"]


def test_the_walk_finds_a_circle_hidden_in_a_function(tmp_path):
    """The check can fail: two modules importing each other, one of them inside a function."""
    pkg = tmp_path / "diffpriv"
    (pkg / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "a" / "_one.py").write_text("from diffpriv.a._two import f\n")
    (pkg / "a" / "_two.py").write_text("def f():\n    from diffpriv.a import _one\n")
    graph = import_graph(pkg)
    assert graph["diffpriv.a._one"] == {"diffpriv.a._two"} and graph["diffpriv.a._two"] == {"diffpriv.a._one"}
    assert circle(graph) == ["diffpriv.a._one", "diffpriv.a._two", "diffpriv.a._one"]
