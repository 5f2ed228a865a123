"""The endpoint sweep's figures: speedup against concurrency, and TPOT against concurrency."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go

from specviz.endpoint.table import endpoint_rows

Look = Callable[[go.Figure, str, str, str], go.Figure]  # (figure, title, x title, y title)


def _mode(t: float) -> str:
    """A row's mode name."""
    return "greedy" if t == 0 else f"T={t:g}"


def speedup_figure(section: dict[str, Any], price: float, look: Look) -> go.Figure:
    """Paired speedup (E2E per token) and throughput ratio, spec over base, against concurrency,
    per mode."""
    fig = go.Figure()
    rows = endpoint_rows(section, price)
    for t in sorted({r["temperature"] for r in rows}):
        mine = [r for r in rows if r["temperature"] == t]
        for key, name, dash in (
            ("paired_speedup", "paired, per token", "solid"),
            ("throughput_ratio", "throughput", "dot"),
        ):
            fig.add_scatter(
                x=[r["concurrency"] for r in mine],
                y=[r[key] for r in mine],
                name=f"{_mode(t)}: {name}",
                mode="lines+markers",
                line={"dash": dash},
            )
    fig.add_hline(y=1.0, line={"dash": "dot", "color": "#999999"})
    fig.update_xaxes(type="log", dtick=0.30103)
    return look(fig, "Speculation on over off, against load (above 1: it pays)", "concurrency", "×")


def tpot_figure(section: dict[str, Any], price: float, look: Look) -> go.Figure:
    """Median TPOT (or, unstreamed, median E2E per token) of each side against concurrency."""
    fig = go.Figure()
    rows = endpoint_rows(section, price)
    for t in sorted({r["temperature"] for r in rows}):
        mine = [r for r in rows if r["temperature"] == t]
        for side in ("base", "spec"):
            ys = [(r[side] or {}).get("tpot") for r in mine]
            fig.add_scatter(
                x=[r["concurrency"] for r in mine],
                y=[None if y is None else y * 1e3 for y in ys],
                name=f"{_mode(t)}: {side}",
                mode="lines+markers",
            )
    fig.update_xaxes(type="log", dtick=0.30103)
    title = "Time per output token after the first (absent without streaming)"
    return look(fig, title, "concurrency", "TPOT, ms")
