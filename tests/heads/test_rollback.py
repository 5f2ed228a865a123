"""After every round the caches hold exactly the committed text, as a fresh pass would.

Full decodes at T = 1 on a tiny Llama target (float64) with random heads: chains through
SpeculativeDecoder, trees through TreeDecoder, over both feature-recording target caches. After
each round (each RoundSummary event) the test checks

(a) the target's cache holds len(ids) - 1 positions, whose features equal a fresh pass over the
    committed ids and whose next logits (feeding the last token) equal the fresh pass's;
(b) EAGLE-3: the head's cache holds real entries only (fed with the target's
    features), as many as the committed tokens before the round, with keys, values and outputs
    equal to those of a fresh cache of the head fed that prefix with real features;
(c) Medusa: the committed count is the committed tokens before the round, and nothing past it.

Tolerance 1e-9 (float64). Several seeds, and the test asserts that rounds with every number of
accepted drafts (0 to gamma, or the tree depth) and a bonus token all occurred.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.decoding import SpeculativeDecoder
from specviz.core.events import Bonus, RoundSummary
from specviz.drafters.tree_model import TreeShape
from specviz.heads.build import target_forward
from specviz.heads.cache import MedusaCache
from specviz.heads.drafters import HeadDrafter, HeadTreeDrafter
from specviz.heads.eagle import fused_layers
from specviz.heads.eagle_lean import LeanEagle3Cache
from specviz.heads.tap import FusedFeatureCache
from specviz.tree.decoding import TreeDecoder
from tests.conftest import tiny_model
from tests.heads.helpers import random_head

V = 8  # a small vocabulary and a flat target (scale 1): random heads are often accepted
PROMPT = [1, 2, 3, 4, 5, 6]
HEAD_TOKENS = torch.arange(1, V)
GAMMA = 3
SHAPE = TreeShape(nodes=8, depth=3, width=2)  # room for depth 3 in a sampled tree
SEEDS = range(6)
HEAD_SEED = 2  # random heads whose top-k trees reach depth 3 within these seeds
NEW_TOKENS = 40
TOL = 1e-9
CASES = [  # (kind, tree: None for a chain, else sampled?)
    ("medusa", None),
    ("medusa", False),
    ("eagle3", None),
    ("eagle3", False),
    ("eagle3", True),
]


@pytest.fixture(scope="module")
def target() -> Any:
    return tiny_model("llama", seed=5, scale=1.0, vocab_size=V)


def _decoder(target: Any, kind: str, tree: bool | None, lean: bool, seed: int) -> Any:
    """A decode of PROMPT by the head drafter (a chain, or a tree sampled or not)."""
    sampling = SamplingConfig(temperature=1.0, seed=seed)
    cache = random_head(kind, target, seed=HEAD_SEED, head_tokens=HEAD_TOKENS)
    make_target = target_forward(kind, lean)
    if tree is None:
        drafter: Any = HeadDrafter(cache, sampling, make_target_cache=make_target)
        speculation = SpeculationConfig(gamma=GAMMA, max_new_tokens=NEW_TOKENS)
        return SpeculativeDecoder(
            target, drafter, PROMPT, sampling=sampling, speculation=speculation
        )
    drafter = HeadTreeDrafter(
        cache, sampling, shape=SHAPE, sampled=tree, make_target_cache=make_target
    )
    return TreeDecoder(target, drafter, PROMPT, sampling=sampling, max_new_tokens=NEW_TOKENS)


@torch.no_grad()
def _check_target_cache(decoder: Any, target: Any) -> None:
    """(a): len(ids) - 1 positions; their features and the next logits as a fresh pass's."""
    ids, cache = decoder.ids, decoder.target_cache
    n = len(ids) - 1
    assert len(cache) == len(cache.features) == n
    if isinstance(decoder, TreeDecoder):
        assert decoder.cached == n
    out = target.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    hidden = out.last_hidden_state[0]  # (L, D)
    if isinstance(decoder.drafter.head, LeanEagle3Cache):  # g: the fused layers (L, 3D)
        layers = fused_layers(int(target.config.num_hidden_layers))
        expected = torch.cat([out.hidden_states[i][0] for i in layers], -1)
    else:
        expected = hidden
    torch.testing.assert_close(cache.features.rows, expected[:n], rtol=TOL, atol=TOL)
    logits = cache.forward(torch.tensor([ids[-1]]), keep=1)[-1]
    torch.testing.assert_close(logits, target.lm_head(hidden[-1]), rtol=TOL, atol=TOL)
    cache.crop(n)  # back to where the decoder left it


@torch.no_grad()
def _check_head(decoder: Any, target: Any, before: int, drafted: bool) -> None:
    """(b) and (c): the head's cache holds the `before` tokens committed before the round (its
    entries fed with real features), and for EAGLE-3 the entries of a fresh pass over them."""
    head, n = decoder.drafter.head, len(decoder.ids) - 1
    held = before if drafted else len(head)  # a round that drafted nothing fed nothing
    if isinstance(head, MedusaCache):
        assert head.committed == len(head) == held <= n
        return
    assert isinstance(head, LeanEagle3Cache)
    assert head.real == len(head) == held <= n
    assert head.positions == list(range(held))
    fresh = LeanEagle3Cache(target, head.head)
    fresh.attach(target, FusedFeatureCache).forward(torch.tensor(decoder.ids[:-1]))
    if held:
        fresh.forward(torch.tensor(decoder.ids[:held]))
    for got, want in ((head.keys, fresh.keys), (head.values, fresh.values)):
        torch.testing.assert_close(got[:, :held], want[:, :held], rtol=TOL, atol=TOL)
    torch.testing.assert_close(head.outputs, fresh.outputs, rtol=TOL, atol=TOL)


@pytest.mark.parametrize("lean", [False, True])  # the target's forward: transformers', lean
@pytest.mark.parametrize(("kind", "tree"), CASES)
def test_caches_hold_the_committed_text_after_every_round(
    target: Any, kind: str, tree: bool | None, lean: bool
) -> None:
    depth = GAMMA if tree is None else SHAPE.depth
    accepted: set[int] = set()
    bonuses = rounds = 0
    for seed in SEEDS:
        decoder = _decoder(target, kind, tree, lean, seed)
        before = len(decoder.ids)
        for event in decoder.events():
            if isinstance(event, Bonus):
                bonuses += 1
            if not isinstance(event, RoundSummary):
                continue
            _check_target_cache(decoder, target)
            _check_head(decoder, target, before, drafted=event.proposed > 0)
            if event.proposed and event.gamma == depth:
                accepted.add(event.accepted)
            before, rounds = len(decoder.ids), rounds + 1
    assert accepted == set(range(depth + 1)), f"accept counts seen: {sorted(accepted)}"
    assert bonuses > 0
    assert rounds >= 10 * len(SEEDS)
