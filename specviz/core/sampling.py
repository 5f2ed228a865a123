"""Pure sampling math: logits → probabilities (temperature, top-k, top-p) and seeded draws."""

from __future__ import annotations

import torch
from torch import Tensor

from specviz.core.config import SamplingConfig


def logits_to_probs(logits: Tensor, sampling: SamplingConfig) -> Tensor:
    """Warp logits (..., V) into probabilities (..., V); T = 0 gives the one-hot argmax."""
    logits = logits if logits.dtype == torch.float64 else logits.float()
    if sampling.greedy:
        top = logits.argmax(dim=-1, keepdim=True)  # (..., 1)
        return torch.zeros_like(logits).scatter_(-1, top, 1.0)
    logits = logits / sampling.temperature
    if 0 < sampling.top_k < logits.shape[-1]:
        kth = torch.topk(logits, sampling.top_k, dim=-1).values[..., -1:]  # (..., 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if sampling.top_p < 1.0:
        probs = _nucleus(probs, sampling.top_p)
    return probs


def _nucleus(probs: Tensor, top_p: float) -> Tensor:
    """Keep the smallest top set of tokens whose mass reaches top_p; renormalise. (..., V)."""
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass strictly above each token
    sorted_probs = sorted_probs.masked_fill(mass_before >= top_p, 0.0)  # the top token always stays
    kept = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
    return kept / kept.sum(dim=-1, keepdim=True)


def sample(probs: Tensor, generator: torch.Generator) -> int:
    """Draw one token id from probs (V,): invert its CDF at one U[0, 1) draw.

    Exact for any probs (zero-probability tokens are never drawn), and cheaper than
    torch.multinomial over a 49k vocabulary on a CPU. One-hot rows give their argmax.
    """
    cdf = probs.double().cumsum(dim=-1)  # (V,)
    u = torch.rand((), generator=generator, dtype=torch.float64, device=probs.device) * cdf[-1]
    token = int(torch.searchsorted(cdf, u[None], right=True))  # first index with cdf > u
    if token >= probs.shape[0]:  # u rounded up to the total mass: take the last possible token
        token = int(probs.nonzero()[-1])
    return token


def uniform(n: int, generator: torch.Generator, like: Tensor) -> Tensor:
    """n independent U[0, 1) draws (n,) on like's device, in like's dtype."""
    return torch.rand(n, generator=generator, dtype=like.dtype, device=like.device)
