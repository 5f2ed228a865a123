"""The lean Llama forward: transformers' logits through prefill, steps, rollback and growth."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from torch import nn

from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig
from specviz.drafters.early_exit import Adapter, early_exit_model
from specviz.drafters.model import ModelDrafter
from specviz.drafters.registry import build_drafter
from specviz.drafters.trimmed import trim_head
from specviz.fast import lean
from specviz.fast.lean import LeanLlama, draft_cache, lean_problem, lean_target_cache
from specviz.fast.packed import pack_linears, packing_problem

from ..conftest import EOS, VOCAB, PairFactory, greedy_plain_and_speculative, tiny_model

HEAD = torch.tensor([EOS, *range(1, VOCAB, 2)])


def _full_logits(model: Any, ids: list[int]) -> torch.Tensor:
    """Logits (T, V) of one uncached transformers forward over ids."""
    with torch.no_grad():
        logits: torch.Tensor = model(torch.tensor([ids])).logits[0]
    return logits


def _check_against_transformers(model: Any, atol: float) -> None:
    """Prefill, single steps, a multi-token feed, rollback and growth all match transformers."""
    lean, ref = LeanLlama(model, capacity=4), KVCache(model)  # capacity 4: grows twice
    seq = [3, 17, 9, 22, 5, 30, 11]
    for piece, keep in (([3, 17, 9, 22, 5, 30, 11], 0), ([8], 1), ([2, 14, 6], 0), ([19], 1)):
        got, want = lean.forward(torch.tensor(piece), keep), ref.forward(torch.tensor(piece), keep)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, atol=atol, rtol=0)
    seq = [*seq, 8, 2, 14, 6, 19]
    assert len(lean) == len(ref) == len(seq)
    lean.crop(9)  # forget the last three tokens, then write different ones in their place
    assert len(lean) == 9
    replacement = [25, 1, 7, 12]
    got = lean.forward(torch.tensor(replacement))  # (4, V)
    want = _full_logits(model, seq[:9] + replacement)[-4:]
    torch.testing.assert_close(got, want, atol=atol, rtol=0)


@pytest.mark.parametrize("kv_heads", [2, 4])  # grouped-query and plain multi-head attention
def test_lean_forward_matches_transformers(kv_heads: int) -> None:
    model = tiny_model("llama", seed=3, scale=3.0, num_key_value_heads=kv_heads)
    assert lean_problem(model) is None
    _check_against_transformers(model, atol=1e-10)  # float64


def test_lean_forward_on_a_trimmed_packed_float32_draft(pair: PairFactory) -> None:
    model = copy.deepcopy(pair("llama")[1]).to(torch.float32)
    if packing_problem(nn.Linear(2, 2)) is None:
        assert pack_linears(model) > 0
    _check_against_transformers(trim_head(model, HEAD), atol=1e-4)


def test_lean_forward_on_an_early_exit_with_an_adapter(pair: PairFactory) -> None:
    target = pair("llama")[0]
    adapter = Adapter(int(target.config.hidden_size)).to(torch.float64)
    with torch.no_grad():
        adapter.proj.weight.normal_(0.0, 0.1, generator=torch.Generator().manual_seed(0))
    draft = early_exit_model(target, 1, adapter)
    assert lean_problem(draft) is None
    _check_against_transformers(draft, atol=1e-10)  # the adapter before the norm is applied


def test_drafter_uses_the_lean_forward_only_where_it_applies(
    pair: PairFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    llama_target, llama_draft = pair("llama")
    gpt2_draft = pair("gpt2")[1]
    greedy = SamplingConfig(temperature=0)
    registered = build_drafter("model", target=llama_target, draft=llama_draft, sampling=greedy)
    assert isinstance(registered, ModelDrafter) and isinstance(registered.cache, LeanLlama)
    assert isinstance(ModelDrafter(llama_draft, greedy, VOCAB).cache, KVCache)  # plain default
    assert isinstance(draft_cache(gpt2_draft), KVCache)
    assert "gpt2" in str(lean_problem(gpt2_draft))
    biased = tiny_model("llama", seed=3, attention_bias=True)
    assert "biases" in str(lean_problem(biased))
    assert isinstance(draft_cache(biased), KVCache)
    wrapped = copy.deepcopy(llama_draft)  # e.g. an adapter library wrapping a projection
    wrapped.model.layers[1].self_attn.q_proj = nn.Sequential(
        wrapped.model.layers[1].self_attn.q_proj
    )
    assert "layers.1.self_attn.q_proj" in str(lean_problem(wrapped))
    assert isinstance(draft_cache(wrapped), KVCache)
    with pytest.raises(ValueError, match="use KVCache"):
        LeanLlama(gpt2_draft)
    monkeypatch.setattr(lean, "LEAN_MAX_LAYER_PARAMS", 100)  # as if its layers were wide
    assert "weights per layer" in str(lean_problem(llama_draft))
    assert isinstance(draft_cache(llama_draft), KVCache)


@pytest.mark.parametrize(
    "keep", [list(range(8)), [0, 1, 2, 3, 4, 5, 7], [0, 1, 3, 4, 6], [2, 5]]
)  # nothing to move; a tree's path after the prefix; gaps from early on; no prefix at all
def test_keep_only_keeps_what_transformers_cache_keeps(keep: list[int]) -> None:
    model = tiny_model("llama", seed=3, scale=3.0)
    ids = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6])
    lean, ref = LeanLlama(model), KVCache(model)
    lean.forward(ids), ref.forward(ids)
    lean.keep_only(torch.tensor(keep)), ref.keep_only(torch.tensor(keep))
    assert len(lean) == len(ref) == len(keep)
    step = torch.tensor([7, 8])
    torch.testing.assert_close(lean.forward(step), ref.forward(step), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("rope_type", ["linear", "dynamic"])
def test_only_length_independent_rope_runs_lean(rope_type: str) -> None:
    rope = {"rope_type": rope_type, "factor": 2.0}  # max_position_embeddings is 96 here
    model = tiny_model("llama", seed=3, scale=3.0, rope_parameters=rope)
    if rope_type == "linear":
        assert lean_problem(model, wide=True) is None
        _check_against_transformers(model, atol=1e-10)
    else:  # one table for the whole capacity would rescale every position: wrong logits
        assert "RoPE type 'dynamic'" in str(lean_problem(model, wide=True))
        assert isinstance(lean_target_cache(model), KVCache)


def test_a_wide_target_runs_lean_on_packed_products_with_transformers_logits(
    pair: PairFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    if packing_problem(nn.Linear(2, 2)) is not None:
        pytest.skip("this PyTorch build cannot pack linears for oneDNN")
    target = copy.deepcopy(pair("llama")[0]).to(torch.float32)
    monkeypatch.setattr(lean, "LEAN_MAX_LAYER_PARAMS", 100)  # as if its layers were wide
    assert "unpacked" in str(lean_problem(target, wide=True))
    assert isinstance(lean_target_cache(target), KVCache)
    assert pack_linears(target) > 0
    assert "weights per layer" in str(lean_problem(target))  # still refused as a draft
    assert lean_problem(target, wide=True) is None
    cache = lean_target_cache(target)
    assert isinstance(cache, LeanLlama)
    qkv = cache.layers[0].qkv  # three linears fused: one packed weight, no other copy
    assert qkv.packed is not None and qkv.weight_t is None
    assert cache.layers[0].o.packed is target.model.layers[0].self_attn.o_proj.packed  # shared
    _check_against_transformers(target, atol=1e-4)


def test_speculative_greedy_with_the_lean_draft_equals_plain_greedy(
    pair: PairFactory, tokenizer: Any
) -> None:
    target, draft = pair("llama")
    plain, spec, accepted = greedy_plain_and_speculative(
        target, target, draft, tokenizer, [20, 8, 5, 27], HEAD
    )
    assert spec == plain
    assert accepted > 0  # the draft was consulted and mostly agreed
