"""A benchmark run's report: its figures, its self-contained plotly HTML page, and a saved result
read back for viewing (its figures and Markdown tables: `specviz bench saved`, `specviz bench
markdown` and the app's Benchmark results tab). Every number comes from the saved JSON.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from specviz.batch.rows import rebatch
from specviz.bench.summary import gamma_curves, policies_vs_best_fixed, summarize
from specviz.bench.sweeps import RENDER_ORDER, by_key
from specviz.bench.sweeps.speedup import cost_table, summary_tables
from specviz.bench.sweeps.trees import resweep
from specviz.endpoint.figure import speedup_figure, tpot_figure
from specviz.results.lever_tables import lever_rows
from specviz.results.records import DEFAULT_PRICE_PER_HOUR, Record
from specviz.results.schema import batch_steps, flat_meta, migrate, read_result
from specviz.results.setting import drafter_label
from specviz.results.table import markdown_table

Look = Callable[[go.Figure, str, str, str], go.Figure]  # (figure, title, x title, y title)
Empty = Callable[[str, str], go.Figure]  # (title, why there is nothing to draw)
# One colour per setting (Okabe & Ito, as the app's token views), measured and theory alike.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000")
SERIES = {"plain": "#999999", "speculative": "#0072B2", "transformers": "#E69F00"}


def plain_look(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    """The report's own look: white, the palette above, titled axes (the app passes its own)."""
    fig.update_layout(
        title=title,
        template="plotly_white",
        colorway=list(PALETTE),
        xaxis_title=x,
        yaxis_title=y,
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
    )
    return fig


def plain_empty(title: str, message: str) -> go.Figure:
    """A figure saying why it has nothing to draw."""
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return plain_look(fig, title, "", "")


def _whole_x(fig: go.Figure) -> go.Figure:
    """Ticks on whole numbers only along x (γ, batch size): never 2.5."""
    fig.update_xaxes(tick0=0, dtick=1, tickformat="d")
    return fig


def figures(
    records: Sequence[Record],
    curves: Sequence[dict[str, Any]],
    batch: Mapping[str, Sequence[tuple[int, float]]],
    look: Look = plain_look,
    empty: Empty = plain_empty,
    *,
    sweep: dict[str, Any] | None = None,
    levers: dict[str, Any] | None = None,
    endpoint: dict[str, Any] | None = None,
    price_per_hour: float = DEFAULT_PRICE_PER_HOUR,
) -> list[go.Figure]:
    """Speedup by drafter, gamma curves, alpha distribution, latency CDF, and the batch figure:
    the batch sweep's speedup against batch size where one ran, else batch step times.

    batch: each draft's (batch size, seconds per plain step) points, by its --draft; sweep: a
    result's batch_sweep section (None: none ran). A figure the result has too little for says
    so (empty) instead of drawing a lone point; look gives every figure its style. levers: a
    result's levers section, whose frontier (at price_per_hour) replaces the first figure.
    endpoint: a result's endpoint section, whose speedup and TPOT against concurrency replace
    the first and the last.
    """
    last = _batch_figure(batch, look, empty) if sweep is None else _sweep_figure(sweep, look)
    first = (
        _speedups(records, look, empty)
        if levers is None
        else frontier_figure(levers, price_per_hour, look)
    )
    if endpoint is not None:
        first = speedup_figure(endpoint, price_per_hour, look)
        last = tpot_figure(endpoint, price_per_hour, look)
    return [
        first,
        _gamma_figure(curves, look, empty),
        _alpha_figure(records, look, empty),
        _latency_cdf(records, look, empty),
        last,
    ]


def _speedups(records: Sequence[Record], look: Look, empty: Empty) -> go.Figure:
    """Each request's measured speedup, a box per drafter, a colour per workload."""
    title = "Measured speedup per request, by drafter"
    if not records:
        return empty(title, "no records in this result")
    fig = go.Figure()
    workloads = sorted({r.category for r in records})
    for i, workload in enumerate(workloads):
        mine = [r for r in records if r.category == workload]
        fig.add_box(
            x=[drafter_label(asdict(r.setting)) for r in mine],
            y=[r.metrics.speedup for r in mine],
            name=workload,
            boxpoints="all",
            jitter=0.4,
            pointpos=0,
            marker={"color": PALETTE[i % len(PALETTE)], "size": 4},
        )
    fig.update_layout(boxmode="group")
    return look(fig, title, "drafter", "speedup ×")


def _gamma_figure(curves: Sequence[dict[str, Any]], look: Look, empty: Empty) -> go.Figure:
    """Measured speedup against γ (solid) and theory's i.i.d. estimate (dashed) for each curve
    with two γ or more, one colour per setting."""
    title = "Speedup against γ: measured (solid) vs i.i.d. estimate (dashed)"
    swept = [c for c in curves if len(c["gammas"]) >= 2]
    if not swept:
        why = "every setting here ran at one γ: no curve to draw (a γ sweep such as code has them)"
        return empty(title, why)
    fig = go.Figure()
    for i, c in enumerate(swept):
        label = f"{c['workload']} {drafter_label(c)} T={c['temperature']:g}"
        colour = PALETTE[i % len(PALETTE)]
        fig.add_scatter(
            x=c["gammas"],
            y=c["measured_speedup"],
            name=label,
            legendgroup=label,
            mode="lines+markers",
            line={"color": colour},
        )
        fig.add_scatter(
            x=c["gammas"],
            y=c["theory_speedup"],
            name=f"{label} i.i.d. estimate",
            legendgroup=label,
            showlegend=False,
            mode="lines",
            line={"color": colour, "dash": "dash"},
        )
    return _whole_x(look(fig, title, "γ", "speedup ×"))


def _alpha_figure(records: Sequence[Record], look: Look, empty: Empty) -> go.Figure:
    """How the requests' acceptance rates spread, a colour per workload."""
    title = "Per-request acceptance α"
    if len(records) < 2:
        return empty(title, "one request: its α is in the tables below")
    fig = go.Figure()
    for i, workload in enumerate(sorted({r.category for r in records})):
        alphas = [r.metrics.alpha for r in records if r.category == workload]
        fig.add_histogram(
            x=alphas,
            name=workload,
            nbinsx=20,
            opacity=0.75,
            marker_color=PALETTE[i % len(PALETTE)],
        )
    fig.update_layout(barmode="overlay")
    return look(fig, title, "α", "requests")


def _latency_cdf(records: Sequence[Record], look: Look, empty: Empty) -> go.Figure:
    """The share of requests done within each latency: plain, speculative, transformers."""
    title = "End-to-end latency CDF"
    if not records:
        return empty(title, "no records in this result")
    fig = go.Figure()
    series = {
        "plain": [r.metrics.plain_latency for r in records],
        "speculative": [r.metrics.latency for r in records],
        "transformers": [r.hf_latency for r in records if r.hf_latency is not None],
    }
    for name, values in series.items():
        xs = sorted(v for v in values if v is not None)
        if xs:
            fig.add_scatter(
                x=xs,
                y=[(i + 1) / len(xs) for i in range(len(xs))],
                name=name,
                mode="lines+markers",
                line={"color": SERIES[name], "shape": "hv"},
            )
    return look(fig, title, "seconds per request", "share of requests")


def _batch_figure(
    batch: Mapping[str, Sequence[tuple[int, float]]], look: Look, empty: Empty
) -> go.Figure:
    """Seconds per plain decode step against the batch size, one line per draft."""
    title = "Plain decode step time against batch size"
    if not any(batch.values()):
        return empty(title, "this result has no batch-size timings")
    fig = go.Figure()
    for i, (name, steps) in enumerate(batch.items()):
        fig.add_scatter(
            x=[b for b, _ in steps],
            y=[t for _, t in steps],
            mode="lines+markers",
            name=Path(name).name or name,
            line={"color": PALETTE[i % len(PALETTE)]},
        )
    return _whole_x(look(fig, title, "batch size", "seconds per step"))


def _sweep_figure(sweep: dict[str, Any], look: Look) -> go.Figure:
    """The batch sweep's speedup over plain decoding against batch size: measured (solid) and
    predicted from the batched pass timings (dashed), one colour per drafter, γ and T."""
    title = "Batch sweep: speedup against batch size, measured (solid) vs predicted (dashed)"
    fig = go.Figure()
    curves: dict[tuple[float, str, int], dict[str, Any]] = {}  # per (T, drafter, γ)
    for r in sweep["rows"]:
        label = f"{r['drafter']} γ={r['gamma']} T={r['temperature']:g}"
        c = curves.setdefault(
            (r["temperature"], r["drafter"], r["gamma"]),
            {"label": label, "batch_sizes": [], "measured": [], "predicted": []},
        )
        c["batch_sizes"].append(r["batch_size"])
        c["measured"].append(r["speedup"]["median"])
        c["predicted"].append(r["predicted_speedup"])
    for i, c in enumerate(curves.values()):
        colour = PALETTE[i % len(PALETTE)]
        fig.add_scatter(
            x=c["batch_sizes"],
            y=c["measured"],
            name=c["label"],
            legendgroup=c["label"],
            mode="lines+markers",
            line={"color": colour},
        )
        fig.add_scatter(
            x=c["batch_sizes"],
            y=c["predicted"],
            name=f"{c['label']} predicted",
            legendgroup=c["label"],
            showlegend=False,
            mode="lines",
            line={"color": colour, "dash": "dash"},
        )
    fig.add_hline(y=1.0, line={"color": SERIES["plain"], "dash": "dot"})  # plain decoding
    sizes = sorted(sweep["plan"]["batch_sizes"])
    fig = look(fig, title, "batch size (rows a pass)", "speedup ×")
    fig.update_xaxes(type="log", tickvals=sizes, ticktext=[str(b) for b in sizes])
    return fig  # whole-number ticks at the batch sizes only, on a log axis


def html_report(figs: Sequence[go.Figure], title: str) -> str:
    """One self-contained HTML page (plotly.js inlined once)."""
    parts = [fig.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, fig in enumerate(figs)]
    head = f"<head><meta charset='utf-8'><title>{title}</title></head>"
    return f"<html>{head}<body><h1>{title}</h1>{''.join(parts)}</body></html>"


def load_result_view(
    path: str | Path, look: Look = plain_look, empty: Empty = plain_empty
) -> tuple[list[go.Figure], str]:
    """The five report figures (styled by look) and the Markdown tables of one saved result
    (any schema version).

    Raises ValueError with what is wrong when path is not a bench result this specviz reads.
    """
    result = resummarized(read_result(path))
    records = [Record.from_dict(r) for r in result["records"]]
    figs = figures(
        records,
        result["gamma_curves"],
        batch_steps(result),
        look,
        empty,
        sweep=result.get("batch_sweep"),
        levers=result.get("levers"),
        endpoint=result.get("endpoint"),
        price_per_hour=result["meta"]["price_per_hour"],
    )
    return figs, render(result, Path(path).stem)


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
    rows = lever_rows(section, price_per_hour)
    points = [r for r in rows if r["workload"] == rows[-1]["workload"]]  # over all workloads
    for kind, colour in KIND_COLOURS.items():
        mine = [p for p in points if p["lever"].startswith(kind + "@")]
        if not mine:
            continue
        fig.add_scatter(
            x=[p["tv"] for p in mine],
            y=[p["speedup"] for p in mine],
            name=KIND_NAMES[kind],
            mode="markers+text",
            text=[p["lever"] for p in mine],
            textposition="top center",
            marker={"color": colour, "size": 11},
            customdata=[[p["agreement"], p["memory_mb"]] for p in mine],
            hovertemplate="%{text}<br>TV %{x:.3f}, speedup %{y:.2f}×<br>greedy agreement "
            "%{customdata[0]:.0%}, weights %{customdata[1]:.0f} MB<extra></extra>",
        )
    fig.add_hline(y=1.0, line={"dash": "dot", "color": "#999999"})
    title = "Speed against distance from the fp32 target (up and left is better)"
    return look(fig, title, "mean total variation from the fp32 target", "speedup × over fp32")


def resummarized(result: dict[str, Any]) -> dict[str, Any]:
    """The result (any schema version) migrated, with its summary, curves and policy table
    recomputed from the raw records."""
    result = migrate(result)
    records = [Record.from_dict(r) for r in result["records"]]
    rows = summarize(records, result["meta"]["price_per_hour"])
    sweep, batch = result["tree_sweep"], result.get("batch_sweep")
    price = float(result["meta"]["price_per_hour"])
    rebatched = {} if batch is None else {"batch_sweep": rebatch(batch, price)}
    return result | {
        "summary": rows,
        "gamma_curves": gamma_curves(rows),
        "policies_vs_best_fixed": policies_vs_best_fixed(rows),
        "tree_sweep": None if sweep is None else resweep(sweep, records),
        **rebatched,
    }


META: tuple[str, ...] = ("cpu", "machine", "threads", "device", "gpu", "cuda", "dtype")
META += ("packed_weights", "draft_forward", "target_forward", "torch", "transformers")


def render(result: dict[str, Any], title: str) -> str:
    """One run (of the current schema: resummarized or schema.migrate) as a Markdown section:
    its command, its machine, the speedup tables, each study's section, the cost table and the
    plain decode step times against batch size."""
    meta = flat_meta(result)
    # the program as older results recorded it (the package's script path) reads as `specviz`
    command = re.sub(r"^\S*(specviz/\S+\.py|specviz)\s", "specviz ", meta["command"])
    machine = ", ".join(f"{k}: {meta[k]}" for k in META if k in meta)
    fmt = meta.get("prompt_format", "raw")
    out = [f"## {title}", "", f"```bash\n{command}\n```", ""]
    machine += f", prompts: {fmt}" if fmt != "raw" else ""
    profile = result["meta"].get("profile")  # the tuned profile the run found, if any
    machine += f", tuned profile: {Path(profile['path']).name}" if profile else ""
    out += [machine, "", *summary_tables(result)]
    studies = by_key()
    for key in RENDER_ORDER:  # each study's own section, where the run saved one
        if result.get(key) is not None:
            out += [studies[key].render(result[key], float(result["meta"]["price_per_hour"])), ""]
    if result["summary"]:
        out += ["Cost per 1k generated tokens:", "", *cost_table(result["summary"]), ""]
    for name, batch in batch_steps(result).items():
        if not batch:
            continue
        base = batch[0][1]
        loaded = f", loaded with draft {name}" if len(result["drafts"]) > 1 else ""
        out += [f"Plain decode step time against batch size (one new token per row{loaded}):", ""]
        out += markdown_table(
            ["batch", "ms per step", "ms per row", "step time / batch-1 step"],
            [[str(b), f"{t * 1e3:.1f}", f"{t * 1e3 / b:.1f}", f"{t / base:.2f}"] for b, t in batch],
        )
        out += [""]
    return "\n".join(out)
