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


NUCLEUS_FIRST_LOOK = 64  # top-p sorts the likeliest this many first (x8 until they suffice)


def _nucleus(probs: Tensor, top_p: float) -> Tensor:
    """Keep the smallest top set of tokens whose mass reaches top_p; renormalise. (..., V).

    Only the likeliest k tokens are sorted, k growing until their mass reaches top_p in every
    row: a token past them has at least that much mass above it, so it is dropped as a sort of
    the whole vocabulary would drop it (a fraction of a full sort's cost at V = 49k)."""
    vocab, k = probs.shape[-1], min(NUCLEUS_FIRST_LOOK, probs.shape[-1])
    while True:
        top, order = probs.topk(k, dim=-1)  # (..., k), descending
        total = top.cumsum(dim=-1)
        if k == vocab or bool((total[..., -1] >= top_p).all()):
            break
        k = min(vocab, 8 * k)
    top = top.masked_fill(total - top >= top_p, 0.0)  # mass strictly above: the top token stays
    kept = torch.zeros_like(probs).scatter_(-1, order, top)
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
