"""The core stands alone: importing it loads no fast path, drafter, app or bench module."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "specviz" / "core"
OUTSIDE = ("specviz.fast", "specviz.drafters", "specviz.app", "specviz.bench", "specviz.gamma")
OUTSIDE += ("specviz.tree", "specviz.stats")


def loaded_after(code: str) -> list[str]:
    """specviz modules loaded in a fresh interpreter after running code."""
    probe = f"{code}; import sys, json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return [m for m in json.loads(out.stdout) if m.startswith("specviz")]


def test_importing_the_core_loads_nothing_outside_it() -> None:
    modules = [p.stem for p in CORE.glob("*.py") if p.stem != "__init__"]
    loaded = loaded_after("; ".join(f"import specviz.core.{m}" for m in modules))
    assert {f"specviz.core.{m}" for m in modules} <= set(loaded)
    assert [m for m in loaded if m.startswith(OUTSIDE)] == []


def test_the_probe_sees_a_module_outside_the_core() -> None:
    """Negative control: the same probe reports a drafter module when one is imported."""
    loaded = loaded_after("import specviz.core.decoding, specviz.drafters.ngram")
    assert "specviz.drafters.ngram" in [m for m in loaded if m.startswith(OUTSIDE)]


def test_the_package_import_is_lazy() -> None:
    """`import specviz` loads nothing but itself; the API arrives on first use."""
    assert loaded_after("import specviz") == ["specviz"]
    assert "specviz.api" in loaded_after("from specviz import speculative_generate")


def code_lines(source: str) -> int:
    """Lines of code: neither blank, nor a comment, nor part of a docstring."""
    tree = ast.parse(source)
    documented: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            doc = body[0]
            if isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
                documented.update(range(doc.lineno, (doc.end_lineno or doc.lineno) + 1))
    lines = source.splitlines()
    return sum(
        1
        for number, line in enumerate(lines, 1)
        if line.strip() and not line.strip().startswith("#") and number not in documented
    )


def test_code_lines_skip_docstrings_comments_and_blanks() -> None:
    source = '"""Doc."""\n\n# note\ndef f() -> int:\n    """Two\n    lines."""\n    return 1\n'
    assert code_lines(source) == 2


def test_the_core_stays_readable_in_one_sitting() -> None:
    """Under 700 lines of code (docstrings, comments and blank lines not counted)."""
    count = sum(code_lines(p.read_text()) for p in CORE.glob("*.py"))
    assert count <= 700, f"specviz/core holds {count} lines of code"
