"""The core stands alone: importing it loads no fast path, drafter, app or bench module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "specviz" / "core"
OUTSIDE = ("specviz.fast", "specviz.drafters", "specviz.app", "specviz.bench", "specviz.gamma")


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


def test_the_core_stays_readable_in_one_sitting() -> None:
    lines = sum(len(p.read_text().splitlines()) for p in CORE.glob("*.py"))
    assert lines <= 1000, f"specviz/core holds {lines} lines"
