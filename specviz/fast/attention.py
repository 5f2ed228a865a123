"""The pieces of a hand-written cached attention: causal mask, RoPE, growing KV buffers.

`specviz.fast.lean` and `specviz.drafters.shared_exit` each write a Llama-style decoder's forward
out by hand over a cache of their own; this is what they share. Each piece computes what
transformers computes, in the same order, so those forwards' logits match transformers'
(tests/fast/test_fast_ops.py checks the pieces; tests/fast/test_lean.py and
tests/drafters/test_shared_exit.py the whole).
Shapes: T new tokens after `start` cached ones, S = start + T, L layers, hd the head size.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


def causal_mask(start: int, n_new: int, device: torch.device) -> Tensor | None:
    """(T, S) bool: new token i sees the start cached positions and the new ones up to itself.

    None for a single token (it sees every position: SDPA's attn_mask=None).
    """
    if n_new <= 1:
        return None
    return torch.ones(n_new, start + n_new, dtype=torch.bool, device=device).tril(start)


def rope_tables(rotary: Any, like: Tensor, capacity: int) -> tuple[Tensor, Tensor]:
    """cos, sin (capacity, hd) of positions 0..capacity-1 from transformers' rotary embedding.

    like: any tensor (n, H) in the model's dtype and on its device, e.g. the embedding matrix.
    Only RoPE types whose frequencies do not depend on the length seen may be tabled once.
    """
    positions = torch.arange(capacity, device=like.device)[None]  # (1, capacity)
    cos, sin = rotary(like[:1], positions)  # (1, capacity, hd) each
    return cos[0], sin[0]


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x (T, heads, hd) rotated by cos, sin (T, 1, hd): transformers' apply_rotary_pos_emb."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin


def grow(old: Tensor, capacity: int, held: int, dim: int) -> Tensor:
    """old with dimension dim enlarged to capacity: its first held entries kept, zeros after."""
    new = old.new_zeros(*old.shape[:dim], capacity, *old.shape[dim + 1 :])
    new.narrow(dim, 0, held).copy_(old.narrow(dim, 0, held))
    return new


class KVBuffers:
    """Every layer's keys and values in preallocated buffers, and RoPE tables, that grow."""

    def __init__(
        self, n_layers: int, n_kv: int, head_dim: int, rotary: Any, like: Tensor, capacity: int
    ) -> None:
        """Empty buffers for `capacity` positions; rotary, like: as for `rope_tables`."""
        self.rotary, self.like = rotary, like
        shape = (n_layers, n_kv, 0, head_dim)
        self.keys = like.new_zeros(shape)  # (L, kv_heads, capacity, hd)
        self.values = like.new_zeros(shape)  # (L, kv_heads, capacity, hd)
        self.cos = self.sin = like.new_zeros(0, head_dim)  # (capacity, hd)
        self.reserve(capacity, held=0)

    @property
    def capacity(self) -> int:
        """Positions the buffers hold before they next grow."""
        return int(self.keys.shape[2])

    def reserve(self, needed: int, held: int) -> bool:
        """Hold at least `needed` positions, keeping the first `held`; whether it had to grow.

        Growing at least doubles the capacity, so feeding n tokens one at a time costs O(n) copies.
        """
        capacity = self.capacity
        if needed <= capacity:
            return False
        capacity = max(needed, 2 * capacity)
        self.keys = grow(self.keys, capacity, held, dim=2)
        self.values = grow(self.values, capacity, held, dim=2)
        self.cos, self.sin = rope_tables(self.rotary, self.like, capacity)
        return True

    def rope(self, start: int, end: int) -> tuple[Tensor, Tensor]:
        """cos, sin (T, 1, hd) of positions start..end-1, broadcasting over heads."""
        return self.cos[start:end, None], self.sin[start:end, None]

    def write(self, layer: int, start: int, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Store layer's keys, values (kv_heads, T, hd) at start..; return all (kv_heads, S, hd)."""
        end = start + keys.shape[1]
        self.keys[layer, :, start:end] = keys
        self.values[layer, :, start:end] = values
        return self.keys[layer, :, :end], self.values[layer, :, :end]
