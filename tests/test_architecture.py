"""ARCHITECTURE.md names only paths that exist: every `path` in it is a file or folder here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "ARCHITECTURE.md"
PATH = re.compile(r"`((?:specviz|tests|tools|tutorials|benchmarks|docs)/[\w./-]*|app\.py)`")


def paths(text: str) -> list[str]:
    """The repository paths a page names in backticks."""
    return PATH.findall(text)


def test_every_path_it_names_exists() -> None:
    named = paths(PAGE.read_text(encoding="utf-8"))
    assert len(named) > 30
    assert [p for p in named if not (ROOT / p).exists()] == []


def test_a_missing_path_is_caught() -> None:
    """Negative control: a path that is not here is listed."""
    named = paths("the loop (`specviz/core/decoding.py`) and `specviz/core/nowhere.py`")
    assert [p for p in named if not (ROOT / p).exists()] == ["specviz/core/nowhere.py"]
