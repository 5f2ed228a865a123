"""What a batched pass costs, and the speedup theory predicts from it at each batch size.

At B rows a plain step is one target pass of B x 1 tokens, t_plain(B); a speculative round is
gamma batched draft steps, t_draft(B) each, and one verification pass of B x (gamma + 1) tokens,
t_verify(B, gamma + 1). All are timed through specviz.batch.cache.BatchKVCache, the path the
batch sweep decodes on, over the first B requests' prompts, interleaved, medians after a
warm-up. With alpha measured at B, a round emits E = (1 - alpha^(gamma+1)) / (1 - alpha) tokens a
row, so

    predicted speedup = E * t_plain(B) / (gamma * t_draft(B) + t_verify(B, gamma + 1)).

While the target is weight-bound (reading its weights dominates), the verification pass costs
about a plain step: r = t_verify / t_plain is near 1. As B(gamma + 1) tokens fill the device, r
climbs toward gamma + 1, the cost of as many plain steps. The pass is called token-bound from the
first B where it has gone at least halfway: (r - 1) / gamma >= TOKEN_BOUND.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from specviz.batch.cache import BatchKVCache
from specviz.core.decoding import clock
from specviz.drafters.trimmed import load_head_tokens, trim_head
from specviz.gamma.theory import expected_tokens_per_round

PASS_REPEATS = 7  # timed passes of each shape, after WARMUP untimed ones
WARMUP = 2
TOKEN_BOUND = 0.5  # (r - 1) / gamma from which a verification pass counts as token-bound
TARGET = "target"


@dataclass(frozen=True, kw_only=True)
class BatchPass:
    """One pass shape's median seconds: `model` (the target, or a drafter's draft model) over
    batch_size rows of tokens_per_row new tokens each."""

    batch_size: int
    model: str
    tokens_per_row: int
    seconds: float


def drafting_models(draft: Any, drafters: Sequence[str]) -> dict[str, Any]:
    """The model each batched drafter drafts with (model-trimmed: its trimmed head); n-gram
    lookup has none (its lookups are priced at 0)."""
    models: dict[str, Any] = {}
    for name in drafters:
        if name == "model":
            models[name] = draft
        elif name == "model-trimmed":
            models[name] = trim_head(draft, load_head_tokens(draft))
    return models


def _fed(prompt: list[int], width: int) -> list[int]:
    """A row's tokens for a pass of `width`: its last prompt token, then prompt tokens again
    (a pass's cost does not depend on which tokens it scores)."""
    drafts = list(prompt) * (width // len(prompt) + 1)
    return [prompt[-1], *drafts[: width - 1]]


@torch.no_grad()
def batch_pass_timings(
    target: Any,
    drafting: dict[str, Any],
    prompts: Sequence[list[int]],
    batch_sizes: Sequence[int],
    widths: Sequence[int],
    *,
    repeats: int = PASS_REPEATS,
) -> list[BatchPass]:
    """Per batch size B: the target over B rows of 1 token and of each width in widths, and each
    drafting model over B rows of 1 token, after the first B prompts (all but their last token)
    are cached; each repeat times every shape once, cutting the caches back after each pass."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1 (got {repeats})")
    if max(batch_sizes) > len(prompts):
        raise ValueError(f"{len(prompts)} prompts cannot fill a batch of {max(batch_sizes)}")
    out: list[BatchPass] = []
    for size in batch_sizes:
        rows = [list(p) for p in prompts[:size]]
        shapes = [(TARGET, target, w) for w in dict.fromkeys([1, *widths])]
        shapes += [(name, model, 1) for name, model in drafting.items()]
        models = {TARGET: target, **drafting}
        caches = {name: BatchKVCache(model, size) for name, model in models.items()}
        for cache in caches.values():
            if any(len(p) > 1 for p in rows):
                cache.forward([p[:-1] for p in rows], keep=1)
        held = {name: cache.lengths for name, cache in caches.items()}
        times: list[list[float]] = [[] for _ in shapes]
        for _ in range(WARMUP + repeats):
            for seconds, (name, model, width) in zip(times, shapes, strict=True):
                fed = [_fed(p, width) for p in rows]
                start = clock(model.device)
                caches[name].forward(fed, keep=width)
                seconds.append(clock(model.device) - start)
                caches[name].crop(held[name])
        out += [
            BatchPass(
                batch_size=size,
                model=name,
                tokens_per_row=width,
                seconds=statistics.median(t[WARMUP:]),
            )
            for t, (name, _, width) in zip(times, shapes, strict=True)
        ]
    return out


def pass_seconds(passes: Sequence[dict[str, Any]]) -> dict[tuple[int, str, int], float]:
    """Saved pass timings by (batch size, model, tokens a row)."""
    return {
        (int(p["batch_size"]), str(p["model"]), int(p["tokens_per_row"])): float(p["seconds"])
        for p in passes
    }


def predicted_speedup(alpha: float, gamma: int, plain: float, draft: float, verify: float) -> float:
    """E[tokens a round](alpha, gamma) * t_plain / (gamma t_draft + t_verify): seconds a pass."""
    a = min(max(alpha, 0.0), 1.0) if alpha == alpha else 0.0  # nan (nothing verified): 0
    return expected_tokens_per_round(a, gamma) * plain / (gamma * draft + verify)


def token_bound_share(ratio: float, gamma: int) -> float:
    """(r - 1) / gamma: 0 where the gamma + 1-token pass costs a plain step, 1 where it costs
    gamma + 1 of them."""
    return (ratio - 1.0) / gamma


def token_bound_from(ratios: Sequence[tuple[int, float]], gamma: int) -> int | None:
    """The first batch size (ascending) whose verification pass is token-bound, None if none."""
    for size, ratio in sorted(ratios):
        if token_bound_share(ratio, gamma) >= TOKEN_BOUND:
            return size
    return None
