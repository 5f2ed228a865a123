"""Training-time drafting for the EAGLE-3 head: every depth of a chain in a few parallel passes.

At depth d a drafted chain rooted at position r = i - d + 1 has its token at r fed with the
target's real feature and every later one with the head's own prediction. Pass d computes,
at every position i at once, the d-th output of the chain rooted at i - d + 1: its input
feature is pass d-1's output at i - 1, and its query sees exactly the keys drafting would
have cached: pass 1's (real) at positions <= r and pass m+1's at r + m for m = 1..d-1 (the
chain's own entries). So training sees the head's own errors as drafting does (the
"training-time test" of EAGLE-3, HASS), not only the real-feature first step.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
from torch import Tensor

from specviz.heads.eagle import EagleShape, Projected


class Unrollable(Protocol):
    """A head with project and finish halves (specviz.heads.eagle.Eagle3Head)."""

    shape: EagleShape

    def project(self, embeds: Tensor, features: Tensor, positions: Tensor) -> Projected:
        """The pass's input x and its rotated queries, keys and values."""
        ...

    def finish(self, x: Tensor, attended: Tensor) -> Tensor:
        """The head's output from x and the attention output."""
        ...


def _expand(x: Tensor, heads: int) -> Tensor:
    """(B, kv, L, hd) → (B, H, L, hd), each kv head serving H / kv query heads."""
    return x.repeat_interleave(heads // x.shape[1], dim=1)


def _shift(x: Tensor, by: int) -> Tensor:
    """x (B, …, L, hd) moved `by` positions later along L (zeros first): out[i] = x[i - by]."""
    if by == 0:
        return x
    pad = torch.zeros_like(x[..., :by, :])
    return torch.cat([pad, x[..., :-by, :]], -2)


def _attend(q: Tensor, passes: list[Projected], depth: int, heads: int) -> Tensor:
    """Attention output (B, H, L, hd) of pass `depth`'s queries over its chains' keys."""
    length, hd = q.shape[2], q.shape[3]
    scale = 1.0 / math.sqrt(hd)
    k1, v1 = _expand(passes[0].k, heads), _expand(passes[0].v, heads)
    scores = (q @ k1.transpose(-1, -2)) * scale  # (B, H, L, L)
    i = torch.arange(length, device=q.device)
    allowed = i[None, :] <= (i[:, None] - depth + 1)  # j <= r = i - d + 1
    scores = scores.masked_fill(~allowed, float("-inf"))
    extra_k, extra_v = [], []
    for offset in range(depth - 1):  # the chain's own entry at i - offset, from pass d - offset
        p = passes[depth - offset - 1]
        extra_k.append(_shift(_expand(p.k, heads), offset))
        extra_v.append(_shift(_expand(p.v, heads), offset))
    diag = [(q * k).sum(-1, keepdim=True) * scale for k in extra_k]  # (B, H, L, 1) each
    weights = torch.softmax(torch.cat([scores, *diag], -1), -1)
    out = weights[..., :length] @ v1
    for n, v in enumerate(extra_v):
        out = out + weights[..., length + n : length + n + 1] * v
    return torch.nan_to_num(out)  # rows with no valid root (i < d - 1) are all -inf: unused


def unrolled(head: Unrollable, embeds: Tensor, first: Tensor, depth: int) -> list[Tensor]:
    """f̂ of passes 1..depth (each (B, L, D)); first (B, L, D): the real f_{i-1} (noised or not).

    Pass d's output at i is valid for i >= d - 1 only. For an EAGLE-3 head, first is the fused
    feature u_{i-1} and the outputs are its hidden states h (fed back the same way).
    """
    positions = torch.arange(embeds.shape[1], device=embeds.device)
    passes: list[Projected] = []
    outs: list[Tensor] = []
    inputs = first
    for d in range(1, depth + 1):
        pr = head.project(embeds, inputs, positions)
        passes.append(pr)
        out = head.finish(pr.x, _attend(pr.q, passes, d, head.shape.heads))
        outs.append(out)
        inputs = torch.cat([torch.zeros_like(out[:, :1]), out[:, :-1]], 1)  # f̂_{i-1}
    return outs
