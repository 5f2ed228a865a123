"""`specviz bench speedup` (the default study): every drafter × policy × γ setting on the
workloads, interleaved with plain decoding and transformers' assisted generation."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specviz.bench.runner import run_all
from specviz.bench.sweep import Context, Outcome, by_temperature
from specviz.bench.sweeps.trees import check_tree_flags, drafter_names, tree_settings
from specviz.drafters.registry import (
    EXIT_DRAFTERS,
    HYBRID_DRAFTERS,
    MODEL_DRAFTERS,
    TREE_DRAFTERS,
    UNCONFIDENT_DRAFTERS,
)
from specviz.heads.lookup import check_heads
from specviz.models.loading import check_device
from specviz.results.records import Record
from specviz.results.setting import DRAFTERS, POLICIES, BenchSetting, drafter_label
from specviz.workloads import Request


def ints(text: str) -> list[int]:
    """'1,2,4' → [1, 2, 4]."""
    return [int(x) for x in text.split(",") if x.strip()]


def _caps(text: str) -> list[int | None]:
    """'none,2' → [None, 2]: draft-model caps of the hybrid drafters (none: no cap)."""
    return [None if x.strip() == "none" else int(x) for x in text.split(",") if x.strip()]


def add_speedup_arguments(b: argparse.ArgumentParser) -> None:
    """Register --exit-layer, --model-gamma, --policies and --start-gamma."""
    b.add_argument(
        "--exit-layer",
        type=ints,
        default="8",
        help="layers the early-exit drafter uses (comma list to compare draft sizes)",
    )
    b.add_argument(
        "--model-gamma",
        type=_caps,
        default="none",
        help="hybrid drafters (ngram+...): at most this many draft-model tokens a round while "
        "lookup copies run to gamma; comma list to compare, 'none' for no cap (default)",
    )
    b.add_argument(
        "--policies",
        default="fixed",
        help=f"comma list of gamma policies {POLICIES}; fixed sweeps --gammas",
    )
    b.add_argument(
        "--start-gamma", type=int, default=4, help="where the dynamic gamma policies start"
    )


def check(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """Validate flags before any model work; returns the drafter and policy names."""
    drafters = drafter_names(args)
    if not drafters or any(d not in DRAFTERS for d in drafters):
        raise ValueError(
            f"--drafters must list some of {', '.join(map(repr, DRAFTERS))} (got {args.drafters!r})"
        )
    if not args.gammas or min(args.gammas) < 1:
        raise ValueError(f"--gammas must be integers >= 1 (got {args.gammas})")
    if args.reps < 1:
        raise ValueError(f"--reps must be >= 1 (got {args.reps})")
    if args.temperatures is not None and min(args.temperatures, default=0) < 0:
        raise ValueError(f"--temperatures must be >= 0 (got {args.temperatures})")
    if args.start_gamma < 1:
        raise ValueError(f"--start-gamma must be >= 1 (got {args.start_gamma})")
    check_device(args.device)
    if not args.price_per_hour > 0:
        raise ValueError(f"--price-per-hour must be > 0 USD (got {args.price_per_hour})")
    if not args.exit_layer or min(args.exit_layer) < 1:
        raise ValueError(f"--exit-layer must be integers >= 1 (got {args.exit_layer})")
    if not args.model_gamma or min((k for k in args.model_gamma if k is not None), default=1) < 1:
        raise ValueError(f"--model-gamma must be integers >= 1 or 'none' (got {args.model_gamma})")
    if args.model_gamma != [None] and not any(d in HYBRID_DRAFTERS for d in drafters):
        raise ValueError(
            "--model-gamma caps the draft model after lookup: add one of "
            f"{', '.join(HYBRID_DRAFTERS)} to --drafters, or drop --model-gamma"
        )
    twice = sorted({d for d in args.draft or [] if args.draft.count(d) > 1})
    if twice:
        raise ValueError(f"--draft names {', '.join(twice)} more than once: give each draft once")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if not policies or any(p not in POLICIES for p in policies):
        raise ValueError(f"--policies must list some of {POLICIES} (got {args.policies!r})")
    check_tree_flags(args, drafters, policies)
    check_heads(drafters, args.heads, flag="--drafters")
    return drafters, policies


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
    drafter runs once, at --tree-depth (sweeps.trees.tree_settings).
    """
    trees = [s for d in drafters if d in TREE_DRAFTERS for s in tree_settings(args, d, draft, t)]
    return trees + [
        BenchSetting(
            drafter=d,
            gamma=g,
            temperature=t,
            draft_name=draft if d in MODEL_DRAFTERS else d,
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

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_speedup_arguments(parser)

    def asked(self, args: argparse.Namespace) -> bool:
        return True  # what runs when no other study is asked for

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
        return ""  # no section: its tables are specviz.bench.markdown's
