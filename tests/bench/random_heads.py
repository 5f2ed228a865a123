"""Random drafting-head weights saved for a tiny test target, as `--heads DIR` reads them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..heads.helpers import save_random_heads as save_heads


def save_random_heads(target: Any, folder: Path, seed: int, head_tokens: torch.Tensor) -> Path:
    """Write a random EAGLE-3 head and random Medusa heads (3) for target into folder."""
    return save_heads(target, folder, seed, head_tokens)
