"""`specviz bench trees` (alias --tree-sweep): the tree drafters' node-budget sweep, and the
tree options every study shares (the drafters' shape and rule)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specviz.bench.sweep import Context, Outcome, by_temperature, with_flags
from specviz.bench.tree_sweep import (
    DEFAULT_NODES,
    SweepPlan,
    parse_nodes,
    run_sweep,
    tree_pass_timings,
)
from specviz.bench.tree_table import render_sweep, sweep_section
from specviz.console import say
from specviz.drafters.registry import HEAD_DRAFTERS, MODEL_DRAFTERS, TREE_DRAFTERS, DrafterOptions
from specviz.models.chat import prompt_ids as chat_prompt_ids
from specviz.results.records import Record
from specviz.results.setting import TREE_RULES, BenchSetting
from specviz.workloads import Request

SWEEP_DRAFTERS = "tree-model"  # --drafters under --tree-sweep when none is given
DEFAULT_DRAFTERS = "model"


def add_tree_arguments(b: argparse.ArgumentParser) -> None:
    """Register --tree-nodes, --tree-depth, --tree-width, --tree-rule and --tree-sweep."""
    defaults = DrafterOptions()
    b.add_argument(
        "--tree-nodes",
        type=int,
        default=defaults.tree_nodes,
        help="tree drafters: at most this many nodes a round",
    )
    b.add_argument(
        "--tree-depth",
        type=int,
        default=defaults.tree_depth,
        help="tree drafters: levels a round drafts (their gamma; --gammas is the chains'), and "
        "the depth D of --tree-sweep",
    )
    b.add_argument(
        "--tree-width",
        type=int,
        default=defaults.tree_width,
        help="tree drafters: at most this many children a node",
    )
    b.add_argument(
        "--tree-rule",
        default="exact",
        choices=sorted(TREE_RULES),
        help="how tree drafters' trees are verified: exact (the output follows the target's "
        "law) or typical (Medusa's typical acceptance: LOSSY, its output does not follow the "
        "target's law; every table row and record that ran it says so)",
    )
    b.add_argument(
        "--tree-sweep",
        nargs="?",
        const=",".join(map(str, DEFAULT_NODES)),
        default=None,
        metavar="N,...",
        help="run the node-budget sweep instead of the other settings: at depth --tree-depth, "
        "the chain (N = 1: the chain drafter at gamma = depth, as many draft calls a round) "
        "and each tree drafter of --drafters (default then: tree-model) at each node budget N; "
        "reports tokens a target pass, r(N) (a pass over N tree tokens against a 1-token step), "
        "the speedup over plain decoding, the chain and transformers' assisted generation, and "
        "where the tree pays (without a value: N = "
        f"{','.join(map(str, DEFAULT_NODES))}; --gammas, --policies and --tree-nodes are for "
        "the other settings)",
    )


def drafter_names(args: argparse.Namespace) -> list[str]:
    """--drafters as a list (its default: model, or tree-model under --tree-sweep)."""
    given = args.drafters or (SWEEP_DRAFTERS if args.tree_sweep else DEFAULT_DRAFTERS)
    return [d.strip() for d in given.split(",") if d.strip()]


def sweep_plan(args: argparse.Namespace, drafters: list[str]) -> SweepPlan | None:
    """The sweep --tree-sweep asks for (None without it); ValueError for what it cannot run."""
    if args.tree_sweep is None:
        return None
    plan = SweepPlan(
        drafters=tuple(drafters),
        nodes=parse_nodes(args.tree_sweep),
        depth=args.tree_depth,
        width=args.tree_width,
        rule=args.tree_rule,
    )
    if len(args.draft or []) > 1:
        raise ValueError("--tree-sweep compares node budgets on one draft: give one --draft")
    if args.policies.strip() != "fixed":
        raise ValueError("--tree-sweep drafts to a fixed depth: drop --policies")
    if args.lean_target:
        raise ValueError(
            "--tree-sweep runs the target on transformers' forward: drop --lean-target"
        )
    return plan


def check_tree_flags(args: argparse.Namespace, drafters: list[str], policies: list[str]) -> None:
    """ValueError, saying what to change, for tree options the run cannot honour."""
    for flag, value in (
        ("--tree-nodes", args.tree_nodes),
        ("--tree-depth", args.tree_depth),
        ("--tree-width", args.tree_width),
    ):
        if value < 1:
            raise ValueError(f"{flag} must be an integer >= 1 (got {value})")
    trees = [d for d in drafters if d in TREE_DRAFTERS]
    masked = [d for d in trees if d not in HEAD_DRAFTERS]  # the head trees verify on their own
    if masked and args.lean_target:
        raise ValueError(
            f"{', '.join(masked)} verify their trees through transformers' forward with a 4D "
            "attention mask, which --lean-target's forward does not take: drop --lean-target, "
            "or bench the tree drafters in a run of their own"
        )
    if trees and "fixed" not in policies and args.tree_sweep is None:
        raise ValueError(
            f"{', '.join(trees)} draft to a fixed depth (--tree-depth): add fixed to --policies"
        )


def tree_settings(
    args: argparse.Namespace, drafter: str, draft: str, temperature: float
) -> list[BenchSetting]:
    """A tree drafter's one setting: --tree-depth, --tree-nodes, --tree-width, --tree-rule."""
    return [
        BenchSetting(
            drafter=drafter,
            gamma=args.tree_depth,
            temperature=temperature,
            draft_name=draft if drafter in MODEL_DRAFTERS else drafter,
            tree_nodes=args.tree_nodes,
            tree_width=args.tree_width,
            tree_rule=args.tree_rule,
        )
    ]


def sweep_result(
    plan: SweepPlan, pair: Any, prompt: str, raw: bool, records: Sequence[Record]
) -> dict[str, Any]:
    """The tree sweep's section: r(N) timed over the first request's prompt, and its rows."""
    say("timing the target's passes over each tree size")
    ids = chat_prompt_ids(pair.tokenizer, prompt, raw=raw)
    timings = tree_pass_timings(pair.target, ids, plan.nodes, depth=plan.depth, width=plan.width)
    return sweep_section(plan, timings, len(ids) - 1, records)


@dataclass(frozen=True, kw_only=True)
class Trees:
    """The node-budget sweep: at depth --tree-depth, the chain and each tree drafter at each
    node budget N; its section is saved under tree_sweep."""

    name: str = "trees"
    key: str | None = "tree_sweep"
    per_draft: bool = True

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_tree_arguments(parser)

    def asked(self, args: argparse.Namespace) -> bool:
        return args.tree_sweep is not None

    def chosen(self, args: argparse.Namespace) -> argparse.Namespace:
        if self.asked(args):
            return args
        return with_flags(args, tree_sweep=",".join(map(str, DEFAULT_NODES)))

    def plan(
        self,
        args: argparse.Namespace,
        drafters: Sequence[str],
        policies: Sequence[str],
        requests: Sequence[Request],
    ) -> SweepPlan | None:
        return sweep_plan(args, list(drafters))

    def run(self, plan: SweepPlan, context: Context) -> Outcome:
        args, pair = context.args, context.pair
        records: list[Record] = []
        for temperature, subset in by_temperature(args, context.requests):
            records += run_sweep(
                pair.target, pair.draft, pair.tokenizer, subset, plan,
                temperature=temperature, draft_name=context.draft, repetitions=args.reps,
                with_hf=not args.no_hf, progress=context.progress, raw=args.raw,
                heads=args.heads,
            )  # fmt: skip
        section = sweep_result(plan, pair, context.requests[0].prompt, args.raw, records)
        return Outcome(records=tuple(records), section=section)

    def render(self, section: dict[str, Any], price_per_hour: float) -> str:
        return render_sweep(section)
