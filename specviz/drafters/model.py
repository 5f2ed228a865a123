"""The draft-model drafter: a small causal LM proposes gamma tokens and the q each came from."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import torch
from torch import Tensor

from specviz.core.cache import CachedForward, KVCache
from specviz.core.config import SamplingConfig
from specviz.core.drafter import Draft
from specviz.core.sampling import logits_to_probs, sample
from specviz.drafters.trimmed import spread, trim_head


class ModelDrafter:
    """Drafts autoregressively with a small causal LM and its own KV cache."""

    def __init__(
        self,
        model: Any,
        sampling: SamplingConfig,
        vocab_size: int,
        make_cache: Callable[[Any], CachedForward] = KVCache,
        min_confidence: float = 0.0,
        head_tokens: Tensor | None = None,
    ) -> None:
        """Wrap model; its distributions are warped by the same sampling config as the target's.

        make_cache: the cached forward (default transformers' forward with a KVCache; the
            registry passes specviz.fast.lean's for small Llama drafts).
        min_confidence: stop drafting after a token whose q has top probability below it.
        head_tokens (S,): draft only among these ids (q = 0 elsewhere; specviz.drafters.trimmed).
        """
        if not 0.0 <= min_confidence <= 1.0:
            raise ValueError(f"min_confidence must be in [0, 1] (got {min_confidence})")
        self.min_confidence = min_confidence
        self.head_tokens = None if head_tokens is None else head_tokens.to(model.device)
        self.cache = make_cache(model if head_tokens is None else trim_head(model, head_tokens))
        self.sampling = sampling
        self.vocab_size = vocab_size
        self.device = model.device

    def prefill(self, prefix: list[int]) -> None:
        """Start a request: forget any earlier one, then cache the draft's keys/values for
        prefix."""
        self.cache.crop(0)
        if prefix:
            self.cache.forward(torch.tensor(prefix, device=self.device), keep=1)

    def propose(
        self,
        ids: list[int],
        gamma: int,
        generator: torch.Generator,
        stop_ids: Collection[int],
    ) -> Draft:
        """Sample up to gamma tokens; q_draft rows are the exact distributions sampled from."""
        pending = ids[len(self.cache) :]  # 1 token, or 2 when one behind after a full accept
        tokens: list[int] = []
        rows: list[Tensor] = []
        for _ in range(gamma):
            logits = self.cache.forward(torch.tensor(pending, device=self.device), keep=1)[-1]
            token, q = self.draw(logits[: self.vocab_size], generator)
            if self.head_tokens is not None:  # positions in the trimmed head -> token ids
                token, q = (
                    int(self.head_tokens[token]),
                    spread(q, self.head_tokens, self.vocab_size),
                )
            tokens.append(token)
            rows.append(q)
            if token in stop_ids or float(q.max()) < self.min_confidence:
                break
            pending = [token]
        q_draft = torch.stack(rows) if rows else torch.empty(0, self.vocab_size)  # (k, V)
        return Draft(
            tokens=torch.tensor(tokens, dtype=torch.long, device=self.device),
            q_draft=q_draft,
            forward_calls=len(tokens),
        )

    def draw(self, logits: Tensor, generator: torch.Generator) -> tuple[int, Tensor]:
        """Sample one token from the warped logits (V,); return it and q (V,) it came from."""
        q = logits_to_probs(logits, self.sampling)
        return sample(q, generator), q

    def rollback(self, committed: int) -> None:
        """Keep at most committed - 1 cached positions (the last token is fed next round)."""
        self.cache.crop(committed - 1)
