"""An audit result as text: its tests, and the table of engines × settings with verdicts.

The table reads saved results (dicts as specviz.audit.runner returns them), so a report can
render it from JSON alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specviz.results.table import markdown_table

TABLE_HEADER = [
    "engine",
    "setting",
    "verdict",
    "N per side",
    "least power",
    "min p (Holm)",
    "command",
]


def row(result: dict[str, Any]) -> list[str]:
    """One table row: the engine, its setting, the verdict and what it rests on."""
    if result["mode"] == "greedy":
        cases = result["cases"]
        kinds = ", ".join(sorted({c["kind"] for c in cases}))
        return [
            result["engine"],
            result["setting"],
            result["verdict"],
            f"{len(cases)} prompts",
            f"greedy ({kinds}; tie < {result['tie_nats']} nats)",
            f"{result['differing_share']:.0%} differ",
            f"`{result['command']}`",
        ]
    tests = result["tests"]
    sizes = "/".join(str(t["n"] // 2) for t in tests[: len(result["plan"]["n"])])
    return [
        result["engine"],
        result["setting"],
        result["verdict"],
        sizes,
        f"{min(t['power'] for t in tests):.3f}",
        f"{min(t['p_holm'] for t in tests):.3g}",
        f"`{result['command']}`",
    ]


def audit_table(results: Sequence[dict[str, Any]]) -> list[str]:
    """The Markdown table of saved audit results, one row each."""
    return markdown_table(TABLE_HEADER, [row(r) for r in results])


def result_lines(result: dict[str, Any]) -> list[str]:
    """Plain-text lines: every test of one result, then its verdict."""
    lines = []
    for t in result.get("tests", []) + result.get("logprob_check", {}).get("tests", []):
        lines.append(
            f"{t['name']:<28} N {t['n']:>6}  stat {t['statistic']:8.2f}  df {t['df']:>2}  "
            f"p(Holm) {t['p_holm']:.3g}  TV {t['tv']:.3f}  power {t['power']:.3f}"
            f"{'  REJECT' if t['reject'] else ''}"
        )
    for c in result.get("cases", []):
        where = "" if c["identical"] else f" at token {c['position']}, top-2 gap {c['gap']}"
        lines.append(f"prompt {c['prompt'] + 1}: {c['kind']}{where}")
    lines.append(f"verdict: {result['verdict']}")
    return lines
