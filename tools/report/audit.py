"""The audit table: engines × settings with their verdicts, from the saved audit results
(benchmarks/audit_bench.py writes RESULTS_DIR/audit/audit.json)."""

from __future__ import annotations

import json

from specviz.audit.table import audit_table
from specviz.results.table import markdown_table
from tools.report.saved import Saved

AUDIT_FILE = ("audit", "audit.json")  # under the results folder


def audit(saved: Saved) -> list[str]:
    """Every saved audit's row (a one-line note until the audits are saved)."""
    path = saved.folder.joinpath(*AUDIT_FILE)
    if not path.is_file():
        note = "not measured yet: python benchmarks/audit_bench.py writes it"
        return markdown_table(["audit"], [[note]])
    rows = json.loads(path.read_text(encoding="utf-8"))["rows"]
    return audit_table([r for r in rows if "verdict" in r])
