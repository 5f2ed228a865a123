"""Medusa heads: K residual blocks on the target's last feature, head k guessing k + 1 ahead.

Terms. The target's feature f_i (D,) is its final-norm hidden state at position i; its own
output head turns f_i into p_target(x_{i+1}). Medusa head k (k = 1..K) is one residual block,
f_i + SiLU(W_k f_i + b_k), read by the same output head restricted to the head tokens S: it
guesses x_{i+1+k} from f_i alone, without the tokens in between (Cai et al. 2024, "Medusa").
Each block starts at zero (W_k = 0, b_k = 0), i.e. as the target's own next-token guess.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class MedusaHeads(nn.Module):
    """f (…, D) → K guessed features (…, K, D), one residual block per head."""

    def __init__(self, width: int, k: int) -> None:
        """K zero-initialised residual blocks of width D."""
        super().__init__()
        blocks = [nn.Linear(width, width) for _ in range(k)]
        for block in blocks:
            nn.init.zeros_(block.weight)
            nn.init.zeros_(block.bias)
        self.blocks = nn.ModuleList(blocks)

    @property
    def k(self) -> int:
        """Number of heads."""
        return len(self.blocks)

    def forward(self, features: Tensor) -> Tensor:
        """f (…, D) → (…, K, D)."""
        return features.unsqueeze(-2) + F.silu(
            torch.stack([block(features) for block in self.blocks], -2)
        )

    def one(self, k: int, features: Tensor) -> Tensor:
        """Head k's (1-based) guessed feature for f (…, D)."""
        block = self.blocks[k - 1]
        out: Tensor = features + F.silu(block(features))
        return out
