"""The self-contained plotly HTML report of a benchmark run, and its figures."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from specviz.bench.batch_table import sweep_curves
from specviz.bench.sweeps.levers import frontier_figure
from specviz.endpoint.figure import speedup_figure, tpot_figure
from specviz.results.records import DEFAULT_PRICE_PER_HOUR, Record
from specviz.results.setting import drafter_label

Look = Callable[[go.Figure, str, str, str], go.Figure]  # (figure, title, x title, y title)
Empty = Callable[[str, str], go.Figure]  # (title, why there is nothing to draw)
# One colour per setting (Okabe & Ito, as the app's token views), measured and theory alike.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000")
SERIES = {"plain": "#999999", "speculative": "#0072B2", "transformers": "#E69F00"}


def plain_look(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    """The report's own look: white, the palette above, titled axes (the app passes its own)."""
    fig.update_layout(
        title=title, template="plotly_white", colorway=list(PALETTE), xaxis_title=x,
        yaxis_title=y, legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
    )  # fmt: skip
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
            y=[r.metrics.speedup for r in mine], name=workload, boxpoints="all", jitter=0.4,
            pointpos=0, marker={"color": PALETTE[i % len(PALETTE)], "size": 4},
        )  # fmt: skip
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
            x=c["gammas"], y=c["measured_speedup"], name=label, legendgroup=label,
            mode="lines+markers", line={"color": colour},
        )  # fmt: skip
        fig.add_scatter(
            x=c["gammas"], y=c["theory_speedup"], name=f"{label} i.i.d. estimate",
            legendgroup=label, showlegend=False, mode="lines",
            line={"color": colour, "dash": "dash"},
        )  # fmt: skip
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
            x=alphas, name=workload, nbinsx=20, opacity=0.75,
            marker_color=PALETTE[i % len(PALETTE)],
        )  # fmt: skip
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
                x=xs, y=[(i + 1) / len(xs) for i in range(len(xs))], name=name,
                mode="lines+markers", line={"color": SERIES[name], "shape": "hv"},
            )  # fmt: skip
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
            x=[b for b, _ in steps], y=[t for _, t in steps], mode="lines+markers",
            name=Path(name).name or name, line={"color": PALETTE[i % len(PALETTE)]},
        )  # fmt: skip
    return _whole_x(look(fig, title, "batch size", "seconds per step"))


def _sweep_figure(sweep: dict[str, Any], look: Look) -> go.Figure:
    """The batch sweep's speedup over plain decoding against batch size: measured (solid) and
    predicted from the batched pass timings (dashed), one colour per drafter, γ and T."""
    title = "Batch sweep: speedup against batch size, measured (solid) vs predicted (dashed)"
    fig = go.Figure()
    for i, c in enumerate(sweep_curves(sweep)):
        colour = PALETTE[i % len(PALETTE)]
        fig.add_scatter(
            x=c["batch_sizes"], y=c["measured"], name=c["label"], legendgroup=c["label"],
            mode="lines+markers", line={"color": colour},
        )  # fmt: skip
        fig.add_scatter(
            x=c["batch_sizes"], y=c["predicted"], name=f"{c['label']} predicted",
            legendgroup=c["label"], showlegend=False, mode="lines",
            line={"color": colour, "dash": "dash"},
        )  # fmt: skip
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
