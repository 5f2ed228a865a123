"""The target's last hidden states, taken from the passes it already makes.

A drafting head (Medusa, EAGLE) reads the target's feature at each position: the final-norm
hidden state (D,) its output head turns into logits. `FeatureCache` is the target's cached
forward (specviz.core.cache.KVCache) that also keeps those features, one row per cached
position, rolled back and compacted together with the keys and values; so the verification
pass hands its features to the drafter with no extra target pass. `FusedFeatureCache` keeps,
instead, what an EAGLE-3 head reads: the hidden states of a low, a middle and a high layer,
concatenated (3D,) per position (specviz.heads.eagle). `FeatureLean` and `FusedFeatureLean`
record the same on specviz.fast.lean's forward, tree passes (positions, mask, keep_only)
included; `feature_cache` and `fused_feature_cache` pick the lean one where it applies.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from specviz.core.cache import KVCache, forward_kwargs
from specviz.fast.lean import LeanLlama, lean_problem
from specviz.heads.eagle import fused_layers


class Features:
    """The features (S, D) of the S positions a target cache holds."""

    def __init__(self, width: int, like: Tensor) -> None:
        """No positions yet; features have `width` entries, like's dtype and device."""
        self.rows = like.new_zeros(0, width)  # (S, D)

    def __len__(self) -> int:
        """Positions held."""
        return int(self.rows.shape[0])

    def add(self, start: int, hidden: Tensor) -> None:
        """Record hidden (T, D) as the features of positions start..start+T-1."""
        self.rows = torch.cat([self.rows[:start], hidden.detach()])

    def crop(self, length: int) -> None:
        """Keep the first `length` positions."""
        self.rows = self.rows[:length]

    def keep_only(self, indices: Tensor) -> None:
        """Keep the positions `indices` (ascending)."""
        self.rows = self.rows.index_select(0, indices.to(self.rows.device))


def decoder_parts(model: Any) -> tuple[Any, Any]:
    """The decoder stack (hidden states after the final norm) and output head of a causal LM."""
    inner = getattr(model, "model", None)
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if inner is None or head is None or not hasattr(inner, "norm"):
        raise ValueError(
            f"drafting heads read the target's last hidden states: they need a decoder at "
            f".model (with a final .norm) and an output head; {type(model).__name__} has none"
        )
    return inner, head


class FeatureCache(KVCache):
    """A KVCache whose forward also records each position's feature (post-norm hidden state)."""

    all_layers = False  # whether a pass hands over every layer's hidden states

    def __init__(self, model: Any) -> None:
        """An empty cache and feature record for model (a Hugging Face causal LM)."""
        super().__init__(model)
        self.inner, self.head = decoder_parts(model)
        self._inner_kwarg = forward_kwargs(self.inner)[0]
        self.features = Features(int(model.config.hidden_size), self.head.weight)

    @torch.no_grad()
    def forward(
        self,
        input_ids: Tensor,
        keep: int = 0,
        positions: Tensor | None = None,
        visible: Tensor | None = None,
    ) -> Tensor:
        """KVCache.forward's logits (T or keep, V); every fed position's record is kept."""
        start = len(self)
        out = self.cached_pass(
            self.inner,
            self._inner_kwarg,
            input_ids,
            positions,
            visible,
            output_hidden_states=self.all_layers,
        )
        self.features.add(start, self.recorded(out))
        hidden = out.last_hidden_state[0]  # (T, D)
        logits: Tensor = self.head(hidden[-keep:] if keep else hidden)
        return logits  # (T or keep, V)

    def recorded(self, out: Any) -> Tensor:
        """What a pass records of its decoder output: the features (T, D)."""
        hidden: Tensor = out.last_hidden_state[0]
        return hidden

    def crop(self, length: int) -> None:
        """Roll the cache and the features back to the first `length` positions."""
        super().crop(length)
        self.features.crop(length)

    def keep_only(self, indices: Tensor) -> None:
        """Keep the positions `indices` in the cache and the features."""
        super().keep_only(indices)
        self.features.keep_only(indices)


class FusedFeatureCache(FeatureCache):
    """A FeatureCache that records each position's fused layers g (3D,) instead of the feature."""

    all_layers = True

    def __init__(self, model: Any) -> None:
        """An empty cache for model; records the hidden states of `fused_layers` of its depth."""
        super().__init__(model)
        self.layers = fused_layers(int(model.config.num_hidden_layers))
        width = len(self.layers) * int(model.config.hidden_size)
        self.features = Features(width, self.head.weight)

    def recorded(self, out: Any) -> Tensor:
        """What a pass records: g (T, 3D), the fused layers' hidden states side by side."""
        return torch.cat([out.hidden_states[i][0] for i in self.layers], -1)


class FeatureLean(LeanLlama):
    """specviz.fast.lean's target forward, also recording each position's feature."""

    def __init__(self, model: Any) -> None:
        """LeanLlama for model and an empty feature record."""
        super().__init__(model)
        self.features = Features(int(model.config.hidden_size), self.embed)

    def _logits(self, x: Tensor, keep: int, start: int) -> Tensor:
        """Record the features of x (T, H) after the final norm, then the head on the last rows."""
        hidden = self.final_norm(x)  # (T, D)
        self.features.add(start, hidden)
        logits: Tensor = self.head(hidden[-keep:] if keep else hidden)
        return logits

    def crop(self, length: int) -> None:
        """Roll the cache and the features back to the first `length` positions."""
        super().crop(length)
        self.features.crop(length)

    def keep_only(self, indices: Tensor) -> None:
        """Keep the positions `indices` in the cache and the features."""
        super().keep_only(indices)
        self.features.keep_only(indices)


class FusedFeatureLean(FeatureLean):
    """specviz.fast.lean's target forward, recording each position's fused layers g (3D,)."""

    def __init__(self, model: Any) -> None:
        """LeanLlama for model, tapping the hidden states of `fused_layers` of its depth."""
        super().__init__(model)
        self.taps = fused_layers(len(self.layers))
        self.features = Features(len(self.taps) * int(self.embed.shape[1]), self.embed)

    def _logits(self, x: Tensor, keep: int, start: int) -> Tensor:
        """Record g (T, 3D) of the tapped layers, then the head on the last rows of x (T, H)."""
        self.features.add(start, torch.cat([self.tapped[i] for i in self.taps], -1))
        return LeanLlama._logits(self, x, keep, start)


def feature_cache(model: Any) -> FeatureCache | FeatureLean:
    """The fastest target forward that records features: FeatureLean where it applies."""
    return FeatureLean(model) if lean_problem(model, wide=True) is None else FeatureCache(model)


def fused_feature_cache(model: Any) -> FusedFeatureCache | FusedFeatureLean:
    """The fastest target forward that records fused layers: FusedFeatureLean where it applies."""
    if lean_problem(model, wide=True) is None:
        return FusedFeatureLean(model)
    return FusedFeatureCache(model)
