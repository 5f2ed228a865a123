"""The app's modules import one another without a circle: their module graph is acyclic."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_name(path: Path, root: Path) -> str:
    """The dotted name of the module at path under root (a package's __init__: the package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Every module of package (a folder under root) → the modules of package it imports,
    anywhere in its file (TYPE_CHECKING blocks and function bodies included)."""
    files = {module_name(p, root): p for p in (root / package.replace(".", "/")).rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = [f"{node.module}.{alias.name}" for alias in node.names]
                targets = [s for s in subs if s in files] or [node.module]
            graph[name] |= {t for t in targets if t in files and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of graph as the modules along it (the first repeated at the end), or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if cycle := visit(nxt):
                return cycle
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        if cycle := visit(start):
            return cycle
    return None


def test_the_app_modules_import_one_another_without_a_circle() -> None:
    graph = import_graph(ROOT, "specviz.app")
    assert {"specviz.app.main", "specviz.app.session", "specviz.app.tabs.decode"} <= set(graph)
    assert "specviz.app.session" in graph["specviz.app.tabs.decode"]  # the graph sees imports
    assert find_cycle(graph) is None


def test_a_hand_made_circle_is_found(tmp_path: Path) -> None:
    """Negative control: the same parse and search report a circle written on purpose, through
    `from package import module`, a plain import and a TYPE_CHECKING block."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("import pkg.c\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import thing\n"
    )
    graph = import_graph(tmp_path, "pkg")
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]
    (pkg / "c.py").write_text("import os\n")  # the circle broken: none found
    assert find_cycle(import_graph(tmp_path, "pkg")) is None
