"""Run a workload interleaved: plain, speculative, and transformers' assisted generation."""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
from transformers import DynamicCache

from specviz.api import autoregressive_generate, speculative_generate
from specviz.bench.metrics import RequestMetrics, request_metrics
from specviz.bench.workloads import Request
from specviz.core.cache import CachedForward, KVCache, cache_kwarg
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.decoding import clock
from specviz.core.drafter import Drafter
from specviz.core.policy import GammaPolicy
from specviz.drafters.registry import DRAFTER_NAMES, REGISTRY, DrafterOptions, build_drafter
from specviz.drafters.shared_exit import SharedExit
from specviz.fast.lean import lean_target_cache
from specviz.gamma.policies import CostModel, make_policy
from specviz.models.chat import prompt_ids as chat_prompt_ids


@dataclass(frozen=True, kw_only=True)
class BenchSetting:
    """One point of a sweep."""

    drafter: str  # one of DRAFTERS
    gamma: int
    temperature: float
    draft_name: str = "draft"
    exit_layer: int = 8
    policy: str = "fixed"  # "fixed", "heuristic", "theory" or "confidence" (see POLICIES)
    model_gamma: int | None = None  # hybrids: at most this many draft-model tokens a round


# gamma policies of the bench: the first three are specviz.gamma.policies; "confidence" drafts up to
# gamma tokens but stops after one whose draft top probability is below CONFIDENCE (the same
# rule and default as transformers' assistant_confidence_threshold).
POLICIES = ("fixed", "heuristic", "theory", "confidence")
HYBRID_DRAFTERS = ("ngram+model", "ngram+model-trimmed")  # lookup first, else the draft model
MODEL_DRAFTERS = tuple(n for n, s in REGISTRY.items() if s.uses_draft_model)
EXIT_DRAFTERS = ("early-exit", "early-exit-shared")  # the target's first k layers draft
DRAFTERS = DRAFTER_NAMES
CONFIDENCE = 0.4


def drafter_label(setting: Mapping[str, Any]) -> str:
    """A setting's drafter in a few words: its exit layer, draft folder or draft-model cap."""
    drafter = str(setting["drafter"])
    if drafter in EXIT_DRAFTERS:
        return f"{drafter} k={setting['exit_layer']}"
    if drafter in ("model", "model-trimmed") and setting["draft_name"] != "bundled":
        return f"{drafter} ({Path(str(setting['draft_name'])).name})"
    if drafter in HYBRID_DRAFTERS and setting["model_gamma"] is not None:
        return f"{drafter} (model ≤ {setting['model_gamma']})"
    return drafter


@dataclass(frozen=True, kw_only=True)
class Record:
    """One timed repetition of one request under one setting."""

    request_id: str
    category: str
    setting: BenchSetting
    repetition: int
    metrics: RequestMetrics
    hf_latency: float | None  # transformers' assisted generation, same request and settings
    hf_tokens: int | None
    hf_identical: bool | None  # token-identical to our output (meaningful at T = 0)

    def to_dict(self) -> dict[str, object]:
        """Plain data for JSON."""
        m = self.metrics
        derived = {
            "mean_gamma": m.mean_gamma,
            "tokens_per_second": m.tokens_per_second,
            "target_calls_per_token": m.target_calls_per_token,
            "alpha": m.alpha,
            "accepted_per_round": m.accepted_per_round,
            "tokens_per_round": m.tokens_per_round,
            "cost_ratio": m.cost_ratio,
            "speedup": m.speedup,
            "bound": m.bound(),
            "efficiency": m.efficiency(),
            "decode_speedup": m.decode_speedup,
            "decode_efficiency": m.decode_efficiency(),
            "verify_ratio": m.verify_ratio,
            "refined_bound": m.refined_bound(),
            "loop_efficiency": m.loop_efficiency(),
        }
        return {
            "request_id": self.request_id,
            "category": self.category,
            "setting": asdict(self.setting),
            "repetition": self.repetition,
            "metrics": asdict(m) | derived,
            "hf_latency": self.hf_latency,
            "hf_tokens": self.hf_tokens,
            "hf_identical": self.hf_identical,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        """Inverse of to_dict (derived metrics are recomputed, not read back).

        data: a record of the current schema; specviz.bench.schema.migrate brings older ones.
        """
        saved = data["metrics"]
        raw = {f.name: saved[f.name] for f in fields(RequestMetrics)}
        raw.update({k: tuple(raw[k]) for k in ("widths", "pass_seconds")})
        return cls(
            request_id=data["request_id"],
            category=data["category"],
            setting=BenchSetting(**data["setting"]),
            repetition=data["repetition"],
            metrics=RequestMetrics(**raw),
            hf_latency=data["hf_latency"],
            hf_tokens=data["hf_tokens"],
            hf_identical=data["hf_identical"],
        )


def _drafter(
    setting: BenchSetting, target: Any, draft: Any, sampling: SamplingConfig, lean: bool
) -> Drafter:
    """A fresh drafter for one run; lean=False drafts through transformers' forward."""
    options = DrafterOptions(
        exit_layer=setting.exit_layer,  # with the adapter shipped for k, if any
        min_confidence=CONFIDENCE if setting.policy == "confidence" else 0.0,
        model_gamma=setting.model_gamma if setting.drafter in HYBRID_DRAFTERS else None,
        make_cache=None if lean else KVCache,
    )
    return build_drafter(
        setting.drafter, target=target, draft=draft, sampling=sampling, options=options
    )


def plain_cache(setting: BenchSetting, lean_target: bool) -> Callable[[Any], CachedForward]:
    """The cached forward plain decoding runs on, to be compared with `setting`'s run.

    early-exit-shared verifies through specviz.drafters.shared_exit's own forward of the target,
    which costs less per pass than transformers' here, so its plain baseline runs on that
    forward too (all layers, nothing shared); every other setting's target uses transformers'
    forward, or with lean_target specviz.fast.lean's (where it applies), the same as its
    speculative run.
    """
    if setting.drafter == "early-exit-shared":
        return lambda target: SharedExit(target, setting.exit_layer).target_view
    return lean_target_cache if lean_target else KVCache


def speculative_cache(
    setting: BenchSetting, lean_target: bool
) -> Callable[[Any], CachedForward] | None:
    """The target's cached forward in `setting`'s speculative run (None: the drafter's share)."""
    return None if setting.drafter == "early-exit-shared" else plain_cache(setting, lean_target)


def _policy(setting: BenchSetting, costs: CostModel) -> GammaPolicy | None:
    """The round-by-round gamma policy (None: the drafter's own fixed gamma)."""
    if setting.policy in ("heuristic", "theory"):
        return make_policy(setting.policy, setting.gamma, costs)
    return None


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


@torch.no_grad()
def hf_generate(
    target: Any, draft: Any, prompt_ids: list[int], setting: BenchSetting, max_new_tokens: int
) -> tuple[float, list[int]]:
    """transformers' own assisted generation (or prompt lookup) on the same request.

    The draft's generation_config is replaced by a copy carrying assistant_settings for the
    call and restored after it (transformers' heuristic writes its gamma back to it).
    """
    ids = torch.tensor([prompt_ids], device=target.device)
    kwargs: dict[str, Any] = {
        "max_new_tokens": max_new_tokens,
        "do_sample": setting.temperature > 0,
    }
    if setting.temperature > 0:
        kwargs.update(temperature=setting.temperature, top_k=0, top_p=1.0)
    saved = draft.generation_config if setting.drafter != "ngram" else None
    if saved is None:
        kwargs.update(prompt_lookup_num_tokens=setting.gamma, max_matching_ngram_size=3)
    else:
        kwargs.update(assistant_model=draft)
        draft.generation_config = copy.deepcopy(saved)
        draft.generation_config.update(**assistant_settings(setting))
    try:
        start = clock(target.device)
        out = target.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
        seconds = clock(target.device) - start
    finally:
        if saved is not None:
            draft.generation_config = saved
    return seconds, out[0, len(prompt_ids) :].tolist()


def has_hf_counterpart(setting: BenchSetting) -> bool:
    """transformers has no early-exit or lookup-then-model drafter and no theory-driven gamma.

    For model-trimmed the comparison is transformers with the same draft and its full head.
    """
    no_counterpart = (*EXIT_DRAFTERS, *HYBRID_DRAFTERS)
    return setting.drafter not in no_counterpart and setting.policy != "theory"


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
) -> Iterator[Record]:
    """Warm up, then A (plain) B (speculative) C (transformers) interleaved, `repetitions` times.

    costs: the theory policy's measured costs, shared by every run of one setting (a fresh
    CostModel when None): costs belong to the hardware and drafter, not to a request.
    lean=False drafts through transformers' forward instead of specviz.fast.lean's; lean_target=True
    runs the target through specviz.fast.lean's (plain and speculative alike; transformers' own
    generation keeps its forward). raw=True sends the prompt as plain text; by default it goes
    through the tokenizer's chat template where there is one (specviz.models.chat).
    """
    prompt_ids = chat_prompt_ids(tokenizer, request.prompt, raw=raw)
    costs = costs if costs is not None else CostModel()
    for rep in range(-1, repetitions):  # rep -1 is the untimed warm-up
        sampling = SamplingConfig(temperature=setting.temperature, seed=seed + max(rep, 0))
        plain = autoregressive_generate(
            target, tokenizer, prompt_ids, sampling=sampling,
            max_new_tokens=request.max_new_tokens, make_cache=plain_cache(setting, lean_target),
        )  # fmt: skip
        spec = speculative_generate(
            target,
            _drafter(setting, target, draft, sampling, lean),
            tokenizer,
            prompt_ids,
            sampling=sampling,
            speculation=SpeculationConfig(
                gamma=setting.gamma, max_new_tokens=request.max_new_tokens
            ),
            policy=_policy(setting, costs),
            make_cache=speculative_cache(setting, lean_target),
        )
        hf_seconds, hf_tokens = (
            hf_generate(target, draft, prompt_ids, setting, request.max_new_tokens)
            if with_hf and has_hf_counterpart(setting)
            else (None, None)
        )
        if rep < 0:
            continue
        yield Record(
            request_id=request.id,
            category=request.category,
            setting=setting,
            repetition=rep,
            metrics=request_metrics(spec, plain),
            hf_latency=hf_seconds,
            hf_tokens=len(hf_tokens) if hf_tokens is not None else None,
            hf_identical=hf_tokens == list(spec.tokens) if hf_tokens is not None else None,
        )


@torch.no_grad()
def batch_step_times(
    target: Any, batch_sizes: Sequence[int], context: int = 64, steps: int = 5
) -> list[tuple[int, float]]:
    """Seconds per plain decode step (one new token per row) against batch size.

    Each size: a prompt pass of `context` tokens a row, one untimed step (a new shape builds its
    kernels on first use), then the median of `steps` timed steps.
    """
    out = []
    vocab = int(target.config.vocab_size)
    gen = torch.Generator().manual_seed(0)
    for b in batch_sizes:
        ids = torch.randint(vocab, (b, context), generator=gen).to(target.device)
        kv = {cache_kwarg(target): DynamicCache(config=target.config)}
        target(input_ids=ids, use_cache=True, **kv)
        target(input_ids=ids[:, -1:], use_cache=True, **kv)
        times = []
        for _ in range(steps):
            start = clock(target.device)
            target(input_ids=ids[:, -1:], use_cache=True, **kv)
            times.append(clock(target.device) - start)
        out.append((b, statistics.median(times)))
    return out


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
) -> list[Record]:
    """Every request under every setting; progress(done, total, label) after each.

    raw=True sends the prompts as plain text, else through the chat template (as run_request).
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
        )
    progress(total, total, f"done in {time.perf_counter() - t0:.0f} s")
    return records
