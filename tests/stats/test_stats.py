"""The equivalence suite: the real sampler passes every setting; every mutant is rejected.

Significance: each test at ALPHA = 0.01; p-values are Holm-adjusted across the whole family
of one run (family-wise error rate 0.01). Seeds are fixed, so every verdict is deterministic.
"""

from __future__ import annotations

import pytest
import torch

from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.decoding import SpeculativeDecoder
from specviz.core.events import Event, RoundSummary
from specviz.drafters.model import ModelDrafter
from specviz.stats.laws import EXACT_VARIANT, Variant, exact_law
from specviz.stats.mutants import MUTANTS, SHOWS_IN
from specviz.stats.suite import (
    acceptance_vs_logged,
    accepted_length_vs_theory,
    check_setting,
    constant_alpha,
    default_settings,
    family_adjusted,
    run_suite,
)
from specviz.stats.testing import estimated_power, goodness_of_fit, holm_adjust, two_sample
from specviz.stats.toy import constant_alpha_pair, random_pair

from ..conftest import PairFactory

ALPHA = 0.01
PROMPT = [1, 2]
SETTINGS = {s.name: s for s in default_settings(stop_id=0)}


@pytest.fixture(scope="module")
def toy() -> tuple[torch.nn.Module, torch.nn.Module]:
    return random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)


def test_exact_sampler_passes_every_setting(toy) -> None:
    target, draft = toy
    results = run_suite(target, draft, PROMPT, list(SETTINGS.values()), n=1500, alpha=ALPHA)
    failed = [(r.name, r.p_value) for r in results if r.reject]
    assert not failed, failed
    assert len(results) >= 4 * len(SETTINGS)  # joint, marginals, two-sample and KS per setting
    # power of each joint G-test against moving TV 0.05 between the two likeliest outcomes
    assert all(r.power >= 0.95 for r in results if "G-test" in r.name)


def test_each_setting_drafts_its_full_gamma_in_the_first_round(toy) -> None:
    """gamma is capped at the tokens still to write, so a short decode would test a smaller one."""
    target, draft = toy
    for setting in SETTINGS.values():
        decoder = SpeculativeDecoder(
            target,
            ModelDrafter(draft, setting.sampling, 6),
            PROMPT,
            sampling=setting.sampling,
            speculation=setting.speculation,
        )
        first = next(e for e in decoder.events() if isinstance(e, RoundSummary))
        gamma = setting.speculation.gamma
        expected = min(gamma, setting.speculation.max_new_tokens - 1)
        assert first.gamma == expected, setting.name
        if "max_new_tokens" not in setting.name:
            assert first.gamma == gamma, setting.name


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_each_mutant_is_rejected(toy, mutant: Variant) -> None:
    target, draft = toy
    setting = SETTINGS[SHOWS_IN[mutant.name]]
    results = family_adjusted(
        check_setting(target, draft, PROMPT, setting, n=3000, alpha=ALPHA, variant=mutant)
    )
    rejected = [r for r in results if r.reject]
    assert rejected, f"{mutant.name} slipped through: {[(r.name, r.p_value) for r in results]}"
    level = ALPHA / len(results)  # the strictest Holm threshold: power there bounds power below
    best = max(estimated_power(r, level) for r in rejected if r.df > 0)
    assert best >= 0.99, f"{mutant.name}: estimated power {best:.3f}"


def test_the_suite_is_not_fooled_at_temperature_one_by_warping_bugs(toy) -> None:
    """Harmless by design: at T=1 without filters, warping the draft only changes nothing."""
    target, draft = toy
    unwarped = next(m for m in MUTANTS if m.name == "target_unwarped")
    results = family_adjusted(
        check_setting(
            target,
            draft,
            PROMPT,
            SETTINGS["gamma=2 T=1"] if "gamma=2 T=1" in SETTINGS else SETTINGS["gamma=1 T=1"],
            n=800,
            alpha=ALPHA,
            variant=unwarped,
        )
    )
    assert not any(r.reject for r in results)


def test_tiny_hf_model_in_float64(pair: PairFactory) -> None:
    target, draft = pair("gpt2")
    prompt = [20, 8, 5, 27]
    setting = SETTINGS["gamma=4 T=1"]
    exact = family_adjusted(check_setting(target, draft, prompt, setting, n=600, alpha=ALPHA))
    assert not any(r.reject for r in exact), [(r.name, r.p_value) for r in exact]
    law = exact_law(target, prompt, 3, setting.sampling)
    assert abs(sum(law.values()) - 1) < 1e-9
    broken = next(m for m in MUTANTS if m.name == "accept_all")
    caught = family_adjusted(
        check_setting(target, draft, prompt, setting, n=600, alpha=ALPHA, variant=broken)
    )
    assert any(r.reject for r in caught)


def _runs(
    target, draft, sampling: SamplingConfig, gamma: int, n: int, variant: Variant = EXACT_VARIANT
) -> list[list[Event]]:
    runs = []
    for seed in range(n):
        seeded = SamplingConfig(temperature=sampling.temperature, seed=seed)
        drafter = variant.drafter_cls(draft, seeded, 6)
        decoder = SpeculativeDecoder(
            target,
            drafter,
            PROMPT,
            sampling=seeded,
            speculation=SpeculationConfig(gamma=gamma, max_new_tokens=4 * (gamma + 1)),
            rule=variant.rule,
        )
        runs.append(list(decoder.events()))
    return runs


def test_acceptance_rate_matches_logged_alpha(toy) -> None:
    target, draft = toy
    sampling = SamplingConfig(temperature=1.0)
    p_exact = holm_adjust(acceptance_vs_logged(_runs(target, draft, sampling, 4, 300), 4))
    assert min(p_exact) >= ALPHA, p_exact
    accept_all = next(m for m in MUTANTS if m.name == "accept_all")
    p_broken = holm_adjust(
        acceptance_vs_logged(_runs(target, draft, sampling, 4, 300, accept_all), 4)
    )
    assert min(p_broken) < ALPHA


def test_mean_accepted_length_matches_theory_when_alpha_is_constant() -> None:
    target, draft = constant_alpha_pair(6, seed=1, sharpness=1.5, draft_noise=1.0)
    sampling = SamplingConfig(temperature=1.0)
    a = constant_alpha(target, draft, sampling, [3])
    assert a == pytest.approx(constant_alpha(target, draft, sampling, [4, 0, 5]), abs=1e-12)
    assert 0.3 < a < 0.95
    gamma = 4
    assert accepted_length_vs_theory(_runs(target, draft, sampling, gamma, 400), gamma, a) >= ALPHA
    same_u = next(m for m in MUTANTS if m.name == "same_uniform")
    broken = _runs(target, draft, sampling, gamma, 400, same_u)
    assert accepted_length_vs_theory(broken, gamma, a) < ALPHA


@pytest.mark.slow
def test_exact_sampler_passes_every_setting_at_large_n(toy) -> None:
    """N = 20000 per sampler and setting; run with `pytest -m slow` (~15 min on 2 cores)."""
    target, draft = toy
    results = run_suite(target, draft, PROMPT, list(SETTINGS.values()), n=20_000, alpha=ALPHA)
    assert not any(r.reject for r in results), [(r.name, r.p_value) for r in results if r.reject]


def test_every_kind_of_test_rejects_a_mutant_on_its_own(toy) -> None:
    """No test in the suite is one that cannot fail: each kind rejects accept-all by itself.

    N = 6000: the log-prob KS test is the weakest kind here; at N = 3000 its Holm p over three
    seeds was 0.026, 0.004 and 0.006 (marginal), at N = 6000 it was 3e-6, 2e-6 and 3e-5.
    """
    target, draft = toy
    accept_all = next(m for m in MUTANTS if m.name == "accept_all")
    results = family_adjusted(
        check_setting(
            target, draft, PROMPT, SETTINGS["gamma=4 T=1"], n=6000, alpha=ALPHA, variant=accept_all
        )
    )
    for kind in ("joint vs exact law", "position", "joint vs plain samples", "log-prob (KS)"):
        assert any(kind in r.name and r.reject for r in results), (
            kind,
            [(r.name, r.p_value) for r in results],
        )


def test_two_sample_with_a_single_outcome_is_not_an_error() -> None:
    """At T = 0 both samplers always write the same tokens: one cell, nothing to reject."""
    result = two_sample([(3, 1)] * 50, [(3, 1)] * 40, alpha=ALPHA)
    assert (result.p_value, result.reject, result.tv, result.df) == (1.0, False, 0.0, 0)


def test_goodness_of_fit_renormalises_a_float32_law_and_refuses_a_wrong_one() -> None:
    law = {(0,): 0.5 + 3e-7, (1,): 0.3, (2,): 0.2}  # float32 rounding
    outcomes = [(0,)] * 50 + [(1,)] * 30 + [(2,)] * 20
    assert goodness_of_fit(outcomes, law, alpha=ALPHA).p_value > 0.99
    with pytest.raises(ValueError, match=r"sum to 0\.9"):
        goodness_of_fit(outcomes, {(0,): 0.5, (1,): 0.4}, alpha=ALPHA)
