"""Lookup-then-model drafting: which drafter proposes, the draft cache catching up, exactness."""

from __future__ import annotations

from collections.abc import Collection

import pytest
import torch

from specviz.api import autoregressive_generate, encode, speculative_generate
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.drafter import Draft
from specviz.core.events import Proposed, RoundSummary
from specviz.drafters.hybrid import LookupThenModelDrafter
from specviz.drafters.model import ModelDrafter
from specviz.stats.mutants import MUTANTS
from specviz.stats.suite import check_setting, default_settings, family_adjusted
from specviz.stats.toy import random_pair

from ..conftest import PairFactory

GREEDY = SamplingConfig(temperature=0)


def _hybrid(
    draft, sampling: SamplingConfig, vocab: int, cap: int | None = None
) -> LookupThenModelDrafter:
    model = ModelDrafter(draft, sampling, vocab)
    return LookupThenModelDrafter(model, model_gamma=cap)  # lookup: n from 3 to 2


def test_lookup_proposes_when_the_text_repeats_and_the_model_catches_up(
    pair: PairFactory, tokenizer
) -> None:
    _, draft = pair("llama")
    vocab = int(draft.config.vocab_size)
    ids = encode(tokenizer, "the cat sat, the cat")
    hybrid = _hybrid(draft, GREEDY, vocab)
    hybrid.prefill(ids[:-1])
    copied = hybrid.propose(ids, 4, torch.Generator(), ())
    assert copied.forward_calls == 0  # "cat" occurred before: lookup copies 4 tokens, " sat"
    assert tokenizer.decode(copied.tokens.tolist()) == " sat"
    ids = [*ids, *copied.tokens.tolist(), *encode(tokenizer, " dog")]  # "og": no repeat
    drafted = hybrid.propose(ids, 3, torch.Generator(), ())
    fresh = ModelDrafter(draft, GREEDY, vocab)  # a draft model that never fell behind
    fresh.prefill(ids[:-1])
    expected = fresh.propose(ids, 3, torch.Generator(), ())
    assert drafted.forward_calls == 3
    assert drafted.tokens.tolist() == expected.tokens.tolist()
    assert torch.allclose(drafted.q_draft, expected.q_draft, atol=1e-9)


def test_model_gamma_caps_the_draft_models_share_but_not_the_copies(
    pair: PairFactory, tokenizer
) -> None:
    _, draft = pair("llama")
    vocab = int(draft.config.vocab_size)
    ids = encode(tokenizer, "the cat sat on the mat, the cat sat on the")
    hybrid = _hybrid(draft, GREEDY, vocab, cap=2)
    hybrid.prefill(ids[:-1])
    copied = hybrid.propose(ids, 6, torch.Generator(), ())
    assert copied.forward_calls == 0 and len(copied.tokens) == 6  # " mat, ": past the cap
    ids = [*ids, *copied.tokens.tolist(), *encode(tokenizer, " dog")]  # "og": no repeat
    drafted = hybrid.propose(ids, 6, torch.Generator(), ())
    assert drafted.forward_calls == len(drafted.tokens) == 2
    with pytest.raises(ValueError, match="model_gamma must be >= 1"):
        _hybrid(draft, GREEDY, vocab, cap=0)


def test_greedy_output_is_the_target_greedy_with_both_kinds_of_round(
    pair: PairFactory, tokenizer
) -> None:
    target, draft = pair("llama")
    vocab = int(target.config.vocab_size)
    prompt = encode(tokenizer, "the cat sat on the mat, the cat sat on the")
    plain = autoregressive_generate(
        target, tokenizer, prompt, sampling=GREEDY, max_new_tokens=40, stop=()
    )
    run = speculative_generate(
        target,
        _hybrid(draft, GREEDY, vocab),
        tokenizer,
        prompt,
        sampling=GREEDY,
        speculation=SpeculationConfig(gamma=4, max_new_tokens=40),
        stop=(),
    )
    assert run.tokens == plain.tokens
    rounds = [e for e in run.events if isinstance(e, RoundSummary)]
    lookup_rounds = [r for r in rounds if r.proposed and r.draft_forward_calls == 0]
    model_rounds = [r for r in rounds if r.draft_forward_calls > 0]
    assert lookup_rounds and model_rounds
    assert any(isinstance(e, Proposed) for e in run.events)


TOY_PROMPT = [1, 2, 3, 1, 2, 3, 4, 1, 2]


def _toy_hybrid(draft, cap: int | None = None):
    return lambda sampling: _hybrid(draft, sampling, 6, cap)


@pytest.mark.parametrize(
    ("setting_name", "cap"),
    [
        ("gamma=2 T=1", None),
        ("gamma=4 T=0.5", None),
        ("gamma=4 EOS in round", None),
        ("gamma=4 T=0.5", 1),  # the draft model capped at one token a round
    ],
)
def test_hybrid_passes_the_equivalence_suite(setting_name: str, cap: int | None) -> None:
    """Exact under sampling (one-hot q for copies, the model's q otherwise), family-wise 0.01."""
    target, draft = random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)
    setting = {s.name: s for s in default_settings(stop_id=0)}[setting_name]
    make = _toy_hybrid(draft, cap)
    results = family_adjusted(
        check_setting(target, None, TOY_PROMPT, setting, n=1200, alpha=0.01, make_drafter=make)
    )
    assert not any(r.reject for r in results), [(r.name, r.p_value) for r in results]


class _CopiesClaimUniformQ(LookupThenModelDrafter):
    """Mutant: labels each copied token as drawn from the uniform law instead of one-hot."""

    def propose(
        self, ids: list[int], gamma: int, generator: torch.Generator, stop_ids: Collection[int]
    ) -> Draft:
        draft = super().propose(ids, gamma, generator, stop_ids)
        if draft.forward_calls or not len(draft.tokens):
            return draft
        uniform = torch.full_like(draft.q_draft, 1.0 / draft.q_draft.shape[-1])
        return Draft(tokens=draft.tokens, q_draft=uniform, forward_calls=0)


def _wrong_q(draft):
    def make(sampling: SamplingConfig) -> LookupThenModelDrafter:
        return _CopiesClaimUniformQ(ModelDrafter(draft, sampling, 6))

    return make


@pytest.mark.parametrize("mutant_name", ["residual_is_p", "accept_all", "copies_claim_uniform_q"])
def test_hybrid_mutants_are_rejected(mutant_name: str) -> None:
    target, draft = random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)
    setting = next(s for s in default_settings() if s.name == "gamma=4 T=1")
    kwargs = (
        {"make_drafter": _wrong_q(draft)}
        if mutant_name == "copies_claim_uniform_q"
        else {
            "make_drafter": _toy_hybrid(draft),
            "variant": next(m for m in MUTANTS if m.name == mutant_name),
        }
    )
    results = family_adjusted(
        check_setting(target, None, TOY_PROMPT, setting, n=1500, alpha=0.01, **kwargs)
    )
    assert any(r.reject for r in results), [(r.name, r.p_value) for r in results]
