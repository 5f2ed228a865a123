"""`specviz bench batch` (alias --batch-sizes): plain and speculative decoding of the same
requests at each batch size; and the plain step timing every local study saves."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from specviz.api import stop_ids
from specviz.bench.batch_rows import batch_pass_timings, drafting_models, rebatch
from specviz.bench.batch_sweep import BatchPlan, Progress, run_batch_sweep, sweep_requests
from specviz.bench.batch_table import render_batch_sweep
from specviz.bench.sweep import Context, Outcome, with_flags
from specviz.console import say
from specviz.workloads import Request, checked_prompt_ids

STEP_BATCH_SIZES = "1,2,4,8,16"


def _sizes(text: str) -> list[int]:
    """'1,2,4' → [1, 2, 4]."""
    return [int(x) for x in text.split(",") if x.strip()]


def add_batch_arguments(b: argparse.ArgumentParser) -> None:
    """Register --batch-sizes, --batch-requests, --batch-new-tokens and --step-batch-sizes."""
    b.add_argument(
        "--batch-sizes",
        type=_sizes,
        default=None,
        metavar="B,...",
        help="run the batch sweep instead of the other settings, e.g. 1,2,4,8,16,32: "
        "--batch-requests requests decoded in consecutive groups of B rows for each B, plainly "
        "and speculatively (each drafter of --drafters with a batched form: model, "
        "model-trimmed, ngram; each of --gammas) on the same requests and seeds, through "
        "transformers' forward; reports throughput, per-request latency, cost per 1k tokens, "
        "the speedup, alpha, the best gamma per B, and the speedup predicted from timed "
        "batched passes (the plain decode step timing is --step-batch-sizes)",
    )
    b.add_argument(
        "--batch-requests",
        type=int,
        default=None,
        metavar="N",
        help="the batch sweep's requests: the first N prompts of --workloads, cycled where "
        "there are fewer (default: the largest of --batch-sizes)",
    )
    b.add_argument(
        "--batch-new-tokens",
        type=int,
        default=None,
        metavar="N",
        help="the batch sweep: at most N new tokens a request (default: the fewest "
        "max_new_tokens among its requests)",
    )
    b.add_argument(
        "--step-batch-sizes",
        type=_sizes,
        default=STEP_BATCH_SIZES,
        metavar="B,...",
        help="comma list of batch sizes at which to time one plain decode step of the target",
    )


def check_step_sizes(args: argparse.Namespace) -> None:
    """ValueError unless --step-batch-sizes lists batch sizes >= 1."""
    if not args.step_batch_sizes or min(args.step_batch_sizes) < 1:
        raise ValueError(f"--step-batch-sizes must be integers >= 1 (got {args.step_batch_sizes})")


def batch_plan(
    args: argparse.Namespace,
    drafters: Sequence[str],
    policies: Sequence[str],
    requests: Sequence[Request],
) -> BatchPlan | None:
    """The sweep --batch-sizes asks for (None without it); ValueError, saying what to change,
    for what it cannot run. Checks flags only: no model is loaded."""
    check_step_sizes(args)
    if args.batch_sizes is None:
        given = [
            flag
            for flag, value in (
                ("--batch-requests", args.batch_requests),
                ("--batch-new-tokens", args.batch_new_tokens),
            )
            if value is not None
        ]
        if given:
            raise ValueError(f"{' and '.join(given)} apply to the batch sweep: add --batch-sizes")
        return None
    if args.tree_sweep is not None:
        raise ValueError("--batch-sizes and --tree-sweep are two sweeps: run one at a time")
    if args.lean_target:
        raise ValueError(
            "--batch-sizes decodes each batch through transformers' forward (specviz.batch), "
            "not specviz.fast.lean's: drop --lean-target"
        )
    if list(policies) != ["fixed"]:
        raise ValueError("--batch-sizes runs each of --gammas as a fixed gamma: drop --policies")
    if len(args.draft or []) > 1:
        raise ValueError("--batch-sizes compares batch sizes on one draft: give one --draft")
    if not requests:
        raise ValueError("--batch-sizes has no requests: check --workloads and --limit")
    sizes = list(args.batch_sizes)
    return BatchPlan(
        batch_sizes=tuple(sorted(sizes)),
        requests=args.batch_requests if args.batch_requests is not None else max(sizes, default=0),
        gammas=tuple(args.gammas),
        drafters=tuple(drafters),
        new_tokens=args.batch_new_tokens
        if args.batch_new_tokens is not None
        else min(r.max_new_tokens for r in requests),
    )


def _checked(pair: Any, picked: Sequence[Request], new_tokens: int, raw: bool) -> list[list[int]]:
    """Every request's prompt ids, each checked against both models; errors name the request."""
    models = [m for m in (pair.target, pair.draft) if m is not None]
    return [checked_prompt_ids(pair.tokenizer, r, new_tokens, models, raw=raw) for r in picked]


def batch_result(
    plan: BatchPlan,
    pair: Any,
    requests: Sequence[Request],
    *,
    temperatures: Sequence[float] | None,
    repetitions: int,
    raw: bool,
    price_per_hour: float,
    progress: Progress,
) -> dict[str, Any]:
    """The batch sweep's section: each temperature's runs, then the batched pass timings over
    the first temperature's prompts (temperatures None: each prompt's own, as the bench)."""
    temps = temperatures if temperatures is not None else sorted({r.temperature for r in requests})
    chosen: list[tuple[float, list[Request], list[list[int]]]] = []
    for t in temps:  # every prompt checked before any decode
        pool = [r for r in requests if temperatures is not None or r.temperature == t]
        picked = sweep_requests(pool, plan.requests)
        chosen.append((t, picked, _checked(pair, picked, plan.new_tokens, raw)))
    stop = stop_ids(pair.target, pair.tokenizer)
    runs = []
    for t, _, prompts in chosen:
        runs += run_batch_sweep(
            pair.target, pair.draft, prompts, plan, temperature=t, repetitions=repetitions,
            stop=stop, progress=progress,
        )  # fmt: skip
    say("timing the batched target and draft passes at each batch size")
    widths = sorted({g + 1 for g in plan.gammas})
    passes = batch_pass_timings(
        pair.target,
        drafting_models(pair.draft, plan.drafters),
        chosen[0][2],
        plan.batch_sizes,
        widths,
    )
    section = {
        "plan": plan.to_dict(),
        "requests": [
            {"temperature": t, "id": r.id, "category": r.category, "prompt_tokens": len(ids)}
            for t, picked, prompts in chosen
            for r, ids in zip(picked, prompts, strict=True)
        ],
        "runs": runs,
        "passes": [asdict(p) for p in passes],
    }
    return rebatch(section, price_per_hour)


@dataclass(frozen=True, kw_only=True)
class Batch:
    """The batch sweep; its section is saved under batch_sweep."""

    name: str = "batch"
    key: str | None = "batch_sweep"
    per_draft: bool = True

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_batch_arguments(parser)

    def asked(self, args: argparse.Namespace) -> bool:
        return args.batch_sizes is not None

    def chosen(self, args: argparse.Namespace) -> argparse.Namespace:
        return args if self.asked(args) else with_flags(args, batch_sizes=_sizes(STEP_BATCH_SIZES))

    def plan(
        self,
        args: argparse.Namespace,
        drafters: Sequence[str],
        policies: Sequence[str],
        requests: Sequence[Request],
    ) -> BatchPlan | None:
        return batch_plan(args, drafters, policies, requests)

    def run(self, plan: BatchPlan, context: Context) -> Outcome:
        args = context.args
        section = batch_result(
            plan, context.pair, context.requests, temperatures=args.temperatures,
            repetitions=args.reps, raw=args.raw, price_per_hour=args.price_per_hour,
            progress=context.progress,
        )  # fmt: skip
        return Outcome(section=section)

    def render(self, section: dict[str, Any], price_per_hour: float) -> str:
        return render_batch_sweep(section)
