"""Shipped drafting-head weights: where they live, how they are saved, loaded and checked.

A head is only meaningful for the target whose features it was trained on, so every weights
file records that target's name and a fingerprint of its embeddings; loading refuses another
target with an error that says what to use instead.

``medusa.safetensors`` holds the Medusa heads (bf16) and their head tokens (int32).
``eagle3.safetensors`` holds the EAGLE-3 head's tensors (bf16; the draft vocabulary as int32)
and metadata: the head's shape, its vocabulary size, the target's name and fingerprint and the
training step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from specviz.heads.eagle import Eagle3Head, EagleShape
from specviz.heads.lookup import head_path
from specviz.heads.medusa import MedusaHeads

RANKING = Path(__file__).resolve().parent.parent / "assets" / "draft" / "token_ranking.safetensors"
HEAD_TOKENS = 8192  # output-head rows the heads score (q = 0 elsewhere)
KINDS = ("eagle3", "medusa")  # the head kinds: {kind}.safetensors each
FORMAT = 1
EAGLE_FILE = "eagle3.safetensors"


def bundled_head_tokens(size: int = HEAD_TOKENS) -> Tensor:
    """The `size` token ids (S,) carrying most of the bundled target's probability."""
    return load_file(str(RANKING))["ranking"].long()[:size]


def fingerprint(target: Any) -> str:
    """'V x D: mean |embedding|' of the first 1024 rows: tells one target's weights apart."""
    embed = target.get_input_embeddings().weight.detach()
    return f"{embed.shape[0]}x{embed.shape[1]}:{float(embed[:1024].double().abs().mean()):.6f}"


def model_label(model: Any) -> str:
    """The model's hub id, or the folder's name for a model loaded from a local path."""
    name = str(getattr(model.config, "_name_or_path", ""))
    return Path(name).name if Path(name).is_absolute() else name


def save_head(
    module: nn.Module,
    kind: str,
    head_tokens: Tensor,
    target: Any,
    summary: dict[str, Any],
    folder: Path,
) -> Path:
    """Write module (bf16) and head_tokens to folder/{kind}.safetensors with its metadata."""
    tensors = {
        k: v.detach().to(torch.bfloat16).contiguous() for k, v in module.state_dict().items()
    }
    tensors["head_tokens"] = head_tokens.to(torch.int32).contiguous()
    meta = {
        "format": str(FORMAT),
        "kind": kind,
        "target": model_label(target),
        "fingerprint": fingerprint(target),
        "shape": json.dumps(EagleShape.of(target.config).as_dict()),
        "heads": str(getattr(module, "k", 0)),
        "steps": str(summary.get("step", 0)),
    }
    path = folder / f"{kind}.safetensors"
    save_file(tensors, str(path), metadata=meta)
    return path


def head_problem(target: Any, path: Path) -> str | None:
    """Why the head at path cannot draft for target, or None if it can."""
    if not path.is_file():
        return f"no head weights at {path}"
    with safe_open(str(path), "pt") as handle:
        meta = handle.metadata() or {}
    config = getattr(target, "config", None)
    if config is None or getattr(config, "model_type", None) != "llama":
        return "the shipped heads were trained on the bundled SmolLM2 (a Llama) target"
    if meta.get("fingerprint") != fingerprint(target):
        return (
            f"this head was trained on the features of {meta.get('target') or 'another model'} "
            f"(fingerprint {meta.get('fingerprint')}); this target's is {fingerprint(target)}"
        )
    return None


def load_head(kind: str, target: Any, path: Path | None = None) -> tuple[MedusaHeads, Tensor]:
    """The Medusa heads (target's dtype and device, eval) and their head tokens (S,)."""
    path = path or head_path(kind)
    problem = head_problem(target, path)
    if problem is not None:
        raise ValueError(
            f"the {kind} drafter cannot draft for this target: {problem}. Train one for it "
            "(python -m specviz.train data features, then heads medusa), or use another drafter"
        )
    tensors = load_file(str(path))
    head_tokens = tensors.pop("head_tokens").long()
    k = sum(1 for name in tensors if name.endswith(".weight"))
    module = MedusaHeads(int(target.config.hidden_size), k)
    module.load_state_dict({k: v.float() for k, v in tensors.items()})
    weight = target.get_output_embeddings().weight
    return module.to(device=weight.device, dtype=weight.dtype).eval(), head_tokens


def save_eagle(head: Eagle3Head, target: Any, step: int, folder: Path) -> Path:
    """Write head (trained for target, at step) to folder/eagle3.safetensors."""
    tensors = {
        k: (v.to(torch.int32) if k == "vocab" else v.detach().to(torch.bfloat16)).cpu().contiguous()
        for k, v in head.state_dict().items()
    }
    meta = {
        "format": str(FORMAT),
        "kind": "eagle3",
        "target": model_label(target),
        "fingerprint": fingerprint(target),
        "shape": json.dumps(head.shape.as_dict()),
        "vocab": str(head.size),
        "steps": str(step),
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / EAGLE_FILE
    tmp = path.with_suffix(".tmp")
    save_file({k: v.cpu() for k, v in tensors.items()}, str(tmp), metadata=meta)
    tmp.replace(path)
    return path


def load_eagle(target: Any, path: Path) -> Eagle3Head:
    """The head at path, in target's dtype and on its device (eval); refuses another target."""
    if not path.is_file():
        raise ValueError(
            f"no EAGLE-3 head weights at {path}: train one (python -m specviz.train heads train), "
            "export it (python -m specviz.train heads export eagle3), or use another drafter"
        )
    with safe_open(str(path), "pt") as handle:
        meta = handle.metadata() or {}
    if meta.get("fingerprint") != fingerprint(target):
        raise ValueError(
            f"the eagle drafters cannot draft for this target: this EAGLE-3 head was trained "
            f"on the features of {meta.get('target') or 'another model'} (fingerprint "
            f"{meta.get('fingerprint')}); this target's is {fingerprint(target)}. Train one for "
            "it (python -m specviz.train heads all), or use another drafter"
        )
    tensors = load_file(str(path))
    vocab = tensors["vocab"].long()
    head = Eagle3Head(EagleShape(**json.loads(meta["shape"])), vocab)
    head.load_state_dict({k: v.long() if k == "vocab" else v.float() for k, v in tensors.items()})
    weight = target.get_output_embeddings().weight
    return head.to(device=weight.device, dtype=weight.dtype).eval()
