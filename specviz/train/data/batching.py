"""What the data steps' batched target passes share: padded batches, the next token drawn,
and the target's top-k log-probabilities at T = 1."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


def left_pad(prompts: list[list[int]], pad: int) -> tuple[Tensor, Tensor, Tensor]:
    """Left-padded ids, attention mask and position ids, each (B, W)."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, p in enumerate(prompts):
        ids[row, width - len(p) :] = torch.tensor(p)
        mask[row, width - len(p) :] = 1
    return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


def right_pad(seqs: list[list[int]], pad: int) -> tuple[Tensor, Tensor]:
    """Right-padded ids and attention mask, each (B, W)."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, s in enumerate(seqs):
        ids[row, : len(s)] = torch.tensor(s)
        mask[row, : len(s)] = 1
    return ids, mask


def next_tokens(scores: Tensor, temperature: float, gen: torch.Generator) -> Tensor:
    """Each row's next token (B,) from its scores (B, V), logits or log-probabilities: the
    argmax at temperature 0, else drawn from softmax(scores / temperature) with gen."""
    if temperature == 0.0:
        return scores.argmax(-1)
    probs = torch.softmax(scores.float() / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=gen).squeeze(1)


def topk_logp(model: Any, hidden: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Top-k token ids (int32) and log-probabilities (fp16) at T = 1 of final features (N, D),
    each (N, K)."""
    logp = torch.log_softmax(model.lm_head(hidden).float(), dim=-1)
    top = logp.topk(k, dim=-1)
    return top.indices.to(torch.int32), top.values.to(torch.float16)
