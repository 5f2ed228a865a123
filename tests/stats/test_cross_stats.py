"""The equivalence suite for drafting across tokenizers: cross (and cross:text) keep the
target's law; each cross-tokenizer mutant (tests/stats/cross_mutants.py) is rejected with power.

Pair: a character-level target (33 tokens, so the exact law of 3 tokens is enumerated) and a
draft whose BPE over the same characters has merges of its own (128 tokens, 33 shared).
Significance: each test at ALPHA = 0.01, Holm-adjusted across one run's tests. Seeds are fixed
(0 .. n - 1 for the speculative sampler), so every verdict is deterministic.
"""

from __future__ import annotations

from typing import Any

import pytest

from specviz.core.config import SamplingConfig
from specviz.drafters.cross_text import CrossTextDrafter
from specviz.drafters.cross_tli import CrossTLIDrafter
from specviz.drafters.cross_vocab import CrossTokenizers, cross_tokenizers
from specviz.stats.suite import check_setting, family_adjusted
from specviz.stats.testing import estimated_power

from ..drafters.cross_pairs import char, char_bpe, tiny_llama
from .cross_mutants import CROSS_MUTANTS, CROSS_SHOWS_IN, CrossMutant, cross_settings

ALPHA = 0.01
SETTINGS = {s.name: s for s in cross_settings()}


@pytest.fixture(scope="module")
def cross() -> tuple[Any, Any, CrossTokenizers, list[int]]:
    """(target, draft, tokenizers, prompt ids): a sharp target, a soft draft."""
    tt, dt = char(), char_bpe(128)
    pair = cross_tokenizers(tt, dt, target_vocab=len(tt), draft_vocab=len(dt))
    assert pair.shared.shared == len(tt) < len(dt)
    target, draft = tiny_llama(len(tt), 1, scale=2.0), tiny_llama(len(dt), 2, scale=1.0)
    return target, draft, pair, tt.encode("the c")


@pytest.mark.parametrize("name", list(SETTINGS))
def test_cross_tli_keeps_the_targets_joint_law(cross: Any, name: str) -> None:
    target, draft, pair, prompt = cross

    def make(sampling: SamplingConfig) -> CrossTLIDrafter:
        return CrossTLIDrafter(draft, sampling, pair)

    results = family_adjusted(
        check_setting(target, draft, prompt, SETTINGS[name], n=1000, alpha=ALPHA, make_drafter=make)
    )
    assert not any(r.reject for r in results), [(r.name, r.p_value) for r in results]
    assert any("joint vs exact law" in r.name for r in results)  # the law was enumerated
    joint = next(r for r in results if "joint vs exact law" in r.name)
    assert joint.power >= 0.8, joint.power  # against TV 0.05 moved between the likeliest


def test_cross_text_keeps_the_targets_joint_law_under_sampling(cross: Any) -> None:
    """Greedy drafting with one-hot q is exact at any temperature (docs/tokenizers.md)."""
    target, draft, pair, prompt = cross

    def make(_sampling: SamplingConfig) -> CrossTextDrafter:
        return CrossTextDrafter(draft, pair)

    setting = SETTINGS["gamma=2 T=0.7 top_p=0.8"]
    results = family_adjusted(
        check_setting(target, draft, prompt, setting, n=1000, alpha=ALPHA, make_drafter=make)
    )
    assert not any(r.reject for r in results), [(r.name, r.p_value) for r in results]


@pytest.mark.parametrize("mutant", CROSS_MUTANTS, ids=lambda m: m.name)
def test_each_cross_mutant_is_rejected(cross: Any, mutant: CrossMutant) -> None:
    target, draft, pair, prompt = cross

    def make(sampling: SamplingConfig) -> CrossTLIDrafter:
        return mutant.drafter_cls(draft, sampling, pair)

    setting = SETTINGS[CROSS_SHOWS_IN[mutant.name]]
    results = family_adjusted(
        check_setting(target, draft, prompt, setting, n=1000, alpha=ALPHA, make_drafter=make)
    )
    rejected = [r for r in results if r.reject]
    assert rejected, f"{mutant.name} slipped through: {[(r.name, r.p_value) for r in results]}"
    level = ALPHA / len(results)  # the strictest Holm threshold: power there bounds power below
    best = max(estimated_power(r, level) for r in rejected if r.df > 0)
    print(f"{mutant.name}: estimated power {best:.4f} at level {level:.4f}")
    assert best >= 0.99, f"{mutant.name}: estimated power {best:.3f}"
