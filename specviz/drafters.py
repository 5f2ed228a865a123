"""Drafters propose up to gamma tokens together with the distribution q each was drawn from."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from specviz.cache import CachedForward
from specviz.config import SamplingConfig
from specviz.lean import draft_cache
from specviz.sampling import logits_to_probs, sample
from specviz.trimmed import spread, trim_head


@dataclass(frozen=True, kw_only=True)
class Draft:
    """Proposed tokens (k,) and the distributions q_draft (k, V) they came from; k <= gamma."""

    tokens: Tensor
    q_draft: Tensor
    forward_calls: int


class Drafter(Protocol):
    """What the verifier needs from any drafter (draft model, n-gram lookup, ...)."""

    def prefill(self, prefix: list[int]) -> None:
        """Process a prompt prefix before the first round (may be a no-op)."""

    def propose(
        self,
        ids: list[int],
        gamma: int,
        generator: torch.Generator,
        stop_ids: Collection[int],
    ) -> Draft:
        """Propose up to gamma tokens to follow ids; stop early after a stop token."""

    def rollback(self, committed: int) -> None:
        """Forget everything past the first `committed` tokens of the sequence."""


@runtime_checkable
class SharesTargetCache(Protocol):
    """A drafter whose cache is part of the target's (specviz.shared_exit): the decoder takes
    the target's cached forward from it instead of making its own."""

    def target_cache(self, target: Any) -> CachedForward:
        """The target's cached forward, sharing state with this drafter's."""


class ModelDrafter:
    """Drafts autoregressively with a small causal LM and its own KV cache."""

    def __init__(
        self,
        model: Any,
        sampling: SamplingConfig,
        vocab_size: int,
        make_cache: Callable[[Any], CachedForward] = draft_cache,
        min_confidence: float = 0.0,
        head_tokens: Tensor | None = None,
    ) -> None:
        """Wrap model; its distributions are warped by the same sampling config as the target's.

        make_cache: the cached forward; by default specviz.lean's for small Llama drafts.
        min_confidence: stop drafting after a token whose q has top probability below it.
        head_tokens (S,): draft only among these ids (q = 0 elsewhere; see specviz.trimmed).
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
        """Cache the draft's keys/values for prefix."""
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
