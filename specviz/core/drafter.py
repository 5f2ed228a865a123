"""The drafter protocol: what the verifier needs from any drafter, and the Draft it returns."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from specviz.core.cache import CachedForward


@dataclass(frozen=True, kw_only=True)
class Draft:
    """Proposed tokens (k,) and the distributions q_draft (k, V) they came from; k <= gamma."""

    tokens: Tensor
    q_draft: Tensor
    forward_calls: int


@runtime_checkable
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
    """A drafter whose cache is part of the target's (specviz.drafters.shared_exit): the
    decoder takes the target's cached forward from it instead of making its own."""

    def target_cache(self, target: Any) -> CachedForward:
        """The target's cached forward, sharing state with this drafter's."""


@runtime_checkable
class RemembersRequests(Protocol):
    """A drafter that learns from finished requests (specviz.drafters.suffix): the decoders
    call remember once a decode has run to its end (EOS or max_new_tokens)."""

    def remember(self, ids: list[int], prompt_len: int) -> None:
        """The decode of ids ended: its first prompt_len tokens are the prompt, the rest the
        output."""


def remember(drafter: object, ids: list[int], prompt_len: int) -> None:
    """Tell drafter that the decode of ids has ended, if it learns from requests."""
    if isinstance(drafter, RemembersRequests):
        drafter.remember(list(ids), prompt_len)
