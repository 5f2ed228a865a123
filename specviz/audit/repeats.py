"""Repeated audits of one planted fault (or of none): how often the audit rejects, with the
Clopper-Pearson interval of that share, and their table.

A repeat is a whole audit with its own seeds (`--seed`), so the runs are independent draws of
the audit's verdict: their rejection count is binomial in the audit's true rejection rate, its
power against the fault planted (or its false-alarm rate, for the pass-through).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scipy import stats

from specviz.audit.table import planned_power
from specviz.results.table import markdown_table

REPEATS_HEADER = [
    "fault planted",
    "setting",
    "TV planted",
    "rejected (not exact)",
    "share (95 % Clopper-Pearson)",
    "N per side: planned (power vs TV)",
    "stopped at look",
    "command (its --seed varies)",
]


def clopper_pearson(hits: int, runs: int, level: float = 0.95) -> tuple[float, float]:
    """The exact two-sided `level` confidence interval of a binomial share hits / runs."""
    if not 0 <= hits <= runs or runs == 0:
        raise ValueError(f"need 0 <= hits <= runs and runs > 0 (got {hits} of {runs})")
    tail = (1 - level) / 2
    low = 0.0 if hits == 0 else float(stats.beta.ppf(tail, hits, runs - hits + 1))
    high = 1.0 if hits == runs else float(stats.beta.ppf(1 - tail, hits + 1, runs - hits))
    return low, high


def summary(fault: str, results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One JSON row for repeated audits of one fault: the count of 'not exact' verdicts, each
    run's verdict, look, requests and seconds, and the first run's plan and command."""
    rejected = sum(r.get("verdict") == "not exact" for r in results)
    planted = [r["planted"] for r in results]
    answers = max(sum(p["requests"] for p in planted), 1)
    first = results[0]
    return {
        "kind": "repeats",
        "fault": fault,
        "setting": first["setting"],
        "runs": len(results),
        "rejected": rejected,
        "interval": clopper_pearson(rejected, len(results)),
        "planted_tv": sum(p["tv_sum"] for p in planted) / answers,  # mean TV an answer
        "verdicts": [r.get("verdict") for r in results],
        "looks": [r.get("stopped_at_look") for r in results],
        "requests": [r.get("budget", {}).get("requests") for r in results],
        "seconds": [r.get("seconds") for r in results],
        "plan": first["plan"],
        "command": first["command"],
    }


def repeats_row(row: dict[str, Any]) -> list[str]:
    """One table row of a repeats summary."""
    low, high = row["interval"]
    plan = row["plan"]
    looks = sorted(set(row["looks"]))
    tvs = "/".join(str(t["tv"]) for t in plan["targets"])
    digits = 1 if row["runs"] >= 100 else 0  # a tenth of a percent where the runs resolve it
    share, low, high = (f"{x:.{digits}%}" for x in (row["rejected"] / row["runs"], low, high))
    return [
        row["fault"],
        row["setting"],
        f"{row['planted_tv']:.3f}",
        f"{row['rejected']} of {row['runs']}",
        f"{share} ({low} to {high})",
        f"{'/'.join(str(n) for n in plan['n'].values())} ({planned_power(plan):.3f} vs TV {tvs})",
        ", ".join(str(look) for look in looks),
        f"`{row['command']}`",
    ]


def repeats_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The Markdown table of repeats summaries, one row each."""
    return markdown_table(REPEATS_HEADER, [repeats_row(r) for r in rows])
