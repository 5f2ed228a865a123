"""The levers sweep as numbers: one row per (workload, lever), the Markdown table, and the
frontier the report plots (speed against distance from the fp32 target).

The levers frontier: each configuration's speedup against its distance from the fp32 target.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

import plotly.graph_objects as go

from specviz.bench.lever_sweep import REFERENCE, parse_lever
from specviz.bench.metrics import cost_per_1k_tokens
from specviz.bench.table import markdown_table

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


def levers_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Speed and distance side by side, one line per (workload, lever)."""
    header = ["workload", "configuration", "tok/s", "speedup", "latency s", "$/1k tok"]
    header += ["weights MB", "α", "greedy agreement", "identical", "first divergence"]
    header += ["mean TV from fp32 target"]
    body = [
        [
            r["workload"],
            r["label"],
            f"{r['tokens_per_second']:.1f}",
            f"{r['speedup']:.2f}",
            f"{r['latency']:.2f}",
            f"{r['cost_per_1k_tokens']:.3g}",
            f"{r['memory_mb']:.0f}",
            "–" if r["alpha"] is None else f"{r['alpha']:.2f}",
            f"{r['agreement']:.0%}",
            f"{r['identical']}/{r['requests']}",
            "–" if r["first_divergence"] is None else f"{r['first_divergence']:g}",
            _tv(r),
        ]
        for r in rows
    ]
    return markdown_table(header, body)


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


def frontier(section: dict[str, Any], price_per_hour: float) -> list[dict[str, Any]]:
    """One point per lever over all workloads: (mean TV, speedup, label), for the plot."""
    rows = lever_rows(section, price_per_hour)
    last = rows[-1]["workload"]
    keys = ("lever", "label", "tv", "speedup", "agreement", "memory_mb")
    return [{k: r[k] for k in keys} for r in rows if r["workload"] == last]


def headline_table(section: dict[str, Any], price_per_hour: float) -> list[str]:
    """Each lever over all workloads: speed, cost and weights beside its distance."""
    rows = lever_rows(section, price_per_hour)
    last = rows[-1]["workload"]
    return levers_table([r for r in rows if r["workload"] == last])


def parts_row(part: str, section: dict[str, Any]) -> list[str]:
    """A levers part's row of the report's parts table."""
    plan = section["plan"]
    runs = section["runs"]
    reps = len({r["rep"] for r in runs})
    counts: dict[str, set[str]] = {}
    for d in section["distances"]:
        counts.setdefault(d["category"], set()).add(d["request"])
    prompts = ", ".join(f"{c} {len(ids)} × {reps}" for c, ids in counts.items())
    return [
        part,
        f"{prompts} ({len(plan['levers'])} levers)",
        ", ".join(f"{t:g}" for t in sorted({float(r["temperature"]) for r in runs})),
        plan["drafter"],
        str(plan["gamma"]),
        "fixed",
        "transformers",
    ]


Look = Callable[[go.Figure, str, str, str], go.Figure]  # (figure, title, x title, y title)
KIND_COLOURS = {"target": "#999999", "hf": "#009E73", "draft": "#E69F00", "spec": "#0072B2"}
KIND_NAMES = {
    "target": "the target alone",
    "hf": "transformers generate()",
    "draft": "the draft alone",
    "spec": "speculative",
}


def frontier_figure(section: dict[str, Any], price_per_hour: float, look: Look) -> go.Figure:
    """One marker per lever: x the mean TV from the fp32 target, y the speedup over it (all
    workloads), coloured by kind; hover gives greedy agreement and weights."""
    fig = go.Figure()
    points = frontier(section, price_per_hour)
    for kind, colour in KIND_COLOURS.items():
        mine = [p for p in points if p["lever"].startswith(kind + "@")]
        if not mine:
            continue
        fig.add_scatter(
            x=[p["tv"] for p in mine], y=[p["speedup"] for p in mine], name=KIND_NAMES[kind],
            mode="markers+text", text=[p["lever"] for p in mine], textposition="top center",
            marker={"color": colour, "size": 11},
            customdata=[[p["agreement"], p["memory_mb"]] for p in mine],
            hovertemplate="%{text}<br>TV %{x:.3f}, speedup %{y:.2f}×<br>greedy agreement "
            "%{customdata[0]:.0%}, weights %{customdata[1]:.0f} MB<extra></extra>",
        )  # fmt: skip
    fig.add_hline(y=1.0, line={"dash": "dot", "color": "#999999"})
    title = "Speed against distance from the fp32 target (up and left is better)"
    return look(fig, title, "mean total variation from the fp32 target", "speedup × over fp32")
