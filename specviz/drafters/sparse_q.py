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
    """A (rows, V) buffer of zeros, filled at a few entries per round and cleared the same way.

    Entries are addressed in the buffer's flat view (row * V + column): one index tensor a
    fill, which index_fill_ and index_copy_ take without the cost of 2-d advanced indexing.
    """

    def __init__(self, vocab_size: int, device: torch.device) -> None:
        """An empty buffer of vocab_size columns on device; it grows to the rows asked for."""
        self.vocab_size, self.device = vocab_size, device
        self.buffer = torch.zeros(0, vocab_size, device=device)
        self.flat = self.buffer.view(-1)
        self.entries = torch.empty(0, dtype=torch.long, device=device)  # the last fill's

    def _clear(self, n: int) -> None:
        """Room for n rows, with the last fill's entries (and nothing else) set back to 0."""
        if n > self.buffer.shape[0]:
            size = max(n, 2 * self.buffer.shape[0], FIRST_ROWS)
            self.buffer = torch.zeros(size, self.vocab_size, device=self.device)
            self.flat = self.buffer.view(-1)
        else:
            self.flat.index_fill_(0, self.entries, 0.0)

    def fill(self, n: int, rows: list[int], cols: list[int], values: list[float]) -> Tensor:
        """(n, V): zeros but values at (rows[i], cols[i]), each entry at most once; a view
        valid until the next fill."""
        v = self.vocab_size
        self._clear(n)
        self.entries = torch.tensor(
            [r * v + c for r, c in zip(rows, cols, strict=True)],
            dtype=torch.long,
            device=self.device,
        )
        self.flat.index_copy_(0, self.entries, torch.tensor(values, device=self.device))
        return self.buffer[:n]

    def chain(self, tokens: list[int]) -> tuple[Tensor, Tensor]:
        """tokens as a tensor (k,) and their one-hot rows (k, V), both from one tensor made
        of the tokens and their entries (a round's torch calls are most of its cost)."""
        k, v = len(tokens), self.vocab_size
        entries = [i * v + t for i, t in enumerate(tokens)]
        both = torch.tensor(tokens + entries, dtype=torch.long, device=self.device)
        self._clear(k)
        self.entries = both[k:]
        self.flat.index_fill_(0, self.entries, 1.0)
        return both[:k], self.buffer[:k]

    def one_hot(self, tokens: list[int]) -> Tensor:
        """(k, V) one-hot rows at tokens (k,)."""
        return self.chain(tokens)[1]
