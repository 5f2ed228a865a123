"""Random drafting heads for the tiny test targets (weights drawn under a forked RNG)."""

from __future__ import annotations

from typing import Any

import torch

from specviz.heads.cache import EagleCache, HeadCache, MedusaCache
from specviz.heads.eagle import EagleHead, EagleShape
from specviz.heads.medusa import MedusaHeads


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
    return MedusaCache(target, module, head_tokens)
