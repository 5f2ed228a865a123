"""Run a workload interleaved: plain, speculative, and transformers' assisted generation (the
baseline a user compares with); what every study's runs share."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from specviz.api import GenerationResult, autoregressive_generate, speculative_generate
from specviz.core.cache import CachedForward, KVCache
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.drafter import Drafter
from specviz.core.policy import GammaPolicy
from specviz.drafters.names import (
    EXIT_DRAFTERS,
    HEAD_DRAFTERS,
    HYBRID_DRAFTERS,
    SHARED_CACHE_DRAFTERS,
    TREE_DRAFTERS,
)
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.drafters.shared_exit import SharedExit
from specviz.fast.lean import lean_target_cache
from specviz.fast.prefix import PrefixCache
from specviz.gamma.policies import CostModel, make_policy
from specviz.heads.build import head_forward
from specviz.models.chat import prompt_ids as chat_prompt_ids
from specviz.models.generate import generate
from specviz.results.records import Record, request_metrics
from specviz.results.setting import CONFIDENCE, TREE_RULES, BenchSetting
from specviz.tree.drafter import TreeDrafter
from specviz.workloads import Request


def assistant_settings(setting: BenchSetting) -> dict[str, Any]:
    """transformers' draft schedule for a setting: gamma, schedule and confidence threshold.

    transformers reads these from the assistant model's generation_config, not from
    generate()'s arguments (passed there, they are ignored and its defaults, 20 tokens with a
    0.4 confidence stop, apply).
    """
    return {
        "num_assistant_tokens": setting.gamma,
        "num_assistant_tokens_schedule": "heuristic"
        if setting.policy == "heuristic"
        else "constant",
        "assistant_confidence_threshold": CONFIDENCE if setting.policy == "confidence" else 0.0,
    }


def hf_generate(
    target: Any, draft: Any, prompt_ids: list[int], setting: BenchSetting, max_new_tokens: int
) -> tuple[float, list[int]]:
    """transformers' own assisted generation with the draft at the setting's schedule (prompt
    lookup for the n-gram drafter) on the same request."""
    if setting.drafter == "ngram":
        return generate(
            target, prompt_ids, max_new_tokens, setting.temperature, lookup=setting.gamma
        )
    schedule = assistant_settings(setting)
    return generate(
        target, prompt_ids, max_new_tokens, setting.temperature, assistant=draft, schedule=schedule
    )


def has_hf_counterpart(setting: BenchSetting) -> bool:
    """transformers has no early-exit, lookup-then-model, drafting-head or tree drafter and no
    theory-driven gamma.

    For model:trimmed the comparison is transformers with the same draft and its full head.
    """
    no_counterpart = (*EXIT_DRAFTERS, *HYBRID_DRAFTERS, *HEAD_DRAFTERS, *TREE_DRAFTERS)
    return setting.drafter not in no_counterpart and setting.policy != "theory"


def _drafter(
    setting: BenchSetting,
    target: Any,
    draft: Any,
    sampling: SamplingConfig,
    lean: bool,
    *,
    lean_target: bool = False,
    heads: str | None = None,
) -> Drafter | TreeDrafter:
    """A fresh drafter for one run; lean=False drafts through transformers' forward.

    A head drafter (heads: its weights' folder, None: the shipped ones) drafts with its head and
    verifies through the target forward of the setting's plain run (head_forward(lean_target)).
    """
    defaults = DrafterOptions()
    head = setting.drafter in HEAD_DRAFTERS
    options = DrafterOptions(
        exit_layer=setting.exit_layer,  # with the adapter shipped for k, if any
        min_confidence=CONFIDENCE if setting.policy == "confidence" else 0.0,
        model_gamma=setting.model_gamma if setting.drafter in HYBRID_DRAFTERS else None,
        make_cache=head_forward(lean_target) if head else (None if lean else KVCache),
        tree_nodes=setting.tree_nodes or defaults.tree_nodes,
        tree_depth=setting.gamma,
        tree_width=setting.tree_width or defaults.tree_width,
        heads=heads,
    )
    return build_drafter(
        setting.drafter, target=target, draft=draft, sampling=sampling, options=options
    )


Caches = Callable[[BenchSetting | None, list[int]], Any]  # (run, prompt ids) -> its make_cache


def plain_cache(setting: BenchSetting, lean_target: bool) -> Callable[[Any], CachedForward]:
    """The cached forward plain decoding runs on, to be compared with `setting`'s run.

    early-exit:shared verifies through specviz.drafters.shared_exit's own forward of the target,
    which costs less per pass than transformers' here, so its plain baseline runs on that
    forward too (all layers, nothing shared); every other setting's target uses transformers'
    forward, or with lean_target specviz.fast.lean's (where it applies), the same as its
    speculative run. The head drafters verify through a forward of their own too (recording
    the target's features), built on the same one: transformers', or specviz.fast.lean's with
    lean_target (specviz.bench.heads.head_forward).
    """
    if setting.drafter == "early-exit:shared":
        return lambda target: SharedExit(target, setting.exit_layer).target_view
    return lean_target_cache if lean_target else KVCache


def speculative_cache(
    setting: BenchSetting, lean_target: bool
) -> Callable[[Any], CachedForward] | None:
    """The target's cached forward in `setting`'s speculative run (None: the drafter's share)."""
    shares = setting.drafter in SHARED_CACHE_DRAFTERS
    return None if shares else plain_cache(setting, lean_target)


def run_caches(settings: Sequence[BenchSetting], lean: bool, keep_prefix: bool) -> Caches:
    """Each run's make_cache for a prompt (plain's under None) over a sequence of requests: with
    keep_prefix one PrefixCache a run (specviz.fast.prefix), else (and for a drafter that brings
    the target's cache) what the decode would build anyway."""
    made = {None: plain_cache(settings[0], lean)} | {
        s: None if s.tree else speculative_cache(s, lean) for s in settings
    }
    if not keep_prefix:
        return lambda run, ids: made[run]
    prefixes = {
        k: PrefixCache(m or KVCache)
        for k, m in made.items()
        if k is None or k.drafter not in SHARED_CACHE_DRAFTERS
    }
    return lambda run, ids: prefixes[run].reuse(ids) if run in prefixes else made[run]


def _policy(setting: BenchSetting, costs: CostModel) -> GammaPolicy | None:
    """The round-by-round gamma policy (None: the drafter's own fixed gamma)."""
    if setting.policy in ("heuristic", "theory"):
        return make_policy(setting.policy, setting.gamma, costs)
    return None


def check_runnable(setting: BenchSetting, lean_target: bool) -> None:
    """ValueError, saying what to change, for a tree setting the tree decoder cannot run (a head
    tree verifies through its own forward, which takes --lean-target's)."""
    if not setting.tree:
        return
    if lean_target and setting.drafter not in HEAD_DRAFTERS:
        raise ValueError(
            f"{setting.drafter} verifies its trees through transformers' forward with a 4D "
            "attention mask, which specviz.fast.lean's target forward does not take: drop "
            "--lean-target, or bench the tree drafters in a run of their own"
        )
    if setting.policy != "fixed":
        raise ValueError(
            f"{setting.drafter} drafts to a fixed depth: run it with the fixed policy "
            f"(got {setting.policy!r})"
        )


def speculative_run(
    target: Any,
    draft: Any,
    tokenizer: Any,
    prompt_ids: list[int],
    setting: BenchSetting,
    *,
    sampling: SamplingConfig,
    max_new_tokens: int,
    costs: CostModel,
    lean: bool = True,
    lean_target: bool = False,
    heads: str | None = None,
) -> GenerationResult:
    """One speculative decode of prompt_ids under setting, with a fresh drafter.

    A tree drafter's trees are verified by the setting's tree rule through transformers'
    forward, a head tree's through its own (check_runnable refuses what it cannot run).
    heads: the head drafters' weights folder (None: the shipped ones).
    """
    check_runnable(setting, lean_target)
    return speculative_generate(
        target,
        _drafter(setting, target, draft, sampling, lean, lean_target=lean_target, heads=heads),
        tokenizer,
        prompt_ids,
        sampling=sampling,
        speculation=SpeculationConfig(gamma=setting.gamma, max_new_tokens=max_new_tokens),
        policy=_policy(setting, costs),
        make_cache=None if setting.tree else speculative_cache(setting, lean_target),
        tree_rule=TREE_RULES[setting.tree_rule or "exact"],
    )


def run_request(
    target: Any,
    draft: Any,
    tokenizer: Any,
    request: Request,
    setting: BenchSetting,
    *,
    repetitions: int,
    with_hf: bool,
    seed: int = 0,
    costs: CostModel | None = None,
    lean: bool = True,
    lean_target: bool = False,
    raw: bool = False,
    heads: str | None = None,
) -> Iterator[Record]:
    """Warm up, then A (plain) B (speculative) C (transformers) interleaved, `repetitions` times.

    costs: the theory policy's measured costs, shared by every run of one setting (a fresh
    CostModel when None): costs belong to the hardware and drafter, not to a request.
    lean=False drafts through transformers' forward instead of specviz.fast.lean's; lean_target=True
    runs the target through specviz.fast.lean's (plain and speculative alike; transformers' own
    generation keeps its forward). raw=True sends the prompt as plain text; by default it goes
    through the tokenizer's chat template where there is one (specviz.models.chat). heads: the
    head drafters' weights folder (None: the shipped ones).
    """
    check_runnable(setting, lean_target)
    prompt_ids = chat_prompt_ids(tokenizer, request.prompt, raw=raw)
    costs = costs if costs is not None else CostModel()
    for rep in range(-1, repetitions):  # rep -1 is the untimed warm-up
        sampling = SamplingConfig(temperature=setting.temperature, seed=seed + max(rep, 0))
        plain = autoregressive_generate(
            target,
            tokenizer,
            prompt_ids,
            sampling=sampling,
            max_new_tokens=request.max_new_tokens,
            make_cache=plain_cache(setting, lean_target),
        )
        spec = speculative_run(
            target,
            draft,
            tokenizer,
            prompt_ids,
            setting,
            sampling=sampling,
            max_new_tokens=request.max_new_tokens,
            costs=costs,
            lean=lean,
            lean_target=lean_target,
            heads=heads,
        )
        hf_seconds, hf_tokens = (
            hf_generate(target, draft, prompt_ids, setting, request.max_new_tokens)
            if with_hf and has_hf_counterpart(setting)
            else (None, None)
        )
        if rep < 0:
            continue
        yield record(request, setting, rep, spec, plain, hf_seconds, hf_tokens)


def record(
    request: Request,
    setting: BenchSetting,
    rep: int,
    spec: GenerationResult,
    plain: GenerationResult,
    hf_seconds: float | None,
    hf_tokens: list[int] | None,
) -> Record:
    """One repetition's record: the speculative run against its plain run and transformers'."""
    return Record(
        request_id=request.id,
        category=request.category,
        setting=setting,
        repetition=rep,
        metrics=request_metrics(spec, plain),
        hf_latency=hf_seconds,
        hf_tokens=len(hf_tokens) if hf_tokens is not None else None,
        hf_identical=hf_tokens == list(spec.tokens) if hf_tokens is not None else None,
    )


def run_all(
    target: Any,
    draft: Any,
    tokenizer: Any,
    requests: Sequence[Request],
    settings: Sequence[BenchSetting],
    *,
    repetitions: int,
    with_hf: bool,
    progress: Callable[[int, int, str], None] = lambda _i, _n, _s: None,
    lean: bool = True,
    lean_target: bool = False,
    raw: bool = False,
    heads: str | None = None,
) -> list[Record]:
    """Every request under every setting; progress(done, total, label) after each.

    raw=True sends the prompts as plain text, else through the chat template (as run_request);
    heads: the head drafters' weights folder (None: the shipped ones).
    """
    records: list[Record] = []
    total = len(requests) * len(settings)
    t0 = time.perf_counter()
    costs = {s: CostModel() for s in settings}  # per setting, shared by its requests
    for i, (setting, request) in enumerate((s, r) for s in settings for r in requests):
        progress(
            i,
            total,
            f"{request.id} {setting.drafter} {setting.policy} gamma={setting.gamma} "
            f"T={setting.temperature}",
        )
        records += run_request(
            target,
            draft,
            tokenizer,
            request,
            setting,
            repetitions=repetitions,
            with_hf=with_hf,
            costs=costs[setting],
            lean=lean,
            lean_target=lean_target,
            raw=raw,
            heads=heads,
        )
    progress(total, total, f"done in {time.perf_counter() - t0:.0f} s")
    return records
