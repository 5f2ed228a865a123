"""Batched speculative decoding: each row has its prompt's plain law, and rows are independent.

Significance: every test at ALPHA = 0.01; p-values are Holm-adjusted across each family (one
check_batch_setting run: every row's law tests and every pair's independence tests), so the
family-wise error rate is 0.01. Seeds are fixed, so every verdict is deterministic. Each
configuration the exact decoder passes is one a mutant of it fails, with estimated power >= 0.99
(computed as in tests/stats/test_stats.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest
import torch

from specviz.batch.decoding import BatchSpeculativeDecoder
from specviz.batch.drafters import BatchDrafter, build_batch_drafter
from specviz.batch.gamma import GammaByRows
from specviz.batch.rule import EXACT_BATCH, BatchRule
from specviz.core.events import RoundSummary
from specviz.stats.laws import speculative_sampler
from specviz.stats.suite import default_settings, family_adjusted
from specviz.stats.testing import TestResult as Result
from specviz.stats.testing import estimated_power
from specviz.stats.toy import REPEATING_PROMPT, MarkovLM, random_pair

from ..conftest import PairFactory
from .law_suite import (
    batch_sampler,
    check_batch_setting,
    independence,
    row_seeds,
)
from .mutants import CACHE_CUT_TO_OTHER_ROW, MUTANTS, BatchMutant

ALPHA = 0.01
SETTINGS = {s.name: s for s in default_settings(stop_id=0)}


@dataclass(frozen=True)
class Config:
    """A setting of the suite, the batch's prompts (one per row) and the number of batches."""

    setting: str
    prompts: tuple[tuple[int, ...], ...]
    n: int


UNEVEN = ((1, 2), (3, 1, 4, 2, 5))  # rows of different lengths: caches and rounds differ
CONFIGS = {
    "B=4 gamma=4 T=1": Config("gamma=4 T=1", (*UNEVEN, (4,), (2, 2, 5, 1, 3, 4)), 500),
    "B=2 gamma=2 T=0.7 top_p=0.8": Config("gamma=2 T=0.7 top_p=0.8", UNEVEN, 500),
    "B=2 gamma=4 EOS in round": Config("gamma=4 EOS in round", UNEVEN, 500),
    "B=2 one prompt gamma=4 T=1": Config("gamma=4 T=1", ((1, 2), (1, 2)), 500),
}
# The configuration each mutant is run in, and the test that must catch it there.
SHOWS_IN = {
    "rejection_truncates_rows": ("B=2 gamma=2 T=0.7 top_p=0.8", "vs exact law"),
    "shared_uniform": ("B=2 one prompt gamma=4 T=1", "rows 0,1: first tokens"),
    "cache_cut_to_other_row": ("B=2 gamma=2 T=0.7 top_p=0.8", "vs exact law"),
}


Pair = tuple[MarkovLM, MarkovLM]


@pytest.fixture(scope="module")
def toy() -> Pair:
    return random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)


def _check(
    target: Any,
    draft: Any,
    config: Config,
    batch_rule: BatchRule = EXACT_BATCH,
    **kwargs: Any,
) -> list[Result]:
    """The family of tests of one configuration, Holm-adjusted."""
    return family_adjusted(
        check_batch_setting(
            target,
            draft,
            [list(p) for p in config.prompts],
            SETTINGS[config.setting],
            n=config.n,
            alpha=ALPHA,
            batch_rule=batch_rule,
            **kwargs,
        )
    )


def _failed(results: list[Result]) -> list[tuple[str, float]]:
    return [(r.name, r.p_value) for r in results if r.reject]


def _best_power(results: list[Result], kind: str) -> float:
    """The best estimated power among the rejecting tests of that kind, at the strictest Holm
    threshold (power there bounds the power of the family below)."""
    level = ALPHA / len(results)
    return max(
        (estimated_power(r, level) for r in results if r.reject and r.df > 0 and kind in r.name),
        default=0.0,
    )


@pytest.mark.parametrize("name", CONFIGS)
def test_exact_batch_decoder_passes(toy: Pair, name: str) -> None:
    target, draft = toy
    config = CONFIGS[name]
    results = _check(target, draft, config)
    assert not _failed(results), _failed(results)
    rows = len(config.prompts)
    assert sum("vs exact law" in r.name for r in results) == rows  # the toy law is enumerated
    assert sum("vs plain samples" in r.name for r in results) == rows
    assert sum("rows " in r.name for r in results) == rows * (rows - 1)  # 2 per pair


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_each_batch_mutant_is_rejected(toy: Pair, mutant: BatchMutant) -> None:
    target, draft = toy
    config_name, caught_by = SHOWS_IN[mutant.name]
    results = _check(target, draft, CONFIGS[config_name], mutant.rule)
    assert _failed(results), f"{mutant.name} slipped through"
    best = _best_power(results, caught_by)
    assert best >= 0.99, f"{mutant.name}: estimated power {best:.3f} ({_failed(results)})"
    if mutant.name == "shared_uniform":  # each row's law stays the target's: only rows couple
        assert all(r.name.split(": ")[1].startswith("rows ") for r in results if r.reject)


@pytest.mark.parametrize("name", ["ngram", "suffix"])
def test_lookup_batch_drafter_passes_and_its_cache_mixup_is_caught(toy: Pair, name: str) -> None:
    """A drafter without a model (n-gram lookup; suffix decoding, its rows sharing one memory
    that every finished row feeds) in a batch: exact, and the cache mix-up is caught."""
    target, draft = toy
    config = Config("gamma=4 T=1", (REPEATING_PROMPT, REPEATING_PROMPT[5:]), 300)

    def lookup_drafter() -> BatchDrafter:
        return build_batch_drafter(name, target=target, draft=None)

    exact = _check(target, draft, config, make_drafter=lookup_drafter)
    assert not _failed(exact), _failed(exact)
    broken = _check(target, draft, config, CACHE_CUT_TO_OTHER_ROW, make_drafter=lookup_drafter)
    assert _best_power(broken, "vs exact law") >= 0.99, _failed(broken)
    prompts = [list(p) for p in config.prompts]
    setting = SETTINGS[config.setting]
    decoder = BatchSpeculativeDecoder(
        target,
        lookup_drafter(),
        prompts,
        sampling=setting.sampling,
        speculation=setting.speculation,
    )
    first = [e for e in decoder.events() if isinstance(e, RoundSummary) and e.round == 0]
    assert sorted(e.row for e in first) == [0, 1]
    assert all(e.proposed > 0 for e in first)  # lookup fired in every row


def test_rows_with_gamma_capped_by_the_batch_size_keep_their_law(toy: Pair) -> None:
    """A γ cap that changes as rows end (EOS in round: rows leave at different rounds; 3 rows
    draft 1, 2 draft 2, one alone 4): each row keeps its prompt's law, and the cache mix-up is
    caught in the same configuration with estimated power >= 0.99."""
    target, draft = toy
    cap = GammaByRows(((1, 4), (2, 2), (3, 1)))
    config = Config("gamma=4 EOS in round", (*UNEVEN, (4,)), 500)
    exact = _check(target, draft, config, gamma_cap=cap)
    assert not _failed(exact), _failed(exact)
    broken = _check(target, draft, config, CACHE_CUT_TO_OTHER_ROW, gamma_cap=cap)
    assert _best_power(broken, "vs exact law") >= 0.99, _failed(broken)
    setting = SETTINGS[config.setting]
    drafted = set()
    for seed in range(20):  # the cap does change within these decodes
        decoder = BatchSpeculativeDecoder(
            target,
            build_batch_drafter("model", target=target, draft=draft),
            [list(p) for p in config.prompts],
            sampling=replace(setting.sampling, seed=seed),
            speculation=setting.speculation,
            stop_ids=setting.stop_ids,
            gamma_cap=cap,
        )
        summaries = [e for e in decoder.events() if isinstance(e, RoundSummary)]
        assert all(e.gamma == 1 for e in summaries if e.round == 0)
        drafted |= {e.gamma for e in summaries}
    assert {1, 2} <= drafted


def test_tiny_llama_rows_are_exact_and_a_cache_mixup_is_caught(pair: PairFactory) -> None:
    """float64 tiny Llama, vocabulary 33: the joint law of 3 tokens is enumerated per row."""
    target, draft = pair("llama")
    config = Config("gamma=2 T=1", ((20, 8, 5, 27, 9), (3, 14)), 200)
    exact = _check(target, draft, config)
    assert not _failed(exact), _failed(exact)
    assert sum("vs exact law" in r.name for r in exact) == 2
    broken = _check(target, draft, config, CACHE_CUT_TO_OTHER_ROW)
    assert _best_power(broken, "vs exact law") >= 0.99, _failed(broken)


def test_each_row_is_its_prompt_decoded_alone_with_its_own_seed(toy: Pair) -> None:
    """Row r of batch seed s writes what prompt r alone writes with seed s * B + r, so rows
    never share a seed (and are independent because each is a function of its own seed)."""
    target, draft = toy
    prompts = [[1, 2], [3, 1, 4, 2, 5], [4]]
    setting = SETTINGS["gamma=4 EOS in round"]
    spec: dict[str, Any] = dict(
        sampling=setting.sampling,
        speculation=setting.speculation,
        k=setting.k,
        stop_ids=setting.stop_ids,
    )
    batch = batch_sampler(target, draft, prompts, **spec)
    alone = [speculative_sampler(target, draft, p, **spec) for p in prompts]
    for seed in range(20):
        seeds = row_seeds(seed, len(prompts))
        assert batch(seed) == tuple(a(s) for a, s in zip(alone, seeds, strict=True))
    assert len({s for seed in range(20) for s in row_seeds(seed, 3)}) == 60


def test_independence_rejects_coupled_pairs_and_passes_independent_ones() -> None:
    gen = torch.Generator().manual_seed(0)
    a = torch.randint(0, 4, (600,), generator=gen).tolist()
    b = torch.randint(0, 4, (600,), generator=gen).tolist()
    assert not independence(a, b, alpha=ALPHA).reject
    coupled = [x if i % 2 else y for i, (x, y) in enumerate(zip(a, b, strict=True))]
    assert independence(a, coupled, alpha=ALPHA).reject
    one_value = independence(a, [0] * 600, alpha=ALPHA)
    assert (one_value.p_value, one_value.df) == (1.0, 0)


def test_bad_input_is_refused_before_any_decoding(toy: Pair) -> None:
    target, draft = toy
    setting = SETTINGS["gamma=4 T=1"]
    spec: dict[str, Any] = dict(sampling=setting.sampling, speculation=setting.speculation, k=3)
    with pytest.raises(ValueError, match="at least one prompt"):
        batch_sampler(target, draft, [], **spec)
    with pytest.raises(ValueError, match=r"prompts \[1\] are empty"):
        batch_sampler(target, draft, [[1], []], **spec)
    with pytest.raises(ValueError, match="at least 2 batches"):
        check_batch_setting(target, draft, [[1, 2]], setting, n=1, alpha=ALPHA)
    with pytest.raises(ValueError, match=r"pairs \[\(0, 2\)\] are not two different rows"):
        check_batch_setting(target, draft, [[1], [2]], setting, n=9, alpha=ALPHA, pairs=[(0, 2)])
    with pytest.raises(ValueError, match="one non-zero size"):
        independence([1, 2], [1], alpha=ALPHA)
