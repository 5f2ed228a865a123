"""One target pass over a whole tree equals separate passes over each root-to-node path."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from specviz.core.cache import KVCache, forward_kwargs
from specviz.tree.decoding import check_tree_attention, tree_inputs
from specviz.tree.proposal import TokenTree

from ..conftest import VOCAB, tiny_model

PARENTS = (-1, -1, 0, 0, 1, 2, 2, 5)  # two branches at the root, a fork under node 0 and 2
PREFIX = [3, 7, 1, 4, 9]


def a_tree(parents: tuple[int, ...] = PARENTS, seed: int = 0) -> TokenTree:
    gen = torch.Generator().manual_seed(seed)
    n = len(parents)
    return TokenTree(
        tokens=torch.randint(1, VOCAB, (n,), generator=gen),
        parents=parents,
        q_draft=torch.zeros(n + 1, VOCAB),
        sampled=(True,) * n,
        forward_calls=0,
    )


# transformers' eager attention takes its softmax in float32 even for a float64 model, so a
# tree pass and a plain pass (other lengths, other masks) round it differently on CPUs whose
# float32 kernels depend on the shape (AVX2): agreement to 1e-5 there, against the > 1e-3 of a
# wrong cache (test_keys_left_behind_change_the_next_logits); sdpa stays in float64.
ATOL = {"sdpa": 1e-9, "eager": 1e-5}


def path_logits(model: Any, ids: list[int]) -> torch.Tensor:
    """Next-token logits after ids, by a plain forward pass with no cache."""
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0, -1]


def tree_pass(model: Any, tree: TokenTree, cached: int) -> tuple[KVCache, torch.Tensor]:
    """Cache PREFIX[:cached], then score the rest of PREFIX and the tree in one pass."""
    cache = KVCache(model)
    if cached:
        cache.forward(torch.tensor(PREFIX[:cached]))
    fresh = PREFIX[cached:]
    positions, visible = tree_inputs(tree, len(fresh), cached, cached)
    tokens = torch.cat([torch.tensor(fresh), tree.tokens])
    logits = cache.forward(tokens, keep=len(tree.parents) + 1, positions=positions, visible=visible)
    return cache, logits


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("arch", ["gpt2", "llama", "qwen2"])
@pytest.mark.parametrize("cached", [0, 3])
def test_each_node_sees_exactly_its_path(arch: str, attn: str, cached: int) -> None:
    model = tiny_model(arch, seed=3, scale=3.0, attn_implementation=attn)
    tree = a_tree()
    _, logits = tree_pass(model, tree, cached)
    atol = ATOL[attn]
    assert torch.allclose(logits[0], path_logits(model, PREFIX), atol=atol, rtol=0)
    for node in range(len(PARENTS)):
        ids = PREFIX + [int(tree.tokens[i]) for i in tree.path(node)]
        assert torch.allclose(logits[node + 1], path_logits(model, ids), atol=atol, rtol=0), node


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("arch", ["gpt2", "llama", "qwen2"])
def test_the_compacted_cache_continues_the_kept_path(arch: str, attn: str) -> None:
    model = tiny_model(arch, seed=4, scale=3.0, attn_implementation=attn)
    tree = a_tree()
    for node in (7, 4, 1):  # a deep leaf, a leaf on the second branch, an inner node
        cache, _ = tree_pass(model, tree, cached=2)
        path = tree.path(node)
        base = len(PREFIX)
        cache.keep_only(torch.tensor([*range(base), *(base + i for i in path)]))
        assert len(cache) == base + len(path)
        ids = PREFIX + [int(tree.tokens[i]) for i in path]
        nxt = cache.forward(torch.tensor([5]))[-1]
        assert torch.allclose(nxt, path_logits(model, [*ids, 5]), atol=ATOL[attn], rtol=0)


def test_keys_left_behind_change_the_next_logits() -> None:
    """Negative control: without the gather, the rejected branches' keys alter what follows."""
    model = tiny_model("llama", seed=4, scale=3.0)
    tree = a_tree()
    cache, _ = tree_pass(model, tree, cached=2)
    path = tree.path(7)
    ids = PREFIX + [int(tree.tokens[i]) for i in path]
    kept_all = cache.forward(torch.tensor([5]), positions=torch.tensor([len(ids)]))[-1]
    assert not torch.allclose(kept_all, path_logits(model, [*ids, 5]), atol=1e-3)


def test_a_float_one_zero_mask_would_be_wrong() -> None:
    """Negative control for the mask format: 1/0 added to the scores leaks every position."""
    model = tiny_model("llama", seed=3, scale=3.0, attn_implementation="eager")
    tree = a_tree()
    cache = KVCache(model)
    positions, visible = tree_inputs(tree, len(PREFIX), 0, 0)
    tokens = torch.cat([torch.tensor(PREFIX), tree.tokens])
    with torch.no_grad():
        out = model(
            input_ids=tokens[None],
            position_ids=positions[None],
            attention_mask=visible.to(torch.float64)[None, None],
            **{forward_kwargs(model)[0]: cache.kv},
            use_cache=True,
        )
    ids = PREFIX + [int(tree.tokens[i]) for i in tree.path(7)]
    assert not torch.allclose(out.logits[0, -1], path_logits(model, ids), atol=1e-3)


def test_a_backend_without_custom_masks_is_refused() -> None:
    model = tiny_model("llama", seed=3)
    model.config._attn_implementation_internal = "flash_attention_2"
    with pytest.raises(ValueError, match="attn_implementation='sdpa'"):
        check_tree_attention(model)


def test_the_lean_forward_scores_a_tree_and_compacts_like_transformers() -> None:
    from specviz.fast.lean import LeanLlama

    model = tiny_model("llama", seed=5, scale=3.0)
    tree = a_tree()
    caches: list[Any] = [KVCache(model), LeanLlama(model)]
    outs = []
    for cache in caches:
        cache.forward(torch.tensor(PREFIX[:2]))
        positions, visible = tree_inputs(tree, 3, 2, 2)
        tokens = torch.cat([torch.tensor(PREFIX[2:]), tree.tokens])
        logits = cache.forward(tokens, keep=9, positions=positions, visible=visible)
        path = tree.path(6)
        cache.keep_only(torch.tensor([*range(5), *(5 + i for i in path)]))
        outs.append((logits, cache.forward(torch.tensor([5]))[-1], len(cache)))
    (hf, hf_next, hf_len), (lean, lean_next, lean_len) = outs
    assert torch.allclose(hf, lean, atol=1e-9, rtol=0)
    assert torch.allclose(hf_next, lean_next, atol=1e-9, rtol=0) and hf_len == lean_len


def test_eager_attention_would_add_a_bool_mask_as_one_and_zero() -> None:
    """Why the mask goes in as float 0 / -inf: eager attention adds a bool mask to the scores."""
    model = tiny_model("llama", seed=3, scale=3.0, attn_implementation="eager")
    tree = a_tree()
    positions, visible = tree_inputs(tree, len(PREFIX), 0, 0)
    tokens = torch.cat([torch.tensor(PREFIX), tree.tokens])
    with torch.no_grad():
        out = model(
            input_ids=tokens[None], position_ids=positions[None], attention_mask=visible[None, None]
        )
    ids = PREFIX + [int(tree.tokens[i]) for i in tree.path(7)]
    assert not torch.allclose(out.logits[0, -1], path_logits(model, ids), atol=1e-3)
