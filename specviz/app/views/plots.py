"""Plotly figures built from round summaries and token cells (no torch)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.basedatatypes import BaseTraceType

from specviz.app.views.cells import Cell, Decode
from specviz.app.views.style import COLORS, PALETTE
from specviz.app.views.tokens import visible
from specviz.core.events import RoundSummary
from specviz.gamma.theory import accepted_length_pmf, expected_accepted_per_round

HEIGHT = 300
SYMBOLS = {"accepted": "circle", "rejected": "x"}
_AXIS = {
    "gridcolor": "#EBF0F8",
    "linecolor": "#EBF0F8",
    "zerolinecolor": "#EBF0F8",
    "zerolinewidth": 2,
    "ticks": "",
    "automargin": True,
    "title": {"standoff": 15},
}
# The app's look: the layout of plotly's "plotly_white" (white ground, light grid) without its
# defaults for every kind of trace, which plotly would copy and check on every figure and send
# with it: by name, the template was most of a figure's cost, and figures are redrawn for every
# request decoding.
LOOK = go.layout.Template(
    layout={
        "font": {"color": "#2a3f5f"},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "hovermode": "closest",
        "hoverlabel": {"align": "left"},
        "title": {"x": 0.05},
        "xaxis": _AXIS,
        "yaxis": _AXIS,
    }
)


def _layout(title: str, x: str, y: str) -> dict[str, Any]:
    """Shared look: the template above, the app's palette, compact margins, axis titles, legend
    on top (the Benchmark results tab's figures get it too)."""
    return {
        "title": {"text": title, "font": {"size": 14}},
        "template": LOOK,
        "colorway": list(PALETTE),
        "height": HEIGHT,
        "margin": {"l": 50, "r": 10, "t": 60, "b": 40},
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        "xaxis": {"title": {"text": x}},
        "yaxis": {"title": {"text": y}},
    }


def figure(
    traces: Sequence[BaseTraceType],
    title: str,
    x: str,
    y: str,
    xaxis: dict[str, Any] | None = None,
    yaxis: dict[str, Any] | None = None,
    **layout: Any,
) -> go.Figure:
    """A figure in the app's look, given whole: traces, titles, each axis's settings and any
    other layout. plotly checks a figure given whole once, where every later update checks
    again: built this way a figure costs a fraction, and each page redraws its own."""
    look = _layout(title, x, y) | layout
    look["xaxis"] |= xaxis or {}
    look["yaxis"] |= yaxis or {}
    return go.Figure(data=list(traces), layout=look)


def styled(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    """A figure in the app's look (what the Benchmark results tab gives the report's figures)."""
    return fig.update_layout(_layout(title, x, y))


def bench_look(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    """A saved benchmark's figure in the app's look, a little taller, its legend (which may list
    many settings) under the plot."""
    legend = {"orientation": "h", "x": 0, "y": -0.3, "yanchor": "top"}
    fig = styled(fig, title, x, y)
    return fig.update_layout(height=HEIGHT + 100, legend=legend, margin={"b": 110})


def placeholder(title: str, message: str) -> go.Figure:
    """A figure that says, in the app's look, why it has nothing to draw."""
    return _empty(title, message)


def whole_ticks(values: Sequence[float], pad: float = 0.5) -> dict[str, Any]:
    """An axis's settings for ticks on whole numbers only (rounds, counts, γ): a step of 1 or
    more, never 0.5; the axis spans the values with pad on each side."""
    if not values:
        return {}
    lo, hi = min(values), max(values)
    step = max(1, math.ceil((hi - lo) / 10))
    return {"tick0": 0, "dtick": step, "range": [lo - pad, hi + pad], "tickformat": "d"}


def _empty(title: str, message: str) -> go.Figure:
    """A placeholder figure with a centred message."""
    note = {"text": message, "showarrow": False, "x": 0.5, "y": 0.5}
    hidden = {"visible": False}
    return figure(
        [],
        title,
        "",
        "",
        xaxis=hidden,
        yaxis=hidden,
        annotations=[note | {"xref": "paper", "yref": "paper"}],
    )


def _alpha(rounds: Sequence[RoundSummary]) -> float:
    """Measured acceptance rate: accepted / proposed drafts over all rounds."""
    proposed = sum(r.proposed for r in rounds)
    return sum(r.accepted for r in rounds) / proposed if proposed else 0.0


def acceptance_figure(
    rounds: Sequence[RoundSummary], window: int = 8, tree: bool = False
) -> go.Figure:
    """Acceptance rate per round, its rolling mean over `window` rounds, and the running total
    (tree: kept path nodes over proposed nodes)."""
    title = "Acceptance rate over time" + (": kept / proposed tree nodes" if tree else "")
    scored = [r for r in rounds if r.proposed]
    if not scored:
        return _empty(title, "no draft tokens proposed yet")
    x = [r.round for r in scored]
    per = [r.accepted / r.proposed for r in scored]
    rolling, running = [], []
    for i in range(len(scored)):
        part = scored[max(0, i - window + 1) : i + 1]
        rolling.append(_alpha(part))
        running.append(_alpha(scored[: i + 1]))
    traces = [
        go.Scatter(x=x, y=per, mode="markers", name="per round", marker_color=COLORS["accepted"]),
        go.Scatter(
            x=x,
            y=rolling,
            mode="lines",
            name=f"rolling ({window} rounds)",
            line_color=COLORS["bonus"],
        ),
        go.Scatter(
            x=x,
            y=running,
            mode="lines",
            name="cumulative α",
            line_dash="dash",
            line_color=COLORS["resampled"],
        ),
    ]
    return figure(
        traces,
        title,
        "round",
        "accepted / proposed",
        xaxis=whole_ticks(x),
        yaxis={"range": [-0.05, 1.05]},
    )


def accepted_length_figure(rounds: Sequence[RoundSummary], tree: bool = False) -> go.Figure:
    """Accepted drafts per round against the expectation for the measured α and each round's γ
    (tree: the kept path's length, with no chain estimate)."""
    title = (
        "Kept path per round (bonus not counted)"
        if tree
        else ("Accepted drafts per round (bonus not counted)")
    )
    if not rounds:
        return _empty(title, "no rounds yet")
    alpha = _alpha(rounds)
    x = [r.round for r in rounds]
    accepted = go.Bar(
        x=x, y=[r.accepted for r in rounds], name="accepted", marker_color=COLORS["accepted"]
    )
    axes = {"xaxis": whole_ticks(x), "yaxis": whole_ticks([0, max(r.gamma for r in rounds)], 0.3)}
    if tree:
        return figure([accepted], title, "round", "kept path nodes", **axes)
    expected = go.Scatter(
        x=x,
        y=[expected_accepted_per_round(alpha, r.gamma) for r in rounds],
        mode="lines",
        line_shape="hvh",
        name=f"i.i.d. estimate α + … + α^γ for α = {alpha:.2f}",
        line={"color": COLORS["rejected"], "dash": "dash"},
    )
    return figure([accepted, expected], title, "round", "accepted drafts", **axes)


def accepted_histogram(rounds: Sequence[RoundSummary], tree: bool = False) -> go.Figure:
    """How often 0..γ drafts were accepted, with the truncated-geometric expectation (tree:
    kept path lengths, with no chain estimate)."""
    title = "Histogram of kept path lengths" if tree else "Histogram of accepted drafts per round"
    if not rounds:
        return _empty(title, "no rounds yet")
    gamma, alpha = max(r.gamma for r in rounds), _alpha(rounds)
    counts = [sum(r.accepted == n for r in rounds) for n in range(gamma + 1)]
    lengths = list(range(gamma + 1))
    bars = go.Bar(x=lengths, y=counts, name="rounds", marker_color=COLORS["bonus"])
    if tree:
        axes = {"xaxis": whole_ticks(lengths), "yaxis": whole_ticks([0, *counts], pad=0.3)}
        return figure([bars], title, "kept path nodes in the round", "rounds", **axes)
    expected = [0.0] * (gamma + 1)
    for r in rounds:  # each round's own γ (policies and the last round may shorten it)
        for n, pr in enumerate(accepted_length_pmf(alpha, r.gamma)):
            expected[n] += pr
    estimate = go.Scatter(
        x=lengths,
        y=expected,
        mode="markers+lines",
        name=f"i.i.d. estimate (independent α = {alpha:.2f})",
        line={"color": COLORS["rejected"], "dash": "dot"},
    )
    axes = {"xaxis": whole_ticks(lengths), "yaxis": whole_ticks([0, *counts, *expected], 0.3)}
    return figure([bars, estimate], title, "accepted drafts in the round", "rounds", **axes)


def pq_figure(cells: Sequence[Cell]) -> go.Figure:
    """p(x) against q(x) for every proposed token that was verified, by verdict."""
    title = "Proposed tokens: target p(x) vs draft q(x)"
    judged = [c for c in cells if c.kind in SYMBOLS and c.q_x is not None]
    if not judged:
        return _empty(title, "no verified draft tokens yet")
    traces = [
        go.Scatter(
            x=[0, 1], y=[0, 1], mode="lines", name="p = q", line={"color": "#999", "dash": "dot"}
        )
    ]
    for kind, symbol in SYMBOLS.items():
        group = [c for c in judged if c.kind == kind]
        traces.append(
            go.Scatter(
                x=[c.q_x for c in group],
                y=[c.p_x for c in group],
                mode="markers",
                name=kind,
                marker={"color": COLORS[kind], "symbol": symbol, "size": 8},
                text=[f"#{c.index} {visible(c.text)!r}" for c in group],
                hovertemplate="%{text}<br>q=%{x:.4g}<br>p=%{y:.4g}<extra></extra>",
            )
        )
    unit = {"range": [-0.02, 1.02]}
    return figure(traces, title, "q(x) draft", "p(x) target", xaxis=unit, yaxis=unit)


def residual_figure(cell: Cell | None, decode: Decode) -> go.Figure:
    """For a resampled token: the top residual candidates against p and q."""
    title = "Residual norm(max(0, p − q))"
    top = [row for row in (cell.top if cell else ()) if max(row[1:]) > 0]  # drop all-zero rows
    if cell is None or not top:
        return _empty(title, "select a resampled token to see its residual")
    labels = [f"{visible(decode(t))!r} ({t})" for t, *_ in top]
    series = (("residual", "resampled"), ("p target", "bonus"), ("q draft", "accepted"))
    bars = [
        go.Bar(x=labels, y=[row[i] for row in top], name=name, marker_color=COLORS[kind])
        for i, (name, kind) in enumerate(series, start=1)
    ]
    at = f"{title} at token #{cell.index}"
    return figure(bars, at, "candidate token", "probability", barmode="group")
