"""Input validation that runs before any model work, with messages that say what to change."""

from __future__ import annotations

from typing import Any


def context_length(model: Any) -> int | None:
    """The model's maximum number of positions, if its config states one."""
    value = getattr(model.config, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) else None


def vocab_size(model: Any) -> int:
    """Width of the model's output distribution."""
    return int(model.config.vocab_size)


def check_prompt(prompt_ids: list[int], max_new_tokens: int, *models: Any) -> None:
    """Raise ValueError for an empty prompt or one that leaves no room in a model's context."""
    if not prompt_ids:
        raise ValueError("prompt is empty: give at least one token of text to continue")
    for model in models:
        limit = context_length(model)
        if limit is None:
            continue
        if len(prompt_ids) > limit:
            raise ValueError(
                f"prompt is {len(prompt_ids)} tokens but the model's context "
                f"(max_position_embeddings) is {limit}: shorten the prompt"
            )
        if len(prompt_ids) + max_new_tokens > limit:
            raise ValueError(
                f"prompt ({len(prompt_ids)} tokens) + max_new_tokens ({max_new_tokens}) exceeds "
                f"the model's context of {limit} tokens: lower max_new_tokens to at most "
                f"{limit - len(prompt_ids)} or shorten the prompt"
            )


def check_pair(target: Any, draft: Any, *, cross_tokenizers: bool = False) -> None:
    """Raise ValueError unless draft and target are on the same device and, unless
    cross_tokenizers (a drafter that translates between tokenizers), score the same vocabulary."""
    v_target, v_draft = vocab_size(target), vocab_size(draft)
    if v_target != v_draft and not cross_tokenizers:
        raise ValueError(
            f"draft and target have different vocabularies (draft vocab_size={v_draft}, "
            f"target vocab_size={v_target}): use a draft trained with the target's tokenizer"
        )
    if target.device != draft.device:
        raise ValueError(
            f"draft is on {draft.device} but target is on {target.device}: put both on one device"
        )


def check_token_ids(prompt_ids: list[int], vocab: int) -> None:
    """Raise ValueError if any prompt id falls outside the vocabulary."""
    bad = [t for t in prompt_ids if not 0 <= t < vocab]
    if bad:
        raise ValueError(f"prompt token ids {bad[:5]} are outside the vocabulary [0, {vocab})")
