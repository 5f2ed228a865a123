"""`specviz bench levers`: speculation beside the other speed-ups, every lever
(specviz.quant.levers: the target, the draft alone, speculation or transformers' generate(),
each model at a precision) on the same requests, timed and measured for its distance from the
fp32 target.

Per request, untimed first: each lever decodes greedily (T = 0; also its warm-up) and its tokens
are compared with the reference's (greedy agreement, first divergence); the reference samples
one continuation at T = 1 (seed 0), which every model a lever's law follows scores: the mean
total variation of its next-token laws from the reference's along it (a speculative lever's
law, and hf@P's, is its target's, and the run records where each TV came from). Then --reps
timed rounds: each lever decodes at the request's temperature, seeded by the round, the levers
in an order that rotates each round. Latency is wall time around the whole call (drafter
construction included); the target runs on transformers' forward in every lever.

Its section as numbers: one row per (workload, lever) and each lever over all workloads (ALL):
tok/s (tokens over wall time), the speedup (the fp32 target's seconds per token over the
lever's, paired by request and repetition), latency, cost per 1k tokens, weights, α (accepted
over verified drafts), greedy agreement, first divergence and mean TV.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specviz.api import stop_ids
from specviz.bench.sweep import Context, Outcome, refuse, rotated
from specviz.console import say
from specviz.core.config import SamplingConfig
from specviz.core.events import Rejected
from specviz.drafters.names import CHAIN_MODEL_DRAFTERS
from specviz.drafters.trimmed import load_head_tokens
from specviz.models.chat import prompt_format
from specviz.models.loading import BUNDLED, check_tokenizers, load_tokenizer, resolve
from specviz.quant.levers import (
    DEFAULT_LEVERS,
    GRAMMAR,
    REFERENCE,
    Lever,
    Models,
    decode,
    distances,
    memory_bytes,
    parse_levers,
)
from specviz.quant.precision import INT8, check_precision, load_at_precision
from specviz.results.lever_tables import render_levers
from specviz.workloads import Request, checked_prompt_ids

LEVER_DRAFTERS = CHAIN_MODEL_DRAFTERS


@dataclass(frozen=True, kw_only=True)
class LeverPlan:
    """What a levers sweep runs: the levers (reference first), the drafter and its gamma."""

    levers: tuple[Lever, ...]
    drafter: str
    gamma: int

    def __post_init__(self) -> None:
        """ValueError, saying what to change, for a plan the sweep cannot run."""
        if not self.levers or self.levers[0].name != REFERENCE:
            raise ValueError("a levers sweep measures from target@fp32: list it first")
        if self.drafter not in LEVER_DRAFTERS:
            raise ValueError(
                f"the levers sweep drafts with one of {', '.join(LEVER_DRAFTERS)} (got "
                f"{self.drafter!r}): give one of them as --drafters"
            )
        if isinstance(self.gamma, bool) or not isinstance(self.gamma, int) or self.gamma < 1:
            raise ValueError(f"gamma must be an integer >= 1 (got {self.gamma!r})")
        int8_draft = [lv.name for lv in self.levers if lv.speculative and lv.draft in INT8]
        if self.drafter == "model:trimmed" and int8_draft:
            raise ValueError(
                f"{', '.join(int8_draft)}: model:trimmed slices the draft's output head, which "
                "torchao's int8 weights do not support; give --drafters model, or drop those "
                "levers"
            )

    def models(self) -> list[tuple[str, str]]:
        """Every (role, precision) some lever runs, each once, in order."""
        return list(dict.fromkeys(m for lever in self.levers for m in lever.models()))


def load_models(plan: LeverPlan, target: str, draft: str, **loading: Any) -> tuple[Models, Any]:
    """Every (role, precision) the plan runs, loaded once (loading: device, pack), and the
    target's tokenizer (the draft's checked against it)."""
    tokenizer = load_tokenizer(target, role="target", progress=say)
    if "draft" in {role for role, _ in plan.models()}:
        check_tokenizers(tokenizer, load_tokenizer(draft, role="draft", progress=say))
        if plan.drafter == "model:trimmed":
            load_head_tokens(resolve(draft, "draft", say))  # its token ranking, before weights
    models: Models = {}
    for role, precision in plan.models():
        say(f"loading {role} at {precision}")
        spec = target if role == "target" else draft
        models[role, precision] = load_at_precision(
            spec, precision, role=role, progress=say, **loading
        )
    return models, tokenizer


def timed_runs(
    plan: LeverPlan,
    models: Models,
    tokenizer: Any,
    request: Request,
    ids: list[int],
    *,
    temperature: float,
    repetitions: int,
    stop: frozenset[int],
) -> list[dict[str, Any]]:
    """`repetitions` rounds of every lever at `temperature`, the order rotating each round."""
    runs = []
    for rep in range(repetitions):
        for lever in rotated(plan.levers, rep):
            sampling = SamplingConfig(temperature=temperature, seed=rep)
            start = time.perf_counter()
            result = decode(
                lever,
                models,
                tokenizer,
                ids,
                drafter=plan.drafter,
                gamma=plan.gamma,
                sampling=sampling,
                max_new_tokens=request.max_new_tokens,
                stop=stop,
            )
            seconds = time.perf_counter() - start
            runs.append(
                {
                    "request": request.id,
                    "category": request.category,
                    "temperature": temperature,
                    "lever": lever.name,
                    "rep": rep,
                    "seconds": seconds,
                    "tokens": len(result.tokens),
                    "proposed": result.proposed,
                    "accepted": result.accepted,
                    "rejected": sum(isinstance(e, Rejected) for e in result.events),
                }
            )
    return runs


def levers_section(plan: LeverPlan, context: Context) -> tuple[dict[str, Any], str]:
    """Load the models, check every prompt against them (each request at each of
    --temperatures, else at its own), run the sweep: its raw section, and how the prompts
    reached the models (chat or raw). A request run at two temperatures is measured once."""
    args, requests = context.args, context.requests
    if not requests:
        raise ValueError("--levers has no requests: check --workloads and --limit")
    models, tokenizer = load_models(
        plan, args.target, (args.draft or [BUNDLED])[0], device=args.device, pack=not args.no_pack
    )
    reference = models["target", "fp32"]
    checked = [reference, *models.values()]  # the reference first: its vocabulary
    picked = [(r, t) for r in requests for t in args.temperatures or [r.temperature]]
    chosen = [  # every prompt before any decode
        (r, checked_prompt_ids(tokenizer, r, r.max_new_tokens, checked, raw=args.raw), t)
        for r, t in picked
    ]
    stop = stop_ids(reference, tokenizer)
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    for i, (request, ids, t) in enumerate(chosen):
        context.progress(i, len(chosen), f"levers: {request.id} (T={t})")
        if request.id not in {d["request"] for d in rows}:
            rows += [
                {"request": request.id, "category": request.category} | d
                for d in distances(
                    plan.levers,
                    models,
                    tokenizer,
                    ids,
                    request.max_new_tokens,
                    stop,
                    drafter=plan.drafter,
                    gamma=plan.gamma,
                )
            ]
        runs += timed_runs(
            plan, models, tokenizer, request, ids, temperature=t, repetitions=args.reps, stop=stop
        )
    context.progress(len(chosen), len(chosen), "levers: done")
    section = {
        "plan": {
            "levers": [lv.name for lv in plan.levers],
            "drafter": plan.drafter,
            "gamma": plan.gamma,
        },
        "memory_bytes": {lv.name: memory_bytes(lv, models) for lv in plan.levers},
        "distances": rows,
        "runs": runs,
    }
    return section, prompt_format(tokenizer, raw=args.raw)


@dataclass(frozen=True, kw_only=True)
class Levers:
    """The levers sweep: it loads its own models, each lever at its precision; its section is
    saved under levers."""

    name: str = "levers"
    key: str | None = "levers"
    per_draft: bool = False
    own_flags: bool = False

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--levers",
            default=DEFAULT_LEVERS,
            metavar="LEVER,...",
            help="the levers to compare: speculation beside lower precision and the small "
            "model, on the same requests, each timed (tokens/s, "
            "latency, cost per 1k tokens, weights) and measured for its distance from the fp32 "
            "target (greedy agreement, first divergence, mean total variation along the "
            f"target's own samples). Each lever is {GRAMMAR} (default: "
            f"{DEFAULT_LEVERS}). Speculation uses the first of --drafters (model or "
            "model:trimmed) at the first of --gammas; int8 needs torchao",
        )

    def chosen(self, args: argparse.Namespace) -> argparse.Namespace:
        return args

    def plan(
        self,
        args: argparse.Namespace,
        drafters: Sequence[str],
        policies: Sequence[str],
        requests: Sequence[Request],
    ) -> LeverPlan:
        """The sweep of --levers; ValueError, saying what to change, for what it cannot run.
        Checks flags and libraries only: no model is loaded."""
        refuse(
            "specviz bench levers sets each model's precision and runs fixed gamma speculation "
            "on one draft through transformers' target forward",
            (
                ("--lean-target", args.lean_target),
                ("--dtype", args.dtype != "float32"),
                ("--policies", list(policies) != ["fixed"]),
                ("--draft twice", len(args.draft or []) > 1),
            ),
        )
        levers = parse_levers(args.levers)
        for lever in levers:
            for _role, precision in lever.models():
                check_precision(precision, args.device)
        return LeverPlan(levers=levers, drafter=drafters[0], gamma=args.gammas[0])

    def run(self, plan: LeverPlan, context: Context) -> Outcome:
        section, fmt = levers_section(plan, context)
        return Outcome(section=section, prompt_format=fmt)

    def render(self, section: dict[str, Any], price_per_hour: float) -> str:
        return render_levers(section, price_per_hour)
