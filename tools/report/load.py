"""The app's load study: latency, time to first token and tokens/s served against the number of
users, shared batches beside one request at a time (benchmarks/app_load.py writes
RESULTS_DIR/app/app-load.json)."""

from __future__ import annotations

import json
from typing import Any

from specviz.results.table import markdown_table
from tools.report.saved import Saved

LOAD_FILE = ("app", "app-load.json")  # under the results folder
HEADER = ["threads", "users", "scheduler", "answered", "messages", "greedy = alone"]
HEADER += ["p50 s", "p95 s"]
HEADER += ["first token p50 s"]
HEADER += ["first token p95 s", "tokens/s served", "RSS MB"]


def app_load(saved: Saved) -> list[str]:
    """One row per users × scheduler, then the command (a one-line note until it is saved)."""
    path = saved.folder.joinpath(*LOAD_FILE)
    if not path.is_file():
        note = "not measured yet: python benchmarks/app_load.py writes it"
        return markdown_table(["app load"], [[note]])
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = [_row(r) for r in data["rows"]]
    return [*markdown_table(HEADER, rows), "", f"`{data['meta']['command']}`"]


def _row(r: dict[str, Any]) -> list[str]:
    """A saved run's cells."""
    mode = f"{r['mode']} ({r['rows']} row{'s' if r['rows'] > 1 else ''})"
    times = [f"{r[k]:.1f}" for k in ("p50", "p95", "ttft_p50", "ttft_p95")]
    served, rss = f"{r['tokens_per_second']:.1f}", f"{r['rss_mb']:.0f}"
    greedy = f"{r['greedy_same']} of {r['greedy']}"
    counts = [str(r["answered"]), str(r["messages"]), greedy]
    threads = str(r.get("threads", 1))  # runs saved before the study varied them ran at 1
    return [threads, str(r["users"]), mode, *counts, *times, served, rss]
