"""A reused buffer for the q_draft of drafters whose proposals are deterministic.

A deterministic drafter (n-gram lookup, suffix decoding) puts all of a row's mass on one token,
or on a node's few children: q_draft (k, V) is almost all zeros. Allocating and zeroing a fresh
k × V tensor each round (k = 16, V = 49,152: 3 MB) costs as much as the suffix lookup itself.
SparseRows keeps one zero buffer per drafter and, each round, clears only the entries the last
round set before writing the new ones: O(entries), not O(k × V).

On the CPU the entries are written through a memoryview of the buffer, and the proposal's
tokens into a reused token buffer the same way; the (k,) and (k, V) views handed out are made
once per k. A round runs no torch operation: each torch call costs microseconds of dispatch,
and many more right after the target's pass, which leaves its code out of the processor's
caches, while a memoryview's item writes are the interpreter's own code. Elsewhere (a GPU)
the entries are written with index_fill_ and index_copy_ on the buffer's flat view.

The buffer starts at FIRST_ROWS rows (more if the first proposal needs them) rather than
growing from one row by doubling: a drafter lives for one request, and each larger block the
doubling asked for was memory the allocator had just mapped, whose pages fault as they are
zeroed, several times a request; one block of the same size each request is reused instead.

The tensors it returns are views of its buffers: they are valid until the drafter's next
proposal, which rewrites them. The decoders read a Draft within its round
(specviz.core.drafter.Draft).
"""

from __future__ import annotations

import torch
from torch import Tensor

FIRST_ROWS = 17  # a suffix chain of 16 tokens (its default cap), or 16 tree nodes and the root


class SparseRows:
    """A (rows, V) buffer of zeros, filled at a few entries per round and cleared the same way.

    Entries are addressed in the buffer's flat view (row * V + column). `entries` holds the last
    fill's, to be cleared at the next.
    """

    def __init__(self, vocab_size: int, device: torch.device) -> None:
        """An empty buffer of vocab_size columns on device; it grows to the rows asked for."""
        self.vocab_size, self.device = vocab_size, device
        self.direct = device.type == "cpu"  # write through memoryviews, not torch calls
        self.entries: list[int] = []
        self._grow(0)

    def _grow(self, rows: int) -> None:
        """A fresh zero buffer of rows rows (and a token buffer as long), with its views."""
        self.buffer = torch.zeros(rows, self.vocab_size, device=self.device)
        self.flat = self.buffer.view(-1)
        self.tokens = torch.zeros(rows, dtype=torch.long, device=self.device)
        self.views: dict[int, tuple[Tensor, Tensor]] = {}  # k -> (tokens[:k], buffer[:k])
        self.entries = []
        if self.direct:
            self.q_items = _floats(self.buffer)
            self.token_items = _ints(self.tokens)

    def _view(self, n: int) -> tuple[Tensor, Tensor]:
        """The first n tokens and rows (made once per n)."""
        views = self.views.get(n)
        if views is None:
            views = self.views[n] = (self.tokens[:n], self.buffer[:n])
        return views

    def _clear(self, n: int) -> None:
        """Room for n rows, with the last fill's entries (and nothing else) set back to 0."""
        if n > self.buffer.shape[0]:
            self._grow(max(n, 2 * self.buffer.shape[0], FIRST_ROWS))
        elif self.direct:
            items = self.q_items
            for entry in self.entries:
                items[entry] = 0.0
        elif self.entries:
            self.flat.index_fill_(0, self._index(self.entries), 0.0)

    def _index(self, entries: list[int]) -> Tensor:
        """entries as an index tensor on the buffer's device."""
        return torch.tensor(entries, dtype=torch.long, device=self.device)

    def fill(self, n: int, rows: list[int], cols: list[int], values: list[float]) -> Tensor:
        """(n, V): zeros but values at (rows[i], cols[i]), each entry at most once; a view
        valid until the next fill."""
        v = self.vocab_size
        self._clear(n)
        self.entries = [r * v + c for r, c in zip(rows, cols, strict=True)]
        if self.direct:
            items = self.q_items
            for entry, value in zip(self.entries, values, strict=True):
                items[entry] = value
        elif self.entries:
            values_t = torch.tensor(values, device=self.device)
            self.flat.index_copy_(0, self._index(self.entries), values_t)
        return self._view(n)[1]

    def chain(self, tokens: list[int]) -> tuple[Tensor, Tensor]:
        """tokens as a tensor (k,) and their one-hot rows (k, V): views valid until the next
        proposal."""
        k, v = len(tokens), self.vocab_size
        self._clear(k)
        self.entries = [i * v + t for i, t in enumerate(tokens)]
        if self.direct:
            items = self.q_items
            for entry in self.entries:
                items[entry] = 1.0
        elif tokens:
            self.flat.index_fill_(0, self._index(self.entries), 1.0)
        return self._tokens(tokens), self._view(k)[1]

    def tree(
        self, tokens: list[int], rows: list[int], cols: list[int], values: list[float]
    ) -> tuple[Tensor, Tensor]:
        """A tree's tokens as a tensor (N,) and its q (N+1, V), zeros but values at (rows[i],
        cols[i]) (as fill): views valid until the next proposal."""
        q = self.fill(len(tokens) + 1, rows, cols, values)
        return self._tokens(tokens), q

    def _tokens(self, tokens: list[int]) -> Tensor:
        """tokens written to the token buffer (as long as the q buffer, which has room), as a
        view (k,)."""
        k = len(tokens)
        if self.direct:
            items = self.token_items
            for i, token in enumerate(tokens):
                items[i] = token
        elif tokens:
            self.tokens[:k] = self._index(tokens)
        return self._view(k)[0]

    def one_hot(self, tokens: list[int]) -> Tensor:
        """(k, V) one-hot rows at tokens (k,)."""
        return self.chain(tokens)[1]


def _floats(tensor: Tensor) -> memoryview[float]:
    """A flat memoryview of a contiguous float32 CPU tensor's elements."""
    if tensor.numel() == 0:
        return memoryview(bytearray()).cast("f")
    return tensor.numpy().data.cast("B").cast("f")


def _ints(tensor: Tensor) -> memoryview[int]:
    """A flat memoryview of a contiguous int64 CPU tensor's elements."""
    if tensor.numel() == 0:
        return memoryview(bytearray()).cast("q")
    return tensor.numpy().data.cast("B").cast("q")
