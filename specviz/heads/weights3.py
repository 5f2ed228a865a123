"""EAGLE-3 head weights: saved with their target's fingerprint, loaded back for drafting.

A file ``eagle3.safetensors`` holds the head's tensors (bf16; the draft vocabulary as int32) and
metadata: the head's shape, its vocabulary size, the target's name and fingerprint
(``specviz.heads.weights.fingerprint``) and the training step. Loading refuses a target whose
fingerprint differs: a head only drafts for the features it was trained on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from specviz.heads.eagle3 import Eagle3Head, EagleShape
from specviz.heads.weights import fingerprint, model_label

FORMAT = 1
NAME = "eagle3.safetensors"


def save_head3(head: Eagle3Head, target: Any, step: int, folder: Path) -> Path:
    """Write head (trained for target, at step) to folder/eagle3.safetensors."""
    from safetensors.torch import save_file

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
    path = folder / NAME
    tmp = path.with_suffix(".tmp")
    save_file({k: v.cpu() for k, v in tensors.items()}, str(tmp), metadata=meta)
    tmp.replace(path)
    return path


def load_head3(target: Any, path: Path) -> Eagle3Head:
    """The head at path, in target's dtype and on its device (eval); refuses another target."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    if not path.is_file():
        raise ValueError(
            f"no EAGLE-3 head weights at {path}: train one (python -m specviz.train heads3), "
            "export it (python -m specviz.train heads-export eagle3), or use another drafter"
        )
    with safe_open(str(path), "pt") as handle:
        meta = handle.metadata() or {}
    if meta.get("fingerprint") != fingerprint(target):
        raise ValueError(
            f"the eagle drafters cannot draft for this target: this EAGLE-3 head was trained "
            f"on the features of {meta.get('target') or 'another model'} (fingerprint "
            f"{meta.get('fingerprint')}); this target's is {fingerprint(target)}. Train one for "
            "it (python -m specviz.train heads-all), or use another drafter"
        )
    tensors = load_file(str(path))
    vocab = tensors["vocab"].long()
    head = Eagle3Head(EagleShape(**json.loads(meta["shape"])), vocab)
    head.load_state_dict({k: v.long() if k == "vocab" else v.float() for k, v in tensors.items()})
    weight = target.get_output_embeddings().weight
    return head.to(device=weight.device, dtype=weight.dtype).eval()
