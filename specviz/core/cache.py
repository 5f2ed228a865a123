"""KV-cache handling in one place: creation, cached forward passes and rollback.

transformers 5.x renamed the forward argument `past_key_values` to `cache` (5.2x, with the
old name deprecated); `Cache.crop(-n)` removes the last n positions on every 5.x release. A
sliding-window layer built from the model's config (Gemma 3's local attention) keeps only its
last window and then refuses to roll back, on some releases with no way to keep more; so every
layer is cached in full (a lazy cache, no config) and the model's mask applies the window: a
rejected draft can be cropped at any length on every release.
All version differences live in this module.
"""

from __future__ import annotations

import inspect
from typing import Any, Protocol, cast

import torch
from torch import Tensor
from transformers import DynamicCache


class KVCache:
    """A model's KV cache together with the number of positions it holds."""

    def __init__(self, model: Any) -> None:
        """An empty cache for model (any Hugging Face causal LM)."""
        self.model = model
        self.kv = DynamicCache()  # lazy: full layers, cropped at any length
        self.sliding = has_sliding_window(getattr(model, "config", None))
        self._kwarg, self._trims = forward_kwargs(model)

    def __len__(self) -> int:
        """Number of token positions currently cached."""
        return int(self.kv.get_seq_length())

    @torch.no_grad()
    def forward(
        self,
        input_ids: Tensor,
        keep: int = 0,
        positions: Tensor | None = None,
        visible: Tensor | None = None,
    ) -> Tensor:
        """Feed new tokens (T,) after the cached ones, extending the cache.

        Returns logits (T, V), or (keep, V) for the last `keep` positions only: the output head
        is then not computed for the others (a prompt prefill needs none of them).
        positions (T,) and visible (T, cached + T) bool (True: may attend) replace the causal
        defaults for a token tree; the mask goes in as float 0 / -inf, which eager and sdpa
        attention both add as given (a bool mask would be added as 1/0 by eager attention).
        """
        extra: dict[str, Any] = {"logits_to_keep": keep} if self._trims and keep else {}
        out = self.cached_pass(self.model, self._kwarg, input_ids, positions, visible, **extra)
        logits: Tensor = out.logits[0]  # (T, V) or (keep, V)
        return logits[-keep:] if keep else logits

    def cached_pass(
        self,
        module: Any,
        kwarg: str,
        input_ids: Tensor,
        positions: Tensor | None,
        visible: Tensor | None,
        **extra: Any,
    ) -> Any:
        """module's output (the model, or its decoder stack, taking this cache as `kwarg`) over
        new tokens (T,) after the cached ones: positions (T,) default to the next ones
        (fed_positions), visible (T, cached + T) bool goes in as the additive mask."""
        positions = fed_positions(len(self), input_ids, positions)
        if visible is not None:
            extra["attention_mask"] = additive_mask(visible, self.model)
        return module(
            input_ids=input_ids[None],  # (1, T)
            position_ids=positions[None],  # (1, T)
            use_cache=True,
            **{kwarg: self.kv},
            **extra,
        )

    def crop(self, length: int) -> None:
        """Roll back to the first `length` positions (no-op if it holds no more than that)."""
        extra = len(self) - length
        if extra > 0:
            self.kv.crop(-extra)

    def keep_only(self, indices: Tensor) -> None:
        """Keep the cached positions `indices` (ascending), dropping the rest on every layer.

        A per-layer gather on the sequence axis: what is dropped is gone, not masked.
        """
        if self.sliding:  # a tree's own mask would replace the window
            raise ValueError("tree verification cannot compact a sliding-window cache")
        for layer in cast(list[Any], self.kv.layers):
            if layer.is_initialized and layer.keys.numel():
                layer.keys = layer.keys.index_select(-2, indices.to(layer.keys.device))
                layer.values = layer.values.index_select(-2, indices.to(layer.values.device))


def fed_positions(start: int, input_ids: Tensor, positions: Tensor | None) -> Tensor:
    """The positions (T,) of tokens input_ids (T,) fed to a cached forward after `start` cached
    positions: positions where given (a tree's), else start..start+T-1."""
    if positions is not None:
        return positions
    return torch.arange(start, start + input_ids.shape[0], device=input_ids.device)


def has_sliding_window(config: Any) -> bool:
    """Whether a model's config gives some layer a sliding attention window."""
    types = getattr(config, "layer_types", None) or ()  # toy models: no config
    return "sliding_attention" in types if types else bool(getattr(config, "sliding_window", 0))


def additive_mask(visible: Tensor, model: Any) -> Tensor:
    """visible (T, S) bool → the (1, 1, T, S) float mask: 0 where visible, -inf elsewhere."""
    dtype = getattr(model, "dtype", torch.float32)
    dtype = dtype if dtype.is_floating_point else torch.float32
    mask = torch.zeros(visible.shape, dtype=dtype, device=visible.device)
    return mask.masked_fill(~visible, float("-inf"))[None, None]


def forward_kwargs(model: Any) -> tuple[str, bool]:
    """The name under which this model's forward takes a cache object, and whether it takes
    logits_to_keep (from one reading of its signature)."""
    params = inspect.signature(model.forward).parameters
    return ("cache" if "cache" in params else "past_key_values"), "logits_to_keep" in params


class CachedForward(Protocol):
    """What decoders and drafters need from a model with a KV cache (KVCache is one)."""

    def __len__(self) -> int:
        """Number of token positions currently cached."""

    def forward(self, input_ids: Tensor, keep: int = 0) -> Tensor:
        """Feed tokens (T,) after the cached ones; logits (T, V), or (keep, V) for the last."""

    def crop(self, length: int) -> None:
        """Roll back to the first `length` positions."""
