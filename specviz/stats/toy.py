"""Toy order-2 Markov language models with exactly known laws, behind an HF-like interface.

The model's KV cache stores the token ids themselves, so cache rollback bugs change the context
the toy sees exactly as they would in a transformer. Given a 4D attention mask (a token tree),
the token before a query is the last position it may attend to before its own (per row).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch
from torch import Tensor

# A toy prompt whose last tokens (1, 2) followed earlier too, each time by another token: lookup
# drafters (tree-ngram) get a tree with several branches at the root.
REPEATING_PROMPT = (1, 2, 3, 1, 2, 4, 1, 2, 5, 1, 2)


@dataclass(frozen=True)
class ToyConfig:
    """The config fields the decoder reads."""

    vocab_size: int
    max_position_embeddings: int = 4096


class MarkovLM(torch.nn.Module):
    """Next-token logits = table[token before last, last token] (table: (V+1, V, V))."""

    def __init__(self, table: Tensor) -> None:
        """table[V] is the row used when there is no token before the last one."""
        super().__init__()
        self.table = torch.nn.Parameter(table, requires_grad=False)
        self.config = ToyConfig(vocab_size=table.shape[-1])

    @property
    def device(self) -> torch.device:
        """Where the table lives."""
        return self.table.device

    def forward(
        self,
        input_ids: Tensor,
        position_ids: Tensor | None = None,
        use_cache: bool = False,
        cache: Any = None,
        attention_mask: Tensor | None = None,
        **_: Any,
    ) -> SimpleNamespace:
        """Logits (B, T, V) for input_ids (B, T) after the cached tokens (cache: a DynamicCache)."""
        new = input_ids.to(torch.float64)[:, None, :, None]  # (B, 1, T, 1)
        history = cache.update(new, new, 0)[0] if cache is not None else new
        hist = history[:, 0, :, 0].long()  # (B, L)
        length, steps = hist.shape[1], input_ids.shape[1]
        idx = torch.arange(length - steps, length, device=hist.device)  # (T,)
        slot = (idx - 1)[None].expand(hist.shape[0], -1)  # (B, T) the token before each query
        if attention_mask is not None and attention_mask.dim() == 4:
            cols = torch.arange(length, device=hist.device)  # (L,)
            seen = (attention_mask[:, 0] == 0) & (cols < idx[:, None])  # (B, T, L)
            slot = torch.where(seen, cols, -1).max(dim=-1).values  # (B, T)
        before = hist.gather(1, slot.clamp(min=0))  # (B, T)
        before = torch.where(slot >= 0, before, self.table.shape[0] - 1)
        return SimpleNamespace(logits=self.table[before, hist[:, idx]])  # (B, T, V)


def random_pair(
    vocab: int, seed: int, sharpness: float = 2.0, draft_noise: float = 1.0
) -> tuple[MarkovLM, MarkovLM]:
    """A target with context-dependent logits and a draft that agrees with it only partly."""
    gen = torch.Generator().manual_seed(seed)
    shape = (vocab + 1, vocab, vocab)
    table = sharpness * torch.randn(shape, generator=gen, dtype=torch.float64)
    noise = draft_noise * torch.randn(shape, generator=gen, dtype=torch.float64)
    return MarkovLM(table), MarkovLM(table + noise)


def constant_alpha_pair(
    vocab: int, seed: int, sharpness: float = 2.0, draft_noise: float = 1.0
) -> tuple[MarkovLM, MarkovLM]:
    """A pair whose alpha = sum min(p, q) is the same in every context (and at any temperature).

    Every context permutes one fixed pair of base logit vectors by the same random permutation.
    """
    gen = torch.Generator().manual_seed(seed)
    base_p = sharpness * torch.randn(vocab, generator=gen, dtype=torch.float64)
    base_q = base_p + draft_noise * torch.randn(vocab, generator=gen, dtype=torch.float64)
    perms = torch.stack([torch.randperm(vocab, generator=gen) for _ in range((vocab + 1) * vocab)])
    perms = perms.view(vocab + 1, vocab, vocab)  # (V+1, V, V)
    return MarkovLM(base_p[perms]), MarkovLM(base_q[perms])
