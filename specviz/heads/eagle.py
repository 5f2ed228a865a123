"""An EAGLE-3 drafting head: fused target layers in, tokens of a draft vocabulary out.

Terms (D the target's width, V its vocabulary, V_d the draft vocabulary's size).

* g_i (3D,): the target's hidden states at position i of a low, a middle and a high layer
  (``fused_layers``), concatenated: the residual stream, before any norm.
* u_i (D,): the *fused feature* of a committed position, ``fuse`` (Linear 3D → D, no bias)
  applied to g_i after each of its three D-blocks is RMS-normalised on its own (the residual
  stream carries a few activations orders of magnitude above the rest; a norm per layer keeps
  them from drowning the fusion). u_{-1} = 0 (no position before the first).
* The head's input at position i is [norm(embed(x_i)) ; norm(u_{i-1})] (2D,), projected to D
  by ``fc``; for a drafted token (one the target has not scored yet) u_{i-1} is replaced by the
  head's own output at i - 1, h_{i-1} (D,): its hidden state after the decoder layer, not a
  guess of the target's feature (EAGLE-3 regresses no feature).
* One Llama-style decoder layer (pre-norm attention with RoPE and GQA over the head's own
  cache, then a pre-norm SwiGLU MLP) turns fc's output into h_i (D,).
* Direct token prediction: logits (V_d,) = ``lm`` (V_d, D) @ RMSNorm(h_i), over the draft
  vocabulary ``vocab`` (V_d,) (token ids of the target, ordered). ``lm`` starts as the
  target's output-head rows of those tokens and is trained. q_draft(x_{i+1}) is the softmax of
  these logits on the draft vocabulary and exactly zero elsewhere, so sampling stays exact
  (Li et al. 2025, "EAGLE-3: Scaling up Inference Acceleration of Large Language Models via
  Training-Time Test"; Zhao et al. 2025, "FR-Spec", for the vocabulary).

``specviz.heads.cache.Eagle3Cache`` is the head's cached forward module by module: its target
cache records g_i. The registered drafters run the same function on
``specviz.heads.eagle_lean.LeanEagle3Cache``, which costs less per step;
tests/heads/test_eagle_lean.py checks that the two agree.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from specviz.fast.attention import apply_rope

FUSED = 3  # layers fused into g


def fused_layers(num_layers: int) -> tuple[int, int, int]:
    """The hidden-state indices EAGLE-3 fuses: a low, a middle and a high layer's output.

    Index i is the output of decoder layer i (index 0 is the embeddings), as in the
    ``hidden_states`` tuple of a transformers model: (2, L // 2, L - 3) for L >= 4 layers;
    a shallower stack (2 or 3 layers, as small test models have) fuses (1, L // 2, L - 1).
    Never the embeddings, nor the last layer's output (transformers hands that one over after
    the final norm).
    """
    if num_layers < 2:
        raise ValueError(f"a target with {num_layers} layers is too shallow for fused features")
    if num_layers < 4:
        return 1, num_layers // 2, num_layers - 1
    return 2, num_layers // 2, num_layers - 3


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


@dataclass(frozen=True, kw_only=True)
class Projected:
    """A pass's fc output x (B, T, D), queries (B, H, T, hd), keys and values (B, kv, T, hd)."""

    x: Tensor
    q: Tensor
    k: Tensor
    v: Tensor


def _rms(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """RMSNorm of x (…, D) with weight (D,) (cast to x's dtype, as under bf16 autocast)."""
    return F.rms_norm(x, (x.shape[-1],), weight.to(x.dtype), eps)


class Eagle3Head(nn.Module):
    """g (…, 3D) → u (…, D) by `fused`; [embed ; u] → h (…, D) by the layer; h → logits (…, V_d)."""

    vocab: Tensor

    def __init__(
        self,
        shape: EagleShape,
        vocab: Tensor,
        *,
        out_rows: Tensor | None = None,
        out_norm: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        """Fresh weights for the draft vocabulary `vocab` (V_d,) of token ids.

        out_rows (V_d, D): the target's output-head rows of vocab, the start of ``lm`` (None:
        random); out_norm (D,): the target's final-norm weight, the start of the head's
        (None: ones). fuse starts by passing the high layer through, fc by passing u through,
        and the layer's two output projections start at zero, so a fresh head reads the target's
        output head off its high layer. Random draws come from generator.
        """
        super().__init__()
        d, hd = shape.width, shape.head_dim
        self.shape = shape
        self.register_buffer("vocab", vocab.long().clone())
        self.norm_fused = nn.Parameter(torch.ones(FUSED, d))
        self.fuse = nn.Linear(FUSED * d, d, bias=False)
        self.norm_embed = nn.Parameter(torch.ones(d))
        self.norm_hidden = nn.Parameter(torch.ones(d))
        self.fc = nn.Linear(2 * d, d, bias=False)
        self.norm_attn = nn.Parameter(torch.ones(d))
        self.q_proj = nn.Linear(d, shape.heads * hd, bias=False)
        self.k_proj = nn.Linear(d, shape.kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, shape.kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(shape.heads * hd, d, bias=False)
        self.norm_mlp = nn.Parameter(torch.ones(d))
        self.gate_proj = nn.Linear(d, shape.intermediate, bias=False)
        self.up_proj = nn.Linear(d, shape.intermediate, bias=False)
        self.down_proj = nn.Linear(shape.intermediate, d, bias=False)
        self.norm_out = nn.Parameter(
            torch.ones(d) if out_norm is None else out_norm.float().clone()
        )
        self.lm = nn.Parameter(torch.zeros(int(vocab.shape[0]), d))
        with torch.no_grad():
            for lin in (self.fuse, self.fc):  # small next to the identity added below
                nn.init.normal_(lin.weight, std=0.1 / lin.in_features**0.5, generator=generator)
            for lin in (self.q_proj, self.k_proj, self.v_proj, self.gate_proj, self.up_proj):
                nn.init.normal_(lin.weight, std=0.02, generator=generator)
            self.fuse.weight[:, (FUSED - 1) * d :] += torch.eye(d)
            self.fc.weight[:, d:] += torch.eye(d)
            nn.init.zeros_(self.o_proj.weight)
            nn.init.zeros_(self.down_proj.weight)
            if out_rows is None:
                nn.init.normal_(self.lm, std=d**-0.5, generator=generator)
            else:
                self.lm.copy_(out_rows)

    @property
    def size(self) -> int:
        """V_d, the draft vocabulary's size."""
        return int(self.vocab.shape[0])

    def fused(self, hidden: Tensor) -> Tensor:
        """u (…, D) from g (…, 3D): each layer's block RMS-normalised, then ``fuse``."""
        s = self.shape
        blocks = hidden.reshape(*hidden.shape[:-1], FUSED, s.width)  # (…, 3, D)
        normed = F.rms_norm(blocks, (s.width,), eps=s.eps) * self.norm_fused.to(blocks.dtype)
        out: Tensor = self.fuse(normed.flatten(-2))
        return out

    def project(self, embeds: Tensor, features: Tensor, positions: Tensor) -> Projected:
        """fc's output x (B, T, D) and rotated q (B, H, T, hd), k, v (B, kv, T, hd).

        embeds (B, T, D): embed(x_i); features (B, T, D): u_{i-1} or h_{i-1}; positions (T,).
        """
        s = self.shape
        b, t, _ = embeds.shape
        joined = torch.cat(
            [_rms(embeds, self.norm_embed, s.eps), _rms(features, self.norm_hidden, s.eps)], -1
        )
        x = self.fc(joined)  # (B, T, D)
        a = _rms(x, self.norm_attn, s.eps)
        cos, sin = rope(positions, s.head_dim, s.rope_theta)
        cos, sin = cos.to(a.dtype), sin.to(a.dtype)
        q = apply_rope(self.q_proj(a).view(b, t, s.heads, s.head_dim), cos, sin)
        k = apply_rope(self.k_proj(a).view(b, t, s.kv_heads, s.head_dim), cos, sin)
        v = self.v_proj(a).view(b, t, s.kv_heads, s.head_dim)
        return Projected(x=x, q=q.transpose(1, 2), k=k.transpose(1, 2), v=v.transpose(1, 2))

    def finish(self, x: Tensor, attended: Tensor) -> Tensor:
        """h (B, T, D) from fc's output x and the attention output (B, H, T, hd)."""
        s = self.shape
        b, _, t, _ = attended.shape
        x = x + self.o_proj(attended.transpose(1, 2).reshape(b, t, s.heads * s.head_dim))
        m = _rms(x, self.norm_mlp, s.eps)
        out: Tensor = x + self.down_proj(F.silu(self.gate_proj(m)) * self.up_proj(m))
        return out

    def forward(
        self,
        embeds: Tensor,
        features: Tensor,
        positions: Tensor,
        past: tuple[Tensor, Tensor] | None = None,
        visible: Tensor | None = None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """h (B, T, D) from embeds and the features before them (B, T, D) at positions (T,).

        past: cached keys and values (B, kv_heads, S, hd), or None (then a causal pass);
        visible (T, S + T) bool replaces the causal mask. Returns h and this call's keys/values.
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

    def logits(self, hidden: Tensor) -> Tensor:
        """Logits (…, V_d) over the draft vocabulary from h (…, D)."""
        out: Tensor = _rms(hidden, self.norm_out, self.shape.eps) @ self.lm.T
        return out

    def full_logits(self, hidden: Tensor, vocab_size: int) -> Tensor:
        """Logits (…, V) over the target's vocabulary: -inf off the draft vocabulary."""
        rows = self.logits(hidden)
        full = rows.new_full((*rows.shape[:-1], vocab_size), float("-inf"))
        index = self.vocab.expand(*rows.shape[:-1], self.size)
        return full.scatter(-1, index, rows)


def fresh_head(target: Any, vocab: Tensor, generator: torch.Generator | None = None) -> Eagle3Head:
    """A new head for target over vocab (V_d,), its output matrix and norm from the target's."""
    out = target.get_output_embeddings().weight.detach()  # (V, D)
    norm = getattr(getattr(target, "model", None), "norm", None)
    weight = None if norm is None else norm.weight.detach().float()
    rows = out.index_select(0, vocab.to(out.device)).float()
    return Eagle3Head(
        EagleShape.of(target.config), vocab, out_rows=rows, out_norm=weight, generator=generator
    )
