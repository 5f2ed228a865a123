"""Suffix decoding where memory is sure of itself, the draft model elsewhere while it pays.

Each round the suffix drafter scores its best speculation (the sum of its tokens' path
frequencies, specviz.drafters.suffix.speculate); at min_score or above its one-hot chain is
proposed, free, and below it the draft model drafts as usual, its q the law its tokens were
drawn from. The draft model costs a forward a token, so it drafts only while it pays: its
*kept share* is the fraction of the tokens it drafted that the target kept
(read from the rounds' ends: a round committing m tokens after n drafted kept min(n, m - 1)).
It is counted across requests: a hybrid built with share_key starts from the counts the memory
holds under that name (SuffixMemory.shares) and leaves its own there when the request ends; the
first request starts from one kept and one rejected token. The counts fade: whenever more than
SHARE_WINDOW drafted tokens are counted, both halve, so the share follows the recent requests.
Below min_model_alpha the round takes the suffix chain whatever its score (or drafts nothing: a
plain target step), except every probe_every-th such round, where the model drafts again to
measure.

Every choice depends only on what happened before the round (the committed text, the memory,
earlier rounds' and requests' outcomes), never on the round's own draws, so the verifier keeps
the output law exact. The draft model's cache falls behind during other rounds and catches up
in one forward over the missed tokens when it next drafts.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import Any, cast

import torch

from specviz.core.cache import CachedForward
from specviz.core.drafter import Draft, SharesTargetCache
from specviz.core.events import SuffixLookup
from specviz.drafters.model import ModelDrafter
from specviz.drafters.suffix.drafter import SuffixDrafter

SHARE_WINDOW = 256  # drafted tokens counted before the counts halve


class SuffixThenModelDrafter:
    """The suffix drafter's chain when its score reaches min_score, else the draft model's
    while the target keeps at least min_model_alpha of its drafts, else the weak chain."""

    def __init__(
        self,
        model: ModelDrafter,
        suffix: SuffixDrafter,
        *,
        min_score: float = 1.0,
        model_gamma: int | None = None,
        min_model_alpha: float = 0.0,
        probe_every: int = 8,
        share_key: str | None = None,
    ) -> None:
        """min_score: the expected accepted tokens a suffix chain must promise (>= 0).
        model_gamma: at most this many draft-model tokens a round (None: gamma's).
        min_model_alpha: the kept share the draft model needs to draft (0: always, to 1).
        probe_every: the model drafts every this many rounds it was kept from (>= 1).
        share_key: the name the model's counts are kept under in the suffix memory, from
        request to request (None: counted in this request only)."""
        if not min_score >= 0:
            raise ValueError(f"min_score must be >= 0 (got {min_score})")
        if model_gamma is not None and model_gamma < 1:
            raise ValueError(f"model_gamma must be >= 1 or None (got {model_gamma})")
        if not 0 <= min_model_alpha <= 1:
            raise ValueError(f"min_model_alpha must be in [0, 1] (got {min_model_alpha})")
        if probe_every < 1:
            raise ValueError(f"probe_every must be >= 1 (got {probe_every})")
        self.model, self.suffix = model, suffix
        self.min_score, self.model_gamma = min_score, model_gamma
        self.min_model_alpha, self.probe_every = min_model_alpha, probe_every
        self.device = model.device
        self.share_key = share_key
        self._start_request()

    def _start_request(self) -> None:
        """The counts a request starts from: the model's tokens kept and drafted (the memory's,
        else one each in advance), no rounds held back, no model round pending."""
        shares = self.suffix.memory.shares
        self.kept, self.drafted = shares.get(self.share_key, (1, 2)) if self.share_key else (1, 2)
        self.held_back = 0  # rounds the model was kept from since it last drafted
        self._pending: tuple[int, int] | None = None  # a model round's (start, drafted)
        self.last = "model"  # who drafted the last round: "suffix" or "model"

    @property
    def model_alpha(self) -> float:
        """The draft model's kept share so far (in this request, or across requests)."""
        return self.kept / self.drafted

    def _model_drafts(self) -> bool:
        """Whether the draft model drafts a round its suffix match is too weak for."""
        if self.model_alpha >= self.min_model_alpha:
            return True
        self.held_back += 1
        return self.held_back % self.probe_every == 0

    def prefill(self, prefix: list[int]) -> None:
        """Start a request: its counts (_start_request), the prompt cached in the draft model,
        the request's suffix trie."""
        self._start_request()
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
        model_gamma of the draft model's while it pays, else the suffix chain (or none)."""
        found = self.suffix.speculation(ids, gamma, stop_ids)
        if (found.tokens and found.score >= self.min_score) or not self._model_drafts():
            self.last = "suffix"
            return self.suffix.draft(found)  # no tokens found: no draft, a plain target step
        self.last, self.held_back = "model", 0
        cap = gamma if self.model_gamma is None else min(gamma, self.model_gamma)
        draft = self.model.propose(ids, cap, generator, stop_ids)
        self._pending = (len(ids), len(draft.tokens))
        return draft

    def rollback(self, committed: int) -> None:
        """Count what the target kept of a model round; forget positions past committed."""
        if self._pending is not None:
            start, drafted = self._pending
            self.kept += min(drafted, max(committed - start - 1, 0))
            self.drafted += drafted
            self._pending = None
            if self.drafted > SHARE_WINDOW:
                self.kept, self.drafted = (self.kept + 1) // 2, (self.drafted + 1) // 2
        self.model.rollback(committed)
        self.suffix.rollback(committed)

    def remember(self, ids: list[int], prompt_len: int) -> None:
        """Add the finished request to the suffix memory, with the model's counts."""
        self.suffix.remember(ids, prompt_len)
        if self.share_key:
            self.suffix.memory.shares[self.share_key] = (self.kept, self.drafted)

    def explain(self, round_index: int) -> SuffixLookup | None:
        """The suffix drafter's last lookup, saying who drafted the round (None unless its
        suffix drafter was built with explain)."""
        found = self.suffix.explain(round_index)
        if found is None:
            return None
        return replace(found, drafted_by=self.last, min_score=self.min_score)


class SuffixThenShared(SuffixThenModelDrafter):
    """Suffix decoding first, else a drafter that shares the target's cache (a drafting head,
    the shared early exit): the decoder verifies through that drafter's target cache, so the
    rounds the suffix chain drafts leave it nothing to catch up."""

    def target_cache(self, target: Any) -> CachedForward:
        """The wrapped drafter's target cache."""
        return cast(SharesTargetCache, self.model).target_cache(target)
