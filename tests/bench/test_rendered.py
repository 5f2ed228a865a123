"""Every saved result renders as it did: its Markdown and the headline tables, pinned by hash.

The hashes in rendered.json change only when a saved result or what it renders to changes on
purpose; rewrite them with `python -m tests.bench.test_rendered`.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from specviz.bench.report import render, resummarized
from specviz.results.saved import saved_results
from specviz.results.schema import read_result
from tools.report.saved import RESULTS_DIR, Saved
from tools.report.tables import TABLES, render_table

PINNED = Path(__file__).with_name("rendered.json")


def rendered() -> dict[str, str]:
    """Every saved result's Markdown and every headline table, by name."""
    out = {
        f"result:{Path(p).name}": render(resummarized(read_result(p)), Path(p).stem)
        for p in saved_results(RESULTS_DIR)
    }
    saved = Saved(RESULTS_DIR)
    return out | {f"table:{name}": render_table(name, saved) for name in TABLES}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_every_saved_result_renders_as_pinned() -> None:
    pinned = json.loads(PINNED.read_text(encoding="utf-8"))
    now = {name: _digest(text) for name, text in rendered().items()}
    assert sorted(now) == sorted(pinned)
    changed = [name for name in now if now[name] != pinned[name]]
    assert not changed, f"rendered differently: {changed}"


def main(folder: str | None = None) -> int:
    """Rewrite the pinned hashes; with a folder, write each rendering there too."""
    texts = rendered()
    PINNED.write_text(
        json.dumps({n: _digest(t) for n, t in sorted(texts.items())}, indent=1) + "\n",
        encoding="utf-8",
    )
    if folder:
        for name, text in texts.items():
            (Path(folder) / name.replace(":", "-")).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
