"""KVCache on a model with sliding-window layers (Gemma 3's local attention): rolling back
past the window gives the logits a fresh forward gives."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, Gemma3TextConfig

from specviz.core.cache import KVCache

WINDOW = 4


def tiny_gemma(seed: int = 0) -> Any:
    """A random 2-layer float64 Gemma 3 text model: one sliding-window layer (WINDOW tokens),
    one full-attention layer."""
    config = Gemma3TextConfig(
        vocab_size=40,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    return model.to(torch.float64).eval()


def test_rolling_back_past_the_window_matches_a_fresh_forward() -> None:
    model = tiny_gemma()
    ids = torch.arange(3, 15)  # 12 tokens: three windows
    other = torch.tensor([30, 31, 32])
    cache = KVCache(model)
    cache.forward(ids)
    cache.crop(7)  # back past the last window's start
    assert len(cache) == 7
    after = cache.forward(other)
    fresh = KVCache(model).forward(torch.cat([ids[:7], other]))[-3:]
    assert torch.allclose(after, fresh, atol=1e-10)
    cache.crop(9)  # and again, one token at a time after that
    step = cache.forward(torch.tensor([33]))
    fresh = KVCache(model).forward(torch.cat([ids[:7], other[:2], torch.tensor([33])]))[-1:]
    assert torch.allclose(step, fresh, atol=1e-10)


def test_feeding_past_the_window_in_chunks_matches_one_forward() -> None:
    """Without a rollback the recorded past changes nothing: the sliding layer still sees its
    last WINDOW tokens."""
    model = tiny_gemma(1)
    ids = torch.arange(3, 16)  # 13 tokens
    cache = KVCache(model)
    chunks = [cache.forward(part) for part in (ids[:5], ids[5:9], ids[9:])]
    fresh = KVCache(model).forward(ids)
    assert torch.allclose(torch.cat(chunks), fresh, atol=1e-10)
    # the model's own uncached forward applies the window the same way
    plain = model(input_ids=ids[None], use_cache=False).logits[0]
    assert torch.allclose(fresh, plain, atol=1e-10)


def test_a_tree_cannot_compact_a_sliding_window_cache() -> None:
    """A tree's own mask would replace the window: compaction refuses with a clear error."""
    cache = KVCache(tiny_gemma())
    cache.forward(torch.arange(3, 9))
    with pytest.raises(ValueError, match="sliding-window"):
        cache.keep_only(torch.tensor([0, 1, 2]))
