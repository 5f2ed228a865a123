"""The levers frontier: each configuration's speedup against its distance from the fp32 target."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go

from specviz.bench.lever_table import frontier

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
