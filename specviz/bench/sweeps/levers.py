"""`specviz bench levers` (alias --levers): speculation beside lower precision and a smaller
model, each timed and measured for its distance from the fp32 target (specviz.bench.lever_sweep).

Its section as numbers: one row per (workload, lever), the Markdown table, and the frontier
figure the report plots (each configuration's speedup against its distance from the fp32
target).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from specviz.api import stop_ids
from specviz.bench.lever_sweep import (
    DEFAULT_LEVERS,
    GRAMMAR,
    REFERENCE,
    LeverPlan,
    Models,
    Progress,
    parse_lever,
    parse_levers,
    run_lever_sweep,
)
from specviz.bench.sweep import Context, Outcome, with_flags
from specviz.console import say
from specviz.drafters.trimmed import load_head_tokens
from specviz.models.chat import PromptFormat, prompt_format
from specviz.models.loading import BUNDLED, check_tokenizers, load_tokenizer, resolve
from specviz.quant.precision import check_precision, load_at_precision
from specviz.results.records import cost_per_1k_tokens
from specviz.results.table import markdown_table
from specviz.workloads import Request, checked_prompt_ids


def add_levers_arguments(b: argparse.ArgumentParser) -> None:
    """Register --levers."""
    b.add_argument(
        "--levers",
        nargs="?",
        const=DEFAULT_LEVERS,
        default=None,
        metavar="LEVER,...",
        help="run the levers sweep instead of the other settings: speculation beside lower "
        "precision and the small model, on the same requests, each timed (tokens/s, latency, "
        "cost per 1k tokens, weights) and measured for its distance from the fp32 target "
        "(greedy agreement, first divergence, mean total variation along the target's own "
        f"samples). Each lever is {GRAMMAR}. Alone, --levers runs {DEFAULT_LEVERS}. "
        "Speculation uses the first of --drafters (model or model-trimmed) at the first of "
        "--gammas; int8 needs torchao",
    )


def levers_plan(
    args: argparse.Namespace, drafters: Sequence[str], policies: Sequence[str]
) -> LeverPlan | None:
    """The sweep --levers asks for (None without it); ValueError, saying what to change, for
    what it cannot run. Checks flags and libraries only: no model is loaded."""
    if args.levers is None:
        return None
    for flag, clash in (
        ("--tree-sweep", args.tree_sweep is not None),
        ("--batch-sizes", args.batch_sizes is not None),
        ("--lean-target", args.lean_target),
        ("--dtype", args.dtype != "float32"),
        ("--policies", list(policies) != ["fixed"]),
        ("--draft twice", len(args.draft or []) > 1),
    ):
        if clash:
            raise ValueError(
                f"--levers sets each model's precision and runs fixed gamma speculation on one "
                f"draft through transformers' target forward: drop {flag}"
            )
    levers = parse_levers(args.levers)
    for lever in levers:
        for _role, precision in lever.models():
            check_precision(precision, args.device)
    return LeverPlan(levers=levers, drafter=drafters[0], gamma=args.gammas[0])


def load_lever_models(
    plan: LeverPlan, target: str, draft: str, *, device: str, pack: bool
) -> tuple[Models, Any]:
    """Every (role, precision) the plan runs, loaded once, and the target's tokenizer."""
    tokenizer = load_tokenizer(target, role="target", progress=say)
    roles = {role for role, _ in plan.models()}
    if "draft" in roles:
        check_tokenizers(tokenizer, load_tokenizer(draft, role="draft", progress=say))
        if plan.drafter == "model-trimmed":
            load_head_tokens(resolve(draft, "draft", say))  # its token ranking, before weights
    models: Models = {}
    for role, precision in plan.models():
        say(f"loading {role} at {precision}")
        spec = target if role == "target" else draft
        models[role, precision] = load_at_precision(
            spec, precision, role=role, device=device, pack=pack, progress=say
        )
    return models, tokenizer


def _picked(
    requests: Sequence[Request], temperatures: Sequence[float] | None
) -> list[tuple[Request, float]]:
    """Each request at each temperature (None: at its own)."""
    if temperatures is None:
        return [(r, r.temperature) for r in requests]
    return [(r, t) for r in requests for t in temperatures]


def levers_result(
    plan: LeverPlan,
    args: argparse.Namespace,
    requests: Sequence[Request],
    progress: Progress,
) -> tuple[dict[str, Any], PromptFormat]:
    """Load the models, check every prompt against them, run the sweep: its raw section, and
    how the prompts reached the models (chat or raw)."""
    if not requests:
        raise ValueError("--levers has no requests: check --workloads and --limit")
    draft = (args.draft or [BUNDLED])[0]
    models, tokenizer = load_lever_models(
        plan, args.target, draft, device=args.device, pack=not args.no_pack
    )
    reference = models["target", "fp32"]
    checked = [reference, *models.values()]  # the reference first: its vocabulary
    chosen = [  # every prompt before any decode
        (r, checked_prompt_ids(tokenizer, r, r.max_new_tokens, checked, raw=args.raw), t)
        for r, t in _picked(requests, args.temperatures)
    ]
    section = run_lever_sweep(
        plan, models, tokenizer, chosen, repetitions=args.reps,
        stop=stop_ids(reference, tokenizer), progress=progress,
    )  # fmt: skip
    return section, prompt_format(tokenizer, raw=args.raw)


@dataclass(frozen=True, kw_only=True)
class Levers:
    """The levers sweep: it loads its own models, each lever at its precision; its section is
    saved under levers."""

    name: str = "levers"
    key: str | None = "levers"
    per_draft: bool = False

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_levers_arguments(parser)

    def asked(self, args: argparse.Namespace) -> bool:
        return args.levers is not None

    def chosen(self, args: argparse.Namespace) -> argparse.Namespace:
        return args if self.asked(args) else with_flags(args, levers=DEFAULT_LEVERS)

    def plan(
        self,
        args: argparse.Namespace,
        drafters: Sequence[str],
        policies: Sequence[str],
        requests: Sequence[Request],
    ) -> LeverPlan | None:
        return levers_plan(args, drafters, policies)

    def run(self, plan: LeverPlan, context: Context) -> Outcome:
        section, fmt = levers_result(plan, context.args, context.requests, context.progress)
        return Outcome(section=section, prompt_format=fmt)

    def render(self, section: dict[str, Any], price_per_hour: float) -> str:
        return render_levers(section, price_per_hour)


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
