"""The saved bench results the documents' tables are rendered from, each read once.

A *part* is one saved result, PART.json in the results folder (benchmarks/results/ of this
repository by default), with its summary recomputed from its records. A part's *summary rows*
are its per-setting, per-workload statistics (what `specviz bench` prints).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specviz.bench.report import resummarized

ROOT = Path(__file__).resolve().parents[2]  # the repository these tools maintain
RESULTS_DIR = ROOT / "benchmarks" / "results"


@dataclass(frozen=True)
class Saved:
    """The parts saved in folder; each is read from disk the first time it is asked for."""

    folder: Path
    _loaded: dict[str, dict[str, Any]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def has(self, part: str) -> bool:
        """Whether folder holds PART.json."""
        return (self.folder / f"{part}.json").exists()

    def load(self, part: str) -> dict[str, Any]:
        """The saved result PART.json with its summary recomputed from its records."""
        if part not in self._loaded:
            path = self.folder / f"{part}.json"
            self._loaded[part] = resummarized(json.loads(path.read_text(encoding="utf-8")))
        return self._loaded[part]

    def meta(self, part: str) -> dict[str, Any]:
        """A part's meta, with what its one draft recorded (draft_forward) beside it."""
        result = self.load(part)
        drafts = [d for d in result.get("drafts", {}).values()]
        extra = {k: v for k, v in drafts[0].items() if k != "batch_step_seconds"} if drafts else {}
        return {**result["meta"], **extra}

    def rows(
        self, part: str, workload: str | None = None, temperature: float | None = None
    ) -> list[Any]:
        """The summary rows of one part, for one workload and temperature when given."""
        return [
            r
            for r in self.load(part)["summary"]
            if (workload is None or r["workload"] == workload)
            and (temperature is None or r["setting"]["temperature"] == temperature)
        ]

    def prompts(self, part: str, workload: str) -> str:
        """'prompts × repetitions' of one workload in one part."""
        records = [r for r in self.load(part)["records"] if r["category"] == workload]
        prompts = len({r["request_id"] for r in records})
        reps = len({r["repetition"] for r in records})
        return f"{prompts} × {reps}"

    def parts_in_order(self) -> list[str]:
        """The saved parts, in the order folder/tables.md shows them."""
        tables = (self.folder / "tables.md").read_text(encoding="utf-8")
        return re.findall(r"^## (\S+)$", tables, flags=re.M)
