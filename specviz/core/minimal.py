"""The whole speculative sampler in one function: read this file first.

p_target: the target's distribution, q_draft: the draft's, both warped the same way
(temperature, top-k, top-p). gamma: draft tokens per round. A round drafts gamma tokens with the
draft's KV cache, scores them all in one target pass, keeps draft token x with probability
min(1, p(x)/q(x)), replaces the first rejected one by a draw from norm(max(0, p - q)), adds a
bonus draw from p when all are kept, and rolls both caches back to the committed tokens.
The emitted tokens follow the target's law exactly (Leviathan et al. 2023; Chen et al. 2023).

specviz.core.decoding is the same loop with events, stop tokens, gamma policies and any drafter;
for the same seed both emit the same tokens (tests/core/test_minimal.py).
"""

from __future__ import annotations

from typing import Any

import torch

from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig
from specviz.core.sampling import logits_to_probs, sample


@torch.no_grad()
def speculative_sample(
    target: Any,
    draft: Any,
    prompt_ids: list[int],
    *,
    gamma: int = 4,
    max_new_tokens: int = 64,
    sampling: SamplingConfig | None = None,
    stop_ids: frozenset[int] = frozenset(),
) -> list[int]:
    """Speculative sampling of target with draft proposing; returns the new token ids."""
    sampling = sampling or SamplingConfig()
    generator = torch.Generator(device=target.device).manual_seed(sampling.seed)
    target_kv, draft_kv, ids = KVCache(target), KVCache(draft), list(prompt_ids)
    vocab = int(target.config.vocab_size)
    device = target.device
    if len(ids) > 1:  # the draft caches the prompt but its last token (fed with the drafts)
        draft_kv.forward(torch.tensor(ids[:-1], device=device), keep=1)
    while (remaining := max_new_tokens - (len(ids) - len(prompt_ids))) > 0:
        k = min(gamma, remaining - 1)
        # 1. draft k tokens autoregressively, remembering the q each was drawn from
        tokens, q_rows, pending = [], [], ids[len(draft_kv) :]
        for _ in range(k):
            logits = draft_kv.forward(torch.tensor(pending, device=device), keep=1)[-1]
            q = logits_to_probs(logits[:vocab], sampling)  # (V,)
            tokens.append(sample(q, generator))
            q_rows.append(q)
            if tokens[-1] in stop_ids:
                break
            pending = tokens[-1:]
        k = len(tokens)
        # 2. one target pass scores every draft position and the bonus position
        fresh = ids[len(target_kv) :] + tokens
        logits = target_kv.forward(torch.tensor(fresh, device=device), keep=k + 1)
        p_target = logits_to_probs(logits, sampling)  # (k+1, V)
        q_draft = torch.stack(q_rows).to(p_target) if q_rows else p_target[:0]  # (k, V)
        # 3. keep x with probability min(1, p(x)/q(x)); stop at the first rejection
        rows = torch.arange(k, device=device)
        drafted = torch.tensor(tokens, dtype=torch.long, device=device)
        p_x, q_x = p_target[rows, drafted], q_draft[rows, drafted]  # (k,)
        accept = torch.where(q_x > 0, (p_x / q_x.clamp(min=1e-300)).clamp(max=1.0), 1.0)
        u = torch.rand(k, generator=generator, dtype=accept.dtype, device=device)
        rejected = (u >= accept).nonzero()
        n = int(rejected[0]) if rejected.numel() else k
        # 4. the next token: from the residual norm(max(0, p - q)) after a rejection, else bonus
        if n < k:
            excess = (p_target[n] - q_draft[n]).clamp(min=0.0)
            next_dist = excess / excess.sum() if excess.sum() > 0 else p_target[n]
        else:
            next_dist = p_target[k]
        next_token = sample(next_dist, generator)
        stopped = next((i for i in range(n) if tokens[i] in stop_ids), None)
        ids += tokens[: stopped + 1] if stopped is not None else [*tokens[:n], next_token]
        # 5. roll both caches back: the last committed token is fed in the next round
        target_kv.crop(len(ids) - 1)
        draft_kv.crop(len(ids) - 1)
        if ids[-1] in stop_ids:
            break
    return ids[len(prompt_ids) :]
