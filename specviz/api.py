"""The one-call API: speculative_generate takes any drafter, or a draft model as a shorthand."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from specviz.core.acceptance import EXACT, AcceptanceRule
from specviz.core.cache import CachedForward
from specviz.core.checks import check_prompt
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.drafter import Drafter
from specviz.core.generate import GenerationResult, collect, encode, speculative_stream
from specviz.core.policy import GammaPolicy
from specviz.drafters.registry import build_drafter


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
) -> GenerationResult:
    """Speculative sampling of target, drafter proposing; the output law is the target's.

    drafter: any Drafter, or a draft model (shorthand for build_drafter("model", ...)).
    stop: token ids that end generation (default: the tokenizer's and model's EOS ids).
    make_cache: the target's cached forward (default transformers' forward with a KVCache).
    """
    sampling, speculation = sampling or SamplingConfig(), speculation or SpeculationConfig()
    if drafter is None:
        raise ValueError("no drafter given: pass a draft model or a Drafter")
    if not isinstance(drafter, Drafter):  # a draft model: check it before building its drafter
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
    )
    return collect(events, prompt_ids, tokenizer)
