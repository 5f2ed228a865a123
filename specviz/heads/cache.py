"""Drafting heads seen as a draft model's cached forward, so the draft-model drafters drive them.

`ModelDrafter` (a chain) and `TreeModelDrafter` (a tree) call `forward(tokens, keep, positions,
visible)` → logits (T, V), `crop` and `len` on a draft's cache. `Eagle3Cache` and `MedusaCache`
answer those calls from the target's features (specviz.heads.tap) and a head:

* a token at position i goes in with the target's real feature f_{i-1} when the target has
  scored position i - 1 (every committed token), else with the head's own output at its
  parent (the entry at position i - 1 that it sees: the previous draft of a chain, the parent
  node of a tree);
* logits are -inf off the head tokens S, so q_draft is exactly zero there.

Positions fed with predicted features are dropped on rollback even when their token was kept:
the next round feeds them again with the target's real features. `attach(target)` makes the
target's cached forward that records those features (the drafter hands it to the decoder).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from specviz.core.cache import fed_positions
from specviz.heads.eagle import Eagle3Head
from specviz.heads.medusa import MedusaHeads
from specviz.heads.tap import FeatureCache, Features


def parent_entry(
    positions: list[int], row: int, pos: int, start: int, visible: Tensor | None
) -> int:
    """The cached entry at position pos - 1 that new row `row` (at pos) sees, among the `start`
    entries of a head's cache at `positions`: a chain's entry just before it, fed by an earlier
    call (visible None), or a tree node's parent (visible (T, start + T) bool)."""
    if visible is None:
        seen = [start - 1] if row == 0 and start > 0 else []
    else:  # a tree node: its ancestors come last among the columns it sees
        seen = visible[row, :start].nonzero()[:, 0].flip(0).tolist()
    for c in seen:
        if positions[c] == pos - 1:
            return int(c)
    raise ValueError(f"the head needs its output at position {pos - 1} before {pos}")


class HeadCache:
    """What the heads share: the target's features, its embeddings, the trimmed output head.

    draft_vocab (S,): the token ids the columns of `forward`'s logits stand for, where they
    cover those tokens only (the drafters then spread q over the vocabulary with zeros); None
    where the logits cover the target's whole vocabulary (-inf off the head tokens).
    """

    draft_vocab: Tensor | None = None

    def __init__(self, target: Any, head_tokens: Tensor, *, output_rows: bool = True) -> None:
        """Share target's embeddings and, with output_rows, its output-head rows for head_tokens
        (S,) (the heads that score with the target's own output head)."""
        embed = target.get_input_embeddings().weight.detach()  # (V, D)
        out = target.get_output_embeddings().weight.detach()  # (V, D)
        self.device = out.device
        self.head_tokens = head_tokens.to(self.device)  # (S,)
        self.embed = embed
        if output_rows:
            self.out_rows = out.index_select(0, self.head_tokens).contiguous()  # (S, D)
        self.vocab_size = int(out.shape[0])
        self.features: Features | None = None
        self.length = 0  # token positions fed

    def attach(self, target: Any, make_cache: Any = FeatureCache) -> Any:
        """A fresh cached forward of target that records features for this head (reset too)."""
        cache = make_cache(target)
        self.features = cache.features
        self.reset()
        return cache

    def reset(self) -> None:
        """Forget every fed position."""
        self.length = 0

    def ready(self, ids: list[int]) -> bool:
        """Whether the target has scored every committed token but the last (all it can)."""
        return self.features is not None and len(self.features) >= len(ids) - 1 > 0

    def target_rows(self) -> Tensor:
        """The target's features (n, D) of the positions it has scored."""
        if self.features is None:
            raise ValueError(
                "a drafting head reads the target's features: decode through the drafter's "
                "target_cache (specviz's decoders do this), not a cache of your own"
            )
        return self.features.rows

    def __len__(self) -> int:
        """Token positions fed so far."""
        return self.length

    def forward(
        self,
        input_ids: Tensor,
        keep: int = 0,
        positions: Tensor | None = None,
        visible: Tensor | None = None,
    ) -> Tensor:
        """Feed tokens (T,) at positions; logits (T, V), or (keep, V) for the last."""
        raise NotImplementedError

    def crop(self, length: int) -> None:
        """Roll back to at most `length` positions."""
        raise NotImplementedError

    def keep_only(self, indices: Tensor) -> None:
        """Not needed: tree drafters crop their draft cache back to the prefix."""
        raise ValueError("a drafting head's cache is cropped, never compacted")

    def logits(self, guessed: Tensor) -> Tensor:
        """Guessed features (T, D) → logits (T, V), -inf off the head tokens."""
        rows = guessed.to(self.out_rows.dtype) @ self.out_rows.T  # (T, S)
        full = rows.new_full((rows.shape[0], self.vocab_size), float("-inf"))
        out: Tensor = full.index_copy_(1, self.head_tokens, rows)
        return out


class Eagle3Cache(HeadCache):
    """The EAGLE-3 head's cached forward over token positions, module by module.

    The target's rows it reads are g (n, 3D) (a target cache recording the fused layers,
    ``specviz.heads.tap.FusedFeatureCache``); a committed token goes in with u = fused(g) of
    the position before, a drafted one with the head's own h there. Logits are -inf off the
    draft vocabulary. The registered drafters run the same function on
    ``specviz.heads.eagle_lean.LeanEagle3Cache``, which costs less per step.
    """

    def __init__(self, target: Any, head: Eagle3Head) -> None:
        """Wrap head for target; an empty cache."""
        super().__init__(target, head.vocab, output_rows=False)
        self.head = head
        self.reset()

    def reset(self) -> None:
        """Empty the head's keys, values, outputs; no position fed."""
        s = self.head.shape
        self.keys = self.embed.new_zeros(1, s.kv_heads, 0, s.head_dim)  # (1, kv, S, hd)
        self.values = self.keys.clone()
        self.outputs = self.embed.new_zeros(0, s.width)  # (S, D): h at each entry
        self.positions: list[int] = []
        self.real = 0  # leading entries fed with the target's real features
        self.length = 0

    def crop(self, length: int) -> None:
        """Keep the first `length` entries, and never one fed with a predicted feature."""
        n = self.real = min(length, self.real)
        self.keys, self.values = self.keys[:, :, :n], self.values[:, :, :n]
        self.outputs, self.positions = self.outputs[:n], self.positions[:n]
        self.length = n

    def _inputs(self, positions: list[int], visible: Tensor | None) -> tuple[Tensor, bool]:
        """The features (T, D) going in with each new token, and whether all are real."""
        real = self.target_rows()  # (n, 3D)
        start, all_real = self.length, True
        rows = self.embed.new_zeros(len(positions), self.head.shape.width)
        known = [(r, pos - 1) for r, pos in enumerate(positions) if 0 < pos <= real.shape[0]]
        if known:
            at = torch.tensor([r for r, _ in known], device=self.device)
            src = torch.tensor([p for _, p in known], device=self.device)
            fused = self.head.fused(real.index_select(0, src).to(self.embed.dtype))
            rows[at] = fused.to(rows.dtype)
        for r, pos in enumerate(positions):
            if pos > real.shape[0]:
                all_real = False
                rows[r] = self.outputs[parent_entry(self.positions, r, pos, start, visible)]
        return rows, all_real

    @torch.no_grad()
    def forward(
        self,
        input_ids: Tensor,
        keep: int = 0,
        positions: Tensor | None = None,
        visible: Tensor | None = None,
    ) -> Tensor:
        """Feed tokens (T,) after the cached entries; logits (T, V), or (keep, V) for the last."""
        start, t = self.length, int(input_ids.shape[0])
        pos = fed_positions(start, input_ids, positions).tolist()
        features, all_real = self._inputs(pos, visible)
        guessed, (k, v) = self.head(
            self.embed[input_ids][None],
            features[None].to(self.embed.dtype),
            torch.tensor(pos, device=self.device),
            past=(self.keys, self.values) if start else None,
            visible=visible,
        )
        guessed = guessed[0]  # (T, D)
        self.keys, self.values = torch.cat([self.keys, k], 2), torch.cat([self.values, v], 2)
        self.outputs = torch.cat([self.outputs, guessed])
        self.positions += pos
        if all_real and self.real == start:
            self.real = start + t
        self.length = start + t
        return self.logits(guessed[-keep:] if keep else guessed)

    def logits(self, guessed: Tensor) -> Tensor:
        """h (T, D) → logits (T, V), -inf off the draft vocabulary."""
        return self.head.full_logits(guessed, self.vocab_size)


class MedusaCache(HeadCache):
    """Medusa heads as a cached forward: a token d levels past the last committed one gets
    head d + 1's guess from the target's latest feature (its own token is not read)."""

    def __init__(self, target: Any, heads: MedusaHeads, head_tokens: Tensor) -> None:
        """Wrap heads for target."""
        super().__init__(target, head_tokens)
        self.heads = heads
        self.committed = 0  # leading positions fed after the target scored the one before

    def reset(self) -> None:
        """Forget every fed position."""
        self.length = self.committed = 0

    def crop(self, length: int) -> None:
        """Keep the first `length` positions, never past the committed ones."""
        self.length = self.committed = min(length, self.committed)

    @torch.no_grad()
    def forward(
        self,
        input_ids: Tensor,
        keep: int = 0,
        positions: Tensor | None = None,
        visible: Tensor | None = None,
    ) -> Tensor:
        """Logits (T or keep, V): the target's own guess is not drafted; head d+1 at depth d."""
        del visible  # a Medusa guess depends on no draft token
        start, t = self.length, int(input_ids.shape[0])
        pos = fed_positions(start, input_ids, positions).tolist()
        real = self.target_rows()
        if all(p - 1 < real.shape[0] for p in pos) and self.committed == start:
            self.committed = start + t
        last = self.committed - 1  # the last committed position: the tree's root
        rows = pos[-keep:] if keep else pos
        guessed = []
        for p in rows:
            depth = p - last  # 0 for the root, whose child head 1 guesses
            if not 0 <= depth < self.heads.k:
                raise ValueError(f"Medusa has {self.heads.k} heads: no guess {depth + 2} ahead")
            guessed.append(self.heads.one(depth + 1, real[last - 1]))
        self.length = start + t
        return self.logits(torch.stack(guessed))
