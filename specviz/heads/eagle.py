"""An EAGLE-style drafting head: one decoder layer that predicts the target's next feature.

Terms. The target's *feature* f_i (D,) is its final-norm hidden state at position i; its output
head turns f_i into p_target(x_{i+1}). The head's input at position i is the token there and
the feature before it, [embed(x_i) ; f_{i-1}] (2D,), projected to D by `fc`; one Llama-style
decoder layer (attention over the head's own cache, then an MLP) turns it into f̂_i, and the
target's output head, restricted to the `head_tokens` S, turns f̂_i into q_draft(x_{i+1})
(zero off S, so sampling from it stays exact). Drafting runs at the feature level: f̂_i is
the feature that goes in with the next draft token. Committed positions always go in with
the target's real features (taken from its verification pass), never with predicted ones.
The target's embeddings and output head are shared, not copied; only `fc` and the layer are
new (Li et al. 2024, "EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from specviz.fast.attention import apply_rope


@dataclass(frozen=True, kw_only=True)
class EagleShape:
    """The head's sizes (the target's width, heads and MLP by default) and RoPE base."""

    width: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    rope_theta: float
    eps: float

    @staticmethod
    def of(config: Any) -> EagleShape:
        """The shape matching a Llama-style target config."""
        rope = getattr(config, "rope_parameters", None) or {}
        theta = rope.get("rope_theta", getattr(config, "rope_theta", 10000.0))
        heads = int(config.num_attention_heads)
        return EagleShape(
            width=int(config.hidden_size),
            heads=heads,
            kv_heads=int(getattr(config, "num_key_value_heads", heads)),
            head_dim=int(getattr(config, "head_dim", config.hidden_size // heads)),
            intermediate=int(config.intermediate_size),
            rope_theta=float(theta),
            eps=float(config.rms_norm_eps),
        )

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for a weights file's metadata."""
        return asdict(self)


def rope(positions: Tensor, head_dim: int, theta: float) -> tuple[Tensor, Tensor]:
    """cos, sin (T, 1, hd) of the positions (T,) (Llama's default RoPE)."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=positions.device) / head_dim)
    angles = positions.float()[:, None] * inv[None]  # (T, hd/2)
    angles = torch.cat([angles, angles], -1)
    return angles.cos()[:, None], angles.sin()[:, None]


class EagleHead(nn.Module):
    """[embed(x_i) ; f_{i-1}] (…, 2D) → f̂_i (…, D): fc, then one decoder layer."""

    def __init__(self, shape: EagleShape) -> None:
        """Fresh weights; the layer's two output projections start at zero (an identity)."""
        super().__init__()
        d, hd = shape.width, shape.head_dim
        self.shape = shape
        self.fc = nn.Linear(2 * d, d, bias=True)
        self.q_proj = nn.Linear(d, shape.heads * hd, bias=False)
        self.k_proj = nn.Linear(d, shape.kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, shape.kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(shape.heads * hd, d, bias=False)
        self.norm_mlp = nn.Parameter(torch.ones(d))
        self.gate_proj = nn.Linear(d, shape.intermediate, bias=False)
        self.up_proj = nn.Linear(d, shape.intermediate, bias=False)
        self.down_proj = nn.Linear(shape.intermediate, d, bias=False)
        for lin in (self.fc, self.q_proj, self.k_proj, self.v_proj, self.gate_proj, self.up_proj):
            nn.init.normal_(lin.weight, std=0.02)
        with torch.no_grad():  # fc starts by passing the feature through
            nn.init.zeros_(self.fc.bias)
            self.fc.weight[:, d:] += torch.eye(d)
        nn.init.zeros_(self.o_proj.weight)
        nn.init.zeros_(self.down_proj.weight)

    def project(self, embeds: Tensor, features: Tensor, positions: Tensor) -> Projected:
        """fc's output x (B, T, D) and rotated q (B, H, T, hd), k, v (B, kv, T, hd)."""
        s = self.shape
        b, t, _ = embeds.shape
        x = self.fc(torch.cat([embeds, features], -1))  # (B, T, D)
        cos, sin = rope(positions, s.head_dim, s.rope_theta)
        q = apply_rope(self.q_proj(x).view(b, t, s.heads, s.head_dim), cos, sin)
        k = apply_rope(self.k_proj(x).view(b, t, s.kv_heads, s.head_dim), cos, sin)
        v = self.v_proj(x).view(b, t, s.kv_heads, s.head_dim)
        return Projected(x=x, q=q.transpose(1, 2), k=k.transpose(1, 2), v=v.transpose(1, 2))

    def finish(self, x: Tensor, attended: Tensor) -> Tensor:
        """f̂ (B, T, D) from fc's output x and the attention output (B, H, T, hd)."""
        s = self.shape
        b, _, t, _ = attended.shape
        x = x + self.o_proj(attended.transpose(1, 2).reshape(b, t, s.heads * s.head_dim))
        h = F.rms_norm(x, (s.width,), self.norm_mlp, s.eps)
        out: Tensor = x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))
        return out

    def forward(
        self,
        embeds: Tensor,
        features: Tensor,
        positions: Tensor,
        past: tuple[Tensor, Tensor] | None = None,
        visible: Tensor | None = None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """f̂ (B, T, D) from embeds and the features before them (B, T, D) at positions (T,).

        past: cached keys and values (B, kv_heads, S, hd), or None (then a causal pass);
        visible (T, S + T) bool replaces the causal mask. Returns f̂ and this call's keys/values.
        """
        pr = self.project(embeds, features, positions)
        t = embeds.shape[1]
        keys = pr.k if past is None else torch.cat([past[0], pr.k], 2)
        values = pr.v if past is None else torch.cat([past[1], pr.v], 2)
        mask = None if visible is None else visible[None, None]
        causal = visible is None and past is None and t > 1
        if visible is None and past is not None and t > 1:
            mask = torch.ones(t, keys.shape[2], dtype=torch.bool, device=pr.x.device)
            mask = mask.tril(keys.shape[2] - t)[None, None]
        attended = F.scaled_dot_product_attention(
            pr.q, keys, values, attn_mask=mask, is_causal=causal, enable_gqa=True
        )  # (B, heads, T, hd)
        return self.finish(pr.x, attended), (pr.k, pr.v)


@dataclass(frozen=True, kw_only=True)
class Projected:
    """A pass's fc output x (B, T, D), queries (B, H, T, hd), keys and values (B, kv, T, hd)."""

    x: Tensor
    q: Tensor
    k: Tensor
    v: Tensor
