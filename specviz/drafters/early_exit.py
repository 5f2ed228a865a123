"""Self-speculation (LayerSkip / Draft & Verify style): the target's own first k layers draft.

`early_exit_model` builds a causal LM that shares the target's embeddings, first k decoder
layers, final norm and output head (no weights are copied), optionally with a small trained
adapter before the norm. It drafts through the ordinary ModelDrafter, with its own KV cache.
`build_early_exit` adds the trained adapter shipped for k, when there is one.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file
from torch import Tensor, nn

ADAPTERS = (
    Path(__file__).resolve().parent.parent / "assets" / "early_exit"
)  # adapter_k{k}.safetensors


class Adapter(nn.Module):
    """A residual linear map on the exit hidden state (d,) → (d,), initialised to identity."""

    def __init__(self, width: int) -> None:
        """Zero-initialised correction: the untrained adapter is the plain early exit."""
        super().__init__()
        self.proj = nn.Linear(width, width, bias=True)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, hidden: Tensor) -> Tensor:
        """hidden (..., d) + W hidden + b."""
        out: Tensor = hidden + self.proj(hidden)
        return out


def decoder_stack(model: Any) -> Any:
    """The decoder stack (`model.model` for Llama, Qwen2, Mistral, ...)."""
    inner = getattr(model, "model", None)
    if inner is None or not hasattr(inner, "layers") or not hasattr(inner, "norm"):
        raise ValueError(
            f"early exit needs a decoder with .model.layers and .model.norm "
            f"(Llama/Qwen2/Mistral-style); {type(model).__name__} has none"
        )
    return inner


def early_exit_model(target: Any, k: int, adapter: Adapter | None = None) -> Any:
    """A k-layer causal LM sharing the target's modules; adapter goes before the final norm."""
    inner = decoder_stack(target)
    total = len(inner.layers)
    if not 1 <= k < total:
        raise ValueError(f"exit layer k must be in [1, {total - 1}] for this target (got {k})")
    config = copy.deepcopy(target.config)
    config.num_hidden_layers = k
    if getattr(config, "layer_types", None):
        config.layer_types = list(config.layer_types)[:k]
    with torch.device("meta"):
        draft = type(target)(config)
    draft.model.embed_tokens = inner.embed_tokens
    draft.model.layers = nn.ModuleList(list(inner.layers[:k]))
    draft.model.norm = inner.norm if adapter is None else nn.Sequential(adapter, inner.norm)
    draft.model.rotary_emb = inner.rotary_emb
    draft.lm_head = target.lm_head
    left = [n for n, t in [*draft.named_parameters(), *draft.named_buffers()] if t.is_meta]
    if left:
        raise ValueError(f"early exit could not share these modules of the target: {left[:5]}")
    return draft.eval()


def adapter_path(k: int) -> Path:
    """Where the trained adapter for exit layer k is shipped (it may not exist)."""
    return ADAPTERS / f"adapter_k{k}.safetensors"


def adapter_width(path: str | Path) -> int | None:
    """The hidden size an adapter file was trained for (None: not an adapter's weights)."""
    with safe_open(str(path), framework="pt") as f:
        if "proj.weight" not in f.keys():  # noqa: SIM118 (safe_open has no __contains__)
            return None
        shape = f.get_slice("proj.weight").get_shape()
    return int(shape[0]) if len(shape) == 2 and shape[0] == shape[1] else None


def load_adapter(path: str | Path, target: Any) -> Adapter:
    """An Adapter for target's width with weights from a safetensors file (early_exit_train);
    a clear ValueError when the file is for another width."""
    width, trained = int(target.config.hidden_size), adapter_width(path)
    if trained != width:
        raise ValueError(
            f"{path} is not an early-exit adapter for this target: it was trained for a hidden "
            f"size of {trained}, the target's is {width}. Train one for this target "
            "(python -m specviz.train.draft.early_exit) or leave the adapter out"
        )
    adapter = Adapter(width)
    adapter.load_state_dict(load_file(str(path)))
    return adapter.to(device=target.device, dtype=target.dtype)


def shipped_adapter(target: Any, k: int) -> Path | None:
    """The adapter shipped for exit layer k, where there is one for this target's width (the
    shipped adapters are the bundled target's)."""
    path = adapter_path(k)
    if not path.is_file() or adapter_width(path) != int(target.config.hidden_size):
        return None
    return path


def build_early_exit(
    target: Any, k: int, adapter: str | Path | None = None
) -> tuple[Any, Path | None]:
    """The early-exit draft and the adapter file it uses (None: the plain early exit).

    adapter None takes the adapter shipped for k (adapter_path) when there is one for this
    target's width.
    """
    path = Path(adapter) if adapter is not None else shipped_adapter(target, k)
    if path is None:
        return early_exit_model(target, k), None
    return early_exit_model(target, k, load_adapter(path, target)), path
