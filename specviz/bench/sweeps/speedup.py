"""`specviz bench speedup` (the default study): every drafter × policy × γ setting on the
workloads, interleaved with plain decoding and transformers' assisted generation, and its
tables: per setting the speedup against the theory, latency and throughput per request, the γ
curves, the dynamic γ policies against the best fixed γ, and the cost per 1k tokens.

It saves records only: the summary rows, γ curves and policy table (specviz.bench.summary) are
recomputed from them, and its tables render from those.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specviz.bench.runner import run_all
from specviz.bench.sweep import Context, Outcome, by_temperature
from specviz.drafters.names import (
    EXIT_DRAFTERS,
    HYBRID_DRAFTERS,
    MODEL_DRAFTERS,
    TREE_DRAFTERS,
    UNCONFIDENT_DRAFTERS,
)
from specviz.results.records import Record
from specviz.results.setting import BenchSetting, drafter_label, setting_label
from specviz.results.table import NONE, Column, column_table, number_cell, spread_cell
from specviz.workloads import Request


def settings(
    drafters: Sequence[str],
    policies: Sequence[str],
    args: argparse.Namespace,
    draft: str,
    t: float,
) -> list[BenchSetting]:
    """Every drafter x policy x gamma (x exit layer, x draft-model cap) point; n-gram and the
    head drafters have no confidence policy (they never stop drafting on their q).

    The fixed policy sweeps --gammas; each dynamic policy runs once, from --start-gamma. A tree
    drafter runs once, at --tree-depth, --tree-nodes, --tree-width and --tree-rule.
    """

    def name(d: str) -> str:
        return draft if d in MODEL_DRAFTERS else d

    trees = [
        BenchSetting(
            drafter=d,
            gamma=args.tree_depth,
            temperature=t,
            draft_name=name(d),
            tree_nodes=args.tree_nodes,
            tree_width=args.tree_width,
            tree_rule=args.tree_rule,
        )
        for d in drafters
        if d in TREE_DRAFTERS
    ]
    return trees + [
        BenchSetting(
            drafter=d,
            gamma=g,
            temperature=t,
            draft_name=name(d),
            exit_layer=k,
            policy=p,
            model_gamma=cap,
        )
        for d in drafters
        if d not in TREE_DRAFTERS
        for k in (args.exit_layer if d in EXIT_DRAFTERS else args.exit_layer[:1])
        for cap in (args.model_gamma if d in HYBRID_DRAFTERS else [None])
        for p in policies
        if not (p == "confidence" and d in UNCONFIDENT_DRAFTERS)
        for g in (args.gammas if p == "fixed" else [args.start_gamma])
    ]


def summary_line(row: dict[str, Any]) -> str:
    """One summary row in a line: speedup, the chain bound where it applies, alpha and c."""
    s = row["setting"]
    head = f"{row['workload']:7s} {s['drafter']:5s} {s['policy']:9s} gamma={s['gamma']} "
    if s.get("tree_nodes") is not None:  # a tree: its gamma is its depth; no chain bound
        head = f"{row['workload']:7s} {drafter_label(s)} depth={s['gamma']} "
    theory = (
        f" (bound {row['bound']['median']:.2f}x, efficiency {row['efficiency']['median']:.2f})"
        if row["bound"] is not None
        else ""
    )
    return (
        f"{head}T={s['temperature']}: speedup {row['speedup']['median']:.2f}x{theory}, "
        f"alpha {row['alpha']['median']:.2f}, c {row['cost_ratio']['median']:.3f}"
    )


def _spread(key: str, fmt: str = ".2f") -> Column:
    """The column of a row's spread under key (NONE where it has none)."""
    return key, lambda r: spread_cell(r[key] or None, fmt)


def _median(key: str, fmt: str = ".2f") -> Column:
    """The column of a row's median under key (NONE where it has none)."""
    return key, lambda r: number_cell(r[key] and r[key]["median"], fmt)


def _head(*names: str) -> tuple[Column, ...]:
    """The workload, T and setting columns that open every per-setting table."""
    head: dict[str, Column] = {
        "workload": ("workload", lambda r: r["workload"]),
        "T": ("T", lambda r: f"{r['setting']['temperature']:g}"),
        "setting": ("setting", lambda r: setting_label(r["setting"])),
    }
    return tuple(head[n] for n in names)


def _titled(title: str, column: Column) -> Column:
    return title, column[1]


SUMMARY = (
    *_head("workload", "T", "setting"),
    ("n", lambda r: str(r["requests"])),
    _spread("speedup"),
    _median("bound"),
    _spread("efficiency"),
    _titled("decode speedup", _spread("decode_speedup")),
    _titled("decode efficiency", _spread("decode_efficiency")),
    _titled("α", _spread("alpha")),
    ("c", lambda r: f"{r['cost_ratio']['median']:.3f}"),
    ("r", lambda r: f"{r['verify_ratio']['median']:.2f}"),
    _titled("bound with r", _median("refined_bound")),
    _titled("loop efficiency", _median("loop_efficiency")),
    ("tokens/round", lambda r: f"{r['tokens_per_round']['median']:.2f}"),
    ("target calls/token", lambda r: f"{r['target_calls_per_token']['median']:.2f}"),
    _titled("ours/HF time per token", _spread("ours_over_transformers_time_per_token")),
    (
        "ours faster than HF (pairs; sign test p)",
        lambda r: (
            NONE
            if not (w := r["ours_faster_than_transformers"])
            else f"{w['faster']}/{w['pairs']} ({w['p_value']:.2g})"
        ),
    ),
    ("same tokens as HF", lambda r: number_cell(r["identical_to_transformers"], ".0%")),
)
LATENCY = (
    *_head("workload", "T", "setting"),
    ("tokens", lambda r: f"{r['tokens']['median']:.0f}"),
    _titled("plain s", _spread("plain_latency")),
    _titled("speculative s", _spread("latency")),
    _titled("transformers s", _spread("hf_latency")),
    _titled("plain tok/s", _spread("plain_tokens_per_second", ".1f")),
    _titled("speculative tok/s", _spread("tokens_per_second", ".1f")),
    _titled("transformers tok/s", _spread("hf_tokens_per_second", ".1f")),
    ("accepted drafts/round", lambda r: f"{r['accepted_per_round']['median']:.2f}"),
    ("tokens/round (with bonus or resample)", lambda r: f"{r['tokens_per_round']['median']:.2f}"),
)
CURVES = (
    ("workload", lambda c: c["workload"]),
    ("drafter", drafter_label),
    ("T", lambda c: f"{c['temperature']:g}"),
    ("α", lambda c: f"{c['alpha']:.2f}"),
    ("c", lambda c: f"{c['cost_ratio']:.3f}"),
    (
        "γ: measured speedup",
        lambda c: ", ".join(
            f"{g}: {m:.2f}" for g, m in zip(c["gammas"], c["measured_speedup"], strict=True)
        ),
    ),
    ("best γ", lambda c: str(c["measured_best_gamma"])),
    ("theory γ", lambda c: str(c["theory_best_gamma"])),
)
POLICY = (
    ("workload", lambda d: d["workload"]),
    ("drafter", lambda d: d["drafter"]),
    ("T", lambda d: f"{d['temperature']:g}"),
    ("policy", lambda d: f"{d['policy']} from γ={d['start_gamma']}"),
    ("speedup", lambda d: f"{d['speedup']:.2f}"),
    (
        "best fixed γ (speedup)",
        lambda d: f"{d['best_fixed_gamma']} ({d['best_fixed_speedup']:.2f})",
    ),
    ("ratio", lambda d: f"{d['ratio']:.2f}"),
    (
        "priced speedup",
        lambda d: number_cell(d["priced_speedup"] if d["priced_ratio"] is not None else None),
    ),
    (
        "best fixed γ priced",
        lambda d: (
            NONE
            if d["priced_ratio"] is None
            else f"{d['best_fixed_priced_gamma']} ({d['best_fixed_priced_speedup']:.2f})"
        ),
    ),
    ("priced ratio", lambda d: number_cell(d["priced_ratio"])),
)
COST = (
    *_head("workload", "T", "setting"),
    ("price/h", lambda r: f"{r['cost_per_1k_tokens']['price_per_hour']:.2f}"),
    ("plain $/1k tok", lambda r: f"{r['cost_per_1k_tokens']['plain']:.5f}"),
    ("speculative $/1k tok", lambda r: f"{r['cost_per_1k_tokens']['speculative']:.5f}"),
)


def summary_tables(result: dict[str, Any]) -> list[str]:
    """The tables a result's records make, each followed by an empty line: per (workload,
    setting), latency and throughput per request, the γ curves, the dynamic γ policies."""
    out: list[str] = []
    if result["summary"]:  # a batch sweep alone has no per-request records
        out += [*column_table(SUMMARY, result["summary"]), ""]
        out += [
            "Latency and throughput per request (medians with min–max; at T > 0 the plain "
            "run's seconds are scaled to the speculative run's length):",
            "",
            *column_table(LATENCY, result["summary"]),
            "",
        ]
    if result["gamma_curves"]:
        out += ["Speedup against γ, and the γ theory picks for the measured α and c:", ""]
        out += [*column_table(CURVES, result["gamma_curves"]), ""]
    if result["policies_vs_best_fixed"]:
        out += [
            "Dynamic γ against the best fixed γ (ratio of median speedups; priced: every run's "
            "work at the sweep's median costs, free of timing noise):",
            "",
            *column_table(POLICY, result["policies_vs_best_fixed"]),
            "",
        ]
    return out


def cost_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Device cost per 1k generated tokens, plain against speculative."""
    return column_table(COST, rows)


@dataclass(frozen=True, kw_only=True)
class SpeedupPlan:
    """The drafters and γ policies every setting is drawn from."""

    drafters: tuple[str, ...]
    policies: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Speedup:
    """The main sweep: it saves records only (summary, γ curves and the policy table come from
    them), no section of its own."""

    name: str = "speedup"
    key: str | None = None
    per_draft: bool = True
    own_flags: bool = False

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """None of its own: its settings are every study's (specviz.bench.sweep)."""

    def chosen(self, args: argparse.Namespace) -> argparse.Namespace:
        return args

    def plan(
        self,
        args: argparse.Namespace,
        drafters: Sequence[str],
        policies: Sequence[str],
        requests: Sequence[Request],
    ) -> SpeedupPlan:
        return SpeedupPlan(drafters=tuple(drafters), policies=tuple(policies))

    def run(self, plan: SpeedupPlan, context: Context) -> Outcome:
        args, pair = context.args, context.pair
        records: list[Record] = []
        for temperature, subset in by_temperature(args, context.requests):
            records += run_all(
                pair.target,
                pair.draft,
                pair.tokenizer,
                subset,
                settings(plan.drafters, plan.policies, args, context.draft, temperature),
                repetitions=args.reps,
                with_hf=not args.no_hf,
                progress=context.progress,
                lean=not args.no_lean,
                lean_target=args.lean_target,
                raw=args.raw,
                heads=args.heads,
            )
        return Outcome(records=tuple(records))

    def render(self, section: dict[str, Any], price_per_hour: float) -> str:
        """The tables of a result's records (section: its summary, gamma_curves and
        policies_vs_best_fixed), the cost table last."""
        return "\n".join([*summary_tables(section), *cost_table(section["summary"])])
