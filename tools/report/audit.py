"""The audit table: engines × settings with their verdicts, from the saved audit results
(benchmarks/audit_bench.py writes RESULTS_DIR/audit/audit.json)."""

from __future__ import annotations

import json
from typing import Any

from specviz.audit.repeats import repeats_table
from specviz.audit.table import audit_table
from specviz.results.table import markdown_table
from tools.report.saved import Saved

AUDIT_FILE = ("audit", "audit.json")  # under the results folder


NOT_YET = "not measured yet: python benchmarks/audit_bench.py writes it"


def audit(saved: Saved) -> list[str]:
    """Every saved audit's row (a one-line note until the audits are saved)."""
    rows = _rows(saved)
    if rows is None:
        return markdown_table(["audit"], [[NOT_YET]])
    return audit_table([r for r in rows if "verdict" in r])


def audit_repeats(saved: Saved) -> list[str]:
    """Every saved repeats row: rejections in repeated audits of a planted fault."""
    rows = [r for r in _rows(saved) or [] if r.get("kind") == "repeats"]
    if not rows:
        return markdown_table(["repeated audits"], [[NOT_YET + " (its repeat parts)"]])
    return repeats_table(rows)


def _rows(saved: Saved) -> list[dict[str, Any]] | None:
    """The saved audit rows (None before any was saved)."""
    path = saved.folder.joinpath(*AUDIT_FILE)
    if not path.is_file():
        return None
    rows: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["rows"]
    return rows
