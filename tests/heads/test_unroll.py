"""Training-time drafting computes exactly what drafting computes, at every depth."""

from __future__ import annotations

import torch

from specviz.heads.cache import EagleCache
from specviz.heads.tap import FeatureCache
from specviz.train.heads_eval import FeatureRows
from specviz.train.unroll import unrolled
from tests.conftest import VOCAB, tiny_model
from tests.heads.helpers import random_head


def test_each_pass_equals_the_drafted_chain() -> None:
    target = tiny_model("llama", seed=5, scale=3.0)
    cache = random_head("eagle", target, seed=3, head_tokens=torch.arange(VOCAB))
    assert isinstance(cache, EagleCache)
    tokens = torch.tensor([5, 6, 7, 8, 9, 10, 11, 12, 5, 6, 7])
    fc = FeatureCache(target)
    fc.forward(tokens)
    feats = fc.features.rows  # (L, D) real features
    first = torch.cat([torch.zeros_like(feats[:1]), feats[:-1]])[None]
    depth = 3
    with torch.no_grad():
        outs = unrolled(cache.head, cache.embed[tokens][None], first, depth)
    rows = FeatureRows(feats)
    cache.features = rows  # type: ignore[assignment]
    checked = 0
    for root in range(len(tokens) - depth + 1):
        cache.reset()
        rows.show(root)  # the target has scored the positions before the root
        cache.forward(tokens[: root + 1])  # real entries up to the root
        for d in range(2, depth + 1):
            cache.forward(tokens[root + d - 1 : root + d])  # the chain's own prediction goes in
        for d in range(1, depth + 1):
            i = root + d - 1
            torch.testing.assert_close(cache.outputs[i], outs[d - 1][0, i], rtol=1e-9, atol=1e-9)
            checked += 1
    assert checked == depth * (len(tokens) - depth + 1)
