"""Random drafting-head weights saved for a tiny test target, as `--heads DIR` reads them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch

from specviz.heads.cache import EagleCache, MedusaCache
from specviz.heads.weights import KINDS, save_head

from ..heads.helpers import random_head


def save_random_heads(target: Any, folder: Path, seed: int, head_tokens: torch.Tensor) -> Path:
    """Write a random EAGLE head and random Medusa heads (3) for target into folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for kind in KINDS:
        cache = random_head(kind, target, seed, head_tokens)
        module = cache.head if isinstance(cache, EagleCache) else cast(MedusaCache, cache).heads
        save_head(module, kind, head_tokens, target, {}, folder)
    return folder
