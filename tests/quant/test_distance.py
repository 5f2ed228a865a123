"""Distances from a reference model: TV on hand-built laws, greedy agreement, and both on tiny
models (0 against itself and for speculation at T = 0 against its own target, > 0 otherwise)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch

from specviz.api import autoregressive_generate, speculative_generate
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.quant.distance import (
    greedy_agreement,
    mean_total_variation,
    next_token_probs,
    total_variation,
)

from ..conftest import PairFactory, perturbed_copy

PROMPT = [3, 5, 7, 9, 11, 13]


def test_total_variation_on_hand_built_laws() -> None:
    p = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.2, 0.3, 0.5]])
    q = torch.tensor([[0.0, 0.5, 0.5], [0.0, 1.0, 0.0], [0.2, 0.3, 0.5]])
    assert total_variation(p, q).tolist() == pytest.approx([0.5, 1.0, 0.0])
    assert total_variation(p, q).shape == (3,)
    # a shorter vocabulary is zero-padded: [1, 0] against [0.5, 0.25, 0.25]
    assert float(total_variation(torch.tensor([1.0, 0.0]), torch.tensor([0.5, 0.25, 0.25]))) == 0.5


def test_total_variation_is_the_largest_gap_over_every_set_of_tokens() -> None:
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        p = torch.rand(6, generator=gen, dtype=torch.float64)
        q = torch.rand(6, generator=gen, dtype=torch.float64)
        p, q = p / p.sum(), q / q.sum()
        subsets = itertools.chain.from_iterable(
            itertools.combinations(range(6), k) for k in range(7)
        )
        largest = max(abs(float(p[list(s)].sum() - q[list(s)].sum())) for s in subsets)
        assert float(total_variation(p, q)) == pytest.approx(largest, abs=1e-12)


def test_total_variation_refuses_laws_over_different_positions() -> None:
    with pytest.raises(ValueError, match="different positions"):
        total_variation(torch.ones(2, 4) / 4, torch.ones(3, 4) / 4)


def test_greedy_agreement_counts_positions_and_the_first_divergence() -> None:
    same = greedy_agreement([1, 2, 3], [1, 2, 3])
    assert (same.matched, same.compared, same.first_divergence, same.rate) == (3, 3, None, 1.0)
    differ = greedy_agreement([1, 2, 3, 4], [1, 2, 9, 4])
    assert (differ.matched, differ.first_divergence, differ.rate) == (3, 2, 0.75)
    stopped = greedy_agreement([1, 2, 3, 4], [1, 2])  # the other stopped early: a mismatch
    assert (stopped.matched, stopped.compared, stopped.first_divergence) == (2, 4, 2)
    longer = greedy_agreement([1], [1, 5, 6])
    assert (longer.matched, longer.compared, longer.first_divergence) == (1, 3, 1)
    assert greedy_agreement([], []).rate == 1.0


def test_next_token_probs_are_laws_at_each_continuation_position(pair: PairFactory) -> None:
    target, _ = pair("llama")
    ids = [*PROMPT, 4, 8, 2]
    probs = next_token_probs(target, ids, len(PROMPT))
    assert probs.shape == (3, target.config.vocab_size)
    assert torch.allclose(probs.sum(-1), torch.ones(3, dtype=probs.dtype))
    with torch.no_grad():  # position i's law is the model's given ids[:i]
        last = target(input_ids=torch.tensor([ids[:-1]])).logits[0, -1].float().softmax(-1)
    assert torch.allclose(probs[-1], last, atol=1e-6)
    for bad in (0, len(ids) + 1):
        with pytest.raises(ValueError, match="start must be"):
            next_token_probs(target, ids, bad)


def _sampled(model: Any, tokenizer: Any) -> list[int]:
    result = autoregressive_generate(
        model, tokenizer, PROMPT, sampling=SamplingConfig(temperature=1.0, seed=0),
        max_new_tokens=12, stop=(),
    )  # fmt: skip
    return [*PROMPT, *result.tokens]


def test_mean_tv_is_zero_for_the_target_itself_and_positive_for_a_perturbed_model(
    pair: PairFactory, tokenizer: Any
) -> None:
    target, draft = pair("llama")
    ids = _sampled(target, tokenizer)
    assert mean_total_variation(target, target, ids, len(PROMPT)) == 0.0
    slightly = perturbed_copy(target, seed=7, noise=0.01)
    near = mean_total_variation(target, slightly, ids, len(PROMPT))
    far = mean_total_variation(target, draft, ids, len(PROMPT))  # noise 0.05
    assert 0.0 < near < far < 1.0
    assert mean_total_variation(target, draft, ids, len(ids)) == 0.0  # no position to compare


def test_speculation_at_t0_agrees_with_its_own_target_and_a_perturbed_model_does_not(
    pair: PairFactory, tokenizer: Any
) -> None:
    target, draft = pair("llama")
    greedy = SamplingConfig(temperature=0.0)
    plain = autoregressive_generate(
        target, tokenizer, PROMPT, sampling=greedy, max_new_tokens=30, stop=()
    ).tokens
    spec = speculative_generate(
        target, draft, tokenizer, PROMPT, sampling=greedy,
        speculation=SpeculationConfig(gamma=4, max_new_tokens=30), stop=(),
    )  # fmt: skip
    assert 0 < spec.accepted < spec.proposed  # drafts were kept and rejected: a real check
    agree = greedy_agreement(plain, spec.tokens)
    assert (agree.rate, agree.first_divergence) == (1.0, None)
    other = autoregressive_generate(
        perturbed_copy(target, seed=7, noise=0.3), tokenizer, PROMPT, sampling=greedy,
        max_new_tokens=30, stop=(),
    ).tokens  # fmt: skip
    moved = greedy_agreement(plain, other)  # the negative control: it must see a difference
    assert moved.rate < 1.0 and moved.first_divergence is not None
