"""A lean cached forward for Llama-family models: transformers' math in fewer calls.

A 3-layer draft's step is mostly per-call framework overhead, not arithmetic, so writing the
same math out in a few tensor calls makes it markedly cheaper (the measured draft cost ratio c
on and off this forward: benchmarks/RESULTS.md, "What limits the bundled pair on this CPU").
It reads the Hugging Face model's weights (q/k/v and gate/up are fused once into transposed
copies; a small draft makes that cheap), keeps keys and values in preallocated buffers that
grow (specviz.fast.attention, with the mask and RoPE), and rolls back by moving a length
pointer. The fused copies are a snapshot: build a new LeanLlama after changing the weights
(drafters are built per request). Models it does not support (see `lean_problem`) fall back to
transformers' forward with `specviz.core.cache.KVCache`.

A target (`lean_target_cache`; opt-in: `--lean-target` in `specviz bench` and `generate`) runs
here too when its linears are packed for oneDNN (specviz.fast.packed): its fused q/k/v and gate/up
are packed copies (about 280 MB more for the bundled fp32 target). Its passes are cheaper than
through transformers' forward, with logits equal to transformers' (tests/fast/test_lean.py); the
timings per pass width are in benchmarks/RESULTS.md, "The target on specviz.fast.lean's forward".

Exactness never depends on this module: the drafter reports the q it actually sampled from,
and the verifier needs nothing else. tests/fast/test_lean.py checks the logits against transformers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import PretrainedConfig

from specviz.core.cache import CachedForward, KVCache, fed_positions
from specviz.fast.attention import KVBuffers, apply_rope, causal_mask
from specviz.fast.packed import PackedLinear, is_packed, pack, packed_product

LEAN_MODEL_TYPES = ("llama",)
# RoPE variants whose frequencies do not depend on the sequence length, so one table computed for
# the whole capacity gives every position transformers' values ("dynamic" and "longrope" rescale
# with the length seen so far).
STATIC_ROPE_TYPES = ("default", "linear", "llama3", "yarn")
# Above about a million weights per layer the arithmetic outweighs the call overhead, and the
# pre-packed oneDNN linears (specviz.fast.packed) beat the plain products used here.
LEAN_MAX_LAYER_PARAMS = 1_000_000


def lean_problem(model: Any, *, wide: bool = False) -> str | None:
    """Why `model` cannot run on LeanLlama, or None if it can.

    wide=False (a draft) refuses layers of over LEAN_MAX_LAYER_PARAMS weights; wide=True (a
    target) accepts them when their linears are packed (specviz.fast.packed), which it then runs.
    """
    config = getattr(model, "config", None)
    if not isinstance(config, PretrainedConfig):
        return "not a Hugging Face model"
    if config.model_type not in LEAN_MODEL_TYPES:
        return f"model type {config.model_type!r} is not one of {LEAN_MODEL_TYPES}"
    if getattr(config, "attention_bias", False) or getattr(config, "mlp_bias", False):
        return "the model has attention or MLP biases"
    if getattr(config, "hidden_act", None) != "silu":
        return f"activation {getattr(config, 'hidden_act', None)!r} is not silu"
    if getattr(config, "pretraining_tp", 1) != 1:
        return "pretraining_tp != 1"
    inner = getattr(model, "model", None)
    if inner is None or not hasattr(inner, "rotary_emb") or not hasattr(inner, "layers"):
        return "no model.layers / model.rotary_emb"
    rope_type = getattr(inner.rotary_emb, "rope_type", "default")
    if rope_type not in STATIC_ROPE_TYPES:
        return f"RoPE type {rope_type!r} is not one of {STATIC_ROPE_TYPES}"
    try:
        odd = [name for name, module in _parts(inner) if not _standard(module)]
    except AttributeError as missing:
        return f"not a Llama decoder layer layout ({missing})"
    if odd:
        return f"non-standard modules {odd[:3]} (only Linear/PackedLinear without bias, RMSNorm)"
    per_layer = _layer_params(inner)
    if per_layer <= LEAN_MAX_LAYER_PARAMS:
        return None
    if not wide:
        return f"{per_layer:,} weights per layer: large enough that overhead does not dominate"
    if not all(is_packed(module) for name, module in _parts(inner) if name.endswith("proj")):
        return f"{per_layer:,} weights per layer on unpacked linears (see specviz.fast.packed)"
    return None


def _layer_params(inner: Any) -> int:
    """Mean number of weights per decoder layer."""
    return int(sum(p.numel() for p in inner.layers.parameters())) // len(inner.layers)


def _parts(inner: Any) -> list[tuple[str, Any]]:
    """(name, module) of every projection and norm the lean forward reimplements."""
    attention = [f"self_attn.{x}_proj" for x in "qkvo"]
    names = [*attention, "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
    names += ["input_layernorm", "post_attention_layernorm"]
    return [
        (f"layers.{i}.{name}", layer.get_submodule(name))
        for i, layer in enumerate(inner.layers)
        for name in names
    ]


def _standard(module: Any) -> bool:
    """A bias-free Linear/PackedLinear or an RMSNorm (weight, variance_epsilon), nothing else."""
    if type(module) in (nn.Linear, PackedLinear):  # plain weights: not torchao's int8 tensors
        return module.bias is None and type(module.weight) in (Tensor, nn.Parameter)
    return hasattr(module, "variance_epsilon") and isinstance(module.weight, Tensor)


def draft_cache(model: Any) -> CachedForward:
    """LeanLlama for a draft it supports, else transformers' forward with a KVCache."""
    return LeanLlama(model) if lean_problem(model) is None else KVCache(model)


def tree_draft_cache(model: Any) -> LeanLlama | KVCache:
    """draft_cache for a tree drafter: both kinds take a tree's positions and mask."""
    return LeanLlama(model) if lean_problem(model) is None else KVCache(model)


def lean_target_cache(model: Any) -> CachedForward:
    """LeanLlama for a target it supports (wide packed layers too), else a KVCache."""
    return LeanLlama(model) if lean_problem(model, wide=True) is None else KVCache(model)


class _Product:
    """x (T, in) → (T, out_1 + out_2 + …): bias-free linears fused into one product."""

    def __init__(self, *linears: Any, packed: bool) -> None:
        """Fuse the weights (out_i, in): packed for oneDNN, or as one transposed copy."""
        self.packed: Tensor | None = None  # oneDNN layout: one PackedLinear's own, or a new one
        self.weight_t: Tensor | None = None  # (in, out): at a draft's sizes mm beats F.linear
        weights = [lin.weight.detach() for lin in linears]
        if packed and len(linears) == 1:
            self.packed = linears[0].packed  # shared with the model, not copied
        elif packed:
            self.packed = pack(torch.cat(weights))  # the concatenation is not kept
        else:
            self.weight_t = torch.cat(weights).t().contiguous()

    def __call__(self, x: Tensor) -> Tensor:
        """x (T, in) → (T, out)."""
        if self.packed is not None:
            return packed_product(x, self.packed)
        assert self.weight_t is not None
        return torch.mm(x, self.weight_t)


@dataclass(frozen=True, kw_only=True)
class LeanLayer:
    """One decoder layer's norms and fused products."""

    norm_attn: Tensor
    qkv: _Product
    o: _Product
    norm_mlp: Tensor
    gate_up: _Product
    down: _Product


def _rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """Llama's RMSNorm of x (T, H) as transformers computes it: normalised in float32."""
    normed = F.rms_norm(x.float(), x.shape[-1:], eps=eps)
    return weight * normed.to(x.dtype)


@dataclass(frozen=True, kw_only=True)
class LeanWeights:
    """A Llama model's weights as LeanLlama reads them: its embedding, head and final norm as
    they are, each layer's products fused (packed for oneDNN where its linears are). Fused
    once, they serve any number of caches (a server's requests): for the bundled target the
    packed copies are hundreds of MB, which fusing per request would allocate again each time."""

    model: Any
    embed: Tensor  # (V, H)
    rotary: Any
    head: Any  # full, trimmed or packed: called as is
    norm: Any  # called as is (early exit may put an adapter before it)
    n_heads: int
    n_kv: int
    head_dim: int
    scale: float
    layers: list[LeanLayer]
    eps: float

    @classmethod
    def of(cls, model: Any) -> LeanWeights:
        """Fuse model's weights (ValueError naming why a model cannot run here)."""
        problem = lean_problem(model, wide=True)
        if problem is not None:
            raise ValueError(f"LeanLlama cannot run this model: {problem}; use KVCache")
        inner, config = model.model, model.config
        attn = inner.layers[0].self_attn
        packed = _layer_params(inner) > LEAN_MAX_LAYER_PARAMS  # then lean_problem saw packing
        return cls(
            model=model,
            embed=inner.embed_tokens.weight.detach(),
            rotary=inner.rotary_emb,
            head=model.get_output_embeddings(),
            norm=inner.norm,
            n_heads=int(config.num_attention_heads),
            n_kv=int(config.num_key_value_heads),
            head_dim=int(attn.head_dim),
            scale=float(attn.scaling),
            layers=[_fused(layer, packed) for layer in inner.layers],
            eps=float(inner.layers[0].input_layernorm.variance_epsilon),
        )


def _fused(layer: Any, packed: bool) -> LeanLayer:
    """One decoder layer's norms and fused products."""
    attn, mlp = layer.self_attn, layer.mlp
    return LeanLayer(
        norm_attn=layer.input_layernorm.weight.detach(),
        qkv=_Product(attn.q_proj, attn.k_proj, attn.v_proj, packed=packed),
        o=_Product(attn.o_proj, packed=packed),
        norm_mlp=layer.post_attention_layernorm.weight.detach(),
        gate_up=_Product(mlp.gate_proj, mlp.up_proj, packed=packed),
        down=_Product(mlp.down_proj, packed=packed),
    )


class SharedLeanTarget:
    """lean_target_cache for one target, its weights fused once and shared by every cache it
    makes (a server's make_cache: one per loaded pair)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        supported = lean_problem(model, wide=True) is None
        self.weights = LeanWeights.of(model) if supported else None

    def __call__(self, model: Any) -> CachedForward:
        """A fresh cache for model (the target this was made for)."""
        if model is not self.model:
            raise ValueError("this shared forward was made for another target")
        if self.weights is None:
            return KVCache(model)
        return LeanLlama(model, weights=self.weights)


class LeanLlama:
    """A Llama causal LM's forward with its own KV cache; shares the model's weights and head."""

    def __init__(self, model: Any, capacity: int = 256, weights: LeanWeights | None = None) -> None:
        """An empty cache for `capacity` positions (it grows) on the model's fused weights:
        weights (LeanWeights.of(model), shared by many caches) or fused here for this one."""
        w = weights if weights is not None else LeanWeights.of(model)
        if w.model is not model:
            raise ValueError("these LeanWeights were fused from another model")
        self.embed, self.rotary, self.head, self.final_norm = w.embed, w.rotary, w.head, w.norm
        self.n_heads, self.n_kv, self.head_dim, self.scale = w.n_heads, w.n_kv, w.head_dim, w.scale
        self.layers, self.eps = w.layers, w.eps
        self.length = 0
        # hidden-state indices (i: the output of layer i, as in transformers' hidden_states)
        # whose values each forward keeps in `tapped`, for subclasses that record them
        self.taps: tuple[int, ...] = ()
        self.tapped: dict[int, Tensor] = {}
        self.kv = KVBuffers(
            len(self.layers), self.n_kv, self.head_dim, self.rotary, self.embed, capacity
        )

    def __len__(self) -> int:
        """Number of token positions currently cached."""
        return self.length

    def crop(self, length: int) -> None:
        """Roll back to the first `length` positions (no-op if it holds no more than that)."""
        self.length = min(self.length, max(0, length))

    def keep_only(self, indices: Tensor) -> None:
        """Keep the cached positions `indices` (ascending) on every layer, dropping the rest.

        Positions already in place (the leading i with indices[i] == i: after a tree pass, the
        prefix) are not moved; only the rest (the kept path's nodes) is gathered into place.
        """
        n = int(indices.shape[0])
        indices = indices.to(self.kv.keys.device)
        moved = (indices != torch.arange(n, device=indices.device)).nonzero()
        lead = int(moved[0, 0]) if moved.numel() else n  # positions already where they belong
        if lead < n:
            tail = indices[lead:]
            self.kv.keys[:, :, lead:n] = self.kv.keys[:, :, tail]  # advanced indexing copies
            self.kv.values[:, :, lead:n] = self.kv.values[:, :, tail]
        self.length = n

    @torch.no_grad()
    def forward(
        self,
        input_ids: Tensor,
        keep: int = 0,
        positions: Tensor | None = None,
        visible: Tensor | None = None,
    ) -> Tensor:
        """Feed new tokens (T,) after the cached ones; logits (T, V), or (keep, V) for the last.

        positions (T,) and visible (T, cached + T) bool replace the causal defaults (a tree).
        """
        start, n_new = self.length, int(input_ids.shape[0])
        end = start + n_new
        self.kv.reserve(end, held=start)
        positions = fed_positions(start, input_ids, positions)
        rope = self.kv.cos[positions, None], self.kv.sin[positions, None]  # (T, 1, head_dim) each
        mask = causal_mask(start, n_new, input_ids.device) if visible is None else visible
        x = self.embed[input_ids]  # (T, H)
        for index, weights in enumerate(self.layers):
            x = self._layer(index, weights, x, start, rope, mask)
            if index + 1 in self.taps:
                self.tapped[index + 1] = x
        self.length = end
        return self._logits(x, keep, start)  # (T or keep, V)

    def _logits(self, x: Tensor, keep: int, start: int) -> Tensor:
        """The output head on the last decoder layer's x (T, H) (the last `keep` rows)."""
        del start  # where x begins: used by subclasses that record hidden states
        x = x[-keep:] if keep else x
        logits: Tensor = self.head(self.final_norm(x))
        return logits

    def _layer(
        self,
        index: int,
        w: LeanLayer,
        x: Tensor,
        start: int,
        rope: tuple[Tensor, Tensor],
        mask: Tensor | None,
    ) -> Tensor:
        """One decoder layer on x (T, H), writing its keys/values at start..start+T."""
        queries, keys, values = project(w, x, rope, self.n_heads, self.n_kv, self.eps)
        keys, values = self.kv.write(index, start, keys, values)  # (kv_heads, S, hd) each
        return finish_layer(w, x, attend(queries, keys, values, mask, self.scale), self.eps)


def project(
    w: LeanLayer, x: Tensor, rope: tuple[Tensor, Tensor], n_heads: int, n_kv: int, eps: float
) -> tuple[Tensor, Tensor, Tensor]:
    """A layer's queries (heads, T, hd), keys and values (kv_heads, T, hd) of x (T, H), the
    queries and keys RoPE-rotated (rope: cos, sin (T, 1, hd))."""
    n_new = x.shape[0]
    qkv = w.qkv(_rms_norm(x, w.norm_attn, eps))
    hd = qkv.shape[-1] // (n_heads + 2 * n_kv)
    qk = qkv[:, : (n_heads + n_kv) * hd].view(n_new, n_heads + n_kv, hd)  # (T, heads + kv, hd)
    qk = apply_rope(qk, *rope)  # queries and keys rotated in one call
    values = qkv[:, (n_heads + n_kv) * hd :].view(n_new, n_kv, hd)
    return qk[:, :n_heads].transpose(0, 1), qk[:, n_heads:].transpose(0, 1), values.transpose(0, 1)


def attend(
    queries: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, scale: float
) -> Tensor:
    """Grouped-query attention of queries (heads, T, hd) over keys, values (kv_heads, S, hd)
    (kv head j serves heads / kv_heads query heads); mask (T, S) bool or None → (heads, T, hd)."""
    out: Tensor = F.scaled_dot_product_attention(
        queries[None], keys[None], values[None], attn_mask=mask, scale=scale, enable_gqa=True
    )[0]
    return out


def finish_layer(w: LeanLayer, x: Tensor, attended: Tensor, eps: float) -> Tensor:
    """The layer's output (T, H): x plus the projected attention attended (heads, T, hd), then
    plus the MLP of that."""
    x = x + w.o(attended.transpose(0, 1).reshape(x.shape[0], -1))
    gate, up = w.gate_up(_rms_norm(x, w.norm_mlp, eps)).chunk(2, -1)
    return x + w.down(F.silu(gate) * up)
