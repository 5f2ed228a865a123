"""The target's features come from its own passes: FeatureCache and FeatureLean agree with a
plain forward, and roll back and compact together with the keys and values."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from specviz.core.cache import KVCache
from specviz.heads.tap import FeatureCache, FeatureLean
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
