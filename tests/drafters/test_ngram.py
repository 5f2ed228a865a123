"""N-gram prompt lookup drafting: lookup rules, exact greedy output, exact law under sampling."""

from __future__ import annotations

import pytest
import torch

from specviz.api import autoregressive_generate
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.decoding import SpeculativeDecoder
from specviz.core.events import EMITTING
from specviz.drafters.ngram import NgramDrafter, lookup
from specviz.stats.mutants import MUTANTS
from specviz.stats.suite import check_setting, default_settings, family_adjusted
from specviz.stats.toy import random_pair

from ..conftest import PairFactory


def test_lookup_prefers_longest_ngram_and_latest_match() -> None:
    ids = [1, 2, 3, 9, 1, 2, 4, 7, 2, 1, 2]
    assert lookup(ids, 3, max_ngram=2, min_ngram=1) == [4, 7, 2]  # "1 2" latest earlier match
    assert lookup(ids, 1, max_ngram=2, min_ngram=1) == [4]
    assert lookup([5, 6, 7], 4, max_ngram=3, min_ngram=1) == []  # no earlier occurrence
    assert lookup([5, 6, 5], 4, max_ngram=3, min_ngram=1) == [6, 5]
    assert lookup([5, 6, 5], 4, max_ngram=3, min_ngram=2) == []


def test_ngram_drafter_has_one_hot_q_and_stops_at_eos() -> None:
    drafter = NgramDrafter(10, max_ngram=2)
    draft = drafter.propose([1, 2, 0, 3, 1, 2], 4, torch.Generator(), stop_ids={0})
    assert draft.tokens.tolist() == [0]
    draft = drafter.propose([1, 2, 5, 3, 1, 2], 4, torch.Generator(), stop_ids={0})
    assert draft.tokens.tolist() == [5, 3, 1, 2]
    assert torch.equal(draft.q_draft.sum(-1), torch.ones(4)) and draft.q_draft.max() == 1.0
    with pytest.raises(ValueError, match="1 <= min_ngram <= max_ngram"):
        NgramDrafter(10, max_ngram=1, min_ngram=2)


def _ngram_decode(target, prompt: list[int], sampling: SamplingConfig, gamma: int, n: int):
    decoder = SpeculativeDecoder(
        target,
        NgramDrafter(target.config.vocab_size, max_ngram=3),
        prompt,
        sampling=sampling,
        speculation=SpeculationConfig(gamma=gamma, max_new_tokens=n),
    )
    events = list(decoder.events())
    return tuple(e.token for e in events if isinstance(e, EMITTING)), events


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_greedy_ngram_equals_greedy_target(arch: str, pair: PairFactory, tokenizer) -> None:
    target, _ = pair(arch)
    prompt = tokenizer("the cat sat on the mat. the cat sat on the")["input_ids"]
    plain = autoregressive_generate(
        target,
        tokenizer,
        prompt,
        sampling=SamplingConfig(temperature=0),
        max_new_tokens=30,
        stop=(),
    )
    for gamma in (1, 3, 6):
        tokens, events = _ngram_decode(target, prompt, SamplingConfig(temperature=0), gamma, 30)
        assert tokens == plain.tokens
        assert any(e.kind == "proposed" for e in events)


NGRAM_PROMPT = [1, 2, 3, 1, 2, 3, 4, 1, 2]


def _ngram(sampling: SamplingConfig) -> NgramDrafter:
    return NgramDrafter(6, max_ngram=3)


@pytest.mark.parametrize("setting_name", ["gamma=2 T=1", "gamma=4 T=0.5", "gamma=4 EOS in round"])
def test_ngram_drafter_passes_the_equivalence_suite(setting_name: str) -> None:
    """Exact under sampling (one-hot q), at family-wise alpha 0.01 (Holm)."""
    target, _ = random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)
    settings = {s.name: s for s in default_settings(stop_id=0)}
    results = family_adjusted(
        check_setting(
            target,
            None,
            NGRAM_PROMPT,
            settings[setting_name],
            n=1200,
            alpha=0.01,
            make_drafter=_ngram,
        )
    )
    assert not any(r.reject for r in results), [(r.name, r.p_value) for r in results]


@pytest.mark.parametrize("mutant_name", ["residual_is_p", "accept_all", "cache_one_too_few"])
def test_ngram_drafter_mutants_are_rejected(mutant_name: str) -> None:
    target, _ = random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)
    setting = next(s for s in default_settings() if s.name == "gamma=4 T=1")
    mutant = next(m for m in MUTANTS if m.name == mutant_name)
    results = family_adjusted(
        check_setting(
            target,
            None,
            NGRAM_PROMPT,
            setting,
            n=1500,
            alpha=0.01,
            variant=mutant,
            make_drafter=_ngram,
        )
    )
    assert any(r.reject for r in results), [(r.name, r.p_value) for r in results]
