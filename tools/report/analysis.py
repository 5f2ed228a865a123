"""Tables of the replays in benchmarks/analysis/: counts without a clock, saved as JSON by tools.

* copy-bound (tools.copy_bound): tokens a round of the suffix chain beside copying oracles;
* gate-replay (tools.gate_replay): the suffix hybrid's gates, target passes and draft-model
  forwards per workload.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specviz.results.table import markdown_table
from tools.gate_replay import table as gate_table
from tools.report.saved import ROOT, Saved

ANALYSIS = ROOT / "benchmarks" / "analysis"


def _load(name: str, folder: Path) -> dict[str, Any] | None:
    """folder/NAME.json, or None where it is not there."""
    path = folder / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def copy_bound(_: Saved, folder: Path = ANALYSIS) -> list[str]:
    """Tokens a round: the suffix chain, and the own-text, anchored and free oracles; the
    prompts sent as raw text (copy-bound) and through the chat template (copy-bound-chat)."""
    runs = [d for d in (_load(n, folder) for n in ("copy-bound", "copy-bound-chat")) if d]
    if not runs:
        return markdown_table(["copy bound"], [["not measured: python -m tools.copy_bound"]])
    head = ["workload", "prompt", "tokens", "suffix", "own-text oracle", "anchored oracle"]
    head += ["free oracle"]
    keys = ("suffix_rounds", "own_oracle_rounds", "anchored_oracle_rounds", "free_oracle_rounds")
    rows = [
        [
            b["workload"],
            "raw" if data["raw"] else "chat template",
            str(b["tokens"]),
            *(f"{b['tokens'] / b[k]:.2f}" for k in keys),
        ]
        for data in runs
        for b in data["bounds"]
    ]
    return markdown_table(head, rows)


def gate_replay(_: Saved, folder: Path = ANALYSIS) -> list[str]:
    """Per workload and gate: target passes, draft-model forwards, tokens a pass."""
    data = _load("gate-replay", folder)
    if data is None:
        return markdown_table(["gate replay"], [["not measured: python -m tools.gate_replay"]])
    return gate_table(data["rows"])
