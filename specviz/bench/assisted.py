"""transformers' own assisted generation (or prompt lookup): the baseline a user compares with."""

from __future__ import annotations

import copy
from typing import Any

import torch

from specviz.core.decoding import clock
from specviz.drafters.registry import EXIT_DRAFTERS, HEAD_DRAFTERS, HYBRID_DRAFTERS, TREE_DRAFTERS
from specviz.results.setting import CONFIDENCE, BenchSetting


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
    """transformers has no early-exit, lookup-then-model, drafting-head or tree drafter and no
    theory-driven gamma.

    For model-trimmed the comparison is transformers with the same draft and its full head.
    """
    no_counterpart = (*EXIT_DRAFTERS, *HYBRID_DRAFTERS, *HEAD_DRAFTERS, *TREE_DRAFTERS)
    return setting.drafter not in no_counterpart and setting.policy != "theory"
