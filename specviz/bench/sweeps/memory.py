"""`specviz bench memory`: drafting from memory on agent workloads, request after request.

An agent's requests repeat one another, so a drafter that remembers earlier requests (the
suffix drafters) should speed up as a workload goes on. Each workload's requests run in their
order (its tasks and steps, specviz.workloads); every drafter setting gets one SuffixMemory per
workload and repetition, empty at first and fed by each finished request, as in use. Every run,
plain ones too, also keeps the target's cache in a PrefixCache per workload and repetition
(specviz.fast.prefix; --no-prefix-cache: none): an agent's prompt is the conversation so far,
and the part the last request shared is not passed through the target again.

Per request and repetition: one plain decode, each setting's speculative decode (their order
rotates each repetition), then, unless --no-hf, transformers' own generate() (no assistant, the
whole prompt). One untimed warm-up request with throwaway memories comes first. Rows carry, per
request and setting: task and step, the speedup over the paired plain decode, tokens a target
pass, accepted and verified drafts, c (the draft's seconds a round over a plain step), each
run's prompt pass apart from its decode (speculation cannot shorten it), and whether the tokens
equal the plain decode's (greedy identity, at T = 0; else where they first differ and the gap
there: a rounding tie or not, specviz.stats.identity). After each workload, each memory's size is
measured by a fresh replay (suffix_memory.replayed_size): bytes and update seconds per token.
A request is cold at step 0 of its task (only other tasks' requests can be in memory), else warm.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specviz.api import autoregressive_generate, speculative_generate
from specviz.bench.runner import Caches, record, run_caches
from specviz.bench.sweep import Context, Outcome, by_temperature, rotated, with_flags
from specviz.bench.sweep import floats as float_list
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.drafters.names import HYBRID_DRAFTERS, MEMORY_DRAFTERS, MODEL_DRAFTERS, TREE_DRAFTERS
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.drafters.suffix.memory import SuffixMemory, replayed_size
from specviz.models.chat import prompt_ids as chat_prompt_ids
from specviz.models.generate import generate
from specviz.results.memory_tables import render_memory
from specviz.results.records import Record, grouped
from specviz.results.setting import TREE_RULES, BenchSetting, drafter_label
from specviz.stats.identity import Divergence, divergence
from specviz.workloads import AGENT_WORKLOADS, Request

DEFAULT_DRAFTERS = "suffix,tree-suffix,ngram,tree-ngram,model:trimmed,suffix+model:trimmed"
DEFAULT_WORKLOADS = ",".join(AGENT_WORKLOADS)


def add_memory_arguments(b: argparse.ArgumentParser) -> None:
    """Register --suffix-gamma, --max-new-tokens and --no-prefix-cache."""
    b.add_argument(
        "--suffix-gamma",
        type=int,
        default=16,
        help="memory study: the most tokens a suffix drafter proposes a round (a chain's "
        "gamma, a tree's depth, the hybrid's suffix rounds; the hybrid's draft-model rounds "
        "take the first of --gammas)",
    )
    b.add_argument(
        "--suffix-factors",
        type=float_list,
        default=[],
        help="memory study: comma list; the suffix drafters at each speculation factor (at "
        "most factor × match length tokens a round; default: the registry's default only)",
    )
    b.add_argument(
        "--max-new-tokens",
        type=int,
        default=0,
        help="memory study: at most this many new tokens a request (0: each request's own)",
    )
    b.add_argument(
        "--no-prefix-cache",
        action="store_true",
        help="memory study: pass each whole prompt through the target (by default every run, "
        "plain ones too, keeps the target's cache and skips the prefix the last request shares)",
    )


@dataclass(frozen=True, kw_only=True)
class MemoryPlan:
    """The settings every request runs, and the cap on new tokens (0: none)."""

    drafters: tuple[str, ...]
    suffix_gamma: int
    gamma: int
    tree_nodes: int
    tree_width: int
    max_new_tokens: int
    prefix_cache: bool
    suffix_factors: tuple[float | None, ...] = (None,)  # None: the registry's default


def memory_plan(args: argparse.Namespace, drafters: Sequence[str]) -> MemoryPlan:
    """The plan of `specviz bench memory`; ValueError, saying what to change, for what it
    cannot run."""
    if args.suffix_gamma < 1:
        raise ValueError(f"--suffix-gamma must be >= 1 (got {args.suffix_gamma})")
    if any(not f > 0 for f in args.suffix_factors):
        raise ValueError(f"--suffix-factors must be > 0 (got {args.suffix_factors}): try 1,2,4")
    if args.max_new_tokens < 0:
        raise ValueError(f"--max-new-tokens must be >= 0 (got {args.max_new_tokens})")
    if args.policies.strip() != "fixed":
        raise ValueError("the memory study drafts at fixed lengths: drop --policies")
    if len(args.draft or []) > 1:
        raise ValueError("the memory study runs one draft: give one --draft")
    if args.lean_target and any(d in TREE_DRAFTERS for d in drafters):
        raise ValueError(
            "tree drafters verify through transformers' forward: drop --lean-target, or the "
            "tree drafters from --drafters"
        )
    return MemoryPlan(
        drafters=tuple(drafters),
        suffix_gamma=args.suffix_gamma,
        gamma=args.gammas[0],
        tree_nodes=args.tree_nodes,
        tree_width=args.tree_width,
        max_new_tokens=args.max_new_tokens,
        prefix_cache=not args.no_prefix_cache,
        suffix_factors=tuple(args.suffix_factors) or (None,),
    )


def memory_settings(plan: MemoryPlan, draft: str, temperature: float) -> list[BenchSetting]:
    """One setting a drafter (with memory: one a --suffix-factors): suffix ones at --suffix-gamma
    (trees as deep), the hybrid's model rounds, chains at --gammas[0], trees at its depth."""
    out = []
    for d in plan.drafters:
        remembers, tree = d in MEMORY_DRAFTERS, d in TREE_DRAFTERS
        out += [
            BenchSetting(
                suffix_factor=factor,
                drafter=d,
                gamma=plan.suffix_gamma if remembers else plan.gamma,
                temperature=temperature,
                draft_name=draft if d in MODEL_DRAFTERS else d,
                model_gamma=plan.gamma if d in HYBRID_DRAFTERS and remembers else None,
                tree_nodes=max(plan.tree_nodes, plan.suffix_gamma if remembers else 0)
                if tree
                else None,
                tree_width=plan.tree_width if tree else None,
                tree_rule="exact" if tree else None,
            )
            for factor in (plan.suffix_factors if remembers else (None,))
        ]
    return out


def _speculative(
    pair: Any,
    setting: BenchSetting,
    memory: SuffixMemory,
    prompt_ids: list[int],
    sampling: SamplingConfig,
    max_new_tokens: int,
    make_cache: Any,
) -> Any:
    """One speculative decode of the setting with its memory (fed when it finishes)."""
    defaults = DrafterOptions()
    options = DrafterOptions(
        memory=memory,
        model_gamma=setting.model_gamma,
        tree_depth=setting.gamma,
        tree_nodes=setting.tree_nodes or defaults.tree_nodes,
        tree_width=setting.tree_width or defaults.tree_width,
        suffix_factor=setting.suffix_factor or defaults.suffix_factor,
    )
    drafter = build_drafter(
        setting.drafter, target=pair.target, draft=pair.draft, sampling=sampling, options=options
    )
    return speculative_generate(
        pair.target,
        drafter,
        pair.tokenizer,
        prompt_ids,
        sampling=sampling,
        speculation=SpeculationConfig(gamma=setting.gamma, max_new_tokens=max_new_tokens),
        make_cache=make_cache,
        tree_rule=TREE_RULES["exact"],
    )


def request_row(
    request: Request, setting: BenchSetting, rec: Record, split: Divergence | None
) -> dict[str, Any]:
    """One request under one setting: what the section's tables are made of; split: where its
    tokens first differ from the plain decode's (None: identical), with the gap there."""
    m = rec.metrics
    gap = None if split is None or split.gap == float("inf") else round(split.gap, 7)
    return {
        "workload": request.category,
        "request": request.id,
        "task": request.task,
        "step": request.step,
        "drafter": drafter_label(vars(setting)),
        "rep": rec.repetition,
        "temperature": setting.temperature,
        "tokens": m.tokens,
        "rounds": m.rounds,
        "accepted": m.accepted,
        "verified": m.accepted + m.rejected,
        "latency": m.latency,
        "plain_latency": m.plain_latency,
        "draft_seconds": m.draft_seconds,
        "step_seconds": m.step_seconds,
        "prefill_seconds": m.prefill_seconds,
        "plain_decode_seconds": m.plain_decode_seconds,
        "identical": split is None,
    } | ({} if split is None else {"diverges": split.position, "tie_gap": gap})


def _workloads(requests: Sequence[Request]) -> list[tuple[str, list[Request]]]:
    """Requests grouped by workload (category), in their order."""
    return list(grouped(requests, lambda r: r.category).items())


def run_memory(plan: MemoryPlan, context: Context) -> tuple[list[Record], dict[str, Any]]:
    """Every workload in order under every setting, --reps times; the records and section."""
    args = context.args
    records: list[Record] = []
    rows: list[dict[str, Any]] = []
    sizes: list[dict[str, Any]] = []
    groups = [(t, _workloads(subset)) for t, subset in by_temperature(args, context.requests)]
    total = sum(len(rs) for _, ws in groups for _, rs in ws) * args.reps
    done = 0
    for temperature, workloads in groups:
        settings = memory_settings(plan, context.draft, temperature)
        first = workloads[0][1][0]
        for rep in range(-1, args.reps):  # rep -1: one untimed request, throwaway memories
            for workload, requests in workloads:
                memories = {s: SuffixMemory() for s in settings}
                caches = run_caches(settings, args.lean_target, plan.prefix_cache)
                for request in requests if rep >= 0 else [first]:
                    if rep >= 0:
                        context.progress(done, total, f"{workload} {request.id} T={temperature}")
                        done += 1
                    rows_of, recs = _request(
                        plan, context, request, settings, memories, caches, rep
                    )
                    if rep >= 0:
                        rows += [r | {"prefix_cache": plan.prefix_cache} for r in rows_of]
                        records += recs
                if rep < 0:
                    break
                for s in settings:
                    if s.drafter in MEMORY_DRAFTERS:
                        size = replayed_size(memories[s])
                        sizes.append(
                            {
                                "workload": workload,
                                "drafter": drafter_label(vars(s)),
                                "rep": rep,
                                "temperature": temperature,
                            }
                            | size
                        )
    context.progress(total, total, "memory study done")
    section = {
        "plan": {
            "drafters": list(plan.drafters),
            "suffix_gamma": plan.suffix_gamma,
            "gamma": plan.gamma,
            "tree_nodes": plan.tree_nodes,
            "tree_width": plan.tree_width,
            "max_new_tokens": plan.max_new_tokens,
            "reps": args.reps,
            "hf": not args.no_hf,
            "prefix_cache": plan.prefix_cache,
            "suffix_factors": list(plan.suffix_factors),
        },
        "rows": rows,
        "sizes": sizes,
    }
    return records, section


def _request(
    plan: MemoryPlan,
    context: Context,
    request: Request,
    settings: Sequence[BenchSetting],
    memories: dict[BenchSetting, SuffixMemory],
    caches: Caches,
    rep: int,
) -> tuple[list[dict[str, Any]], list[Record]]:
    """One request: plain, each setting (rotated by rep), then transformers' generate()."""
    args, pair = context.args, context.pair
    ids = chat_prompt_ids(pair.tokenizer, request.prompt, raw=args.raw)
    own, cap = request.max_new_tokens, plan.max_new_tokens
    limit = min(own, cap) if cap else own  # the request's own, capped by --max-new-tokens
    temperature = settings[0].temperature
    sampling = SamplingConfig(temperature=temperature, seed=max(rep, 0))
    plain = autoregressive_generate(
        pair.target,
        pair.tokenizer,
        ids,
        sampling=sampling,
        max_new_tokens=limit,
        make_cache=caches(None, ids),
    )
    rows, recs = [], []
    for setting in rotated(settings, max(rep, 0)):
        spec = _speculative(
            pair, setting, memories[setting], ids, sampling, limit, caches(setting, ids)
        )
        rec = record(request, setting, max(rep, 0), spec, plain, None, None)
        split = divergence(pair.target, ids, plain.tokens, spec.tokens) if not temperature else None
        rows.append(request_row(request, setting, rec, split))
        recs.append(rec)
    if not args.no_hf:
        hf, _ = generate(pair.target, ids, limit, temperature)  # transformers' own, no assistant
        rows = [r | {"hf_latency": hf} for r in rows]
    return rows, recs


@dataclass(frozen=True, kw_only=True)
class Memory:
    """Drafting from memory on workloads run in order; its section is saved under memory."""

    name: str = "memory"
    key: str | None = "memory"
    per_draft: bool = True
    own_flags: bool = False

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_memory_arguments(parser)

    def chosen(self, args: argparse.Namespace) -> argparse.Namespace:
        drafters, workloads = args.drafters or DEFAULT_DRAFTERS, args.workloads or DEFAULT_WORKLOADS
        return with_flags(args, drafters=drafters, workloads=workloads)

    def plan(
        self,
        args: argparse.Namespace,
        drafters: Sequence[str],
        policies: Sequence[str],
        requests: Sequence[Request],
    ) -> MemoryPlan:
        return memory_plan(args, drafters)

    def run(self, plan: MemoryPlan, context: Context) -> Outcome:
        records, section = run_memory(plan, context)
        return Outcome(records=tuple(records), section=section)

    def render(self, section: dict[str, Any], price_per_hour: float) -> str:
        return render_memory(section)
