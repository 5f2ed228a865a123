"""Suffix decoding where memory is sure of itself, the draft model elsewhere.

Each round the suffix drafter scores its best speculation (the sum of its tokens' path
frequencies, specviz.drafters.suffix_speculate); at min_score or above its one-hot chain is
proposed, free, and below it the draft model drafts as usual, its q the law its tokens were
drawn from. The choice depends only on the committed text and the memory, never on a random
draw, so the verifier keeps the output law exact. The draft model's cache falls behind during
suffix rounds and catches up in one forward over the missed tokens when it next drafts.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

import torch

from specviz.core.drafter import Draft
from specviz.core.events import SuffixLookup
from specviz.drafters.model import ModelDrafter
from specviz.drafters.suffix import SuffixDrafter


class SuffixThenModelDrafter:
    """The suffix drafter's chain when its score reaches min_score, else the draft model's."""

    def __init__(
        self,
        model: ModelDrafter,
        suffix: SuffixDrafter,
        *,
        min_score: float = 1.0,
        model_gamma: int | None = None,
    ) -> None:
        """min_score: the expected accepted tokens a suffix chain must promise (>= 0).
        model_gamma: at most this many draft-model tokens a round (None: gamma's)."""
        if not min_score >= 0:
            raise ValueError(f"min_score must be >= 0 (got {min_score})")
        if model_gamma is not None and model_gamma < 1:
            raise ValueError(f"model_gamma must be >= 1 or None (got {model_gamma})")
        self.model, self.suffix = model, suffix
        self.min_score, self.model_gamma = min_score, model_gamma
        self.device = model.device
        self.last = "model"  # who drafted the last round: "suffix" or "model"

    def prefill(self, prefix: list[int]) -> None:
        """Cache the prompt in the draft model and start the request's suffix trie."""
        self.model.prefill(prefix)
        self.suffix.prefill(prefix)

    def propose(
        self,
        ids: list[int],
        gamma: int,
        generator: torch.Generator,
        stop_ids: Collection[int],
    ) -> Draft:
        """Up to gamma tokens: the suffix chain if it scores min_score or more, else up to
        model_gamma of the draft model's."""
        found = self.suffix.speculation(ids, gamma, stop_ids)
        if found.tokens and found.score >= self.min_score:
            self.last = "suffix"
            return self.suffix.draft(found)
        self.last = "model"
        cap = gamma if self.model_gamma is None else min(gamma, self.model_gamma)
        return self.model.propose(ids, cap, generator, stop_ids)

    def rollback(self, committed: int) -> None:
        """Forget the draft model's positions past committed."""
        self.model.rollback(committed)
        self.suffix.rollback(committed)

    def remember(self, ids: list[int], prompt_len: int) -> None:
        """Add the finished request to the suffix memory."""
        self.suffix.remember(ids, prompt_len)

    def explain(self, round_index: int) -> SuffixLookup | None:
        """The suffix drafter's last lookup, saying who drafted the round (None unless its
        suffix drafter was built with explain)."""
        found = self.suffix.explain(round_index)
        if found is None:
            return None
        return replace(found, drafted_by=self.last, min_score=self.min_score)
