"""Random drafting heads for the tiny test targets (weights drawn under a forked RNG)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from specviz.heads.cache import EagleCache, HeadCache, MedusaCache
from specviz.heads.eagle import EagleHead, EagleShape
from specviz.heads.medusa import MedusaHeads
from specviz.heads.weights import KINDS, save_head


def random_head(kind: str, target: Any, seed: int, head_tokens: torch.Tensor) -> HeadCache:
    """A head of `kind` with every weight random (none left at its zero init), float64."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if kind == "eagle":
            module: torch.nn.Module = EagleHead(EagleShape.of(target.config))
        else:
            module = MedusaHeads(int(target.config.hidden_size), 3)
        with torch.no_grad():
            for param in module.parameters():
                param.normal_(0.0, 1.0 / param.shape[-1] ** 0.5)
    module = module.to(torch.float64).eval()
    if isinstance(module, EagleHead):
        return EagleCache(target, module, head_tokens)
    assert isinstance(module, MedusaHeads)
    return MedusaCache(target, module, head_tokens)


def save_random_heads(target: Any, folder: Path, seed: int, head_tokens: torch.Tensor) -> Path:
    """Write random eagle and medusa heads for target to folder (as the trainer saves them)."""
    folder.mkdir(parents=True, exist_ok=True)
    for kind in KINDS:
        cache = random_head(kind, target, seed, head_tokens)
        assert isinstance(cache, EagleCache | MedusaCache)
        module = cache.head if isinstance(cache, EagleCache) else cache.heads
        save_head(module, kind, head_tokens, target, {"step": 0}, folder)
    return folder
