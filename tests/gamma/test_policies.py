"""Gamma policies and the confidence threshold change speed only: outputs stay exact."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest

from specviz.api import autoregressive_generate, speculative_generate
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.events import RoundSummary
from specviz.core.policy import FixedGamma
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter
from specviz.gamma.policies import CostModel, HeuristicGamma, TheoryGamma, VerifyCost, make_policy
from specviz.gamma.theory import expected_tokens_per_round
from specviz.stats.laws import EXACT_VARIANT
from specviz.stats.mutants import MUTANTS
from specviz.stats.suite import check_setting, default_settings, family_adjusted
from specviz.stats.toy import random_pair

from ..conftest import PairFactory


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


def _simulate(
    policy: TheoryGamma,
    *,
    keep: bool,
    draft: float,
    a: float,
    b: float,
    rounds: int = 60,
    extra: dict[int, float] | None = None,
    accept_at_most: int = 99,
) -> list[int]:
    """Feed rounds whose target pass costs a + b k (+ extra[k]) seconds; returns gammas used."""
    used = []
    for _ in range(rounds):
        g = policy.next_gamma()
        used.append(g)
        policy.update(
            RoundSummary(
                round=0,
                gamma=g,
                proposed=g,
                accepted=min(g, accept_at_most) if keep else 0,
                emitted=(min(g, accept_at_most) if keep else 0) + 1,
                draft_seconds=draft * g,
                target_seconds=a + b * (g + 1) + (extra or {}).get(g + 1, 0.0),
                draft_forward_calls=g,
            )
        )
    return used


def test_theory_policy_follows_the_bound_when_verification_is_free() -> None:
    high = TheoryGamma(start=2)
    used = _simulate(high, keep=True, draft=0.01, a=0.1, b=0.0)  # every draft kept, c = 0.1
    assert high.cost_ratio == pytest.approx(0.1) and high.verify_ratio(8) == pytest.approx(1.0)
    assert used[:2] == [2, 0]  # start, then a 1-token pass to learn the cost line
    assert used[-1] > 4 and used.count(0) <= 60 // 8 + 1


def test_theory_policy_falls_back_to_plain_steps_and_keeps_probing() -> None:
    low = TheoryGamma(start=6, probe_every=8)
    used = _simulate(low, keep=False, draft=0.01, a=0.1, b=0.0)  # nothing kept
    assert low.alpha < 0.1
    late = used[28:]  # alpha forgets (half-life 32 verified tokens): it quits by round 25
    assert late.count(0) >= len(late) * 6 // 8  # plain steps, as no gamma > 0 pays
    assert 1 <= sum(g > 0 for g in late) <= len(late) // 8 + 1  # but alpha is still re-measured


def test_theory_policy_keeps_probing_from_plain_steps_at_a_fixed_gap() -> None:
    low = TheoryGamma(start=6, probe_every=8)
    used = _simulate(low, keep=False, draft=0.01, a=0.1, b=0.0, rounds=120)  # nothing kept
    drafting = [i for i, g in enumerate(used) if g > 0 and i >= 30]  # once plain steps won
    assert [b - a for a, b in itertools.pairwise(drafting)] == [8] * (len(drafting) - 1)
    assert len(drafting) >= 10  # no back-off while plain steps look best


def test_theory_policy_alpha_follows_a_request_whose_agreement_recovers() -> None:
    """40 rounds the draft gets wrong, then 12 it gets right: recent verdicts weigh more."""
    gammas = {}
    for half_life in (32.0, math.inf):
        policy = TheoryGamma(start=4, probe_every=8, half_life=half_life)
        _simulate(policy, keep=False, draft=0.005, a=0.1, b=0.0, rounds=40)
        gammas[half_life] = _simulate(policy, keep=True, draft=0.005, a=0.1, b=0.0, rounds=12)
    assert gammas[32.0][-1] >= 3  # drafting longer again within 12 rounds
    assert gammas[math.inf][-1] == 1  # a cumulative alpha is still held down by the old rounds


def test_theory_policy_probes_less_once_its_choice_is_confirmed() -> None:
    settled = TheoryGamma(start=4, probe_every=8)
    used = _simulate(settled, keep=True, draft=0.01, a=0.1, b=0.0, rounds=250)
    probes = [i for i, g in enumerate(used) if g == 0][1:]  # the first is the cost line's start
    assert [b - a for a, b in itertools.pairwise(probes)] == [16, 32, 64, 128]
    assert settled.probe_gap == 256


def test_theory_policy_probes_again_soon_when_a_probe_overturns_its_choice() -> None:
    policy = TheoryGamma(start=4, probe_every=8)
    _simulate(policy, keep=True, draft=0.01, a=0.1, b=0.0, rounds=20)  # drafting pays: gap 16
    assert policy.probe_gap == 16
    for _ in range(50):  # as if 1-token passes had become nearly free
        policy.verify_seconds.add(1, 0.001)
    policy.probed_from, policy.since_probe = 4, 0  # a probe round (gamma 0) has just begun
    policy.update(_summary(0, 0, 0))  # the probe round ends: plain steps now look best
    assert policy.probe_gap == 8 and policy.next_gamma() == 0


def test_theory_policy_reuses_costs_measured_by_earlier_requests() -> None:
    shared = CostModel()
    first = _simulate(TheoryGamma(start=4, costs=shared), keep=True, draft=0.01, a=0.1, b=0.0)
    assert first[:2] == [4, 0] and shared.verify.passes(1) == first.count(0) == 4  # 1, 9, 25, 57
    second = _simulate(TheoryGamma(start=4, costs=shared), keep=True, draft=0.01, a=0.1, b=0.0)
    assert 0 not in second  # the 1-token pass is known: next probe after 8 * 2**3 rounds
    assert shared.verify.passes(1) == 4
    assert shared.draft_step_seconds == pytest.approx(0.01)
    fresh = _simulate(TheoryGamma(start=4), keep=True, draft=0.01, a=0.1, b=0.0)
    assert fresh == first  # without sharing, every request measures again


def test_theory_policy_prices_wide_verification() -> None:
    """A free drafter with a costly verification pass: the r = 1 bound would pick max_gamma."""
    policy = TheoryGamma(start=4, max_gamma=16)
    _simulate(policy, keep=True, draft=0.0, a=0.05, b=0.02, rounds=4, accept_at_most=3)
    tokens = policy.kept_by_position.expected_tokens()  # gamma > 0 is chosen with the estimates
    predicted = {g: policy.tokens_per_second(g) for g in range(17)}
    assert policy.verify_seconds.slope() == pytest.approx(0.02)
    assert policy.verify_ratio(4) == pytest.approx((0.05 + 0.02 * 5) / 0.07)
    brute = max(range(17), key=lambda g: tokens[g] / (0.05 + 0.02 * (g + 1)))
    assert max(predicted, key=predicted.__getitem__) == brute == 3  # a 4th draft is never kept


def test_theory_policy_drafts_long_when_agreement_comes_in_stretches() -> None:
    """3 rounds in 10 keep every draft, the others reject the first (0.3 of first drafts kept).

    Independent verdicts at alpha = 0.3 would make gamma = 1 best (at most 1.43 tokens a round);
    here a round drafting gamma emits 1 + 0.3 gamma on average, so long drafts pay.
    """
    policy = TheoryGamma(start=4, max_gamma=16)
    used = []
    for i in range(80):
        g = policy.next_gamma()
        used.append(g)
        kept = g if i % 10 in (0, 4, 7) else 0
        policy.update(
            RoundSummary(
                round=i,
                gamma=g,
                proposed=g,
                accepted=kept,
                emitted=kept + 1,
                draft_seconds=0.005 * g,
                target_seconds=0.1 + 0.01 * (g + 1),
                draft_forward_calls=g,
            )
        )
    first, second, *deeper = policy.kept_by_position.rates()
    assert first < 0.45 and second > 0.7 and min(deeper) > 0.85  # kept once the first is
    drafted = [g for g in used[40:] if g]  # the others are probes (plain steps)
    assert min(drafted) >= 8 and len(drafted) >= 36, used
    # the closed form at the first draft's alpha would have stayed at gamma = 1:
    speed = {
        g: expected_tokens_per_round(0.3, g) / (0.1 + 0.01 * (g + 1) + 0.005 * g)
        for g in range(1, 17)
    }
    assert max(speed, key=speed.__getitem__) == 1


def test_theory_policy_predicts_nothing_before_any_cost_is_measured() -> None:
    assert TheoryGamma(start=4).tokens_per_second(4) == 0.0  # no pass timed yet: no division


def test_a_pass_that_also_scored_the_prompt_is_not_a_verification_cost() -> None:
    costs = CostModel()
    with_prompt = dataclasses.replace(_summary(4, 4, 2), target_seconds=0.9, prompt_tokens=40)
    costs.add(with_prompt)
    assert not costs.verify.by_k and costs.draft_step_seconds == pytest.approx(0.01)
    costs.add(_summary(4, 4, 2))
    assert costs.verify(5) == pytest.approx(0.1)


def test_verification_costs_keep_a_bounded_window_of_recent_passes() -> None:
    costs = VerifyCost(window=8)
    for seconds in [0.5] * 100 + [0.1] * 8:  # the machine got faster
        costs.add(3, seconds)
    assert costs.passes(3) == 8 and costs.median(3) == pytest.approx(0.1)


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
) -> None:
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


def test_confidence_threshold_drafts_less_and_stays_exact(pair: PairFactory, tokenizer) -> None:
    target, draft = pair("gpt2")
    greedy = SamplingConfig(temperature=0)
    plain = autoregressive_generate(
        target, tokenizer, "abc", sampling=greedy, max_new_tokens=30, stop=()
    )
    sampling = SamplingConfig(temperature=1.0, seed=3)
    confident = ModelDrafter(draft, sampling, target.config.vocab_size, min_confidence=0.6)
    spec = speculative_generate(
        target,
        confident,
        tokenizer,
        "abc",
        sampling=sampling,
        speculation=SpeculationConfig(gamma=6, max_new_tokens=30),
        stop=(),
    )
    assert any(r.proposed < r.gamma for r in spec.rounds)
    greedy_drafter = ModelDrafter(draft, greedy, target.config.vocab_size, min_confidence=0.6)
    same = speculative_generate(
        target,
        greedy_drafter,
        tokenizer,
        "abc",
        sampling=greedy,
        speculation=SpeculationConfig(gamma=6, max_new_tokens=30),
        stop=(),
    )
    assert same.tokens == plain.tokens


@pytest.mark.parametrize("name", ["heuristic", "theory"])
@pytest.mark.parametrize(("variant_name", "rejects"), [("exact", False), ("accept_all", True)])
def test_dynamic_gamma_through_the_equivalence_suite(
    name: str, variant_name: str, rejects: bool
) -> None:
    """Family-wise alpha 0.01 (Holm), fixed seeds: exact under each policy, and accept-all under
    the same policy is rejected (the negative control)."""
    target, draft = random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)
    setting = next(s for s in default_settings() if s.name == "gamma=2 T=1")
    variant = next((m for m in MUTANTS if m.name == variant_name), EXACT_VARIANT)
    results = family_adjusted(
        check_setting(
            target,
            draft,
            [1, 2],
            setting,
            n=1200,
            alpha=0.01,
            variant=variant,
            make_policy=lambda: make_policy(name, 2),
        )
    )
    assert any(r.reject for r in results) == rejects, [(r.name, r.p_value) for r in results]


@pytest.mark.parametrize(("variant_name", "rejects"), [("exact", False), ("accept_all", True)])
def test_confidence_threshold_through_the_equivalence_suite(
    variant_name: str, rejects: bool
) -> None:
    """Family-wise alpha 0.01 (Holm): exact with a threshold, and accept-all is still caught."""
    target, draft = random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)
    setting = next(s for s in default_settings() if s.name == "gamma=4 T=1")
    variant = next((m for m in MUTANTS if m.name == variant_name), EXACT_VARIANT)

    def confident(sampling: SamplingConfig) -> ModelDrafter:
        return variant.drafter_cls(
            draft, sampling, 6, make_cache=variant.draft_cache, min_confidence=0.5
        )

    results = family_adjusted(
        check_setting(
            target,
            draft,
            [1, 2],
            setting,
            n=1200,
            alpha=0.01,
            variant=variant,
            make_drafter=confident,
        )
    )
    assert any(r.reject for r in results) == rejects, [(r.name, r.p_value) for r in results]


def test_ngram_drafter_through_the_public_api(pair: PairFactory, tokenizer) -> None:
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
        NgramDrafter(target.config.vocab_size),
        tokenizer,
        prompt,
        sampling=SamplingConfig(temperature=0),
        speculation=SpeculationConfig(gamma=4, max_new_tokens=20),
        stop=(),
    )
    assert spec.tokens == plain.tokens and spec.proposed > 0
    with pytest.raises(ValueError, match="no drafter given"):
        speculative_generate(target, None, tokenizer, prompt)


def test_theory_policy_measures_uneven_verification_costs() -> None:
    """As on this CPU: a 3-token pass costs more than a 5-token one; the policy learns that."""
    policy = TheoryGamma(start=4, max_gamma=8)
    # seconds added to the 2- and 3-token passes (more than doubling them): two drafts are always
    # kept and a third never, so gamma = 2 and 3 emit nearly as many tokens and the cost decides
    slow = {2: 0.2, 3: 0.2}
    used = _simulate(
        policy, keep=True, draft=0.005, a=0.05, b=0.03, rounds=40, extra=slow, accept_at_most=2
    )
    assert 3 in policy.verify_seconds.by_k  # the line made gamma = 2 look best: it was tried
    assert policy.verify_seconds(3) > policy.verify_seconds.line(3)  # its measured cost counts
    assert not {1, 2} & set(used[8:])  # and never used again once measured
