"""Self-speculation that shares the target's KV cache for the layers it drafts with (LayerSkip).

The early-exit draft *is* the target's first k layers, so the keys and values it writes while
drafting are exactly the ones the target would write for the same tokens. `SharedExit` keeps one
cache for all L layers and two views of it:

* the exit view (the drafter's) runs layers [0, k), then the exit head, and remembers each
  position's layer-k hidden state;
* the target view (the verifier's) starts each verification pass at layer k from those hidden
  states, and runs layers [0, k) itself only for positions the drafter never fed (the prompt
  the first time, the last draft of a round, a plain step).

A round then costs γ exit steps and one pass over L − k layers instead of L. Both views run the
same modules (packed or not), so only float rounding separates a position computed one token at
a time by the drafter from one computed in a batch by the target; the verifier still uses
exactly the p it computed. Supports Llama and Qwen2 decoders (`shared_exit_problem`); others
draft through `specviz.drafters.early_exit` with a cache of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import PretrainedConfig

from specviz.core.cache import CachedForward
from specviz.core.config import SamplingConfig
from specviz.drafters.early_exit import (
    Adapter,
    build_early_exit,
    decoder_stack,
    load_adapter,
    shipped_adapter,
)
from specviz.drafters.model import ModelDrafter
from specviz.fast.attention import KVBuffers, apply_rope, causal_mask, grow
from specviz.fast.lean import draft_cache

SHARED_MODEL_TYPES = ("llama", "qwen2")


def shared_exit_problem(target: Any) -> str | None:
    """Why the early exit cannot share `target`'s cache, or None if it can."""
    config = getattr(target, "config", None)
    if not isinstance(config, PretrainedConfig):
        return "not a Hugging Face model"
    if config.model_type not in SHARED_MODEL_TYPES:
        return f"model type {config.model_type!r} is not one of {SHARED_MODEL_TYPES}"
    if getattr(config, "use_sliding_window", False):
        return "sliding-window attention"
    inner = getattr(target, "model", None)
    if inner is None or not hasattr(inner, "rotary_emb") or not hasattr(inner, "layers"):
        return "no model.layers / model.rotary_emb"
    parts = ["input_layernorm", "post_attention_layernorm", "mlp"]
    parts += [f"self_attn.{x}_proj" for x in "qkvo"]
    try:
        for layer in inner.layers:
            for name in parts:
                layer.get_submodule(name)
    except AttributeError as missing:
        return f"not a Llama-style decoder layer ({missing})"
    return None


class SharedExit:
    """One KV cache for all of the target's layers, filled partly by the drafter (first k)."""

    def __init__(
        self, target: Any, k: int, adapter: Adapter | None = None, capacity: int = 256
    ) -> None:
        """An empty cache for `capacity` positions, growing; adapter: as early_exit's."""
        problem = shared_exit_problem(target)
        if problem is not None:
            raise ValueError(f"the early exit cannot share this target's cache: {problem}")
        inner = decoder_stack(target)
        if not 1 <= k < len(inner.layers):
            raise ValueError(
                f"exit layer k must be in [1, {len(inner.layers) - 1}] for this target (got {k})"
            )
        self.target, self.k, self.layers = target, k, list(inner.layers)
        self.embed: Tensor = inner.embed_tokens.weight.detach()  # (V, H)
        self.rotary, self.norm = inner.rotary_emb, inner.norm
        self.exit_norm = inner.norm if adapter is None else nn.Sequential(adapter, inner.norm)
        self.head = target.get_output_embeddings()
        attn, config = self.layers[0].self_attn, target.config
        self.n_heads, self.n_kv = int(config.num_attention_heads), int(config.num_key_value_heads)
        self.head_dim, self.scale = int(attn.head_dim), float(attn.scaling)
        self.exit_len = 0  # positions through layers [0, k)
        self.full_len = 0  # positions through all layers
        self.tokens: list[int] = []  # the token at each of the exit_len positions
        self.kv = KVBuffers(
            len(self.layers), self.n_kv, self.head_dim, self.rotary, self.embed, capacity
        )
        hidden_shape = (self.kv.capacity, self.embed.shape[1])
        self.hidden = self.embed.new_zeros(hidden_shape)  # (capacity, H) at layer k
        self.exit_view, self.target_view = ExitView(self), TargetView(self)

    def _reserve(self, needed: int) -> None:
        """Grow the cache, the layer-k hidden states and the RoPE tables to `needed` positions."""
        held = max(self.exit_len, self.full_len)
        if self.kv.reserve(needed, held):
            self.hidden = grow(self.hidden, self.kv.capacity, held, dim=0)

    @torch.no_grad()
    def exit_forward(self, input_ids: Tensor, keep: int = 0) -> Tensor:
        """Layers [0, k) and the exit head on tokens (T,) after exit_len; logits (T or keep, V)."""
        x = self._lower(input_ids)
        x = x[-keep:] if keep else x
        logits: Tensor = self.head(self.exit_norm(x))
        return logits

    @torch.no_grad()
    def target_forward(self, input_ids: Tensor, keep: int = 0) -> Tensor:
        """The full target on tokens (T,) after full_len, reusing the drafter's layers [0, k)."""
        start, ids = self.full_len, input_ids.tolist()
        end, reuse = start + len(ids), self._reusable(start, ids)
        if reuse < len(ids):
            self.exit_len = start + reuse
            self._lower(input_ids[reuse:])  # fills hidden[start + reuse : end]
        x = self._run(self.hidden[start:end], start, range(self.k, len(self.layers)))
        self.full_len = end
        x = x[-keep:] if keep else x
        logits: Tensor = self.head(self.norm(x))
        return logits

    def _reusable(self, start: int, ids: list[int]) -> int:
        """How many of ids, fed at start.., the drafter already ran through layers [0, k)."""
        reuse = 0
        while reuse < len(ids) and start + reuse < self.exit_len:
            if self.tokens[start + reuse] != ids[reuse]:
                break  # a different token: its lower layers (and all after it) are recomputed
            reuse += 1
        return reuse

    def crop_exit(self, length: int) -> None:
        """Forget the first k layers' positions from `length` on."""
        self.exit_len = min(self.exit_len, max(0, length))
        del self.tokens[self.exit_len :]

    def crop_full(self, length: int) -> None:
        """Forget all layers' positions from `length` on."""
        self.full_len = min(self.full_len, max(0, length))

    def _lower(self, input_ids: Tensor) -> Tensor:
        """Layers [0, k) on tokens (T,) after exit_len; records, returns layer-k states (T, H)."""
        start = self.exit_len
        end = start + int(input_ids.shape[0])
        self._reserve(end)
        x = self._run(self.embed[input_ids], start, range(self.k))
        self.hidden[start:end] = x
        del self.tokens[start:]
        self.tokens += input_ids.tolist()
        self.exit_len = end
        return x

    def _run(self, x: Tensor, start: int, layers: range) -> Tensor:
        """Decoder layers `layers` on hidden states x (T, H) at positions start..start+T."""
        n_new = x.shape[0]
        end = start + n_new
        rope = self.kv.rope(start, end)  # cos, sin (T, 1, head_dim)
        mask = causal_mask(start, n_new, x.device)  # (T, S) or None for one token
        for index in layers:
            x = self._layer(index, x, start, rope, mask)
        return x

    def _layer(
        self, index: int, x: Tensor, start: int, rope: tuple[Tensor, Tensor], mask: Tensor | None
    ) -> Tensor:
        """One decoder layer on x (T, H), writing its keys/values at start..start+T."""
        layer, n_new, hd, nh, nkv = (
            self.layers[index],
            x.shape[0],
            self.head_dim,
            self.n_heads,
            self.n_kv,
        )
        attn = layer.self_attn
        h = layer.input_layernorm(x)
        q = apply_rope(attn.q_proj(h).view(n_new, nh, hd), *rope)  # (T, heads, hd)
        k = apply_rope(attn.k_proj(h).view(n_new, nkv, hd), *rope)  # (T, kv_heads, hd)
        keys, values = self.kv.write(  # (kv_heads, S, hd) each
            index, start, k.transpose(0, 1), attn.v_proj(h).view(n_new, nkv, hd).transpose(0, 1)
        )
        if nkv != nh:  # grouped-query attention: each kv head serves nh / nkv query heads
            keys = keys.repeat_interleave(nh // nkv, dim=0)
            values = values.repeat_interleave(nh // nkv, dim=0)
        out = F.scaled_dot_product_attention(
            q.transpose(0, 1), keys, values, attn_mask=mask, scale=self.scale
        )  # (heads, T, hd)
        x = x + attn.o_proj(out.transpose(0, 1).reshape(n_new, nh * hd))
        out_mlp: Tensor = x + layer.mlp(layer.post_attention_layernorm(x))
        return out_mlp


class ExitView:
    """The drafter's CachedForward: the target's first k layers and the exit head."""

    def __init__(self, store: SharedExit) -> None:
        """A view of store."""
        self.store = store

    def __len__(self) -> int:
        """Positions through the first k layers."""
        return self.store.exit_len

    def forward(self, input_ids: Tensor, keep: int = 0) -> Tensor:
        """Exit logits (T or keep, V) for tokens (T,) after the cached ones."""
        return self.store.exit_forward(input_ids, keep)

    def crop(self, length: int) -> None:
        """Forget the first k layers' positions from `length` on."""
        self.store.crop_exit(length)


class TargetView:
    """The verifier's CachedForward: all layers, starting at layer k where the drafter left off."""

    def __init__(self, store: SharedExit) -> None:
        """A view of store."""
        self.store = store

    def __len__(self) -> int:
        """Positions through all layers."""
        return self.store.full_len

    def forward(self, input_ids: Tensor, keep: int = 0) -> Tensor:
        """Target logits (T or keep, V) for tokens (T,) after the cached ones."""
        return self.store.target_forward(input_ids, keep)

    def crop(self, length: int) -> None:
        """Forget all layers' positions from `length` on."""
        self.store.crop_full(length)


class SharedExitDrafter(ModelDrafter):
    """An early-exit drafter whose k layers' cache is the target's (one SharedExit per decode).

    The decoder asks it for the target's cache (`target_cache`) instead of making its own.
    """

    def __init__(
        self,
        target: Any,
        k: int,
        sampling: SamplingConfig,
        vocab_size: int,
        adapter: Adapter | None = None,
        min_confidence: float = 0.0,
        store: type[SharedExit] = SharedExit,
    ) -> None:
        """Draft with target's first k layers (plus adapter); store: the shared cache class."""
        self.store = store(target, k, adapter)
        super().__init__(
            target,
            sampling,
            vocab_size,
            make_cache=lambda _model: self.store.exit_view,
            min_confidence=min_confidence,
        )

    def target_cache(self, target: Any) -> CachedForward:
        """The target's side of the shared cache (target must be the one drafted from), empty:
        the decoder asks for it as a request starts."""
        if target is not self.store.target:
            raise ValueError("this drafter shares the cache of another target model")
        self.store.crop_full(0)
        self.store.crop_exit(0)
        return self.store.target_view


def early_exit_drafter(
    target: Any,
    k: int,
    sampling: SamplingConfig,
    vocab_size: int,
    *,
    share: bool,
    min_confidence: float = 0.0,
    make_cache: Callable[[Any], CachedForward] = draft_cache,
) -> ModelDrafter:
    """The target's first k layers (with the adapter shipped for k, if any) as a drafter.

    share=True: through the target's own KV cache (SharedExitDrafter; a clear ValueError where
    the target's layout does not allow it); False: a separate k-layer model and its own cache
    (make_cache), as specviz.drafters.early_exit builds it.
    """
    if not share:
        model, _path = build_early_exit(target, k)
        return ModelDrafter(
            model, sampling, vocab_size, make_cache=make_cache, min_confidence=min_confidence
        )
    path = shipped_adapter(target, k)
    adapter = None if path is None else load_adapter(path, target)
    return SharedExitDrafter(
        target, k, sampling, vocab_size, adapter=adapter, min_confidence=min_confidence
    )
