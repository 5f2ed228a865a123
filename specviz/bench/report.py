"""Summaries of benchmark records and a self-contained plotly HTML report."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from scipy import stats

from specviz.bench.batch_table import sweep_curves
from specviz.bench.lever_table import frontier_figure
from specviz.bench.metrics import DEFAULT_PRICE_PER_HOUR, cost_per_1k_tokens, spread
from specviz.bench.runner import BenchSetting, Record, drafter_label
from specviz.bench.trees import is_tree
from specviz.endpoint.figure import speedup_figure, tpot_figure
from specviz.gamma.policies import VerifyCost
from specviz.gamma.theory import optimal_gamma, speedup_bound


def _key(r: Record) -> tuple[str, BenchSetting]:
    """Group records by workload and setting."""
    return r.category, r.setting


PricingKey = tuple[str, str, str, int, float, int | None, int | None]


def _pricing_key(r: Record) -> PricingKey:
    """Records priced together: same workload, drafter and temperature (any gamma or policy);
    a tree drafter's node budget and width too (its draft passes grow with them)."""
    s = r.setting
    return r.category, s.drafter, s.draft_name, s.exit_layer, s.temperature, *_tree_key(s)


def _tree_key(s: BenchSetting) -> tuple[int | None, int | None]:
    """A tree setting's node budget and width (None, None for a chain)."""
    return s.tree_nodes, s.tree_width


def priced_speedups(records: Sequence[Record]) -> list[float]:
    """Each record's speedup with its work priced at costs shared by its whole sweep.

    A record's work is its draft steps and its verification passes by width, and its paired
    plain run's decode steps; each is priced at the median measured over every record of the
    same workload, drafter and temperature (passes by width as the theory policy prices them:
    VerifyCost). Timing noise, which moves identical runs apart on a busy machine
    (benchmarks/RESULTS.md, section Machine and parts), is gone; what is left
    compares the policies' choices. nan where per-pass timings were not recorded.
    """
    groups: dict[PricingKey, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        groups[_pricing_key(r)].append(i)
    out = [float("nan")] * len(records)
    for idx in groups.values():
        ms = [records[i].metrics for i in idx]
        if not all(m.widths and m.plain_decode_seconds for m in ms):
            continue
        passes = VerifyCost(window=None)  # every pass of the sweep, not only the latest
        for m in ms:
            for width, seconds in zip(m.widths, m.pass_seconds, strict=True):
                passes.add(width, seconds)
        step = statistics.median(m.step_seconds for m in ms)
        drafted = [m.draft_seconds / m.draft_calls for m in ms if m.draft_calls]
        draft = statistics.median(drafted) if drafted else 0.0
        for i, m in zip(idx, ms, strict=True):
            work = m.draft_calls * draft + sum(passes(w) for w in m.widths)
            out[i] = m.tokens * step / work
    return out


def summarize(records: Sequence[Record], price_per_hour: float) -> list[dict[str, Any]]:
    """Per (workload, setting): medians with min–max, theory, cost, agreement with transformers."""
    groups: dict[tuple[str, BenchSetting], list[Record]] = defaultdict(list)
    priced: dict[tuple[str, BenchSetting], list[float]] = defaultdict(list)
    for r, speed in zip(records, priced_speedups(records), strict=True):
        groups[_key(r)].append(r)
        priced[_key(r)].append(speed)
    rows = []
    for (category, setting), rs in groups.items():
        ms = [r.metrics for r in rs]
        chain = not setting.tree  # the Leviathan bound and its kin describe chains only
        hf = [r for r in rs if r.hf_latency is not None and r.hf_tokens]
        hf_runs = [(r.hf_latency, r.hf_tokens) for r in rs if r.hf_latency and r.hf_tokens]
        spec_s, plain_s = sum(m.latency for m in ms), sum(m.plain_latency for m in ms)
        tokens = sum(m.tokens for m in ms)
        rows.append(
            {
                "workload": category,
                "setting": asdict(setting),
                "exact": setting.exact,  # False: a lossy tree rule, not the target's law
                "requests": len(rs),
                "speedup": asdict(spread([m.speedup for m in ms])),
                "mean_gamma": asdict(spread([m.mean_gamma for m in ms])),
                "bound": asdict(spread([m.bound() for m in ms])) if chain else None,
                "efficiency": asdict(spread([m.efficiency() for m in ms])) if chain else None,
                "decode_speedup": _spread_known([m.decode_speedup for m in ms]),
                "decode_efficiency": _spread_known([m.decode_efficiency() for m in ms])
                if chain
                else None,
                "priced_speedup": _spread_known(priced[category, setting]),
                "verify_ratio": asdict(spread([m.verify_ratio for m in ms])),
                "refined_bound": asdict(spread([m.refined_bound() for m in ms])) if chain else None,
                "loop_efficiency": asdict(spread([m.loop_efficiency() for m in ms]))
                if chain
                else None,
                "alpha": asdict(spread([m.alpha for m in ms if m.alpha == m.alpha] or [0.0])),
                "cost_ratio": asdict(spread([m.cost_ratio for m in ms])),
                "tokens": asdict(spread([m.tokens for m in ms])),
                "tokens_per_second": asdict(spread([m.tokens_per_second for m in ms])),
                "latency": asdict(spread([m.latency for m in ms])),
                "plain_latency": asdict(spread([m.plain_latency for m in ms])),
                "plain_tokens_per_second": asdict(spread([m.tokens / m.plain_latency for m in ms])),
                "hf_latency": asdict(spread([s for s, _ in hf_runs])) if hf_runs else None,
                "hf_tokens_per_second": asdict(spread([n / s for s, n in hf_runs]))
                if hf_runs
                else None,
                "target_calls_per_token": asdict(spread([m.target_calls_per_token for m in ms])),
                "accepted_per_round": asdict(spread([m.accepted_per_round for m in ms])),
                "tokens_per_round": asdict(spread([m.tokens_per_round for m in ms])),
                "ours_over_transformers_time_per_token": asdict(spread([_hf_ratio(r) for r in hf]))
                if hf
                else None,
                "identical_to_transformers": sum(bool(r.hf_identical) for r in hf) / len(hf)
                if hf
                else None,
                "ours_faster_than_transformers": faster_pairs([_hf_ratio(r) for r in hf])
                if hf
                else None,
                "cost_per_1k_tokens": {
                    "plain": cost_per_1k_tokens(plain_s, tokens, price_per_hour),
                    "speculative": cost_per_1k_tokens(spec_s, tokens, price_per_hour),
                    "price_per_hour": price_per_hour,
                },
            }
        )
    return rows


def _spread_known(values: Sequence[float]) -> dict[str, float] | None:
    """Spread of the values that are not nan (None when none is known)."""
    known = [v for v in values if v == v]
    return asdict(spread(known)) if known else None


def faster_pairs(ratios: Sequence[float]) -> dict[str, float]:
    """Pairs where ours took less time per token (ratio < 1), and the one-sided sign test's p
    of H0: ours is as likely to be slower as faster (ties count as not faster)."""
    faster = sum(r < 1.0 for r in ratios)
    p_value = float(stats.binomtest(faster, len(ratios), 0.5, alternative="greater").pvalue)
    return {"faster": faster, "pairs": len(ratios), "p_value": p_value}


def _hf_ratio(r: Record) -> float:
    """Our seconds per token / transformers' seconds per token for one request."""
    if r.hf_latency is None or not r.hf_tokens:
        raise ValueError("record has no transformers timing")
    return (r.metrics.latency / r.metrics.tokens) / (r.hf_latency / r.hf_tokens)


# workload, drafter, draft name, exit layer, draft-model cap, T
Curve = tuple[str, str, str, int, int | None, float]


def _curve_key(row: dict[str, Any]) -> Curve:
    """Rows that differ only in gamma and policy share a curve."""
    s = row["setting"]
    cap = s["model_gamma"]
    return row["workload"], s["drafter"], s["draft_name"], s["exit_layer"], cap, s["temperature"]


def gamma_curves(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (workload, drafter, T): measured speedup of fixed gammas, and theory's optimum
    (chain drafters only: a tree's speedup against its node budget is the tree sweep's)."""
    curves: dict[Curve, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row["setting"]["policy"] == "fixed" and not is_tree(row["setting"]):
            curves[_curve_key(row)].append(row)
    out = []
    for (workload, drafter, draft_name, exit_layer, cap, temperature), points in curves.items():
        points.sort(key=lambda r: r["setting"]["gamma"])
        gammas = [p["setting"]["gamma"] for p in points]
        measured = [p["speedup"]["median"] for p in points]
        alpha = sorted(p["alpha"]["median"] for p in points)[len(points) // 2]
        c = sorted(p["cost_ratio"]["median"] for p in points)[len(points) // 2]
        a = min(alpha, 0.999)
        out.append(
            {
                "workload": workload,
                "drafter": drafter,
                "draft_name": draft_name,
                "exit_layer": exit_layer,
                "model_gamma": cap,
                "temperature": temperature,
                "gammas": gammas,
                "measured_speedup": measured,
                "theory_speedup": [speedup_bound(a, g, c) for g in gammas],
                "measured_best_gamma": gammas[measured.index(max(measured))],
                "theory_best_gamma": optimal_gamma(a, c, max(gammas)),
                "alpha": alpha,
                "cost_ratio": c,
            }
        )
    return out


def _best_fixed(rows: Sequence[dict[str, Any]], metric: str) -> dict[Curve, tuple[float, int]]:
    """Per curve: the best fixed gamma's median `metric` and that gamma."""
    best: dict[Curve, tuple[float, int]] = {}
    for row in rows:
        if row["setting"]["policy"] == "fixed" and row[metric]:
            key, speed = _curve_key(row), row[metric]["median"]
            if key not in best or speed > best[key][0]:
                best[key] = (speed, row["setting"]["gamma"])
    return best


def policies_vs_best_fixed(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each dynamic policy's median speedup / the best fixed gamma's, on the same curve.

    Measured (wall clock, paired with plain runs) and priced (priced_speedups: the same work at
    shared costs, free of timing noise), each against the fixed gamma that is best by it.
    """
    best, best_priced = _best_fixed(rows, "speedup"), _best_fixed(rows, "priced_speedup")
    out = []
    for row in rows:
        key = _curve_key(row)
        if row["setting"]["policy"] != "fixed" and key in best:
            speed = row["speedup"]["median"]
            priced, versus = row["priced_speedup"], best_priced.get(key)
            out.append(
                {
                    "workload": row["workload"],
                    "drafter": drafter_label(row["setting"]),
                    "temperature": row["setting"]["temperature"],
                    "policy": row["setting"]["policy"],
                    "start_gamma": row["setting"]["gamma"],
                    "speedup": speed,
                    "best_fixed_gamma": best[key][1],
                    "best_fixed_speedup": best[key][0],
                    "ratio": speed / best[key][0],
                    **_priced_versus(priced, versus),
                }
            )
    return out


def _priced_versus(
    priced: dict[str, float] | None, versus: tuple[float, int] | None
) -> dict[str, float | int | None]:
    """A policy's priced median against the best fixed gamma's (None where either is unknown)."""
    if not priced or not versus:
        return dict.fromkeys(
            (
                "priced_speedup",
                "best_fixed_priced_gamma",
                "best_fixed_priced_speedup",
                "priced_ratio",
            )
        )
    return {
        "priced_speedup": priced["median"],
        "best_fixed_priced_gamma": versus[1],
        "best_fixed_priced_speedup": versus[0],
        "priced_ratio": priced["median"] / versus[0],
    }


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
