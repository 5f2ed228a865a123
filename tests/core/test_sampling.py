"""logits → probs: temperature, top-k, top-p, greedy; seeded draws."""

from __future__ import annotations

import torch

from specviz.core.config import SamplingConfig
from specviz.core.sampling import logits_to_probs, sample
from specviz.stats.testing import goodness_of_fit

LOGITS = torch.tensor([2.0, 1.0, 0.5, -1.0, -3.0], dtype=torch.float64)


def test_greedy_is_one_hot_argmax_without_nan() -> None:
    extreme = torch.tensor([1e30, -1e30, float("-inf"), 3.0], dtype=torch.float64)
    probs = logits_to_probs(extreme, SamplingConfig(temperature=0))
    assert torch.equal(probs, torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64))
    batch = logits_to_probs(torch.stack([LOGITS, -LOGITS]), SamplingConfig(temperature=0))
    assert batch.argmax(-1).tolist() == [0, 4] and torch.equal(
        batch.sum(-1), torch.ones(2).double()
    )


def test_temperature_scales_logits() -> None:
    for t in (0.5, 1.0, 1.5):
        probs = logits_to_probs(LOGITS, SamplingConfig(temperature=t))
        assert torch.allclose(probs, torch.softmax(LOGITS / t, -1), atol=1e-15)


def test_top_k_keeps_k_largest_and_renormalises() -> None:
    probs = logits_to_probs(LOGITS, SamplingConfig(top_k=2))
    expected = torch.softmax(LOGITS[:2], -1)
    assert torch.allclose(probs[:2], expected, atol=1e-15)
    assert probs[2:].abs().sum() == 0


def test_top_p_keeps_smallest_set_reaching_mass() -> None:
    logits = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64).log()
    assert torch.allclose(
        logits_to_probs(logits, SamplingConfig(top_p=0.7)),
        torch.tensor([0.625, 0.375, 0.0, 0.0], dtype=torch.float64),
    )
    assert torch.allclose(
        logits_to_probs(logits, SamplingConfig(top_p=0.9)),
        torch.tensor([0.5, 0.3, 0.15, 0.0], dtype=torch.float64) / 0.95,
    )
    # the top token always survives, even when it alone exceeds top_p
    assert logits_to_probs(logits, SamplingConfig(top_p=0.1)).tolist() == [1.0, 0.0, 0.0, 0.0]


def full_sort_nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """top-p by sorting the whole vocabulary: the reference for the partial sort."""
    ordered, order = probs.sort(dim=-1, descending=True)
    ordered = ordered.masked_fill(ordered.cumsum(-1) - ordered >= top_p, 0.0)
    kept = torch.zeros_like(probs).scatter_(-1, order, ordered)
    return kept / kept.sum(-1, keepdim=True)


def test_top_p_sorting_the_likeliest_only_keeps_what_a_full_sort_keeps() -> None:
    """Flat and peaked rows of a 49k vocabulary (the kept set from one token to thousands) and
    a top_p of 1 - 1e-9 (nearly the whole vocabulary): the same tokens, the same mass."""
    gen = torch.Generator().manual_seed(0)
    for spread in (0.1, 1.0, 3.0, 8.0):
        logits = torch.randn(4, 49152, generator=gen, dtype=torch.float64) * spread
        for top_p in (0.05, 0.5, 0.9, 0.99, 1 - 1e-9):
            got = logits_to_probs(logits, SamplingConfig(top_p=top_p))
            want = full_sort_nucleus(torch.softmax(logits, -1), top_p)
            assert torch.equal(got > 0, want > 0), (spread, top_p)
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-15)


def test_top_k_then_top_p_and_temperature_compose() -> None:
    cfg = SamplingConfig(temperature=2.0, top_k=3, top_p=0.8)
    probs = logits_to_probs(LOGITS, cfg)
    warm = torch.softmax(LOGITS[:3] / 2.0, -1)  # top-3 after temperature
    keep = 2 if warm[0] + warm[1] >= 0.8 else 3
    expected = torch.zeros(5, dtype=torch.float64)
    expected[:keep] = warm[:keep] / warm[:keep].sum()
    assert torch.allclose(probs, expected, atol=1e-15)


def test_low_precision_logits_become_float32_probs() -> None:
    probs = logits_to_probs(LOGITS.to(torch.bfloat16), SamplingConfig())
    assert probs.dtype == torch.float32 and abs(float(probs.sum()) - 1) < 1e-6


def test_sample_is_determined_by_the_generator() -> None:
    probs = torch.softmax(LOGITS, -1)
    draws = [sample(probs, torch.Generator().manual_seed(s)) for s in range(50)]
    again = [sample(probs, torch.Generator().manual_seed(s)) for s in range(50)]
    assert draws == again and len(set(draws)) > 1


def test_sample_follows_the_distribution_and_never_draws_zero_mass() -> None:
    """G-test at significance 0.001, fixed seed; negative control: the draws against a wrong law."""
    probs = torch.tensor([0.0, 0.2, 0.0, 0.5, 0.3, 0.0], dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)
    draws = [(sample(probs, generator),) for _ in range(4000)]
    assert {d[0] for d in draws} == {1, 3, 4}
    law = {(i,): float(p) for i, p in enumerate(probs.tolist()) if p > 0}
    assert not goodness_of_fit(draws, law, alpha=0.001).reject
    wrong = {(1,): 0.25, (3,): 0.45, (4,): 0.3}
    assert goodness_of_fit(draws, wrong, alpha=0.001).reject


def test_sample_at_the_edges_of_the_vocabulary() -> None:
    one_hot_last = torch.zeros(49_152)
    one_hot_last[-1] = 1.0
    one_hot_first = torch.zeros(49_152)
    one_hot_first[0] = 1.0
    generator = torch.Generator().manual_seed(1)
    assert {sample(one_hot_last, generator) for _ in range(50)} == {49_151}
    assert {sample(one_hot_first, generator) for _ in range(50)} == {0}
