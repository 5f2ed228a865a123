"""The drafting heads as drafters: a chain or a tree, over the target's own features.

Both wrap the draft-model drafters around a head's cached forward (specviz.heads.cache), so a
drafted token's q is the law it was drawn from by the same code as for a draft model. A head
whose logits cover a draft vocabulary only (HeadCache.draft_vocab: EAGLE-3's) is sampled over
it; its q is then spread over the target's vocabulary with zeros, as a trimmed draft's is. They
share the target's cache (SharesTargetCache): the decoder verifies through `target_cache`,
which records the target's features for the head. Before the target's first pass there are no
features, so the first round drafts nothing (the target scores the prompt alone).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import torch
from torch import Tensor

from specviz.core.config import SamplingConfig
from specviz.core.drafter import Draft
from specviz.core.sampling import logits_to_probs
from specviz.drafters.model import ModelDrafter
from specviz.drafters.tree_model import TreeModelDrafter, TreeShape
from specviz.drafters.trimmed import spread
from specviz.heads.cache import HeadCache, MedusaCache
from specviz.heads.tap import FeatureCache
from specviz.tree.proposal import TokenTree

MakeTargetCache = Callable[[Any], Any]


class HeadDrafter(ModelDrafter):
    """A drafting head proposing a chain of up to gamma tokens."""

    def __init__(
        self,
        cache: HeadCache,
        sampling: SamplingConfig,
        make_target_cache: MakeTargetCache = FeatureCache,
    ) -> None:
        """Draft with cache's head; make_target_cache: the target forward that records features."""
        super().__init__(cache, sampling, cache.vocab_size, make_cache=lambda c: c)
        self.head, self.make_target_cache = cache, make_target_cache
        self.head_tokens = cache.draft_vocab  # logits over these only: q spread with zeros

    def target_cache(self, target: Any) -> Any:
        """The target's cached forward, recording the features this head reads."""
        return self.head.attach(target, self.make_target_cache)

    def prefill(self, prefix: list[int]) -> None:
        """Nothing to do: the head needs the target's features of the prompt first."""

    def law(self, logits: Tensor) -> Tensor:
        """q (V,) over the target's vocabulary from one row of the head's logits (V or S,)."""
        q = logits_to_probs(logits[: self.vocab_size], self.sampling)
        return q if self.head_tokens is None else spread(q, self.head_tokens, self.vocab_size)

    def propose(
        self, ids: list[int], gamma: int, generator: torch.Generator, stop_ids: Collection[int]
    ) -> Draft:
        """Up to gamma tokens (Medusa: no more than its heads); none before the target's first
        pass."""
        if not self.head.ready(ids):
            empty = torch.empty(0, dtype=torch.long, device=self.device)
            return Draft(tokens=empty, q_draft=torch.empty(0, self.vocab_size), forward_calls=0)
        if isinstance(self.head, MedusaCache):  # head k guesses k + 1 ahead: k tokens at most
            gamma = min(gamma, self.head.heads.k)
        return super().propose(ids, gamma, generator, stop_ids)


class HeadTreeDrafter(TreeModelDrafter):
    """A drafting head growing a token tree (top-k children, or sampled from q)."""

    def __init__(
        self,
        cache: HeadCache,
        sampling: SamplingConfig,
        *,
        shape: TreeShape,
        sampled: bool,
        make_target_cache: MakeTargetCache = FeatureCache,
    ) -> None:
        """Grow trees with cache's head under shape; make_target_cache as for HeadDrafter."""
        super().__init__(
            cache,
            sampling,
            cache.vocab_size,
            shape=shape,
            sampled=sampled,
            make_cache=lambda c: c,
        )
        self.head, self.make_target_cache = cache, make_target_cache

    def target_cache(self, target: Any) -> Any:
        """The target's cached forward, recording the features this head reads."""
        return self.head.attach(target, self.make_target_cache)

    def prefill(self, prefix: list[int]) -> None:
        """Nothing to do: the head needs the target's features of the prompt first."""

    def _dists(self, logits: Tensor) -> tuple[Tensor, Tensor]:
        """q (V,) and the unwarped log-softmax (V,), zero and -inf off a draft vocabulary."""
        vocab = self.head.draft_vocab
        if vocab is None:
            return super()._dists(logits)
        q, logp = super()._dists(logits)  # over the draft vocabulary (S,)
        full = logp.new_full((self.vocab_size,), float("-inf")).index_copy_(0, vocab, logp)
        return spread(q, vocab, self.vocab_size), full

    def propose_tree(
        self, ids: list[int], max_depth: int, generator: torch.Generator, stop_ids: Collection[int]
    ) -> TokenTree:
        """A tree as TreeModelDrafter grows it; an empty one before the target's first pass."""
        if not self.head.ready(ids):
            return TokenTree(
                tokens=torch.empty(0, dtype=torch.long),
                parents=(),
                q_draft=torch.zeros(1, self.vocab_size),
                sampled=(),
                forward_calls=0,
            )
        return super().propose_tree(ids, max_depth, generator, stop_ids)
