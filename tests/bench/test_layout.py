"""The benchmark's layout: a few files, each a study or what the studies share, and a leaf.

Every study is one file of specviz/bench/sweeps/ (the Sweep protocol of specviz.bench.sweep);
the package holds at most MAX_FILES Python files of at most MAX_LINES lines each, one table
renderer, and no `python -m` entry point (its commands are `specviz bench` subcommands). Only
the command line's bench command (specviz/cli/bench.py and its parser) imports it: what the
app and the other packages need lives outside it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "specviz"
BENCH = PACKAGE / "bench"
MAX_FILES = 16
MAX_LINES = 400
STUDIES = ("speedup", "trees", "batch", "levers", "memory", "cross", "endpoint", "replay", "heads")
IMPORTS_THE_BENCH = ("specviz/cli/bench.py", "specviz/cli/bench_parser.py")  # the subcommand


def bench_files() -> list[Path]:
    """Every Python file of the benchmark package."""
    return sorted(BENCH.rglob("*.py"))


def bench_imports(source: str) -> list[str]:
    """The modules of specviz.bench that source imports (at any depth, lazily or not)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[:2] == ["specviz", "bench"]]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[:2] == ["specviz", "bench"]:
                found.append(node.module)
            elif node.module == "specviz":
                found += [f"specviz.{a.name}" for a in node.names if a.name == "bench"]
    return found


def test_the_bench_holds_few_short_files() -> None:
    files = bench_files()
    assert len(files) <= MAX_FILES, f"specviz/bench holds {len(files)} Python files"
    lines = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in files}
    assert {p: n for p, n in lines.items() if n > MAX_LINES} == {}


def test_each_study_is_one_file_of_the_sweeps() -> None:
    studies = {p.stem for p in (BENCH / "sweeps").glob("*.py")} - {"__init__"}
    assert studies == set(STUDIES)


def test_one_table_renderer() -> None:
    defined = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in sorted(PACKAGE.rglob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if "def _table" in line
    ]
    assert len(defined) == 1, defined


def test_no_module_of_the_bench_runs_as_a_script() -> None:
    assert [str(p) for p in bench_files() if "__main__" in p.read_text()] == []


def test_only_the_command_line_imports_the_bench() -> None:
    outside = [p for p in PACKAGE.rglob("*.py") if BENCH not in p.parents] + [ROOT / "app.py"]
    importers = {str(p.relative_to(ROOT)) for p in outside if bench_imports(p.read_text())}
    assert importers == set(IMPORTS_THE_BENCH)


def test_the_import_finder_sees_every_form() -> None:
    """Negative control: each way of importing the bench is found, a look-alike is not."""
    assert bench_imports("import specviz.bench.report") == ["specviz.bench.report"]
    assert bench_imports("from specviz.bench.sweep import Sweep") == ["specviz.bench.sweep"]
    assert bench_imports("from specviz import bench") == ["specviz.bench"]
    assert bench_imports("def f():\n    from specviz.bench import cli\n") == ["specviz.bench"]
    assert bench_imports("import specviz.benchmarks\nfrom specviz import api") == []
