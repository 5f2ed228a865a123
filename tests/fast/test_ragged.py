"""The ragged lean batch cache: each row's logits are those of its own tokens alone, after any
rounds of feeding, rolling back, leaving and joining (float64 tiny Llama: equal to 1e-9)."""

from __future__ import annotations

import pytest
import torch

from specviz.batch.cache import BatchKVCache, admitted, batch_cache
from specviz.fast.lean import LeanWeights
from specviz.fast.ragged import RaggedLean

from ..conftest import VOCAB, PairFactory

TOL = {"rtol": 1e-9, "atol": 1e-9}


def fresh_logits(model, prefix: list[int]) -> torch.Tensor:
    """Logits (T, V) of prefix by a cache-free forward of transformers."""
    with torch.no_grad():
        return model(input_ids=torch.tensor([prefix])).logits[0]


def test_rows_after_ragged_rounds_score_their_own_tokens_alone(pair: PairFactory) -> None:
    target, _ = pair("llama")
    gen = torch.Generator().manual_seed(0)
    rows = [[3, 4, 5, 6, 7, 8], [9], [10, 11, 12]]
    cache = RaggedLean(LeanWeights.of(target), rows=3)
    cache.forward(rows, keep=1)
    for _ in range(10):  # each row feeds its own count of tokens (0 too), keeps a random prefix
        fed = [
            torch.randint(1, VOCAB, (int(n),), generator=gen).tolist()
            for n in torch.randint(0, 7, (3,), generator=gen)
        ]
        logits = cache.forward(fed, keep=3)  # (3, 3, V): each row's last (up to) 3, right-aligned
        for r, (row, new) in enumerate(zip(rows, fed, strict=True)):
            kept = min(3, len(new))
            if kept:
                expected = fresh_logits(target, row + new)[-kept:]
                torch.testing.assert_close(logits[r, 3 - kept :], expected, **TOL)
            assert not logits[r, : 3 - kept].any()  # nothing before a short row's tokens
        keep = [
            len(r) + int(torch.randint(0, len(f) + 1, (), generator=gen))
            for r, f in zip(rows, fed, strict=True)
        ]
        cache.crop(keep)
        rows = [(r + f)[:k] for r, f, k in zip(rows, fed, keep, strict=True)]
        assert cache.lengths == [len(r) for r in rows]


def test_rows_leave_and_join_prefilled_apart(pair: PairFactory) -> None:
    target, _ = pair("llama")
    cache = batch_cache(target)
    assert isinstance(cache, RaggedLean)
    cache.add_rows(3)
    cache.forward([[3, 4], [5, 6, 7], [8]])
    cache.keep_rows([2, 0])
    joining = cache.empty()
    joining.add_rows(2)
    joining.forward([[6, 7, 8, 9], [2]], keep=1)
    cache.join_rows(joining)
    logits = cache.forward([[9], [10], [1], [1]], keep=1)[:, -1]
    for row, context in enumerate([[8, 9], [3, 4, 10], [6, 7, 8, 9, 1], [2, 1]]):
        torch.testing.assert_close(logits[row], fresh_logits(target, context)[-1], **TOL)
    assert cache.lengths == [2, 3, 5, 2]
    cache.keep_rows([])
    assert cache.rows == 0 and cache.lengths == []


def test_joining_rows_ride_in_the_next_pass(pair: PairFactory) -> None:
    target, _ = pair("llama")
    cache = batch_cache(target)
    cache.add_rows(2)
    cache.forward([[3, 4], [5, 6, 7]])
    assert admitted(cache, [[6, 7, 8, 9], [2]]) == [0, 0]  # nothing run for them yet
    assert cache.lengths == [2, 3, 0, 0]
    logits = cache.forward([[9], [], [6, 7, 8, 9, 1], [2, 1]], keep=2)
    for row, context in [(0, [3, 4, 9]), (2, [6, 7, 8, 9, 1]), (3, [2, 1])]:
        torch.testing.assert_close(logits[row, -1], fresh_logits(target, context)[-1], **TOL)
    torch.testing.assert_close(logits[2, 0], fresh_logits(target, [6, 7, 8, 9])[-1], **TOL)
    assert cache.lengths == [3, 3, 5, 2]


def test_batch_cache_is_lean_where_lean_runs_the_model_and_transformers_elsewhere(
    pair: PairFactory,
) -> None:
    llama, _ = pair("llama")
    gpt2, _ = pair("gpt2")
    weights = LeanWeights.of(llama)
    shared = batch_cache(llama, weights)
    assert isinstance(shared, RaggedLean) and shared.weights is weights
    assert isinstance(batch_cache(gpt2), BatchKVCache)


def test_bad_shapes_and_foreign_rows_are_refused(pair: PairFactory) -> None:
    target, _ = pair("llama")
    with pytest.raises(ValueError, match="cannot have -1 rows"):
        RaggedLean(LeanWeights.of(target), rows=-1)
    cache = RaggedLean(LeanWeights.of(target), rows=2)
    with pytest.raises(ValueError, match="1 rows of tokens for a cache of 2 rows"):
        cache.forward([[1]])
    with pytest.raises(ValueError, match="3 lengths"):
        cache.crop([1, 1, 1])
    with pytest.raises(ValueError, match="same weights"):
        cache.join_rows(RaggedLean(LeanWeights.of(target), rows=1))
