"""The EAGLE-3 head: training-time drafting equals drafting, q is zero off the draft vocabulary,
and its drafters decode exactly."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.decoding import SpeculativeDecoder
from specviz.core.events import Accepted, Sampled
from specviz.drafters.tree_model import TreeShape
from specviz.heads.cache import Eagle3Cache
from specviz.heads.drafters import HeadDrafter, HeadTreeDrafter
from specviz.heads.eagle import Eagle3Head, fresh_head
from specviz.heads.tap import FusedFeatureCache
from specviz.plain import autoregressive_events
from specviz.train.heads.evaluate import FeatureRows
from specviz.train.heads.unroll import unrolled
from tests.conftest import VOCAB, tiny_model

VOCAB_D = torch.tensor([3, 5, 6, 7, 8, 9, 10, 11, 12, 20, 21, 0])  # q = 0 on every other token
PROMPT = [5, 6, 7, 8, 5, 6]


@pytest.fixture(scope="module")
def target() -> Any:
    """A 6-layer tiny Llama (fused layers 2, 3, 3)."""
    return tiny_model("llama", seed=5, scale=3.0, num_hidden_layers=6)


def random_head3(target: Any, seed: int, vocab: torch.Tensor = VOCAB_D) -> Eagle3Cache:
    """An EAGLE-3 head with every weight random (none left at its init), float64."""
    gen = torch.Generator().manual_seed(seed)
    head = fresh_head(target, vocab, gen)
    with torch.no_grad():
        for param in head.parameters():
            param.copy_(torch.randn(param.shape, generator=gen) / param.shape[-1] ** 0.5)
    return Eagle3Cache(target, head.to(torch.float64).eval())


def _fused_rows(target: Any, tokens: torch.Tensor) -> torch.Tensor:
    """g (L, 3D) of every position, recorded by the target's cached forward."""
    cache = FusedFeatureCache(target)
    cache.forward(tokens)
    return cache.features.rows


def test_each_unrolled_pass_equals_the_drafted_chain(target: Any) -> None:
    cache = random_head3(target, seed=3)
    tokens = torch.tensor([5, 6, 7, 8, 9, 10, 11, 12, 5, 6, 7, 8, 9])
    g = _fused_rows(target, tokens)  # (L, 3D)
    assert g.shape == (len(tokens), 3 * int(target.config.hidden_size))
    head = cache.head
    depth = 6
    with torch.no_grad():
        first = torch.cat([torch.zeros_like(g[:1]), g[:-1]])[None]  # g_{i-1}
        outs = unrolled(head, cache.embed[tokens][None], head.fused(first), depth)
    rows = FeatureRows(g)
    cache.features = rows  # type: ignore[assignment]
    checked = 0
    for root in range(len(tokens) - depth + 1):
        cache.reset()
        rows.show(root)  # the target has scored the positions before the root
        logits = [cache.forward(tokens[: root + 1], keep=1)[0]]  # real entries up to the root
        for d in range(2, depth + 1):  # the chain's own output goes in with its next token
            logits.append(cache.forward(tokens[root + d - 1 : root + d])[0])
        assert cache.real == root + 1
        for d in range(1, depth + 1):
            i = root + d - 1
            torch.testing.assert_close(cache.outputs[i], outs[d - 1][0, i], rtol=1e-9, atol=1e-9)
            expected = head.full_logits(outs[d - 1][0, i], VOCAB)
            torch.testing.assert_close(logits[d - 1], expected, rtol=1e-9, atol=1e-9)
            checked += 1
    assert checked == depth * (len(tokens) - depth + 1)


def test_q_is_zero_off_the_draft_vocabulary(target: Any) -> None:
    cache = random_head3(target, seed=4)
    rows = FeatureRows(_fused_rows(target, torch.tensor(PROMPT)))
    cache.features = rows  # type: ignore[assignment]
    rows.show(len(PROMPT) - 1)
    logits = cache.forward(torch.tensor(PROMPT))  # (T, V)
    q = torch.softmax(logits, -1)
    off = torch.ones(VOCAB, dtype=torch.bool)
    off[VOCAB_D] = False
    assert bool((q[:, off] == 0).all())
    torch.testing.assert_close(q.sum(-1), torch.ones(len(PROMPT), dtype=q.dtype))
    assert bool((q[:, VOCAB_D] > 0).all())


def test_a_fresh_head_reads_the_targets_output_rows(target: Any) -> None:
    head = fresh_head(target, VOCAB_D, torch.Generator().manual_seed(0))
    out = target.get_output_embeddings().weight.detach()
    torch.testing.assert_close(head.lm.detach(), out[VOCAB_D].float())
    assert isinstance(head, Eagle3Head) and head.size == len(VOCAB_D)
    zero = head.fused(torch.zeros(3, 3 * int(target.config.hidden_size)))
    assert bool((zero == 0).all())  # u_{-1} = 0 is what fused() gives a zero row too


def _plain(target: Any, n: int) -> list[int]:
    sampling = SamplingConfig(temperature=0.0)
    events = autoregressive_events(target, PROMPT, sampling=sampling, max_new_tokens=n)
    return [e.token for e in events if isinstance(e, Sampled)]


@pytest.mark.parametrize("tree", [None, "topk"])
def test_greedy_eagle3_matches_plain_greedy(target: Any, tree: str | None) -> None:
    sampling = SamplingConfig(temperature=0.0)
    vocab = torch.arange(2, VOCAB)
    cache = random_head3(target, seed=11, vocab=vocab)
    n = 24
    if tree is None:
        drafter: Any = HeadDrafter(cache, sampling, make_target_cache=FusedFeatureCache)
        decoder: Any = SpeculativeDecoder(
            target, drafter, PROMPT, sampling=sampling,
            speculation=SpeculationConfig(gamma=4, max_new_tokens=n),
        )  # fmt: skip
    else:
        from specviz.tree.decoding import TreeDecoder

        shape = TreeShape(nodes=6, depth=3, width=2)
        drafter = HeadTreeDrafter(
            cache, sampling, shape=shape, sampled=False, make_target_cache=FusedFeatureCache
        )
        decoder = TreeDecoder(target, drafter, PROMPT, sampling=sampling, max_new_tokens=n)
    events = list(decoder.events())
    assert decoder.ids[len(PROMPT) :] == _plain(target, n)
    assert sum(isinstance(e, Accepted) for e in events) >= 0


def test_saved_head_loads_back_and_drafts_exactly(target: Any, tmp_path: Any) -> None:
    from specviz.heads.build import build_head_drafter
    from specviz.heads.weights import load_eagle, save_eagle

    cache = random_head3(target, seed=12, vocab=torch.arange(2, VOCAB))
    path = save_eagle(cache.head, target, 7, tmp_path)
    loaded = load_eagle(target, path)
    for name, value in cache.head.state_dict().items():
        expected = value if name == "vocab" else value.to(torch.bfloat16).to(value.dtype)
        torch.testing.assert_close(loaded.state_dict()[name], expected, rtol=0, atol=0)
    sampling = SamplingConfig(temperature=0.0)
    drafter = build_head_drafter("eagle3", target, sampling, folder=tmp_path)
    decoder = SpeculativeDecoder(
        target, drafter, PROMPT, sampling=sampling,
        speculation=SpeculationConfig(gamma=3, max_new_tokens=16),
    )  # fmt: skip
    list(decoder.events())
    assert decoder.ids[len(PROMPT) :] == _plain(target, 16)
    other = tiny_model("llama", seed=6, scale=3.0, num_hidden_layers=6)
    with pytest.raises(ValueError, match="fingerprint"):
        load_eagle(other, path)
