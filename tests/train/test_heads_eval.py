"""heads-eval on the EAGLE-3 head: the laws it scores are the chained drafts the head makes."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from specviz.heads.eagle import Eagle3Head, fresh_head
from specviz.heads.eagle_lean import LeanEagle3Cache
from specviz.train.heads.evaluate import drafted_laws, target_pass
from specviz.train.heads.unroll import unrolled
from tests.conftest import VOCAB, tiny_model

DRAFT_VOCAB = torch.tensor([3, 5, 6, 7, 8, 9, 10, 11, 12, 20, 21, 0])
TOKENS = torch.tensor([5, 6, 7, 8, 9, 10, 11, 12, 5, 6, 7, 8, 9])


@pytest.fixture(scope="module")
def target() -> Any:
    """A 6-layer tiny Llama (fused layers 2, 3, 3)."""
    return tiny_model("llama", seed=5, scale=3.0, num_hidden_layers=6)


def random_head(target: Any, seed: int) -> Eagle3Head:
    """An EAGLE-3 head with every weight random, float64, eval."""
    gen = torch.Generator().manual_seed(seed)
    head = fresh_head(target, DRAFT_VOCAB, gen)
    with torch.no_grad():
        for param in head.parameters():
            param.copy_(torch.randn(param.shape, generator=gen) / param.shape[-1] ** 0.5)
    return head.to(torch.float64).eval()


def test_the_scored_laws_are_the_heads_chained_drafts(target: Any) -> None:
    head = random_head(target, seed=11)
    g, p = target_pass(target, TOKENS, fused=True)  # (L, 3D), (L, V)
    assert g.shape == (len(TOKENS), 3 * int(target.config.hidden_size))
    torch.testing.assert_close(p.sum(-1), torch.ones(len(TOKENS)))
    start, depth = 3, 4
    laws = drafted_laws(LeanEagle3Cache(target, head), g, TOKENS, start, depth)
    assert laws.shape == (len(TOKENS) - start, depth, VOCAB)
    with torch.no_grad():
        first = torch.cat([torch.zeros_like(g[:1]), g[:-1]]).to(torch.float64)[None]
        embed = target.get_input_embeddings().weight.detach().to(torch.float64)
        outs = unrolled(head, embed[TOKENS][None], head.fused(first), depth)
    off = torch.ones(VOCAB, dtype=torch.bool)
    off[DRAFT_VOCAB] = False
    checked = 0
    for i in range(start, len(TOKENS)):
        for j in range(1, depth + 1):
            q = laws[i - start, j - 1]
            if i + j >= len(TOKENS):
                assert bool((q == -1).all())  # padding: no token there to draft
                continue
            expected = torch.softmax(head.full_logits(outs[j - 1][0, i + j - 1], VOCAB), -1)
            torch.testing.assert_close(q, expected.float(), rtol=1e-5, atol=1e-6)
            assert bool((q[off] == 0).all())  # q = 0 off the draft vocabulary
            checked += 1
    assert checked == sum(min(depth, len(TOKENS) - 1 - i) for i in range(start, len(TOKENS)))


def test_a_head_that_reads_other_features_scores_other_laws(target: Any) -> None:
    """The negative control: fed the target's features one position late, the same head drafts
    other laws (so the equality above is no accident of the features being ignored)."""
    head = random_head(target, seed=11)
    g, _ = target_pass(target, TOKENS, fused=True)
    good = drafted_laws(LeanEagle3Cache(target, head), g, TOKENS, 3, 2)
    shifted = drafted_laws(LeanEagle3Cache(target, head), g.roll(1, 0), TOKENS, 3, 2)
    assert not torch.allclose(good[:, 0], shifted[:, 0])
