"""Prompt lookup first, the draft model otherwise: free copies where the text repeats itself.

Code repeats its own identifiers and the prompt's; where the last n tokens occurred before,
n-gram lookup proposes what followed them at no cost (one-hot q), and elsewhere the draft
model drafts as usual. Which of the two drafts a round depends only on the tokens so far, and
each proposal carries the q it was drawn from, so the verifier keeps the output law exact. The
draft model's cache falls behind during lookup rounds and catches up in one forward over the
missed tokens when it next drafts.

Copies are free and often long, model drafts cost a step each and are lost more often, so the
two want different lengths: model_gamma caps the draft model's share of a round (γ still
bounds the copies).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, cast

import torch

from specviz.core.cache import CachedForward
from specviz.core.drafter import Draft, SharesTargetCache
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter


class LookupThenModelDrafter:
    """N-gram lookup's continuation when there is one, else the draft model's proposal."""

    def __init__(
        self,
        model: ModelDrafter,
        lookup: NgramDrafter | None = None,
        *,
        model_gamma: int | None = None,
    ) -> None:
        """lookup: tried first each round; by default n from 3 down to 2 (n >= 2 keeps chance
        one-token matches out). model_gamma: at most this many draft-model tokens a round
        (None: gamma's)."""
        if model_gamma is not None and model_gamma < 1:
            raise ValueError(f"model_gamma must be >= 1 or None (got {model_gamma})")
        device = str(model.device)
        self.lookup = lookup or NgramDrafter(model.vocab_size, min_ngram=2, device=device)
        self.model, self.device, self.model_gamma = model, model.device, model_gamma

    def prefill(self, prefix: list[int]) -> None:
        """Cache the prompt in the draft model (lookup needs nothing)."""
        self.model.prefill(prefix)

    def propose(
        self,
        ids: list[int],
        gamma: int,
        generator: torch.Generator,
        stop_ids: Collection[int],
    ) -> Draft:
        """Up to gamma tokens: the lookup's if it has any, else up to model_gamma of the model's."""
        copied = self.lookup.propose(ids, gamma, generator, stop_ids)
        if len(copied.tokens) > 0:
            return copied
        cap = gamma if self.model_gamma is None else min(gamma, self.model_gamma)
        return self.model.propose(ids, cap, generator, stop_ids)

    def rollback(self, committed: int) -> None:
        """Forget the draft model's positions past committed (lookup keeps no state)."""
        self.model.rollback(committed)


class LookupThenShared(LookupThenModelDrafter):
    """Lookup first, else a drafter that shares the target's cache (a drafting head, the shared
    early exit): the decoder verifies through that drafter's target cache, which then sees every
    verified position, those of lookup rounds too."""

    def target_cache(self, target: Any) -> CachedForward:
        """The wrapped drafter's target cache."""
        return cast(SharesTargetCache, self.model).target_cache(target)
