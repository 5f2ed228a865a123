"""The reused q buffer of the deterministic drafters: after any sequence of fills, each fill
equals the dense tensor built from scratch."""

from __future__ import annotations

import random

import pytest
import torch

from specviz.drafters.sparse_q import FIRST_ROWS, SparseRows


def dense(n: int, v: int, rows: list[int], cols: list[int], values: list[float]) -> torch.Tensor:
    """The same (n, v) tensor, built fresh."""
    q = torch.zeros(n, v)
    q[torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long)] = torch.tensor(
        values
    )
    return q


def buffers(v: int) -> list[SparseRows]:
    """A buffer written through memoryviews (the CPU's way) and one written with torch's index
    operations (the way elsewhere), both on the CPU."""
    direct, indexed = SparseRows(v, torch.device("cpu")), SparseRows(v, torch.device("cpu"))
    indexed.direct = False
    return [direct, indexed]


@pytest.mark.parametrize("way", [0, 1], ids=["memoryview", "index-ops"])
def test_each_proposal_equals_fresh_tensors_across_growth_and_shrinking(way: int) -> None:
    rng, v = random.Random(way), 50
    buffer = buffers(v)[way]
    for _ in range(300):
        n = rng.randint(1, 20)  # grows past its size and shrinks again
        kind = rng.choice(["fill", "chain", "tree"])
        if kind == "chain":
            tokens = [rng.randrange(v) for _ in range(n)]
            got_tokens, got = buffer.chain(tokens)
            rows, cols, values = list(range(n)), tokens, [1.0] * n
        else:
            entries = {
                (rng.randrange(n), rng.randrange(v)): rng.random()
                for _ in range(rng.randint(0, 30))
            }
            rows, cols = [r for r, _ in entries], [c for _, c in entries]
            values = list(entries.values())
            tokens = [rng.randrange(v) for _ in range(n - 1)]
            if kind == "fill":
                got = buffer.fill(n, rows, cols, values)
            else:
                got_tokens, got = buffer.tree(tokens, rows, cols, values)
        if kind != "fill":
            assert torch.equal(got_tokens, torch.tensor(tokens, dtype=torch.long))
        assert torch.equal(got, dense(n, v, rows, cols, values))
        assert int((buffer.buffer != 0).sum()) == len(values)  # nothing of an earlier fill left


def test_one_hot_rows() -> None:
    buffer = SparseRows(7, torch.device("cpu"))
    buffer.one_hot([3, 3, 6])
    q = buffer.one_hot([0, 5])
    assert torch.equal(q, torch.nn.functional.one_hot(torch.tensor([0, 5]), 7).float())
    assert buffer.one_hot([]).shape == (0, 7)


def test_the_buffer_is_allocated_once_for_proposals_up_to_its_first_rows() -> None:
    buffer = SparseRows(11, torch.device("cpu"))
    buffer.one_hot([1])
    first = buffer.buffer
    for k in range(1, FIRST_ROWS + 1):  # a chain that lengthens round by round
        buffer.one_hot([2] * k)
        assert buffer.buffer is first
    buffer.one_hot([3] * (FIRST_ROWS + 1))  # past it, it grows
    assert buffer.buffer is not first and buffer.buffer.shape[0] >= FIRST_ROWS + 1
