"""Gamma policies and the confidence threshold change speed only: outputs stay exact."""

from __future__ import annotations

import pytest

from specviz.config import SamplingConfig, SpeculationConfig
from specviz.drafters import ModelDrafter
from specviz.events import RoundSummary
from specviz.generate import autoregressive_generate, speculative_generate
from specviz.ngram import NgramDrafter
from specviz.policies import FixedGamma, HeuristicGamma, TheoryGamma, make_policy
from specviz.stats.suite import check_setting, default_settings, family_adjusted
from specviz.stats.toy import random_pair

from .conftest import PairFactory


def _summary(gamma: int, proposed: int, accepted: int) -> RoundSummary:
    return RoundSummary(
        round=0,
        gamma=gamma,
        proposed=proposed,
        accepted=accepted,
        emitted=accepted + 1,
        draft_seconds=0.01 * proposed,
        target_seconds=0.1,
        draft_forward_calls=proposed,
    )


def test_heuristic_schedule_matches_transformers() -> None:
    policy = HeuristicGamma(start=4)
    policy.update(_summary(4, 4, 4))
    assert policy.next_gamma() == 6
    policy.update(_summary(6, 6, 2))
    assert policy.next_gamma() == 5
    for _ in range(10):
        policy.update(_summary(policy.next_gamma(), policy.next_gamma(), 0))
    assert policy.next_gamma() == 1


def test_theory_policy_follows_the_bound() -> None:
    high = TheoryGamma(start=2)
    for _ in range(30):
        high.update(_summary(2, 2, 2))  # every draft kept, c = 0.1
    low = TheoryGamma(start=6)
    for _ in range(30):
        low.update(_summary(6, 6, 0))  # nothing kept
    assert high.next_gamma() > 4 and low.next_gamma() == 1
    assert high.cost_ratio == pytest.approx(0.1)


def test_make_policy_and_bad_values() -> None:
    assert isinstance(make_policy("fixed", 3), FixedGamma)
    with pytest.raises(
        ValueError, match=r"gamma policy must be one of \['fixed', 'heuristic', 'theory'\]"
    ):
        make_policy("magic", 3)
    with pytest.raises(ValueError, match=r"min_confidence must be in \[0, 1\]"):
        ModelDrafter(None, SamplingConfig(), 5, min_confidence=2.0)


@pytest.mark.parametrize("name", ["heuristic", "theory"])
def test_dynamic_gamma_keeps_greedy_output_and_records_gamma(
    name: str, pair: PairFactory, tokenizer
) -> None:  # type: ignore[no-untyped-def]
    target, draft = pair("llama")
    plain = autoregressive_generate(
        target,
        tokenizer,
        "the cat",
        sampling=SamplingConfig(temperature=0),
        max_new_tokens=40,
        stop=(),
    )
    spec = speculative_generate(
        target,
        draft,
        tokenizer,
        "the cat",
        sampling=SamplingConfig(temperature=0),
        speculation=SpeculationConfig(gamma=3, max_new_tokens=40),
        stop=(),
        policy=make_policy(name, 3),
    )
    assert spec.tokens == plain.tokens
    assert len({r.gamma for r in spec.rounds}) > 1  # gamma actually changed between rounds


def test_confidence_threshold_drafts_less_and_stays_exact(pair: PairFactory, tokenizer) -> None:  # type: ignore[no-untyped-def]
    target, draft = pair("gpt2")
    greedy = SamplingConfig(temperature=0)
    plain = autoregressive_generate(
        target, tokenizer, "abc", sampling=greedy, max_new_tokens=30, stop=()
    )
    sampling = SamplingConfig(temperature=1.0, seed=3)
    confident = ModelDrafter(draft, sampling, target.config.vocab_size, min_confidence=0.6)
    spec = speculative_generate(
        target,
        None,
        tokenizer,
        "abc",
        sampling=sampling,
        speculation=SpeculationConfig(gamma=6, max_new_tokens=30),
        stop=(),
        drafter=confident,
    )
    assert any(r.proposed < r.gamma for r in spec.rounds)
    greedy_drafter = ModelDrafter(draft, greedy, target.config.vocab_size, min_confidence=0.6)
    same = speculative_generate(
        target,
        None,
        tokenizer,
        "abc",
        sampling=greedy,
        speculation=SpeculationConfig(gamma=6, max_new_tokens=30),
        stop=(),
        drafter=greedy_drafter,
    )
    assert same.tokens == plain.tokens


@pytest.mark.parametrize("name", ["heuristic", "theory"])
def test_dynamic_gamma_passes_the_equivalence_suite(name: str) -> None:
    """Family-wise alpha 0.01 (Holm), fixed seeds."""
    target, draft = random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)
    setting = next(s for s in default_settings() if s.name == "gamma=2 T=1")
    results = family_adjusted(
        check_setting(
            target,
            draft,
            [1, 2],
            setting,
            n=1200,
            alpha=0.01,
            make_policy=lambda: make_policy(name, 2),
        )
    )
    assert not any(r.reject for r in results), [(r.name, r.p_value) for r in results]


def test_ngram_drafter_through_the_public_api(pair: PairFactory, tokenizer) -> None:  # type: ignore[no-untyped-def]
    target, _ = pair("gpt2")
    prompt = "abcabcabcab"
    plain = autoregressive_generate(
        target,
        tokenizer,
        prompt,
        sampling=SamplingConfig(temperature=0),
        max_new_tokens=20,
        stop=(),
    )
    spec = speculative_generate(
        target,
        None,
        tokenizer,
        prompt,
        sampling=SamplingConfig(temperature=0),
        speculation=SpeculationConfig(gamma=4, max_new_tokens=20),
        stop=(),
        drafter=NgramDrafter(target.config.vocab_size),
    )
    assert spec.tokens == plain.tokens and spec.proposed > 0
    with pytest.raises(ValueError, match="no draft model given"):
        speculative_generate(target, None, tokenizer, prompt)
