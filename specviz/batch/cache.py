"""One KV cache for B requests of different lengths, rolled back row by row.

The B rows share one transformers DynamicCache of S slots; `valid` (B, S) says which slots hold a
row's real positions. A slot of a pad token, or of a draft token the verifier rejected, is a
*hole*: every later pass masks it out (a zeroed key would still take softmax mass, a masked one
takes none). Each row's positions count only its real tokens, so row r's logits are those of its
tokens alone. Holes are squeezed out (a per-row gather) once they are half of the cache.

    cache = BatchKVCache(model, rows=3)
    logits = cache.forward([[5, 6, 7], [8], [9, 10]], keep=1)  # (3, 1, V): each row's last
    cache.crop([2, 1, 2])  # row 0 keeps its first 2 positions, row 1 its first 1, ...
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch
from torch import Tensor
from transformers import DynamicCache

from specviz.core.cache import forward_kwargs, has_sliding_window
from specviz.fast.lean import LeanWeights, lean_problem
from specviz.fast.ragged import RaggedLean

PAD_ID = 0  # the id fed in pad slots: masked out, its value never matters


class BatchCache(Protocol):
    """What the batch decoders need of a cache of B rows: BatchKVCache (any causal LM) or
    specviz.fast.ragged.RaggedLean (the models LeanLlama runs, without padding)."""

    model: Any
    ragged: bool  # rows of different lengths fed together cost no padding

    @property
    def rows(self) -> int:
        """B, the number of rows."""

    @property
    def lengths(self) -> list[int]:
        """Positions cached per row."""

    def empty(self) -> BatchCache:
        """A cache of no rows of the same kind, on the same model."""

    def add_rows(self, n: int) -> None:
        """n empty rows join after the others."""

    def join_rows(self, other: Any) -> None:
        """other's rows (a cache of the same kind and model) join after these."""

    def forward(self, new: Sequence[Sequence[int]], keep: int = 0) -> Tensor:
        """Feed row r the tokens new[r]; logits (B, keep, V), each row's last right-aligned."""

    def crop(self, lengths: Sequence[int]) -> None:
        """Keep the first lengths[r] positions of each row r."""

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only these rows, in this order."""


def batch_cache(model: Any, weights: LeanWeights | None = None) -> BatchCache:
    """An empty batch cache for model: on the lean forward where it runs the model (weights:
    its LeanWeights, fused once and shared; None: fused here), else a BatchKVCache."""
    if weights is not None:
        return RaggedLean(weights)
    if lean_problem(model, wide=True) is None:
        return RaggedLean(LeanWeights.of(model))
    return BatchKVCache(model, 0)


class BatchKVCache:
    """The KV cache of B rows, each holding its own number of real positions."""

    ragged = False  # a pass pads every row to the longest row's new tokens

    def __init__(self, model: Any, rows: int) -> None:
        """An empty cache of `rows` rows (0 too: rows join with add_rows) for model (any
        Hugging Face causal LM)."""
        if rows < 0:
            raise ValueError(f"a batch cannot have {rows} rows")
        self.model = model
        self.sliding = has_sliding_window(getattr(model, "config", None))
        self._kwarg, self._trims = forward_kwargs(model)
        self.device = model.device
        self.kv = DynamicCache()  # lazy: full layers (see specviz.core.cache)
        self.valid = torch.zeros(rows, 0, dtype=torch.bool, device=self.device)  # (B, S)

    def empty(self) -> BatchKVCache:
        """A cache of no rows for the same model."""
        return BatchKVCache(self.model, 0)

    def add_rows(self, n: int) -> None:
        """n empty rows join after the others (their slots all holes until they are fed)."""
        if n == 0:
            return
        width = self.valid.shape[1]
        self.valid = torch.cat([self.valid, self.valid.new_zeros(n, width)])
        if width:  # a cache with no slots yet has nothing to extend
            self._each_layer(lambda x: torch.cat([x, x.new_zeros(n, *x.shape[1:])]))

    def join_rows(self, other: BatchKVCache) -> None:
        """other's rows (a cache of the same model, e.g. the joining requests' prompts run by
        themselves) join after these; the side with fewer slots gets holes to match."""
        if other.rows == 0:
            return
        width = max(self.valid.shape[1], other.valid.shape[1])
        self._widen(width)
        other._widen(width)
        if not self._layers():  # nothing computed here yet: other's layers, these rows holes
            rows = self.rows
            other._each_layer(lambda x: torch.cat([x.new_zeros(rows, *x.shape[1:]), x]))
            self.kv = other.kv
        elif other._layers():
            for mine, theirs in zip(self._layers(), other._layers(), strict=True):
                mine.keys = torch.cat([mine.keys, theirs.keys])
                mine.values = torch.cat([mine.values, theirs.values])
        else:  # nothing computed there: its rows are holes here
            self._each_layer(lambda x: torch.cat([x, x.new_zeros(other.rows, *x.shape[1:])]))
        self.valid = torch.cat([self.valid, other.valid])

    def _widen(self, width: int) -> None:
        """Hole slots at the end, up to width slots."""
        extra = width - self.valid.shape[1]
        if extra <= 0:
            return
        self.valid = torch.cat([self.valid, self.valid.new_zeros(self.rows, extra)], dim=1)
        if self._layers():
            self._each_layer(
                lambda x: torch.cat([x, x.new_zeros(*x.shape[:2], extra, x.shape[3])], 2)
            )

    def _layers(self) -> list[Any]:
        """The layers that hold keys and values."""
        layers: list[Any] = list(self.kv.layers)
        return [layer for layer in layers if layer.is_initialized and layer.keys.numel()]

    @property
    def rows(self) -> int:
        """B, the number of rows."""
        return int(self.valid.shape[0])

    @property
    def lengths(self) -> list[int]:
        """Real positions cached per row."""
        return [int(n) for n in self.valid.sum(dim=1).tolist()]

    @torch.no_grad()
    def forward(self, new: Sequence[Sequence[int]], keep: int = 0) -> Tensor:
        """Feed row r the tokens new[r] (any number, 0 too) after its cached positions.

        Returns logits (B, keep, V): row r's last min(keep, len(new[r])) tokens end each row
        (the new tokens are right-aligned in the pass), or (B, T, V) for keep 0.
        """
        if len(new) != self.rows:
            raise ValueError(f"{len(new)} rows of tokens for a cache of {self.rows} rows")
        width = max(1, max(len(r) for r in new))  # T
        real = torch.tensor([[j >= width - len(r) for j in range(width)] for r in new])
        real = real.to(self.device)  # (B, T) True: a token of the row, False: a pad
        ids = torch.tensor(
            [[PAD_ID] * (width - len(r)) + list(r) for r in new], device=self.device
        )  # (B, T)
        starts = self.valid.sum(dim=1, keepdim=True)  # (B, 1)
        positions = (starts + real.long().cumsum(dim=1) - 1).clamp(min=0)  # (B, T)
        mask = self._mask(real)  # (B, 1, T, S + T)
        extra: dict[str, Any] = {"logits_to_keep": keep} if self._trims and keep else {}
        out = self.model(
            input_ids=ids,
            position_ids=positions,
            attention_mask=mask,
            use_cache=True,
            **{self._kwarg: self.kv},
            **extra,
        )
        self.valid = torch.cat([self.valid, real], dim=1)
        logits: Tensor = out.logits  # (B, T, V) or (B, keep, V)
        return logits[:, -keep:] if keep else logits

    def _mask(self, real: Tensor) -> Tensor:
        """The additive mask (B, 1, T, S + T): a query sees its row's real cached slots and
        the row's real new tokens up to itself; a pad sees itself only (no empty softmax)."""
        width = real.shape[1]
        causal = torch.ones(width, width, dtype=torch.bool, device=self.device).tril()  # (T, T)
        own = torch.eye(width, dtype=torch.bool, device=self.device)  # (T, T)
        fresh = causal[None] & real[:, None, :] | own[None]  # (B, T, T)
        cached = self.valid[:, None, :].expand(-1, width, -1)  # (B, T, S)
        visible = torch.cat([cached, fresh], dim=2)  # (B, T, S + T)
        dtype = getattr(self.model, "dtype", torch.float32)
        dtype = dtype if dtype.is_floating_point else torch.float32
        mask = torch.zeros(visible.shape, dtype=dtype, device=self.device)
        return mask.masked_fill(~visible, float("-inf"))[:, None]

    def crop(self, lengths: Sequence[int]) -> None:
        """Keep the first lengths[r] real positions of each row r; the rest become holes."""
        if len(lengths) != self.rows:
            raise ValueError(f"{len(lengths)} lengths for a cache of {self.rows} rows")
        limit = torch.tensor(lengths, device=self.device)[:, None]  # (B, 1)
        self.valid &= self.valid.long().cumsum(dim=1) <= limit
        used = self.valid.any(dim=0).nonzero()
        end = int(used[-1]) + 1 if used.numel() else 0
        if end < self.valid.shape[1]:  # trailing slots no row uses: drop them outright
            self.kv.crop(end - self.valid.shape[1])  # crop(-n) drops the last n on every 5.x
            self.valid = self.valid[:, :end]
        if 2 * int(self.valid.sum()) < self.valid.numel():
            self._squeeze()

    def _squeeze(self) -> None:
        """Gather each row's real slots to the right end (left padding); holes are gone."""
        length = max(self.lengths)
        if length == 0:
            return
        order = torch.argsort(self.valid.int(), dim=1, stable=True)[:, -length:]  # (B, S')
        self._each_layer(lambda x: x.gather(2, order[:, None, :, None].expand_as(x[:, :, :length])))
        self.valid = self.valid.gather(1, order)

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only these rows (e.g. drop the requests that finished), in this order; none
        kept empties the cache, its memory freed."""
        if not rows:
            self.kv = DynamicCache()
            self.valid = self.valid.new_zeros(0, 0)
            return
        index = torch.tensor(list(rows), dtype=torch.long, device=self.device)
        self._each_layer(lambda x: x.index_select(0, index))
        self.valid = self.valid.index_select(0, index)

    def _each_layer(self, take: Any) -> None:
        """Replace every initialized layer's keys and values (B, H, S, D) by take of them."""
        if self.sliding:
            raise ValueError("a batched cache cannot compact a sliding-window cache")
        layer: Any
        for layer in self.kv.layers:
            if layer.is_initialized and layer.keys.numel():
                layer.keys, layer.values = take(layer.keys), take(layer.values)


def admitted(running: BatchCache, prefixes: Sequence[Sequence[int]]) -> list[int]:
    """Rows holding prefixes join running; returns the positions each new row holds.

    A ragged cache (no padding: RaggedLean) takes them empty: each prefix rides in the next
    pass beside the other rows' tokens, costing its own tokens and no pass of its own. A padded
    one (BatchKVCache) gets them prefilled in a pass of their own first, so that joining rows
    cost their prompts alone, not the running rows' padding to the longest prompt too."""
    if running.ragged:
        running.add_rows(len(prefixes))
        return [0] * len(prefixes)
    cache = running.empty()
    cache.add_rows(len(prefixes))
    if any(prefixes):
        cache.forward(prefixes, keep=1)
    running.join_rows(cache)
    return [len(p) for p in prefixes]
