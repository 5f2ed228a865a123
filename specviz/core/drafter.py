"""The drafter protocol: what the verifier needs from any drafter, and the Draft it returns;
what a drafter that can explain its rounds offers besides (ExplainsRounds)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from specviz.core.cache import CachedForward
from specviz.core.events import DrafterRound


@dataclass(frozen=True, kw_only=True)
class Draft:
    """Proposed tokens (k,) and the distributions q_draft (k, V) they came from; k <= gamma.

    A deterministic drafter may hand out tokens and q_draft as views of buffers it rewrites at
    its next proposal (specviz.drafters.sparse_q): read a Draft within its round, or copy it.
    """

    tokens: Tensor
    q_draft: Tensor
    forward_calls: int


@runtime_checkable
class Drafter(Protocol):
    """What the verifier needs from any drafter (draft model, n-gram lookup, ...)."""

    def prefill(self, prefix: list[int]) -> None:
        """Start a request: forget any earlier one (a drafter serves request after request),
        then process the prompt prefix before the first round (may be a no-op)."""

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
class ExplainsRounds(Protocol):
    """A drafter that can say how it drafted (the suffix and cross-tokenizer drafters, built
    with DrafterOptions.explain): the decoders emit what explain returns right after each
    proposal, before the proposal's own events."""

    def explain(self, round_index: int) -> DrafterRound | None:
        """How the proposal just made was drafted, as the event of round round_index; None when
        the drafter records nothing (built without explain)."""


@runtime_checkable
class Remembers(Protocol):
    """A drafter that learns from finished requests (the suffix drafters): each request decoded
    to its end is given to it, prompt then output."""

    def remember(self, ids: list[int], prompt_len: int) -> None:
        """Learn from a finished request: ids, its first prompt_len the prompt."""


@runtime_checkable
class SharesTargetCache(Protocol):
    """A drafter whose cache is part of the target's (specviz.drafters.shared_exit): the
    decoder takes the target's cached forward from it instead of making its own."""

    def target_cache(self, target: Any) -> CachedForward:
        """The target's cached forward, sharing state with this drafter's."""
