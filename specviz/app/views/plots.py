"""Plotly figures built from round summaries and token cells (no torch)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go

from specviz.app.views.cells import Cell, Decode
from specviz.app.views.style import COLORS, PALETTE
from specviz.app.views.tokens import visible
from specviz.core.events import RoundSummary
from specviz.gamma.theory import accepted_length_pmf, expected_accepted_per_round

HEIGHT = 300
SYMBOLS = {"accepted": "circle", "rejected": "x"}


def _layout(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    """Shared look: white template, the app's palette, compact margins, axis titles, legend on
    top (the Benchmark results tab's figures get it too)."""
    fig.update_layout(
        title={"text": title, "font": {"size": 14}},
        template="plotly_white",
        colorway=list(PALETTE),
        height=HEIGHT,
        margin={"l": 50, "r": 10, "t": 60, "b": 40},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        xaxis_title=x,
        yaxis_title=y,
    )
    return fig


def styled(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    """A figure in the app's look (what the Benchmark results tab gives the report's figures)."""
    return _layout(fig, title, x, y)


def bench_look(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    """A saved benchmark's figure in the app's look, a little taller, its legend (which may list
    many settings) under the plot."""
    fig = _layout(fig, title, x, y)
    legend = {"orientation": "h", "x": 0, "y": -0.3, "yanchor": "top"}
    fig.update_layout(height=HEIGHT + 100, legend=legend, margin={"b": 110})
    return fig


def placeholder(title: str, message: str) -> go.Figure:
    """A figure that says, in the app's look, why it has nothing to draw."""
    return _empty(title, message)


def whole_ticks(fig: go.Figure, axis: str, values: Sequence[float], pad: float = 0.5) -> None:
    """Ticks on whole numbers only (rounds, counts, γ): a step of 1 or more, never 0.5; the axis
    spans the values with pad on each side."""
    if not values:
        return
    lo, hi = min(values), max(values)
    step = max(1, math.ceil((hi - lo) / 10))
    update = fig.update_xaxes if axis == "x" else fig.update_yaxes
    update(tick0=0, dtick=step, range=[lo - pad, hi + pad], tickformat="d")


def _empty(title: str, message: str) -> go.Figure:
    """A placeholder figure with a centred message."""
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _layout(fig, title, "", "")


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
    fig = go.Figure()
    fig.add_scatter(x=x, y=per, mode="markers", name="per round", marker_color=COLORS["accepted"])
    fig.add_scatter(
        x=x,
        y=rolling,
        mode="lines",
        name=f"rolling ({window} rounds)",
        line_color=COLORS["bonus"],
    )
    fig.add_scatter(
        x=x,
        y=running,
        mode="lines",
        name="cumulative α",
        line_dash="dash",
        line_color=COLORS["resampled"],
    )
    fig.update_yaxes(range=[-0.05, 1.05])
    whole_ticks(fig, "x", x)
    return _layout(fig, title, "round", "accepted / proposed")


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
    fig = go.Figure()
    fig.add_bar(
        x=x, y=[r.accepted for r in rounds], name="accepted", marker_color=COLORS["accepted"]
    )
    whole_ticks(fig, "x", x)
    whole_ticks(fig, "y", [0, max(r.gamma for r in rounds)], pad=0.3)
    if tree:
        return _layout(fig, title, "round", "kept path nodes")
    fig.add_scatter(
        x=x,
        y=[expected_accepted_per_round(alpha, r.gamma) for r in rounds],
        mode="lines",
        line_shape="hvh",
        name=f"i.i.d. estimate α + … + α^γ for α = {alpha:.2f}",
        line={"color": COLORS["rejected"], "dash": "dash"},
    )
    return _layout(fig, title, "round", "accepted drafts")


def accepted_histogram(rounds: Sequence[RoundSummary], tree: bool = False) -> go.Figure:
    """How often 0..γ drafts were accepted, with the truncated-geometric expectation (tree:
    kept path lengths, with no chain estimate)."""
    title = "Histogram of kept path lengths" if tree else "Histogram of accepted drafts per round"
    if not rounds:
        return _empty(title, "no rounds yet")
    gamma, alpha = max(r.gamma for r in rounds), _alpha(rounds)
    counts = [sum(r.accepted == n for r in rounds) for n in range(gamma + 1)]
    fig = go.Figure()
    fig.add_bar(x=list(range(gamma + 1)), y=counts, name="rounds", marker_color=COLORS["bonus"])
    whole_ticks(fig, "x", list(range(gamma + 1)))
    if tree:
        whole_ticks(fig, "y", [0, *counts], pad=0.3)
        return _layout(fig, title, "kept path nodes in the round", "rounds")
    expected = [0.0] * (gamma + 1)
    for r in rounds:  # each round's own γ (policies and the last round may shorten it)
        for n, pr in enumerate(accepted_length_pmf(alpha, r.gamma)):
            expected[n] += pr
    fig.add_scatter(
        x=list(range(gamma + 1)),
        y=expected,
        mode="markers+lines",
        name=f"i.i.d. estimate (independent α = {alpha:.2f})",
        line={"color": COLORS["rejected"], "dash": "dot"},
    )
    whole_ticks(fig, "y", [0, max(*counts, *expected)], pad=0.3)
    return _layout(fig, title, "accepted drafts in the round", "rounds")


def pq_figure(cells: Sequence[Cell]) -> go.Figure:
    """p(x) against q(x) for every proposed token that was verified, by verdict."""
    title = "Proposed tokens: target p(x) vs draft q(x)"
    judged = [c for c in cells if c.kind in SYMBOLS and c.q_x is not None]
    if not judged:
        return _empty(title, "no verified draft tokens yet")
    fig = go.Figure()
    fig.add_scatter(
        x=[0, 1], y=[0, 1], mode="lines", name="p = q", line={"color": "#999", "dash": "dot"}
    )
    for kind, symbol in SYMBOLS.items():
        group = [c for c in judged if c.kind == kind]
        fig.add_scatter(
            x=[c.q_x for c in group],
            y=[c.p_x for c in group],
            mode="markers",
            name=kind,
            marker={"color": COLORS[kind], "symbol": symbol, "size": 8},
            text=[f"#{c.index} {visible(c.text)!r}" for c in group],
            hovertemplate="%{text}<br>q=%{x:.4g}<br>p=%{y:.4g}<extra></extra>",
        )
    fig.update_xaxes(range=[-0.02, 1.02])
    fig.update_yaxes(range=[-0.02, 1.02])
    return _layout(fig, title, "q(x) draft", "p(x) target")


def residual_figure(cell: Cell | None, decode: Decode) -> go.Figure:
    """For a resampled token: the top residual candidates against p and q."""
    title = "Residual norm(max(0, p − q))"
    top = [row for row in (cell.top if cell else ()) if max(row[1:]) > 0]  # drop all-zero rows
    if cell is None or not top:
        return _empty(title, "select a resampled token to see its residual")
    labels = [f"{visible(decode(t))!r} ({t})" for t, *_ in top]
    fig = go.Figure()
    for i, (name, kind) in enumerate(
        (("residual", "resampled"), ("p target", "bonus"), ("q draft", "accepted")), start=1
    ):
        fig.add_bar(x=labels, y=[row[i] for row in top], name=name, marker_color=COLORS[kind])
    fig.update_layout(barmode="group")
    return _layout(fig, f"{title} at token #{cell.index}", "candidate token", "probability")
