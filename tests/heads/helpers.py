"""Random drafting heads for the tiny test targets (weights drawn under a forked RNG)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from specviz.heads.cache import HeadCache, MedusaCache
from specviz.heads.eagle import Eagle3Head, EagleShape
from specviz.heads.eagle_lean import LeanEagle3Cache
from specviz.heads.medusa import MedusaHeads
from specviz.heads.weights import KINDS, save_eagle, save_head


def random_module(kind: str, target: Any, seed: int, head_tokens: torch.Tensor) -> torch.nn.Module:
    """A head module of `kind` with every weight random (none left at its zero init), float64.

    An EAGLE-3 head drafts over head_tokens; its norm weights are drawn around 1 (as trained
    ones are), so its q is not flat.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        shape = EagleShape.of(target.config)
        if kind == "eagle3":
            module: torch.nn.Module = Eagle3Head(shape, head_tokens)
        else:
            module = MedusaHeads(int(target.config.hidden_size), 3)
        with torch.no_grad():
            for name, param in module.named_parameters():
                if kind == "eagle3" and name.startswith("norm"):
                    param.normal_(1.0, 0.2)
                else:
                    param.normal_(0.0, 1.0 / param.shape[-1] ** 0.5)
    return module.to(torch.float64).eval()


def random_head(kind: str, target: Any, seed: int, head_tokens: torch.Tensor) -> HeadCache:
    """A random head of `kind` (random_module) as the cached forward its drafters use."""
    module = random_module(kind, target, seed, head_tokens)
    if isinstance(module, Eagle3Head):
        return LeanEagle3Cache(target, module)
    assert isinstance(module, MedusaHeads)
    return MedusaCache(target, module, head_tokens)


def save_random_heads(target: Any, folder: Path, seed: int, head_tokens: torch.Tensor) -> Path:
    """Write random heads of every kind for target to folder (as the trainers save them)."""
    folder.mkdir(parents=True, exist_ok=True)
    for kind in KINDS:
        module = random_module(kind, target, seed, head_tokens)
        if isinstance(module, Eagle3Head):
            save_eagle(module, target, 0, folder)
        else:
            save_head(module, kind, head_tokens, target, {"step": 0}, folder)
    return folder
