"""A target's KV cache kept from one request to the next: the prompt's shared prefix is not
passed through the target again.

An agent sends its whole conversation with every request, so each prompt starts with the one
before it. Plain and speculative decoding both pass every prompt token through the target
once before the first new token, and speculation cannot shorten that pass; serving engines
skip it for the part they have seen (prefix caching). PrefixCache does the same for one
caller: it holds the target's cache of the last decode together with the token ids that
cache holds, and hands it to the next decode cropped to the longest common prefix of those ids
and the new prompt. Keys and values depend only on the tokens before them, so the reused
positions are the ones a fresh pass would compute (up to floating-point rounding), and each
decode's law is unchanged: the cache is state, not a change to any rule.

Terms:
- held ids: the token ids whose keys and values the cache holds, in order, tracked through
  every forward, crop and keep_only of the decode that used it (a tree's rejected nodes are
  dropped from both).
- reused prefix: the longest common prefix of the held ids and the new prompt, capped at the
  prompt's length minus one: the decode's first pass needs at least one prompt token to
  score.

The caller owns one PrefixCache per target and forward path, and passes `prefix.reuse(ids)` as
the decode's `make_cache`. Plain decoding (`autoregressive_generate`) and the chain and tree
decoders take it alike; a drafter that shares the target's cache (a drafting head, shared
early exit) brings its own cache and cannot take one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from torch import Tensor

from specviz.core.cache import KVCache


class HeldCache:
    """A target's cached forward together with the token ids it holds (the held ids)."""

    def __init__(self, inner: Any) -> None:
        """Wrap inner, an empty cached forward (KVCache, or a fast path's own)."""
        if len(inner) != 0:
            raise ValueError("a PrefixCache starts from an empty cache")
        self.inner = inner
        self.ids: list[int] = []

    def __len__(self) -> int:
        """Number of token positions currently cached."""
        return len(self.inner)

    def forward(
        self,
        input_ids: Tensor,
        keep: int = 0,
        positions: Tensor | None = None,
        visible: Tensor | None = None,
    ) -> Tensor:
        """The inner forward of input_ids (T,); their ids are held after the others."""
        tree = {} if positions is None else {"positions": positions, "visible": visible}
        logits: Tensor = self.inner.forward(input_ids, keep=keep, **tree)
        self.ids += input_ids.tolist()
        return logits

    def crop(self, length: int) -> None:
        """Roll back to the first `length` positions."""
        self.inner.crop(length)
        del self.ids[length:]

    def keep_only(self, indices: Tensor) -> None:
        """Keep the cached positions `indices` (ascending) and their ids."""
        self.inner.keep_only(indices)
        self.ids = [self.ids[i] for i in indices.tolist()]


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Length of the longest common prefix of two sequences (of ids, or a string's characters)."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def reusable_prefix(held: Sequence[int], ids: Sequence[int]) -> int:
    """The positions of a cache holding `held` that a forward after `ids` can keep: their
    common prefix, leaving at least one of ids to feed (the logits after ids need one)."""
    return min(common_prefix(held, ids), len(ids) - 1)


class PrefixCache:
    """The target's cache of the last decode, handed to the next one cropped to the prefix the
    two prompts share. The caller owns it; one per target and forward path."""

    def __init__(self, make_cache: Callable[[Any], Any] = KVCache) -> None:
        """make_cache: the target's cached forward to keep (default transformers' forward with
        a KVCache; a fast path's own, as the decode would otherwise build it)."""
        self.make_cache = make_cache
        self.held: HeldCache | None = None
        self.target: Any = None
        self.reused = 0  # positions the last decode found in the cache

    def reuse(self, prompt_ids: Sequence[int]) -> Callable[[Any], HeldCache]:
        """The make_cache for a decode of prompt_ids: the held cache cropped to the reused
        prefix, or a new one on the first decode."""
        if not prompt_ids:
            raise ValueError("the prompt is empty: give at least one token")

        def make(target: Any) -> HeldCache:
            if self.held is None:
                self.held, self.target = HeldCache(self.make_cache(target)), target
            elif target is not self.target:
                raise ValueError(
                    "this PrefixCache holds another target's keys and values: keep one "
                    "PrefixCache per target"
                )
            self.reused = reusable_prefix(self.held.ids, prompt_ids)
            self.held.crop(self.reused)
            return self.held

        return make

    def clear(self) -> None:
        """Forget what is held (the next decode starts from an empty cache)."""
        self.held, self.target, self.reused = None, None, 0

    def __len__(self) -> int:
        """Positions held."""
        return 0 if self.held is None else len(self.held)
