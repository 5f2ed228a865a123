"""`specviz bench levers` (alias --levers): speculation beside lower precision and a smaller
model, each timed and measured for its distance from the fp32 target (specviz.bench.lever_sweep)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specviz.api import stop_ids
from specviz.bench.lever_sweep import (
    DEFAULT_LEVERS,
    GRAMMAR,
    LeverPlan,
    Models,
    Progress,
    parse_levers,
    run_lever_sweep,
)
from specviz.bench.lever_table import render_levers
from specviz.bench.sweep import Context, Outcome, with_flags
from specviz.bench.workloads import Request, checked_prompt_ids
from specviz.console import say
from specviz.drafters.trimmed import load_head_tokens
from specviz.models.chat import PromptFormat, prompt_format
from specviz.models.loading import BUNDLED, check_tokenizers, load_tokenizer, resolve
from specviz.quant.precision import check_precision, load_at_precision


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
