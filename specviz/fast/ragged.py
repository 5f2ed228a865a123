"""A lean forward for a batch of rows of different lengths: every row's new tokens in one pass,
with no padding.

The rows' new tokens are laid end to end (T = the sum of the rows' counts, not B times the
longest), so each of a layer's products runs once over all of them, on the model's LeanWeights
(specviz.fast.lean: fused once, packed for oneDNN where the target's linears are). Attention
runs row by row, each row over KV buffers of its own (specviz.fast.attention.KVBuffers), so a
row sees exactly its own positions: no mask of holes, nothing to squeeze, and rolling a row
back moves its length pointer. Each row's logits are LeanLlama's for that row alone, up to the
order of the products' sums.

RaggedLean has BatchKVCache's interface (specviz.batch.cache), for the models LeanLlama runs
(`lean_problem`); specviz.batch.cache.batch_cache picks it where it applies.

    cache = RaggedLean(LeanWeights.of(model), rows=2)
    logits = cache.forward([[5, 6, 7], [8]], keep=2)  # (2, 2, V): each row's last 2, right-aligned
    cache.crop([2, 1])  # row 0 keeps its first 2 positions, row 1 its first 1
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from specviz.fast.attention import KVBuffers, causal_mask
from specviz.fast.lean import LeanLayer, LeanWeights, attend, finish_layer, project

CAPACITY = 64  # positions a new row's buffers hold before they grow (they double)


@dataclass(frozen=True)
class _Span:
    """Row `row`'s tokens in a pass: `count` of them at `offset` in the pass, after its `start`
    cached positions."""

    row: int
    start: int
    offset: int
    count: int


class RaggedLean:
    """The KV cache and forward of B rows, each holding its own number of positions."""

    ragged = True  # a pass costs the rows' new tokens, whatever their counts

    def __init__(self, weights: LeanWeights, rows: int = 0) -> None:
        """An empty cache of `rows` rows (0 too: rows join with add_rows or join_rows) on
        weights (LeanWeights.of(model), shared by any number of caches)."""
        if rows < 0:
            raise ValueError(f"a batch cannot have {rows} rows")
        self.weights, self.model = weights, weights.model
        self.device = weights.embed.device
        self.buffers: list[KVBuffers] = []
        self.length: list[int] = []  # each row's cached positions
        self.add_rows(rows)

    def empty(self) -> RaggedLean:
        """A cache of no rows on the same weights (joining rows' prompts run in it)."""
        return RaggedLean(self.weights)

    @property
    def rows(self) -> int:
        """B, the number of rows."""
        return len(self.buffers)

    @property
    def lengths(self) -> list[int]:
        """Positions cached per row."""
        return list(self.length)

    def add_rows(self, n: int) -> None:
        """n empty rows join after the others."""
        w = self.weights
        for _ in range(n):
            self.buffers.append(
                KVBuffers(len(w.layers), w.n_kv, w.head_dim, w.rotary, w.embed, CAPACITY)
            )
            self.length.append(0)

    def join_rows(self, other: RaggedLean) -> None:
        """other's rows (a cache on the same weights) join after these."""
        if other.weights is not self.weights:
            raise ValueError("rows join a cache on the same weights only")
        self.buffers += other.buffers
        self.length += other.length

    def crop(self, lengths: Sequence[int]) -> None:
        """Keep the first lengths[r] positions of each row r."""
        if len(lengths) != self.rows:
            raise ValueError(f"{len(lengths)} lengths for a cache of {self.rows} rows")
        self.length = [min(n, max(0, k)) for n, k in zip(self.length, lengths, strict=True)]

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only these rows, in this order (the others' buffers are freed)."""
        self.buffers = [self.buffers[r] for r in rows]
        self.length = [self.length[r] for r in rows]

    @torch.no_grad()
    def forward(self, new: Sequence[Sequence[int]], keep: int = 0) -> Tensor:
        """Feed row r the tokens new[r] (any number, 0 too) after its cached positions.

        Returns logits (B, keep, V): row r's last min(keep, len(new[r])) tokens end each row
        (zeros before them), or (B, T, V) for keep 0, T the most tokens a row was fed.
        """
        if len(new) != self.rows:
            raise ValueError(f"{len(new)} rows of tokens for a cache of {self.rows} rows")
        keep = keep or max(1, max((len(r) for r in new), default=1))
        spans = self._spans(new)
        ids = torch.tensor([t for r in new for t in r], dtype=torch.long, device=self.device)
        x = self.weights.embed[ids]  # (T, H)
        if spans:
            x = self._layers(x, spans)
        for span in spans:
            self.length[span.row] += span.count
        return self._logits(x, spans, keep)

    def _spans(self, new: Sequence[Sequence[int]]) -> list[_Span]:
        """Where each fed row's tokens lie in the pass; its buffers made room for them."""
        spans, offset = [], 0
        for row, tokens in enumerate(new):
            if tokens:
                start = self.length[row]
                self.buffers[row].reserve(start + len(tokens), held=start)
                spans.append(_Span(row=row, start=start, offset=offset, count=len(tokens)))
                offset += len(tokens)
        return spans

    def _layers(self, x: Tensor, spans: list[_Span]) -> Tensor:
        """Every decoder layer on x (T, H), each span attending over its own row."""
        w = self.weights
        rope = self._rope(spans)
        masks = [causal_mask(s.start, s.count, self.device) for s in spans]
        for index, layer in enumerate(w.layers):
            x = self._layer(index, layer, x, spans, rope, masks)
        return x

    def _rope(self, spans: list[_Span]) -> tuple[Tensor, Tensor]:
        """cos, sin (T, 1, hd) of every fed token's position in its row."""
        parts = [self.buffers[s.row].rope(s.start, s.start + s.count) for s in spans]
        return torch.cat([cos for cos, _ in parts]), torch.cat([sin for _, sin in parts])

    def _layer(
        self,
        index: int,
        layer: LeanLayer,
        x: Tensor,
        spans: list[_Span],
        rope: tuple[Tensor, Tensor],
        masks: list[Tensor | None],
    ) -> Tensor:
        """One decoder layer on x (T, H): products over every row's tokens at once, attention
        row by row over the row's own keys and values (written at its positions)."""
        w = self.weights
        queries, keys, values = project(layer, x, rope, w.n_heads, w.n_kv, w.eps)
        attended = []
        for span, mask in zip(spans, masks, strict=True):
            mine = slice(span.offset, span.offset + span.count)
            held_keys, held_values = self.buffers[span.row].write(
                index, span.start, keys[:, mine], values[:, mine]
            )  # (kv_heads, S_row, hd) each
            attended.append(attend(queries[:, mine], held_keys, held_values, mask, w.scale))
        return finish_layer(layer, x, torch.cat(attended, dim=1), w.eps)

    def _logits(self, x: Tensor, spans: list[_Span], keep: int) -> Tensor:
        """(B, keep, V): the head on each span's last min(keep, count) positions of x (T, H),
        right-aligned in its row."""
        rows: list[int] = []
        slots: list[int] = []
        where: list[int] = []
        for span in spans:
            kept = min(keep, span.count)
            rows += [span.row] * kept
            slots += range(keep - kept, keep)
            end = span.offset + span.count
            where += range(end - kept, end)
        w = self.weights
        picked = x[where] if where else x.new_zeros(1, x.shape[-1])  # (N, H)
        logits: Tensor = w.head(w.norm(picked))  # (N, V)
        out = logits.new_zeros(self.rows, keep, logits.shape[-1])
        if where:
            out[rows, slots] = logits
        return out
