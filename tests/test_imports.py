"""The package's import graph has no cycle, function-local imports counted too, and a function
imports only what an optional heavy extra needs (gradio and the app built on it, llama.cpp,
torchao): everything else is imported where a reader looks first, at the top of its module."""

from __future__ import annotations

from pathlib import Path

from .import_graph import Import, cycles, imports, local_imports

ROOT = Path(__file__).resolve().parent.parent
OPTIONAL = ("gradio", "llama_cpp", "torchao", "specviz.app")  # loaded only where used
MAX_LOCAL = 15


def test_the_package_has_no_import_cycle() -> None:
    assert cycles(imports(ROOT, "specviz")) == []


def test_a_planted_cycle_is_found(tmp_path: Path) -> None:
    """Negative control: a cycle closed by an import inside a function is found, and so is
    one through a relative import; the same package without them has none."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def f():\n    from pkg.high import g\n    return g\n")
    (package / "high.py").write_text("from . import low\n\ndef g():\n    return low\n")
    assert cycles(imports(tmp_path, "pkg")) == [["pkg.high", "pkg.low"]]
    (package / "low.py").write_text("def f():\n    return 1\n")
    assert cycles(imports(tmp_path, "pkg")) == []


def test_type_checking_imports_do_not_count(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    guarded = "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import pkg.b\n"
    (package / "a.py").write_text(guarded)
    (package / "b.py").write_text("import pkg.a\n")
    assert cycles(imports(tmp_path, "pkg")) == []


def test_functions_import_only_optional_extras() -> None:
    found = local_imports(ROOT, "specviz")
    other = [f"{i.source}:{i.line} {i.target}" for i in found if not _optional(i)]
    assert other == []
    assert len(found) <= MAX_LOCAL


def test_a_function_local_import_is_found(tmp_path: Path) -> None:
    """Negative control: an import inside a method of a class is counted, one at the top is not."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("import json\n")
    (package / "m.py").write_text("class C:\n    def f(self):\n        import json\n")
    assert [(i.source, i.target) for i in local_imports(tmp_path, "pkg")] == [("pkg.m", "json")]


def _optional(found: Import) -> bool:
    return any(found.target == o or found.target.startswith(f"{o}.") for o in OPTIONAL)
