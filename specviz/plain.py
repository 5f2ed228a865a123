"""Plain target decoding: one forward pass a token, the speed baseline and the reference law.

It warps and samples through the same code as the speculative loop (specviz.core), so the two
differ only in who proposes the tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import Any

import torch

from specviz.core.cache import CachedForward, KVCache
from specviz.core.config import SamplingConfig, check_max_new_tokens
from specviz.core.decoding import clock, make_generator
from specviz.core.events import Event, Finished, Prefill, Sampled
from specviz.core.sampling import logits_to_probs, sample


def autoregressive_events(
    target: Any,
    prompt_ids: list[int],
    *,
    sampling: SamplingConfig,
    max_new_tokens: int,
    stop_ids: Collection[int] = (),
    make_cache: Callable[[Any], CachedForward] = KVCache,
) -> Iterator[Event]:
    """Plain target sampling, one forward pass per token: the speed baseline and reference law.

    make_cache: the target's cached forward (a benchmark runs plain decoding through the same
    forward as the speculative run it is compared with).
    """
    check_max_new_tokens(max_new_tokens)
    device = target.device
    cache, generator, ids = make_cache(target), make_generator(sampling, device), list(prompt_ids)
    start = clock(device)
    yield Prefill(prompt_tokens=len(ids), target_seconds=0.0, draft_seconds=0.0)  # no pass yet
    reason = "max_new_tokens"
    for position in range(max_new_tokens):
        t0 = clock(device)  # the first step scores the whole prompt: no separate prompt pass
        logits = cache.forward(torch.tensor(ids[len(cache) :], device=device), keep=1)[-1]  # (V,)
        p = logits_to_probs(logits, sampling)
        token, seconds = sample(p, generator), clock(device) - t0
        yield Sampled(position=position, token=token, p_x=float(p[token]), target_seconds=seconds)
        ids.append(token)
        if token in stop_ids:
            reason = "eos"
            break
    yield Finished(
        reason=reason, new_tokens=len(ids) - len(prompt_ids), seconds=clock(device) - start
    )
