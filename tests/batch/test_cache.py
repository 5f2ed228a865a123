"""The batched cache after ragged rounds gives each row the logits of its prefix alone."""

from __future__ import annotations

import pytest
import torch

from specviz.batch.cache import BatchKVCache, admitted

from ..conftest import VOCAB, PairFactory


def fresh_logits(model, prefix: list[int]) -> torch.Tensor:
    """Next-token logits (V,) of prefix by a cache-free forward."""
    with torch.no_grad():
        return model(input_ids=torch.tensor([prefix])).logits[0, -1]


@pytest.mark.parametrize("arch", ["llama", "gpt2", "qwen2"])
def test_next_logits_after_ragged_rounds_equal_a_fresh_forward(pair: PairFactory, arch) -> None:
    target, _ = pair(arch)
    gen = torch.Generator().manual_seed(0)
    rows = [[3, 4, 5, 6, 7, 8], [9], [10, 11, 12]]
    cache = BatchKVCache(target, len(rows))
    cache.forward(rows, keep=1)
    squeezes: list[int] = []
    squeeze = cache._squeeze
    cache._squeeze = lambda: (squeezes.append(1), squeeze())[1]  # count the compactions
    for _ in range(10):  # a round: each row feeds its own count of tokens, keeps a random prefix
        fed = [
            torch.randint(1, VOCAB, (int(n),), generator=gen).tolist()
            for n in torch.randint(0, 7, (3,), generator=gen)
        ]
        cache.forward(fed)
        grown = [r + f for r, f in zip(rows, fed, strict=True)]
        keep = [
            len(r) + int(torch.randint(0, min(len(f), 2) + 1, (), generator=gen))
            for r, f in zip(rows, fed, strict=True)
        ]
        cache.crop(keep)
        rows = [g[:k] for g, k in zip(grown, keep, strict=True)]
        assert cache.lengths == [len(r) for r in rows]
        nxt = [[int(t)] for t in torch.randint(1, VOCAB, (3,), generator=gen)]
        logits = cache.forward(nxt, keep=1)[:, -1]  # (3, V)
        for r, (row, token) in enumerate(zip(rows, nxt, strict=True)):
            torch.testing.assert_close(
                logits[r], fresh_logits(target, row + token), rtol=1e-9, atol=1e-9
            )
        rows = [row + token for row, token in zip(rows, nxt, strict=True)]
    assert squeezes  # holes were squeezed out by the per-row gather at least once


def test_holes_are_masked_not_zeroed(pair: PairFactory) -> None:
    """A rejected slot stays in the tensors until squeezed; only the mask keeps it out."""
    target, _ = pair("llama")
    cache = BatchKVCache(target, 2)
    cache.forward([[3, 4, 5, 6], [7, 8, 9, 10]])
    cache.crop([4, 2])  # row 1 keeps 2 of 4: two holes, fewer than half the slots
    assert cache.valid.shape[1] == 4 and cache.lengths == [4, 2]
    logits = cache.forward([[11], [12]], keep=1)[:, -1]
    torch.testing.assert_close(logits[1], fresh_logits(target, [7, 8, 12]), rtol=1e-9, atol=1e-9)


def test_rows_leave_and_the_rest_keep_their_contexts(pair: PairFactory) -> None:
    target, _ = pair("llama")
    cache = BatchKVCache(target, 3)
    cache.forward([[3, 4], [5, 6, 7], [8]])
    cache.keep_rows([2, 0])
    logits = cache.forward([[9], [10]], keep=1)[:, -1]
    torch.testing.assert_close(logits[0], fresh_logits(target, [8, 9]), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(logits[1], fresh_logits(target, [3, 4, 10]), rtol=1e-9, atol=1e-9)


def test_rows_join_a_running_cache_and_the_last_leaving_empties_it(pair: PairFactory) -> None:
    target, _ = pair("llama")
    cache = BatchKVCache(target, 0)
    cache.add_rows(1)
    cache.forward([[3, 4, 5]], keep=1)
    cache.add_rows(2)  # two rows join a cache that holds the first row's three positions
    logits = cache.forward([[6], [8, 9], [2]], keep=1)[:, -1]
    for row, context in enumerate([[3, 4, 5, 6], [8, 9], [2]]):
        expected = fresh_logits(target, context)
        torch.testing.assert_close(logits[row], expected, rtol=1e-9, atol=1e-9)
    assert cache.lengths == [4, 2, 1]
    cache.keep_rows([])
    assert cache.rows == 0 and cache.valid.shape == (0, 0)


def test_rows_prefilled_apart_join_a_running_cache(pair: PairFactory) -> None:
    target, _ = pair("llama")
    cache = BatchKVCache(target, 2)
    cache.forward([[3, 4], [5]], keep=1)
    joining = BatchKVCache(target, 0)
    joining.add_rows(2)
    joining.forward([[6, 7, 8, 9], [2]], keep=1)  # more slots than the running cache
    cache.join_rows(joining)
    logits = cache.forward([[1], [1], [1], [1]], keep=1)[:, -1]
    for row, context in enumerate([[3, 4, 1], [5, 1], [6, 7, 8, 9, 1], [2, 1]]):
        expected = fresh_logits(target, context)
        torch.testing.assert_close(logits[row], expected, rtol=1e-9, atol=1e-9)
    empty = BatchKVCache(target, 1)  # nothing computed yet: the joining rows' layers are taken
    empty.join_rows(joining)
    assert empty.rows == 3 and empty.lengths == [0, 4, 1]


def test_joining_rows_are_prefilled_apart_where_the_cache_pads(pair: PairFactory) -> None:
    target, _ = pair("llama")
    cache = BatchKVCache(target, 1)
    cache.forward([[3, 4]], keep=1)
    assert admitted(cache, [[6, 7, 8], [2]]) == [3, 1] and cache.lengths == [2, 3, 1]
    logits = cache.forward([[1], [1], [1]], keep=1)[:, -1]
    for row, context in enumerate([[3, 4, 1], [6, 7, 8, 1], [2, 1]]):
        expected = fresh_logits(target, context)
        torch.testing.assert_close(logits[row], expected, rtol=1e-9, atol=1e-9)


def test_bad_shapes_are_refused(pair: PairFactory) -> None:
    target, _ = pair("llama")
    with pytest.raises(ValueError, match="cannot have -1 rows"):
        BatchKVCache(target, -1)
    cache = BatchKVCache(target, 2)
    with pytest.raises(ValueError, match="1 rows of tokens for a cache of 2 rows"):
        cache.forward([[1]])
    with pytest.raises(ValueError, match="3 lengths"):
        cache.crop([1, 1, 1])
