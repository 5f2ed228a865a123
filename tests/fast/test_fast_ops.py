"""The hand-written attention's pieces: causal mask, RoPE as transformers applies it, growth."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from specviz.fast.attention import KVBuffers, apply_rope, causal_mask, grow, rope_tables

from ..conftest import tiny_model

HEAD_DIM = 8  # tiny_model's llama: hidden 32 over 4 heads, 2 kv heads


def _rotary(**overrides: Any) -> tuple[Any, torch.Tensor]:
    """A tiny float64 Llama's rotary embedding and its embedding matrix (V, H)."""
    inner = tiny_model("llama", seed=0, **overrides).model
    return inner.rotary_emb, inner.embed_tokens.weight.detach()


@pytest.mark.parametrize(("start", "n_new"), [(0, 2), (0, 5), (1, 3), (6, 4)])
def test_causal_mask_is_the_hand_built_one(start: int, n_new: int) -> None:
    mask = causal_mask(start, n_new, torch.device("cpu"))
    assert mask is not None and mask.dtype == torch.bool
    want = [[j <= start + i for j in range(start + n_new)] for i in range(n_new)]
    assert mask.tolist() == want  # new token i sees every cached position and new ones <= i


@pytest.mark.parametrize("start", [0, 7])
def test_one_new_token_needs_no_mask(start: int) -> None:
    assert causal_mask(start, 1, torch.device("cpu")) is None


@pytest.mark.parametrize("rope", [None, {"rope_type": "linear", "factor": 2.0}])
@pytest.mark.parametrize("start", [0, 5])
def test_rope_is_transformers_apply_rotary_pos_emb(rope: dict[str, Any] | None, start: int) -> None:
    rotary, embed = _rotary(**({} if rope is None else {"rope_parameters": rope}))
    cos, sin = rope_tables(rotary, embed, 12)  # (12, hd) each
    assert cos.shape == sin.shape == (12, HEAD_DIM) and cos.dtype == embed.dtype
    end = start + 4
    want_cos, want_sin = rotary(embed[:1], torch.arange(start, end)[None])  # (1, T, hd) each
    torch.testing.assert_close(cos[start:end], want_cos[0], atol=1e-12, rtol=0)
    torch.testing.assert_close(sin[start:end], want_sin[0], atol=1e-12, rtol=0)
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(4, 4, HEAD_DIM, generator=gen, dtype=torch.float64)  # (T, heads, hd)
    k = torch.randn(4, 2, HEAD_DIM, generator=gen, dtype=torch.float64)  # (T, kv_heads, hd)
    rows = (cos[start:end, None], sin[start:end, None])  # (T, 1, hd) each
    want_q, want_k = apply_rotary_pos_emb(  # on (1, heads, T, hd) with cos, sin (1, T, hd)
        q.transpose(0, 1)[None], k.transpose(0, 1)[None], cos[None, start:end], sin[None, start:end]
    )
    torch.testing.assert_close(apply_rope(q, *rows), want_q[0].transpose(0, 1), atol=0, rtol=0)
    torch.testing.assert_close(apply_rope(k, *rows), want_k[0].transpose(0, 1), atol=0, rtol=0)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_grow_keeps_the_held_entries_and_zeros_the_rest(dim: int) -> None:
    old = torch.arange(1.0, 1 + 3 * 4 * 5).view(3, 4, 5)  # no zero entry to hide a lost one
    new = grow(old, capacity=9, held=2, dim=dim)
    assert new.shape == (*old.shape[:dim], 9, *old.shape[dim + 1 :]) and new.dtype == old.dtype
    assert torch.equal(new.narrow(dim, 0, 2), old.narrow(dim, 0, 2))
    assert not new.narrow(dim, 2, 7).any()


def test_kv_buffers_grow_keeping_what_they_hold() -> None:
    rotary, embed = _rotary()
    kv = KVBuffers(2, 2, HEAD_DIM, rotary, embed, capacity=4)
    assert kv.capacity == 4 and kv.keys.shape == kv.values.shape == (2, 2, 4, HEAD_DIM)
    gen = torch.Generator().manual_seed(2)
    keys, values = (torch.randn(2, 2, 3, HEAD_DIM, generator=gen, dtype=embed.dtype) for _ in "kv")
    for layer in range(2):  # three positions in every layer
        got_k, got_v = kv.write(layer, 0, keys[layer], values[layer])  # (kv_heads, 3, hd)
        assert torch.equal(got_k, keys[layer]) and torch.equal(got_v, values[layer])
    before = kv.keys
    assert not kv.reserve(4, held=3) and kv.keys is before  # room enough: nothing moves
    assert kv.reserve(5, held=3) and kv.capacity == 8  # at least doubles
    assert torch.equal(kv.keys[:, :, :3], keys) and torch.equal(kv.values[:, :, :3], values)
    assert not kv.keys[:, :, 3:].any() and not kv.values[:, :, 3:].any()
    want_cos, want_sin = rope_tables(rotary, embed, 8)  # the tables cover the new capacity
    assert torch.equal(kv.cos, want_cos) and torch.equal(kv.sin, want_sin)
    cos, sin = kv.rope(2, 5)
    assert cos.shape == sin.shape == (3, 1, HEAD_DIM) and torch.equal(cos[:, 0], want_cos[2:5])
    new = torch.randn(2, 2, HEAD_DIM, generator=gen, dtype=embed.dtype)  # (kv_heads, T, hd)
    got_k, got_v = kv.write(1, 3, new, -new)  # two more positions after the three held
    assert got_k.shape == (2, 5, HEAD_DIM)
    assert torch.equal(got_k[:, :3], keys[1]) and torch.equal(got_k[:, 3:], new)
    assert torch.equal(got_v[:, :3], values[1]) and torch.equal(got_v[:, 3:], -new)
    assert kv.reserve(20, held=2) and kv.capacity == 20  # more than double: exactly what is needed
    assert torch.equal(kv.keys[1, :, :2], keys[1, :, :2]) and not kv.keys[:, :, 2:].any()
