"""The EAGLE-3 head's drafting forward in few calls: folded norms, fused products, fixed buffers.

`Eagle3Cache` (specviz.heads.eagle) runs the head as it trains, module by module. A drafting
step feeds one token through one decoder layer and the output matrix over the draft vocabulary,
so per-call overhead and the output matrix make most of its cost. `LeanEagle3Cache` computes the
same function (tests/heads/test_eagle_lean.py compares the two) with less of both:

* every RMSNorm's weight is folded into the product after it (norm(x) ⊙ w Wᵀ = norm(x) (W
  diag w)ᵀ), so a norm is one call without a weight;
* fc's two halves are one product over [norm(embed) ; norm(u)]; q, k and v are one product,
  gate and up another; queries and keys are rotated in one call from RoPE tables;
* keys, values and the head's outputs h live in buffers that grow by doubling, rolled back by
  moving a length, so a step allocates no cache;
* logits cover the draft vocabulary only, (T, V_d), the columns of `draft_vocab`: the drafters
  sample over it and spread q with zeros over the target's vocabulary (specviz.heads.drafters).

The products multiply by a transposed copy of each weight (in, out) in the head's dtype:
at one row, a matrix-vector product, that layout streams the weight in the order it is stored,
which is what a step's cost mostly is. Exactness never depends on any of this: q is the warped
softmax of whatever logits were computed, zero off the draft vocabulary, and the drafters
report the q they sampled from.

Shapes: T new tokens after S cached entries; D the width, H heads and kv key/value heads of
size hd; V_d the draft vocabulary's size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from specviz.core.cache import fed_positions
from specviz.fast.attention import apply_rope, causal_mask, grow
from specviz.heads.cache import HeadCache, parent_entry
from specviz.heads.eagle import FUSED, Eagle3Head, rope


class Product:
    """x (T, in) → x Wᵀ (T, out) for a fixed W (out, in), kept as a transposed copy (in, out)."""

    def __init__(self, weight: Tensor) -> None:
        """Copy W transposed, contiguous."""
        self.weight_t = weight.detach().t().contiguous()  # (in, out)

    def __call__(self, x: Tensor) -> Tensor:
        """x (T, in) → (T, out)."""
        return torch.mm(x, self.weight_t)


@dataclass(frozen=True, kw_only=True)
class FoldedHead:
    """The head's weights with each norm folded into the product after it (see the module)."""

    fuse: Product  # (3D → D): g's normalised blocks → u
    fc: Product  # (2D → D): [norm(embed) ; norm(u)] → x
    qkv: Product  # (D → (H + 2 kv) hd)
    o: Product  # (H hd → D)
    gate_up: Product  # (D → 2 I)
    down: Product  # (I → D)
    lm: Product  # (D → V_d)

    @staticmethod
    def of(head: Eagle3Head) -> FoldedHead:
        """Fold head's norms into its products."""

        def folded(weight: Tensor, norm: Tensor) -> Product:
            return Product(weight.detach() * norm.detach().to(weight.dtype)[None])

        fc_norm = torch.cat([head.norm_embed, head.norm_hidden])
        qkv = torch.cat([head.q_proj.weight, head.k_proj.weight, head.v_proj.weight])
        gate_up = torch.cat([head.gate_proj.weight, head.up_proj.weight])
        return FoldedHead(
            fuse=folded(head.fuse.weight, head.norm_fused.flatten()),
            fc=folded(head.fc.weight, fc_norm),
            qkv=folded(qkv, head.norm_attn),
            o=Product(head.o_proj.weight),
            gate_up=folded(gate_up, head.norm_mlp),
            down=Product(head.down_proj.weight),
            lm=folded(head.lm, head.norm_out),
        )


def _norm(x: Tensor, eps: float) -> Tensor:
    """RMS-normalise x (…, D) over its last dimension, no weight."""
    return F.rms_norm(x, x.shape[-1:], eps=eps)


class LeanEagle3Cache(HeadCache):
    """The EAGLE-3 head's cached forward (Eagle3Cache's rules), logits over V_d only.

    A committed token at position i goes in with u = fused(g_{i-1}) from the target's record,
    a drafted one with the head's own h at its parent (the entry at position i - 1 that it
    sees); entries fed a predicted feature are dropped on rollback even when their token was
    kept, and fed again next round with the target's real features.
    """

    def __init__(self, target: Any, head: Eagle3Head, capacity: int = 256) -> None:
        """Fold head (eval, on target's device) for drafting; empty buffers of `capacity`.

        The folded weights are a snapshot: build a new cache after changing the head's.
        """
        super().__init__(target, head.vocab, output_rows=False)
        self.head = head
        self.draft_vocab = self.head_tokens  # the logits' columns: (V_d,) token ids
        self.weights = FoldedHead.of(head)
        s = head.shape
        self.dtype = head.lm.dtype
        self.keys = head.lm.new_zeros(s.kv_heads, capacity, s.head_dim)  # (kv, capacity, hd)
        self.values = self.keys.clone()
        self.hidden = head.lm.new_zeros(capacity, s.width)  # (capacity, D): h of every entry
        self.cos, self.sin = self._rope(capacity)
        self.reset()

    def _rope(self, capacity: int) -> tuple[Tensor, Tensor]:
        """cos, sin (capacity, 1, hd) of positions 0..capacity-1, as the head computes them."""
        s = self.head.shape
        cos, sin = rope(torch.arange(capacity, device=self.device), s.head_dim, s.rope_theta)
        return cos.to(self.dtype), sin.to(self.dtype)

    @property
    def capacity(self) -> int:
        """Entries the buffers hold before they next grow."""
        return int(self.keys.shape[1])

    def _reserve(self, needed: int, held: int) -> None:
        """Hold at least `needed` entries (positions too), keeping the first `held`."""
        if needed <= self.capacity:
            return
        capacity = max(needed, 2 * self.capacity)
        self.keys = grow(self.keys, capacity, held, dim=1)
        self.values = grow(self.values, capacity, held, dim=1)
        self.hidden = grow(self.hidden, capacity, held, dim=0)
        self.cos, self.sin = self._rope(capacity)

    def reset(self) -> None:
        """No entry fed."""
        self.positions: list[int] = []
        self.real = 0  # leading entries fed with the target's real features
        self.length = 0

    @property
    def outputs(self) -> Tensor:
        """h (S, D) of every cached entry."""
        return self.hidden[: self.length]

    def crop(self, length: int) -> None:
        """Keep the first `length` entries, and never one fed with a predicted feature."""
        self.length = self.real = min(length, self.real)
        del self.positions[self.length :]

    def _features(self, positions: list[int], visible: Tensor | None) -> tuple[Tensor, bool]:
        """The features (T, D) going in with each new token, and whether all are real."""
        real = self.target_rows()  # (n, 3D)
        n, d = int(real.shape[0]), self.head.shape.width
        start = self.length
        chain = visible is None and positions == [start] and start > n  # a chain's next draft
        if chain and self.positions[start - 1] == start - 1:  # its parent: the entry before
            return self.hidden[start - 1 : start], False
        known = [r for r, p in enumerate(positions) if 0 < p <= n]
        if len(known) == len(positions):  # committed tokens only: the common first call
            src = torch.tensor([p - 1 for p in positions], device=self.device)
            return self._fused(real.index_select(0, src)), True
        rows = self.hidden.new_zeros(len(positions), d)
        if known:
            at = torch.tensor(known, device=self.device)
            src = torch.tensor([positions[r] - 1 for r in known], device=self.device)
            rows[at] = self._fused(real.index_select(0, src))
        drafted = [r for r, p in enumerate(positions) if p > n]
        for r in drafted:
            rows[r] = self.hidden[parent_entry(self.positions, r, positions[r], start, visible)]
        return rows, not drafted

    def _fused(self, g: Tensor) -> Tensor:
        """u (T, D) from g (T, 3D): each layer's block normalised, then the folded fuse."""
        t = g.shape[0]
        blocks = _norm(g.to(self.dtype).view(t, FUSED, -1), self.head.shape.eps)
        return self.weights.fuse(blocks.view(t, -1))

    @torch.no_grad()
    def forward(
        self,
        input_ids: Tensor,
        keep: int = 0,
        positions: Tensor | None = None,
        visible: Tensor | None = None,
    ) -> Tensor:
        """Feed tokens (T,) after the cached entries; logits (T, V_d), or (keep, V_d) for the
        last, over `draft_vocab`. positions (T,) and visible (T, S + T) bool: a tree's."""
        start, t = self.length, int(input_ids.shape[0])
        end = start + t
        fed = fed_positions(start, input_ids, positions)  # (T,)
        pos = fed.tolist()
        features, all_real = self._features(pos, visible)
        self._reserve(max(end, max(pos) + 1), held=start)
        rotation = self.cos[fed], self.sin[fed]  # (T, 1, hd) each
        h = self._layer(input_ids, features, rotation, start, visible)  # (T, D)
        self.hidden[start:end] = h
        self.positions += pos
        if all_real and self.real == start:
            self.real = end
        self.length = end
        rows = h[-keep:] if keep else h
        return self.weights.lm(_norm(rows, self.head.shape.eps))  # (T or keep, V_d)

    def _layer(
        self,
        ids: Tensor,
        features: Tensor,
        rotation: tuple[Tensor, Tensor],
        start: int,
        visible: Tensor | None,
    ) -> Tensor:
        """h (T, D) of the new tokens rotated by cos, sin (T, 1, hd); writes their keys and
        values at start.."""
        s, w = self.head.shape, self.weights
        t, nh, nkv, hd = int(ids.shape[0]), s.heads, s.kv_heads, s.head_dim
        joined = torch.cat([self.embed[ids].to(self.dtype), features], -1)  # (T, 2D)
        x = w.fc(_norm(joined.view(t, 2, -1), s.eps).view(t, -1))  # (T, D)
        qkv = w.qkv(_norm(x, s.eps))  # (T, (H + 2 kv) hd)
        qk = apply_rope(qkv[:, : (nh + nkv) * hd].view(t, nh + nkv, hd), *rotation)
        end = start + t
        self.keys[:, start:end] = qk[:, nh:].transpose(0, 1)
        self.values[:, start:end] = qkv[:, (nh + nkv) * hd :].view(t, nkv, hd).transpose(0, 1)
        mask = causal_mask(start, t, ids.device) if visible is None else visible
        attended = F.scaled_dot_product_attention(  # (1, H, T, hd)
            qk[None, :, :nh].transpose(1, 2),
            self.keys[None, :, :end],
            self.values[None, :, :end],
            attn_mask=mask,
            enable_gqa=True,
        )
        x = x + w.o(attended[0].transpose(0, 1).reshape(t, nh * hd))
        gate, up = w.gate_up(_norm(x, s.eps)).chunk(2, -1)
        out: Tensor = x + w.down(F.silu(gate) * up)
        return out
