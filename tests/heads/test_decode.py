"""Head drafters decode exactly: greedy output equals plain greedy decoding, chains and trees."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.decoding import SpeculativeDecoder
from specviz.core.events import Accepted, RoundSummary, Sampled, TreeProposed
from specviz.drafters.tree_model import TreeShape
from specviz.heads.build import target_forward
from specviz.heads.drafters import HeadDrafter, HeadTreeDrafter
from specviz.plain import autoregressive_events
from specviz.tree.decoding import TreeDecoder
from tests.conftest import VOCAB, tiny_model
from tests.heads.helpers import random_head

PROMPT = [5, 6, 7, 8, 5, 6]
HEAD_TOKENS = torch.arange(2, VOCAB)  # q = 0 on tokens 0 and 1


@pytest.fixture(scope="module")
def target() -> Any:
    return tiny_model("llama", seed=5, scale=3.0)


def _plain(target: Any, n: int) -> list[int]:
    sampling = SamplingConfig(temperature=0.0)
    events = autoregressive_events(target, PROMPT, sampling=sampling, max_new_tokens=n)
    return [e.token for e in events if isinstance(e, Sampled)]


@pytest.mark.parametrize("kind", ["eagle3", "medusa"])
@pytest.mark.parametrize("forward", ["transformers", "lean"])
@pytest.mark.parametrize("tree", [None, "topk", "sampled"])
def test_greedy_heads_match_plain_greedy(
    target: Any, kind: str, forward: str, tree: str | None
) -> None:
    sampling = SamplingConfig(temperature=0.0)
    cache = random_head(kind, target, seed=11, head_tokens=HEAD_TOKENS)
    make_target = target_forward(kind, lean=forward == "lean")
    n = 24
    if tree is None:
        drafter: Any = HeadDrafter(cache, sampling, make_target_cache=make_target)
        decoder: Any = SpeculativeDecoder(
            target, drafter, PROMPT, sampling=sampling,
            speculation=SpeculationConfig(gamma=3, max_new_tokens=n),
        )  # fmt: skip
    else:
        shape = TreeShape(nodes=6, depth=3, width=2)
        drafter = HeadTreeDrafter(
            cache, sampling, shape=shape, sampled=tree == "sampled", make_target_cache=make_target
        )
        decoder = TreeDecoder(target, drafter, PROMPT, sampling=sampling, max_new_tokens=n)
    events = list(decoder.events())
    ids = decoder.ids[len(PROMPT) :]
    assert ids == _plain(target, n)
    assert any(isinstance(e, TreeProposed) for e in events) == (tree is not None)
    assert sum(isinstance(e, Accepted) for e in events) >= 0


def test_lookup_then_head_matches_plain_greedy(target: Any) -> None:
    from specviz.drafters.hybrid import LookupThenShared
    from specviz.drafters.ngram import NgramDrafter

    sampling = SamplingConfig(temperature=0.0)
    head = HeadDrafter(
        random_head("eagle3", target, seed=11, head_tokens=HEAD_TOKENS),
        sampling,
        make_target_cache=target_forward("eagle3", lean=True),
    )
    drafter = LookupThenShared(head, NgramDrafter(VOCAB, min_ngram=2), model_gamma=None)
    decoder = SpeculativeDecoder(
        target, drafter, PROMPT, sampling=sampling,
        speculation=SpeculationConfig(gamma=3, max_new_tokens=24),
    )  # fmt: skip
    list(decoder.events())
    assert decoder.ids[len(PROMPT) :] == _plain(target, 24)


def test_suffix_then_head_matches_plain_greedy_with_a_memory_of_other_text(target: Any) -> None:
    from specviz.drafters.suffix.drafter import SuffixConfig, SuffixDrafter
    from specviz.drafters.suffix.hybrid import SuffixThenShared
    from specviz.drafters.suffix.memory import SuffixMemory

    sampling = SamplingConfig(temperature=0.0)
    plain = _plain(target, 24)
    memory = SuffixMemory()
    memory.add([*PROMPT[-3:], *plain[:10]])  # the answer's start, as an earlier request wrote it
    memory.add([9, 3, 7, 1, 4, 2])  # and text that has nothing to do with it
    head = HeadDrafter(
        random_head("eagle3", target, seed=11, head_tokens=HEAD_TOKENS), sampling,
        make_target_cache=target_forward("eagle3", lean=True),
    )  # fmt: skip
    suffix = SuffixDrafter(VOCAB, memory=memory, config=SuffixConfig(factor=2.0))
    drafter = SuffixThenShared(head, suffix, min_score=1.0, model_gamma=None, min_model_alpha=0.0)
    decoder = SpeculativeDecoder(
        target, drafter, PROMPT, sampling=sampling,
        speculation=SpeculationConfig(gamma=3, max_new_tokens=24),
    )  # fmt: skip
    drafted_by: list[str] = []
    for e in decoder.events():
        if isinstance(e, RoundSummary) and e.proposed:  # who drafted the round just verified
            drafted_by.append(drafter.last)
    assert decoder.ids[len(PROMPT) :] == plain
    assert {"suffix", "model"} <= set(drafted_by)  # memory copied, and the head drafted
