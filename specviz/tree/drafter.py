"""What the tree decoder needs from a tree drafter and from a cached forward, and any chain
drafter seen as a tree drafter (one child per node)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from specviz.core.drafter import Drafter
from specviz.tree.proposal import TokenTree, chain


class TreeCache(Protocol):
    """A cached forward that takes a tree's positions and mask and keeps chosen positions
    (specviz.core.cache.KVCache; specviz.fast.lean.LeanLlama)."""

    def __len__(self) -> int:
        """Number of token positions currently cached."""

    def forward(
        self,
        input_ids: Tensor,
        keep: int = 0,
        positions: Tensor | None = None,
        visible: Tensor | None = None,
    ) -> Tensor:
        """Feed tokens (T,) at positions, each seeing the columns visible (T, cached + T)."""

    def crop(self, length: int) -> None:
        """Roll back to the first `length` positions."""

    def keep_only(self, indices: Tensor) -> None:
        """Keep the cached positions `indices` (ascending), dropping the rest."""


@runtime_checkable
class TreeDrafter(Protocol):
    """What the tree decoder needs from a drafter that proposes token trees."""

    depth: int  # the deepest level a proposal reaches

    def prefill(self, prefix: list[int]) -> None:
        """Process a prompt prefix before the first round (may be a no-op)."""

    def propose_tree(
        self, ids: list[int], max_depth: int, generator: torch.Generator, stop_ids: Collection[int]
    ) -> TokenTree:
        """A tree of continuations of ids, no deeper than max_depth (no children after a stop)."""

    def rollback(self, committed: int) -> None:
        """Forget everything past the first `committed` tokens of the sequence."""


class ChainAsTree:
    """Any chain drafter as a tree drafter: its gamma tokens as a one-child-per-node tree."""

    def __init__(self, drafter: Drafter, gamma: int) -> None:
        """Wrap drafter; each proposal asks it for up to gamma tokens."""
        self.drafter, self.depth = drafter, gamma

    def prefill(self, prefix: list[int]) -> None:
        """The wrapped drafter's prefill."""
        self.drafter.prefill(prefix)

    def propose_tree(
        self, ids: list[int], max_depth: int, generator: torch.Generator, stop_ids: Collection[int]
    ) -> TokenTree:
        """The wrapped drafter's chain of up to max_depth tokens."""
        draft = self.drafter.propose(ids, max_depth, generator, stop_ids)
        return chain(draft.tokens, draft.q_draft, draft.forward_calls)

    def rollback(self, committed: int) -> None:
        """The wrapped drafter's rollback."""
        self.drafter.rollback(committed)
