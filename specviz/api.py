"""The one-call API: validate inputs, run a decoder, collect its events into a result.

speculative_generate takes any drafter, or a draft model as a shorthand for the registered
"model" drafter; the streams hand back the lazy event generator instead of a result.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from specviz.checks import check_prompt, check_token_ids, vocab_size
from specviz.core.acceptance import EXACT, AcceptanceRule
from specviz.core.cache import CachedForward, KVCache
from specviz.core.config import SamplingConfig, SpeculationConfig, check_max_new_tokens
from specviz.core.decoding import SpeculativeDecoder
from specviz.core.drafter import Drafter, Remembers, SharesTargetCache
from specviz.core.events import (
    EMITTING,
    Event,
    Finished,
    Prefill,
    RoundSummary,
    Sampled,
    TreeVerified,
)
from specviz.core.policy import GammaPolicy
from specviz.drafters.registry import build_drafter
from specviz.plain import autoregressive_events
from specviz.tree.decoding import TreeDecoder
from specviz.tree.drafter import TreeCache, TreeDrafter
from specviz.tree.verify import EXACT_TREE, TreeRule


@dataclass(frozen=True, kw_only=True)
class GenerationResult:
    """Everything one decode produced: new tokens (a stop token that ended it among them), their
    text (without that stop token), every event, and totals."""

    prompt_ids: tuple[int, ...]
    tokens: tuple[int, ...]
    text: str
    events: tuple[Event, ...]
    finish_reason: str
    seconds: float

    @property
    def rounds(self) -> tuple[RoundSummary, ...]:
        """Round summaries of a speculative decode (empty for plain decoding)."""
        return tuple(e for e in self.events if isinstance(e, RoundSummary))

    @property
    def proposed(self) -> int:
        """Draft tokens proposed."""
        return sum(r.proposed for r in self.rounds)

    @property
    def accepted(self) -> int:
        """Draft tokens accepted."""
        return sum(r.accepted for r in self.rounds)

    @property
    def acceptance_rate(self) -> float:
        """Accepted / proposed draft tokens (nan when nothing was proposed)."""
        return self.accepted / self.proposed if self.proposed else float("nan")

    @property
    def target_calls(self) -> int:
        """Target forward passes: one per round, or one per token when plain (the first of
        them also scores the prompt)."""
        plain = sum(isinstance(e, Sampled) for e in self.events)
        return len(self.rounds) + plain

    @property
    def exact(self) -> bool:
        """False when a lossy tree rule (typical acceptance) chose any token: the output then
        does not follow the target's law."""
        return all(e.exact for e in self.events if isinstance(e, TreeVerified))

    @property
    def prefill(self) -> Prefill:
        """The prefill event."""
        return next(e for e in self.events if isinstance(e, Prefill))


def collect(events: Iterable[Event], prompt_ids: list[int], tokenizer: Any) -> GenerationResult:
    """Drain an event stream into a GenerationResult."""
    log = tuple(events)
    tokens = tuple(e.token for e in log if isinstance(e, EMITTING))
    finished = next(e for e in log if isinstance(e, Finished))
    written = tokens[:-1] if finished.reason == "eos" else tokens  # a stop token is no text
    return GenerationResult(
        prompt_ids=tuple(prompt_ids),
        tokens=tokens,
        text=tokenizer.decode(list(written)) if tokenizer is not None else "",
        events=log,
        finish_reason=finished.reason,
        seconds=finished.seconds,
    )


def encode(tokenizer: Any, prompt: str | list[int]) -> list[int]:
    """Prompt text (or ids) → token ids, with a clear error for an empty prompt."""
    if isinstance(prompt, str):
        if not prompt.strip():
            raise ValueError("prompt is empty: give some text to continue")
        return list(tokenizer(prompt)["input_ids"])
    return list(prompt)


def stop_ids(target: Any, tokenizer: Any) -> frozenset[int]:
    """End-of-sequence ids from the tokenizer and the model's generation config."""
    found: set[int] = set()
    for source in (getattr(tokenizer, "eos_token_id", None), _generation_eos(target)):
        if isinstance(source, int):
            found.add(source)
        elif isinstance(source, list | tuple):
            found.update(int(t) for t in source)
    return frozenset(found)


def _generation_eos(model: Any) -> object:
    """generation_config.eos_token_id if the model has one."""
    config = getattr(model, "generation_config", None)
    return getattr(config, "eos_token_id", None)


def speculative_stream(
    target: Any,
    drafter: Drafter | TreeDrafter,
    tokenizer: Any,
    prompt: str | list[int],
    *,
    sampling: SamplingConfig,
    speculation: SpeculationConfig,
    rule: AcceptanceRule = EXACT,
    stop: Collection[int] | None = None,
    policy: GammaPolicy | None = None,
    make_cache: Callable[[Any], CachedForward] | None = None,
    tree_rule: TreeRule = EXACT_TREE,
) -> tuple[list[int], Iterator[Event]]:
    """Validate everything, then return the prompt ids and the lazy event stream.

    drafter: any Drafter (specviz.build_drafter makes the registered ones; specviz's
    speculative_generate also takes a draft model), or a TreeDrafter, whose trees are verified
    by tree_rule (its depth replaces speculation.gamma); policy chooses gamma per round
    (default: speculation.gamma every round); make_cache: the target's cached forward (default
    a KVCache), None with a drafter that shares the target's cache (SharesTargetCache: the
    shared early exit, the drafting heads), whose own forward of the target verifies. A tree
    is verified through make_cache's forward too: it must take a tree's positions and mask and
    keep the kept path (specviz.tree.drafter.TreeCache: a KVCache, specviz.fast.lean's).
    """
    if not isinstance(drafter, Drafter | TreeDrafter):
        raise ValueError(
            f"drafter must be a Drafter (prefill, propose, rollback) or a TreeDrafter, got "
            f"{type(drafter).__name__}: build one with specviz.build_drafter, or pass a draft "
            "model to specviz.speculative_generate"
        )
    prompt_ids = encode(tokenizer, prompt)
    check_prompt(prompt_ids, speculation.max_new_tokens, target)
    check_token_ids(prompt_ids, vocab_size(target))
    stops = stop_ids(target, tokenizer) if stop is None else frozenset(stop)
    if isinstance(drafter, TreeDrafter):
        return prompt_ids, _tree_events(
            target, drafter, prompt_ids, sampling, speculation, stops, tree_rule, policy, make_cache
        )
    decoder = SpeculativeDecoder(
        target,
        drafter,
        prompt_ids,
        sampling=sampling,
        speculation=speculation,
        stop_ids=stops,
        rule=rule,
        policy=policy,
        make_cache=make_cache,
    )
    return prompt_ids, _remembered(decoder)


def _remembered(decoder: SpeculativeDecoder | TreeDecoder) -> Iterator[Event]:
    """The decoder's events; once it has run to its end (EOS or max_new_tokens), a drafter
    that learns from requests (Remembers: the suffix drafters) is
    given the whole sequence, before the Finished event reaches the caller."""
    for event in decoder.events():
        if isinstance(event, Finished) and isinstance(decoder.drafter, Remembers):
            decoder.drafter.remember(list(decoder.ids), decoder.prompt_len)
        yield event


def _tree_events(
    target: Any,
    drafter: TreeDrafter,
    prompt_ids: list[int],
    sampling: SamplingConfig,
    speculation: SpeculationConfig,
    stops: frozenset[int],
    rule: TreeRule,
    policy: GammaPolicy | None,
    make_cache: Callable[[Any], CachedForward] | None,
) -> Iterator[Event]:
    """A tree decode's events, after refusing what a tree decode cannot take."""
    if policy is not None:
        raise ValueError("a tree drafter's depth is fixed: drop the gamma policy")
    if make_cache is not None and isinstance(drafter, SharesTargetCache):
        raise ValueError(
            f"{type(drafter).__name__} verifies through its own forward of the target: drop "
            "make_cache (a drafting head's forward is DrafterOptions.make_cache's: None for "
            "specviz.fast.lean's, a KVCache for transformers')"
        )
    decoder = TreeDecoder(
        target,
        drafter,
        prompt_ids,
        sampling=sampling,
        max_new_tokens=speculation.max_new_tokens,
        stop_ids=stops,
        rule=rule,
        make_cache=cast(Callable[[Any], TreeCache], make_cache or KVCache),
    )
    return _remembered(decoder)


def speculative_generate(
    target: Any,
    drafter: Drafter | Any,
    tokenizer: Any,
    prompt: str | list[int],
    *,
    sampling: SamplingConfig | None = None,
    speculation: SpeculationConfig | None = None,
    rule: AcceptanceRule = EXACT,
    stop: Collection[int] | None = None,
    policy: GammaPolicy | None = None,
    make_cache: Callable[[Any], CachedForward] | None = None,
    tree_rule: TreeRule = EXACT_TREE,
) -> GenerationResult:
    """Speculative sampling of target, drafter proposing; the output law is the target's.

    drafter: any Drafter or TreeDrafter, or a draft model (shorthand for
    build_drafter("model", ...)); tree_rule verifies a TreeDrafter's trees.
    stop: token ids that end generation (default: the tokenizer's and model's EOS ids).
    make_cache: the target's cached forward (default transformers' forward with a KVCache).
    """
    sampling, speculation = sampling or SamplingConfig(), speculation or SpeculationConfig()
    if drafter is None:
        raise ValueError("no drafter given: pass a draft model or a Drafter")
    if not isinstance(drafter, Drafter | TreeDrafter):  # a draft model: check it first
        check_prompt(encode(tokenizer, prompt), speculation.max_new_tokens, target, drafter)
        drafter = build_drafter("model", target=target, draft=drafter, sampling=sampling)
    prompt_ids, events = speculative_stream(
        target,
        drafter,
        tokenizer,
        prompt,
        sampling=sampling,
        speculation=speculation,
        rule=rule,
        stop=stop,
        policy=policy,
        make_cache=make_cache,
        tree_rule=tree_rule,
    )
    return collect(events, prompt_ids, tokenizer)


def autoregressive_stream(
    target: Any,
    tokenizer: Any,
    prompt: str | list[int],
    *,
    sampling: SamplingConfig,
    max_new_tokens: int,
    stop: Collection[int] | None = None,
    make_cache: Callable[[Any], CachedForward] = KVCache,
) -> tuple[list[int], Iterator[Event]]:
    """Validate everything, then return the prompt ids and the lazy plain-decoding stream."""
    check_max_new_tokens(max_new_tokens)
    prompt_ids = encode(tokenizer, prompt)
    check_prompt(prompt_ids, max_new_tokens, target)
    check_token_ids(prompt_ids, vocab_size(target))
    events = autoregressive_events(
        target,
        prompt_ids,
        sampling=sampling,
        max_new_tokens=max_new_tokens,
        stop_ids=stop_ids(target, tokenizer) if stop is None else frozenset(stop),
        make_cache=make_cache,
    )
    return prompt_ids, events


def autoregressive_generate(
    target: Any,
    tokenizer: Any,
    prompt: str | list[int],
    *,
    sampling: SamplingConfig | None = None,
    max_new_tokens: int = 64,
    stop: Collection[int] | None = None,
    make_cache: Callable[[Any], CachedForward] = KVCache,
) -> GenerationResult:
    """Plain target sampling with the same warping and KV-cached path as the speculative loop.

    make_cache: the target's cached forward (default transformers' forward with a KVCache).
    """
    prompt_ids, events = autoregressive_stream(
        target,
        tokenizer,
        prompt,
        sampling=sampling or SamplingConfig(),
        max_new_tokens=max_new_tokens,
        stop=stop,
        make_cache=make_cache,
    )
    return collect(events, prompt_ids, tokenizer)
