"""The levers sweep's rows and table, from its saved section (`specviz bench levers`:
speculation beside lower precision and the small model, specviz.bench.sweeps.levers).

A row per (workload, lever), then each lever over every workload: tokens a second, the speedup
over the fp32 target paired by request and repetition, latency, cost, the weights' memory, α,
and the distance from the fp32 target's law (greedy agreement, first divergence, mean TV).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from specviz.quant.levers import REFERENCE, parse_lever
from specviz.results.records import cost_per_1k_tokens
from specviz.results.table import column_table, number_cell

ALL = "all"  # the row over every workload


def _paired_speedups(runs: Sequence[dict[str, Any]], lever: str) -> list[float]:
    """Reference seconds per token over the lever's, paired by (request, T, repetition)."""

    def per_token(r: dict[str, Any]) -> float:
        return float(r["seconds"]) / max(int(r["tokens"]), 1)

    ref = {(r["request"], r["temperature"], r["rep"]): r for r in runs if r["lever"] == REFERENCE}
    return [
        per_token(ref[key]) / per_token(r)
        for r in runs
        if r["lever"] == lever and (key := (r["request"], r["temperature"], r["rep"])) in ref
    ]


def _row(
    category: str,
    lever: str,
    runs: Sequence[dict[str, Any]],
    dists: Sequence[dict[str, Any]],
    all_runs: Sequence[dict[str, Any]],
    memory: int,
    price_per_hour: float,
) -> dict[str, Any]:
    """One (workload, lever) row from its runs and distances."""
    seconds = sum(float(r["seconds"]) for r in runs)
    tokens = sum(int(r["tokens"]) for r in runs)
    accepted = sum(int(r["accepted"]) for r in runs)
    verified = accepted + sum(int(r["rejected"]) for r in runs)  # drafts after a rejection: not
    speedups = _paired_speedups(all_runs, lever)
    firsts = [d["first_divergence"] for d in dists]
    compared = sum(int(d["compared"]) for d in dists)
    return {
        "workload": category,
        "lever": lever,
        "label": parse_lever(lever).label,
        "requests": len(dists),
        "runs": len(runs),
        "tokens_per_second": tokens / seconds if seconds else 0.0,
        "latency": statistics.median(float(r["seconds"]) for r in runs),
        "cost_per_1k_tokens": cost_per_1k_tokens(seconds, tokens, price_per_hour),
        "speedup": statistics.median(speedups) if speedups else float("nan"),
        "memory_mb": memory / 1e6,
        "alpha": accepted / verified if verified else None,  # per verified draft, as the bench
        "agreement": sum(int(d["matched"]) for d in dists) / compared if compared else 1.0,
        "identical": sum(f is None for f in firsts),
        "first_divergence": statistics.median(f for f in firsts if f is not None)
        if any(f is not None for f in firsts)
        else None,
        "tv": statistics.fmean(float(d["tv"]) for d in dists),
        "tv_of": dists[0]["tv_of"],
    }


def _mine(rows: Sequence[dict[str, Any]], lever: str | None, category: str) -> list[Any]:
    """The rows of a lever (None: every lever) in a workload (ALL: every workload)."""
    return [r for r in rows if lever in (None, r["lever"]) and category in (ALL, r["category"])]


def lever_rows(section: dict[str, Any], price_per_hour: float) -> list[dict[str, Any]]:
    """Every (workload, lever) row, then each lever over all workloads (workload 'all')."""
    runs, dists = section["runs"], section["distances"]
    categories = list(dict.fromkeys(d["category"] for d in dists))
    out = []
    for category in [*categories, ALL] if len(categories) > 1 else categories:
        scope = _mine(runs, None, category)
        for lever in section["plan"]["levers"]:
            row = _row(
                category,
                lever,
                _mine(runs, lever, category),
                _mine(dists, lever, category),
                scope,
                section["memory_bytes"][lever],
                price_per_hour,
            )
            out.append(row)
    return out


def _tv(row: dict[str, Any]) -> str:
    """The mean TV, with where it comes from for a speculative lever (its target's law)."""
    value = f"{row['tv']:.3f}"
    return f"{value} (= {row['tv_of']}: exact)" if row["lever"].startswith("spec@") else value


COLUMNS = (
    ("workload", lambda r: r["workload"]),
    ("configuration", lambda r: r["label"]),
    ("tok/s", lambda r: f"{r['tokens_per_second']:.1f}"),
    ("speedup", lambda r: f"{r['speedup']:.2f}"),
    ("latency s", lambda r: f"{r['latency']:.2f}"),
    ("$/1k tok", lambda r: f"{r['cost_per_1k_tokens']:.3g}"),
    ("weights MB", lambda r: f"{r['memory_mb']:.0f}"),
    ("α", lambda r: number_cell(r["alpha"])),
    ("greedy agreement", lambda r: f"{r['agreement']:.0%}"),
    ("identical", lambda r: f"{r['identical']}/{r['requests']}"),
    ("first divergence", lambda r: number_cell(r["first_divergence"], "g")),
    ("mean TV from fp32 target", _tv),
)


def levers_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Speed and distance side by side, one line per (workload, lever)."""
    return column_table(COLUMNS, rows)


def note(section: dict[str, Any]) -> str:
    """What the sweep ran and how its columns are read."""
    plan = section["plan"]
    reps = max((int(r["rep"]) for r in section["runs"]), default=0) + 1
    requests = len({d["request"] for d in section["distances"]})
    return (
        f"Levers: {requests} requests, each configuration timed {reps} time(s) after a greedy "
        f"warm-up, speculation with the {plan['drafter']} drafter at γ = {plan['gamma']}. "
        "tok/s: tokens over wall time; α: accepted over verified drafts; speedup: the fp32 "
        "target's seconds per token over the "
        "configuration's, paired by request and repetition (median); latency: one request end "
        "to end (median); weights MB: the weights it holds; greedy agreement: share of positions "
        "whose T = 0 token equals the fp32 target's, identical: requests with no difference, "
        "first divergence: the position of the first difference (median over the others); "
        "mean TV: total variation of the next-token law from the fp32 target's along the "
        "target's own sampled continuation. A speculative configuration's law is its verifying "
        "target's (specviz verify), so its TV is that target's."
    )


def render_levers(section: dict[str, Any], price_per_hour: float) -> str:
    """The note and the table."""
    return "\n".join([note(section), "", *levers_table(lever_rows(section, price_per_hour))])
