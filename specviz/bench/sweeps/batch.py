"""`specviz bench batch`: where speculative decoding stops paying as more
requests share a pass.

The runs: N requests decoded in groups of B rows for each batch size B, plainly and with each
batched drafter at each fixed gamma, on the same requests and seeds (specviz.batch.sweep); its
rows, each batch size's best gamma and the verdicts, computed from the saved runs and the
batched passes timed at each B, are specviz.batch.rows'. Here: the plan, the run, the Markdown.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specviz.api import stop_ids
from specviz.batch.rows import pass_seconds, rebatch
from specviz.batch.sweep import Setting, run_batch_sweep
from specviz.bench.sweep import Context, Outcome, ints, plain
from specviz.console import say
from specviz.drafters.names import BATCH_DRAFTERS, REGISTRY
from specviz.drafters.trimmed import load_head_tokens, trim_head
from specviz.gamma.theory import TOKEN_BOUND
from specviz.results.table import column_table, markdown_table, spread_cell
from specviz.tune.timing import TARGET, batch_pass_timings
from specviz.workloads import Request, checked_prompt_ids

STEP_BATCH_SIZES = "1,2,4,8,16"  # the sizes `specviz bench batch` sweeps by default


def _whole(value: object) -> bool:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, kw_only=True)
class BatchPlan:
    """What a batch sweep runs: batch sizes, N requests, gammas, batched drafters, new tokens."""

    batch_sizes: tuple[int, ...]
    requests: int  # N: every batch size decodes the same N requests
    gammas: tuple[int, ...]
    drafters: tuple[str, ...]
    new_tokens: int  # max_new_tokens of every request

    def __post_init__(self) -> None:
        """ValueError, saying what to change, unless the sweep can run as planned."""
        sizes, drafters = list(self.batch_sizes), self.drafters
        if len(sizes) < 2 or not all(_whole(b) and b >= 1 for b in sizes):
            raise ValueError(
                "--batch-sizes takes two or more batch sizes >= 1, e.g. 1,2,4,8,16,32 (got "
                f"{sizes}); the plain decode step timing is --step-batch-sizes"
            )
        if len(set(sizes)) != len(sizes):
            raise ValueError(f"--batch-sizes names a batch size twice (got {sizes})")
        if not _whole(self.requests) or self.requests < max(sizes):
            raise ValueError(
                f"--batch-requests must be at least the largest batch size, {max(sizes)}, so "
                f"that each batch size fills a batch (got {self.requests!r})"
            )
        if not self.gammas or not all(_whole(g) and g >= 1 for g in self.gammas):
            raise ValueError(f"--gammas must be integers >= 1 (got {list(self.gammas)})")
        others = [d for d in drafters if d not in BATCH_DRAFTERS]
        if not drafters or others:
            raise ValueError(
                f"--batch-sizes decodes each batch through transformers' forward "
                f"(specviz.batch); {', '.join(others) or 'no drafter'} has no batched form "
                f"there: give --drafters from {', '.join(BATCH_DRAFTERS)}"
            )
        if len(set(drafters)) != len(drafters):
            raise ValueError(f"--drafters names a drafter twice (got {', '.join(drafters)})")
        if not _whole(self.new_tokens) or self.new_tokens < 1:
            raise ValueError(f"--batch-new-tokens must be >= 1 (got {self.new_tokens!r})")

    def settings(self) -> list[Setting]:
        """Every speculative setting: each drafter at each gamma."""
        return [(d, g) for d in self.drafters for g in self.gammas]


def sweep_requests(pool: Sequence[Request], n: int) -> list[Request]:
    """The first n requests of pool, cycled from its start where it has fewer."""
    if not pool:
        raise ValueError("the batch sweep has no requests at this temperature: check --workloads")
    return [pool[i % len(pool)] for i in range(n)]


ROW_COLUMNS = (
    ("T", lambda r: f"{r['temperature']:g}"),
    ("drafter", lambda r: r["drafter"]),
    ("B", lambda r: str(r["batch_size"])),
    ("γ", lambda r: str(r["gamma"])),
    ("plain tok/s", lambda r: f"{r['plain']['tokens_per_second']:.1f}"),
    ("speculative tok/s", lambda r: f"{r['speculative']['tokens_per_second']:.1f}"),
    ("speedup (min–max)", lambda r: spread_cell(r["speedup"])),
    ("predicted", lambda r: f"{r['predicted_speedup']:.2f}"),
    ("α", lambda r: "–" if r["alpha"] is None else f"{r['alpha']:.2f}"),
    ("tokens/round", lambda r: f"{r['tokens_per_round']:.2f}"),
    ("r", lambda r: f"{r['verify_ratio']:.2f}"),
    ("plain latency s", lambda r: f"{r['plain']['latency']:.2f}"),
    ("speculative latency s", lambda r: f"{r['speculative']['latency']:.2f}"),
    ("plain tok/s a request", lambda r: f"{r['plain']['request_tokens_per_second']:.1f}"),
    (
        "speculative tok/s a request",
        lambda r: f"{r['speculative']['request_tokens_per_second']:.1f}",
    ),
    ("plain $/1k tok", lambda r: f"{r['plain']['cost_per_1k_tokens']:.3g}"),
    ("speculative $/1k tok", lambda r: f"{r['speculative']['cost_per_1k_tokens']:.3g}"),
    ("same tokens as plain", lambda r: f"{r['same_tokens']:.0%}"),
)


def passes_table(section: dict[str, Any]) -> list[str]:
    """Per B: the plain step, each γ's verification pass (its r) and each draft step, in ms."""
    plan, timed = section["plan"], pass_seconds(section["passes"])
    drafts = [d for d in plan["drafters"] if any(k[1] == d for k in timed)]
    header = ["B", "plain step ms", *(f"verify γ={g} ms (r)" for g in plan["gammas"])]
    body = []
    for b in plan["batch_sizes"]:
        step = timed[b, TARGET, 1]
        verify = [timed[b, TARGET, g + 1] for g in plan["gammas"]]
        body.append(
            [
                str(b),
                f"{step * 1e3:.1f}",
                *(f"{v * 1e3:.1f} ({v / step:.2f})" for v in verify),
                *(f"{timed[b, d, 1] * 1e3:.1f}" for d in drafts),
            ]
        )
    return markdown_table([*header, *(f"{d} draft step ms" for d in drafts)], body)


def _where(pays_at: Sequence[int], stops_from: int | None) -> str:
    """Where a speedup exceeds 1, and from which batch size it no longer does."""
    at = f"at B = {', '.join(map(str, pays_at))}" if pays_at else "at no B"
    return at + ("" if stops_from is None or not pays_at else f", not from B = {stops_from} on")


def render_batch(section: dict[str, Any]) -> str:
    """The sweep as Markdown: a note on what ran, the rows, the pass timings, the verdicts."""
    plan, runs = section["plan"], section["runs"]
    workloads = ", ".join(dict.fromkeys(r["category"] for r in section["requests"]))
    reps = max((r["repetition"] for r in runs), default=0) + 1
    note = (
        f"Batch sweep: {plan['requests']} requests ({workloads}), {plan['new_tokens']} new "
        f"tokens each, decoded in consecutive groups of B rows, plainly and speculatively on "
        f"the same requests and seeds, {reps} repetition(s) after a warm-up, through "
        "transformers' forward (specviz.batch). tok/s: all requests' tokens over their wall "
        "time; latency: a request's seconds within its group (mean); speedup: plain seconds "
        "per token over speculative; predicted: E[tokens a round] t_plain / (γ t_draft + "
        "t_verify) from the passes timed below and the measured α; r = t_verify / t_plain."
    )
    lines = [note, "", *column_table(ROW_COLUMNS, section["rows"]), ""]
    lines += ["Batched passes (medians; r = verify / plain step):", "", *passes_table(section), ""]
    for v in section["verdicts"]:
        best = f"{v['best_speedup']:.2f}× at B = {v['best_batch_size']}, γ = {v['best_gamma']}"
        lines.append(
            f"- T = {v['temperature']:g}, {v['drafter']}: speculation beats plain decoding "
            f"{_where(v['pays_at'], v['stops_from'])} (fastest {best}); theory predicts it "
            f"does {_where(v['predicted_pays_at'], v['predicted_stops_from'])}."
        )
    largest = max(plan["batch_sizes"])
    bound = "; ".join(
        f"at γ = {c['gamma']} "
        + (
            f"at no B up to {largest}"
            if c["token_bound_from"] is None
            else f"from B = {c['token_bound_from']}"
        )
        for c in section["verify"]
    )
    return "\n".join(
        [
            *lines,
            (
                f"- The verification pass of γ + 1 tokens a row is token-bound ((r − 1)/γ ≥ "
                f"{TOKEN_BOUND:g}: past halfway from a plain step's cost to γ + 1 steps') {bound}."
            ),
        ]
    )


def drafting_models(draft: Any, drafters: Sequence[str]) -> dict[str, Any]:
    """The model each batched drafter drafts with (model:trimmed: its trimmed head); n-gram
    lookup has none (its lookups are priced at 0)."""
    return {
        name: trim_head(draft, load_head_tokens(draft)) if REGISTRY[name].trims_head else draft
        for name in drafters
        if REGISTRY[name].uses_draft_model
    }


def batch_result(plan: BatchPlan, context: Context) -> dict[str, Any]:
    """The sweep's section: each temperature's runs (--temperatures; without it each prompt's
    own), every prompt checked against both models before any decode, then the batched pass
    timings over the first temperature's prompts."""
    args, pair = context.args, context.pair
    given = args.temperatures
    temps = given if given is not None else sorted({r.temperature for r in context.requests})
    models = [m for m in (pair.target, pair.draft) if m is not None]
    chosen: list[tuple[float, list[Request], list[list[int]]]] = []
    for t in temps:
        pool = [r for r in context.requests if given is not None or r.temperature == t]
        picked = sweep_requests(pool, plan.requests)
        ids = [
            checked_prompt_ids(pair.tokenizer, r, plan.new_tokens, models, raw=args.raw)
            for r in picked
        ]
        chosen.append((t, picked, ids))
    stop, runs = stop_ids(pair.target, pair.tokenizer), []
    for t, _, prompts in chosen:
        runs += run_batch_sweep(
            pair.target,
            pair.draft,
            prompts,
            batch_sizes=plan.batch_sizes,
            settings=plan.settings(),
            new_tokens=plan.new_tokens,
            temperature=t,
            repetitions=args.reps,
            stop=stop,
            progress=context.progress,
        )
    say("timing the batched target and draft passes at each batch size")
    widths = sorted({g + 1 for g in plan.gammas})
    passes = batch_pass_timings(
        pair.target,
        drafting_models(pair.draft, plan.drafters),
        chosen[0][2],
        plan.batch_sizes,
        widths,
    )
    requests = [
        {"temperature": t, "id": r.id, "category": r.category, "prompt_tokens": len(ids)}
        for t, picked, prompts in chosen
        for r, ids in zip(picked, prompts, strict=True)
    ]
    section = {"plan": plain(plan), "requests": requests, "runs": runs, "passes": passes}
    return rebatch(section, args.price_per_hour)


@dataclass(frozen=True, kw_only=True)
class Batch:
    """The batch sweep; its section is saved under batch_sweep."""

    name: str = "batch"
    key: str | None = "batch_sweep"
    per_draft: bool = True
    own_flags: bool = False

    def add_arguments(self, b: argparse.ArgumentParser) -> None:
        b.add_argument(
            "--batch-sizes",
            type=ints,
            default=STEP_BATCH_SIZES,
            metavar="B,...",
            help="the batch sizes to sweep, e.g. 1,2,4,8,16,32 (default: %(default)s): "
            "--batch-requests requests decoded in consecutive groups of B rows for each B, "
            "plainly and speculatively (each drafter of --drafters with a batched form: model, "
            "model:trimmed, ngram; each of --gammas) on the same requests and seeds, through "
            "transformers' forward; reports throughput, per-request latency, cost per 1k "
            "tokens, the speedup, alpha, the best gamma per B, and the speedup predicted from "
            "timed batched passes (the plain decode step timing is --step-batch-sizes)",
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

    def chosen(self, args: argparse.Namespace) -> argparse.Namespace:
        return args

    def plan(
        self,
        args: argparse.Namespace,
        drafters: Sequence[str],
        policies: Sequence[str],
        requests: Sequence[Request],
    ) -> BatchPlan:
        """The sweep of --batch-sizes; ValueError, saying what to change, for what it cannot
        run."""
        for wrong, message in (
            (
                args.lean_target,
                "decodes each batch through transformers' forward "
                "(specviz.batch), not specviz.fast.lean's: drop --lean-target",
            ),
            (
                list(policies) != ["fixed"],
                "runs each of --gammas as a fixed gamma: drop --policies",
            ),
            (len(args.draft or []) > 1, "compares batch sizes on one draft: give one --draft"),
            (not requests, "has no requests: check --workloads and --limit"),
        ):
            if wrong:
                raise ValueError(f"specviz bench batch {message}")
        sizes = sorted(args.batch_sizes)
        fewest = min(r.max_new_tokens for r in requests)
        return BatchPlan(
            batch_sizes=tuple(sizes),
            gammas=tuple(args.gammas),
            drafters=tuple(drafters),
            requests=args.batch_requests if args.batch_requests is not None else max(sizes),
            new_tokens=args.batch_new_tokens if args.batch_new_tokens is not None else fewest,
        )

    def run(self, plan: BatchPlan, context: Context) -> Outcome:
        return Outcome(section=batch_result(plan, context))

    def render(self, section: dict[str, Any], price_per_hour: float) -> str:
        return render_batch(section)
