"""A reused buffer for the q_draft of drafters whose proposals are deterministic.

A deterministic drafter (n-gram lookup, suffix decoding) puts all of a row's mass on one token,
or on a node's few children: q_draft (k, V) is almost all zeros. Allocating and zeroing a fresh
k × V tensor each round (k = 16, V = 49,152: 3 MB) costs as much as the suffix lookup itself.
SparseRows keeps one zero buffer per drafter and, each round, clears only the entries the last
round set before writing the new ones: O(entries), not O(k × V).

The buffer starts at FIRST_ROWS rows (more if the first proposal needs them) rather than
growing from one row by doubling: a drafter lives for one request, and each larger block the
doubling asked for was memory the allocator had just mapped, whose pages fault as they are
zeroed, several times a request; one block of the same size each request is reused instead.

The q_draft it returns is a view of that buffer: it is valid until the drafter's next proposal,
which rewrites it. The decoders read a Draft within its round (specviz.core.drafter.Draft).
"""

from __future__ import annotations

import torch
from torch import Tensor

FIRST_ROWS = 17  # a suffix chain of 16 tokens (its default cap), or 16 tree nodes and the root


class SparseRows:
    """A (rows, V) buffer of zeros, filled at a few entries per round and cleared the same way."""

    def __init__(self, vocab_size: int, device: torch.device) -> None:
        """An empty buffer of vocab_size columns on device; it grows to the rows asked for."""
        self.vocab_size, self.device = vocab_size, device
        self.buffer = torch.zeros(0, vocab_size, device=device)
        self.rows = self.cols = torch.empty(0, dtype=torch.long, device=device)

    def fill(self, n: int, rows: list[int], cols: list[int], values: list[float]) -> Tensor:
        """(n, V): zeros but values at (rows[i], cols[i]); a view valid until the next fill."""
        if n > self.buffer.shape[0]:
            size = max(n, 2 * self.buffer.shape[0], FIRST_ROWS)
            self.buffer = torch.zeros(size, self.vocab_size, device=self.device)
        else:
            self.buffer[self.rows, self.cols] = 0.0  # the last fill's entries, nothing else
        self.rows = torch.tensor(rows, dtype=torch.long, device=self.device)
        self.cols = torch.tensor(cols, dtype=torch.long, device=self.device)
        self.buffer[self.rows, self.cols] = torch.tensor(values, device=self.device)
        return self.buffer[:n]

    def one_hot(self, tokens: list[int]) -> Tensor:
        """(k, V) one-hot rows at tokens (k,)."""
        k = len(tokens)
        return self.fill(k, list(range(k)), tokens, [1.0] * k)
