"""The target's features come from its own passes: FeatureCache and FeatureLean (and their
fused-layer kin) agree with a plain forward, and roll back and compact together with the keys
and values, tree passes included."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from specviz.core.cache import KVCache
from specviz.heads.tap import FeatureCache, FeatureLean, FusedFeatureCache, FusedFeatureLean
from tests.conftest import tiny_model


@pytest.fixture(scope="module")
def target() -> Any:
    return tiny_model("llama", seed=5, scale=3.0)


def _hidden(model: Any, ids: list[int]) -> torch.Tensor:
    """Post-norm hidden states (T, D) of a fresh full pass."""
    with torch.no_grad():
        return model.model(input_ids=torch.tensor([ids])).last_hidden_state[0]


@pytest.mark.parametrize("make", [FeatureCache, FeatureLean])
def test_features_and_logits_match_a_fresh_pass(target: Any, make: Any) -> None:
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    cache, plain = make(target), KVCache(target)
    logits = torch.cat([cache.forward(torch.tensor(ids[:5])), cache.forward(torch.tensor(ids[5:]))])
    expected = torch.cat(
        [plain.forward(torch.tensor(ids[:5])), plain.forward(torch.tensor(ids[5:]))]
    )
    torch.testing.assert_close(logits, expected, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(cache.features.rows, _hidden(target, ids), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("make", [FeatureCache, FeatureLean])
def test_rollback_and_compaction_keep_features_in_step(target: Any, make: Any) -> None:
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    cache = make(target)
    cache.forward(torch.tensor(ids))
    cache.crop(5)
    assert len(cache.features) == len(cache) == 5
    cache.forward(torch.tensor([7, 8]))
    torch.testing.assert_close(
        cache.features.rows, _hidden(target, [*ids[:5], 7, 8]), rtol=1e-9, atol=1e-9
    )
    keep = torch.tensor([0, 1, 2, 3, 4, 6])
    cache.keep_only(keep)
    assert len(cache.features) == len(cache) == 6
    torch.testing.assert_close(
        cache.features.rows, _hidden(target, [*ids[:5], 7, 8])[keep], rtol=1e-9, atol=1e-9
    )


@pytest.fixture(scope="module")
def deep() -> Any:
    """A 6-layer tiny Llama: the fused layers (2, 3, 3) are inner ones."""
    return tiny_model("llama", seed=5, scale=3.0, num_hidden_layers=6)


def _fused(model: Any, ids: list[int]) -> torch.Tensor:
    """g (T, 3D): the fused layers' hidden states of a fresh full pass."""
    with torch.no_grad():
        states = model.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    return torch.cat([states.hidden_states[i][0] for i in (2, 3, 3)], -1)


@pytest.mark.parametrize("make", [FusedFeatureCache, FusedFeatureLean])
def test_fused_features_follow_a_tree_pass_and_its_compaction(deep: Any, make: Any) -> None:
    """g of a prompt, then of a tree's nodes (positions by depth, each seeing its ancestors),
    and after keep_only of the prefix and one path, g and the logits of a fresh pass."""
    ids = [3, 1, 4, 1, 5, 9]
    cache, plain = make(deep), KVCache(deep)
    cache.forward(torch.tensor(ids))
    torch.testing.assert_close(cache.features.rows, _fused(deep, ids), rtol=1e-9, atol=1e-9)
    tokens, parents = torch.tensor([2, 6, 5, 3]), (-1, -1, 0, 1)  # two branches of two
    visible = torch.zeros(4, len(ids) + 4, dtype=torch.bool)
    visible[:, : len(ids)] = True
    for node, parent in enumerate(parents):
        visible[node, len(ids) + node] = True
        if parent >= 0:
            visible[node, len(ids) + parent] = True
    positions = torch.tensor([6, 6, 7, 7])
    tree_logits = cache.forward(tokens, keep=4, positions=positions, visible=visible)
    plain.forward(torch.tensor(ids))
    expected = plain.forward(tokens, keep=4, positions=positions, visible=visible)
    torch.testing.assert_close(tree_logits, expected, rtol=1e-9, atol=1e-9)
    cache.keep_only(torch.tensor([*range(len(ids)), len(ids) + 1, len(ids) + 3]))  # path 6, 3
    path = [*ids, 6, 3]
    assert len(cache) == len(cache.features) == len(path)
    torch.testing.assert_close(cache.features.rows, _fused(deep, path), rtol=1e-9, atol=1e-9)
    fresh = KVCache(deep).forward(torch.tensor([*path, 7]))[-1]
    torch.testing.assert_close(cache.forward(torch.tensor([7]))[-1], fresh, rtol=1e-9, atol=1e-9)
