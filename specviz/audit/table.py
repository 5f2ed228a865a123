"""An audit result as text: its tests, and the table of engines × settings with verdicts.

The table reads saved results (dicts as specviz.audit.runner returns them), so a report can
render it from JSON alone.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from specviz.audit.power import power
from specviz.audit.sequential import Plan
from specviz.results.table import markdown_table

TABLE_HEADER = [
    "engine",
    "setting",
    "verdict",
    "N per side: drawn of planned",
    "planned power",
    "min p (Holm)",
    "command",
]


def row(result: dict[str, Any]) -> list[str]:
    """One table row: the engine, its setting, the verdict and what it rests on."""
    if result["mode"] == "greedy":
        cases = result["cases"]
        kinds = ", ".join(sorted({c["kind"] for c in cases}))
        return [
            result.get("label", result["engine"]),
            result["setting"],
            result["verdict"],
            f"{len(cases)} prompts",
            f"greedy ({kinds}; tie < {result['tie_nats']} nats)",
            f"{result['differing_share']:.0%} differ",
            _code(result["command"]),
        ]
    tests, plan = result["tests"], result["plan"]
    drawn = "/".join(str(t["n"] // 2) for t in tests[: len(plan["n"])])
    planned = "/".join(str(n) for n in plan["n"].values())
    tvs = "/".join(str(t["tv"]) for t in plan["targets"])
    return [
        result.get("label", result["engine"]),
        result["setting"],
        result["verdict"],
        f"{drawn} of {planned} (look {result['stopped_at_look']})",
        f"{planned_power(plan):.3f} vs TV {tvs}",
        f"{min(t['p_holm'] for t in tests):.3g}",
        _code(result["command"]),
    ]


def _code(command: str) -> str:
    """A command as one Markdown table cell: newlines written \\n, pipes escaped, without the
    --json FILE it was saved with."""
    words = shlex.split(command)
    if "--json" in words:
        at = words.index("--json")
        words = words[:at] + words[at + 2 :]
    text = shlex.join(words).replace("\n", "\\n").replace("|", "\\|")
    return f"`{text}`"


def planned_power(plan: dict[str, Any]) -> float:
    """The least power of the planned N at the last look (saved, or computed from the plan)."""
    if "planned_power" in plan:
        return float(plan["planned_power"])
    design = Plan(
        n={int(k): n for k, n in plan["n"].items()},
        alpha=plan["alpha"],
        goal=plan["power_goal"],
        tests=plan["tests"],
    )
    level = design.worst_level(design.last_look)
    return min(
        power(t["tv"], design.n[t["k"]], design.n[t["k"]], t["cells"] - 1, level)
        for t in plan["targets"]
    )


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
