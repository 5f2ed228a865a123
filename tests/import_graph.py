"""The import graph of a package, read with ast: every import at any depth (module level, inside
functions and classes), except those under `if TYPE_CHECKING:`, which never run.

An edge a → b means module a imports module b (or a name from it). `from p import x` is an edge
to p.x where p.x is a module of the package, else to p. A package's own __init__ is not made an
edge of its submodules' imports: Python runs it first whichever submodule is imported, so it
cannot close a cycle of its own making unless it imports one of them back, which is an edge.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class Import:
    """One import statement: the module it stands in, where, and whether inside a function."""

    source: str  # the importing module, dotted
    target: str  # the imported module of the package, dotted
    line: int
    local: bool  # inside a function body (lazy)


def modules(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name → file, for every .py file of the package under root."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(root: Path, package: str) -> list[Import]:
    """Every import of a module of the package by a module of the package."""
    known = modules(root, package)
    found = []
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node, local in _walk(tree, local=False):
            for target in _targets(node, name, is_package, known):
                found.append(Import(source=name, target=target, line=node.lineno, local=local))
    return found


def _walk(node: ast.AST, local: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """The import statements under node, each with whether a function body holds it."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking(child.test):
            yield from _walk_list(child.orelse, local)
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, local
        inner = local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield from _walk(child, inner)


def _walk_list(
    body: list[ast.stmt], local: bool
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    for statement in body:
        if isinstance(statement, ast.Import | ast.ImportFrom):
            yield statement, local
        yield from _walk(statement, local)


def local_imports(root: Path, package: str) -> list[Import]:
    """Every import inside a function of the package, of any module (target: its dotted name)."""
    found = []
    for name, path in modules(root, package).items():
        for node, local in _walk(ast.parse(path.read_text(encoding="utf-8")), local=False):
            if not local:
                continue
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or "."]
            )
            found += [Import(source=name, target=t, line=node.lineno, local=True) for t in names]
    return found


def _type_checking(test: ast.expr) -> bool:
    """Whether an if's test is TYPE_CHECKING (or typing.TYPE_CHECKING)."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _targets(
    node: ast.Import | ast.ImportFrom, name: str, is_package: bool, known: dict[str, Path]
) -> list[str]:
    """The package's modules one import statement imports."""
    if isinstance(node, ast.Import):
        return [_owner(a.name, known) for a in node.names if _owner(a.name, known)]
    base = _absolute(node, name, is_package)
    if base is None:
        return []
    found = []
    for alias in node.names:
        target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else _owner(base, known)
        if target:
            found.append(target)
    return found


def _absolute(node: ast.ImportFrom, name: str, is_package: bool) -> str | None:
    """The dotted module a `from ... import` reads from, relative imports resolved."""
    if node.level == 0:
        return node.module
    parts = name.split(".") if is_package else name.split(".")[:-1]
    parts = parts[: len(parts) - node.level + 1]
    return ".".join([*parts, node.module] if node.module else parts) or None


def _owner(dotted: str, known: dict[str, Path]) -> str:
    """The longest prefix of dotted that is a module of the package ('' for none)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return ""


def cycles(edges: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing itself),
    each sorted: every import cycle lies within one of them (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    return [sorted(c) for c in _components(graph) if len(c) > 1 or c[0] in graph[c[0]]]


def _components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    found.append(_pop_component(stack, on_stack, node))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def _pop_component(stack: list[str], on_stack: set[str], root: str) -> list[str]:
    """Pop the stack down to root: one strongly connected component."""
    component = []
    while True:
        node = stack.pop()
        on_stack.discard(node)
        component.append(node)
        if node == root:
            return component
