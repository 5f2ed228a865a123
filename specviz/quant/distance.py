"""How far a configuration's outputs are from a reference model's (the fp32 target's).

Terms:
- greedy agreement: decode the reference and the configuration greedily (T = 0) from the same
  prompt; the share of positions where their tokens are equal, and the first position where
  they differ (None: never, over both lengths).
- total variation TV(p, q) = ½ Σ_x |p(x) − q(x)|: 0 for equal laws, 1 for disjoint ones; the
  largest difference in probability the two assign to any set of tokens.
- mean TV along a continuation: feed prompt + continuation (the reference's own sampled
  tokens) to both models and average TV of their next-token distributions over the
  continuation's positions, so both are compared on the same prefixes, the ones the reference
  itself produces.

A speculative decoder has exactly its verifying target's law (Leviathan et al. 2023, checked
by `specviz verify`), so its distance from the fp32 target is its verifying target's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from specviz.core.config import SamplingConfig
from specviz.core.sampling import logits_to_probs


@dataclass(frozen=True, kw_only=True)
class Agreement:
    """Greedy agreement of a configuration's tokens with the reference's."""

    matched: int  # positions where both have a token and it is the same
    compared: int  # max(len(reference), len(tokens)): a missing token counts as a mismatch
    first_divergence: int | None  # first position whose tokens differ (None: identical)

    @property
    def rate(self) -> float:
        """matched / compared (1.0 when both are empty)."""
        return self.matched / self.compared if self.compared else 1.0


def greedy_agreement(reference: Sequence[int], tokens: Sequence[int]) -> Agreement:
    """Position-by-position agreement of `tokens` with `reference` (both generated ids)."""
    compared = max(len(reference), len(tokens))
    same = [a == b for a, b in zip(reference, tokens, strict=False)]
    first = next((i for i, s in enumerate(same) if not s), None)
    if first is None and len(reference) != len(tokens):
        first = len(same)  # one stopped where the other went on
    return Agreement(matched=sum(same), compared=compared, first_divergence=first)


def total_variation(p: Tensor, q: Tensor) -> Tensor:
    """½ Σ |p − q| over the last axis: (..., V), (..., V) → (...); a shorter V is zero-padded."""
    if p.shape[:-1] != q.shape[:-1]:
        raise ValueError(f"distributions over different positions: {p.shape} vs {q.shape}")
    width = max(p.shape[-1], q.shape[-1])
    p = torch.nn.functional.pad(p.double(), (0, width - p.shape[-1]))
    q = torch.nn.functional.pad(q.double(), (0, width - q.shape[-1]))
    return 0.5 * (p - q).abs().sum(dim=-1)


@torch.no_grad()
def next_token_probs(
    model: Any, ids: Sequence[int], start: int, sampling: SamplingConfig | None = None
) -> Tensor:
    """The model's next-token distributions for ids[start:], each given ids[:i]: (n, V).

    One teacher-forced forward of ids (1, L); sampling warps the logits as decoding would
    (default temperature 1, no filters: the model's own law). start must be >= 1.
    """
    if not 1 <= start <= len(ids):
        raise ValueError(f"start must be in [1, {len(ids)}] (got {start})")
    device = next(model.parameters()).device
    batch = torch.tensor([list(ids)], dtype=torch.long, device=device)  # (1, L)
    logits = model(input_ids=batch, use_cache=False).logits[0, start - 1 : len(ids) - 1]  # (n, V)
    return logits_to_probs(logits.float(), sampling or SamplingConfig())


def mean_total_variation(
    reference: Any,
    model: Any,
    ids: Sequence[int],
    start: int,
    sampling: SamplingConfig | None = None,
) -> float:
    """Mean TV between model's and reference's next-token laws over ids[start:] (0.0 if none)."""
    if start == len(ids):
        return 0.0
    p_ref = next_token_probs(reference, ids, start, sampling)  # (n, V)
    q_cfg = next_token_probs(model, ids, start, sampling)  # (n, V)
    return float(total_variation(p_ref, q_cfg).mean())
