"""transformers' own generate() of a loaded model, timed: the baseline a user compares with.

Plain generation, assisted generation with a draft model (Universal Assisted Generation where
the two tokenizers differ) or prompt lookup, on the same request as specviz's own decode.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from specviz.core.decoding import clock

# transformers' logger that warns, as its assisted generation calls the assistant's generate()
# with a generation_config and arguments together, of a deprecation no caller can act on
GENERATION_LOG = "transformers.generation.utils"


@torch.no_grad()
def generate(
    model: Any,
    ids: list[int],
    max_new_tokens: int,
    temperature: float,
    *,
    assistant: Any = None,
    schedule: dict[str, Any] | None = None,
    lookup: int = 0,
    tokenizers: tuple[Any, Any] | None = None,
    stop: Collection[int] | None = None,
) -> tuple[float, list[int]]:
    """Seconds and new tokens of transformers' own generate() of model on ids: greedy at T = 0,
    else sampled at temperature with no top-k or top-p (its own defaults would filter).

    assistant: a draft model for its assisted generation; schedule: its draft length, schedule
    and confidence threshold (num_assistant_tokens, num_assistant_tokens_schedule,
    assistant_confidence_threshold), set on a copy of its generation_config for the call
    (transformers reads them there, and its heuristic writes its gamma back); tokenizers: the
    target's and the assistant's, where they differ (Universal Assisted Generation); lookup:
    prompt lookup of this many tokens instead; stop: the end-of-sequence ids to stop at (None:
    the model's own).
    """
    batch = torch.tensor([ids], device=model.device)
    kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens, "do_sample": temperature > 0}
    if temperature > 0:
        kwargs.update(temperature=temperature, top_k=0, top_p=1.0)
    if stop is not None:
        kwargs.update(eos_token_id=sorted(stop) or None, pad_token_id=min(stop, default=None))
    if lookup:
        kwargs.update(prompt_lookup_num_tokens=lookup, max_matching_ngram_size=3)
    saved = None if assistant is None else assistant.generation_config
    if assistant is not None:
        kwargs["assistant_model"] = assistant
        if tokenizers is not None:
            kwargs.update(tokenizer=tokenizers[0], assistant_tokenizer=tokenizers[1])
        assistant.generation_config = copy.deepcopy(saved)
        assistant.generation_config.update(**(schedule or {}))
    try:
        with quiet(GENERATION_LOG):
            start = clock(model.device)
            out = model.generate(batch, attention_mask=torch.ones_like(batch), **kwargs)
            seconds = clock(model.device) - start
    finally:
        if assistant is not None:
            assistant.generation_config = saved
    return seconds, [int(t) for t in out[0, len(ids) :]]


@contextmanager
def quiet(name: str) -> Iterator[None]:
    """Within the block, the logger called name passes on errors only (its level restored)."""
    log = logging.getLogger(name)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)
