"""What one target pass over a token tree costs, against a plain 1-token step: r(N).

A tree round's target pass scores the fresh token and the tree's N nodes at once, through
transformers' forward with a 4D attention mask; a chain round's scores the fresh token and
its D drafts causally. Both are timed here over the same cached prefix, interleaved with the
plain 1-token step they are divided by, medians after a warm-up.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from specviz.bench.trees import top_k_capacity
from specviz.core.cache import KVCache
from specviz.core.decoding import clock
from specviz.tree.decoding import tree_inputs
from specviz.tree.proposal import TokenTree

PASS_REPEATS = 15  # timed passes of each shape, after WARMUP untimed ones
WARMUP = 3


@dataclass(frozen=True, kw_only=True)
class PassTiming:
    """One pass shape's median seconds and its ratio to the plain 1-token step."""

    nodes: int  # the sweep's N: 1 the chain (depth drafts, causal), else N tree nodes; 0 plain
    tokens: int  # tokens in the pass: the fresh token and the drafts
    mask: str  # "causal" (plain step, chain) or "tree" (4D mask)
    seconds: float
    ratio: float  # r(N): seconds / the plain 1-token step's seconds


def timing_tree(nodes: int, depth: int, width: int) -> TokenTree:
    """A top-k shaped tree of `nodes` nodes, filled level by level: `width` children of the
    root, then `width` children for each of a level's first `width` nodes, down to `depth`.

    Only its shape is used (the tokens do not change a pass's cost). ValueError when the
    shape cannot hold that many nodes.
    """
    most = top_k_capacity(depth, width)
    if nodes > most:
        raise ValueError(
            f"a tree of depth {depth} and width {width} holds at most {most} nodes "
            f"(got {nodes}): raise --tree-width or --tree-depth, or lower the node budget"
        )
    parents: list[int] = []
    level = [-1]
    while len(parents) < nodes:
        grown: list[int] = []
        for parent in level[:width]:
            for _ in range(width):
                if len(parents) < nodes:
                    parents.append(parent)
                    grown.append(len(parents) - 1)
        level = grown
    return TokenTree(
        tokens=torch.zeros(nodes, dtype=torch.long),
        parents=tuple(parents),
        q_draft=torch.zeros(nodes + 1, 1),
        sampled=(False,) * nodes,
        forward_calls=0,
    )


def _shapes(
    prompt_ids: list[int], nodes: Sequence[int], depth: int, width: int, held: int
) -> list[tuple[int, str, list[int], Tensor | None, Tensor | None]]:
    """(N, mask, tokens, positions, visible) of each pass: the plain step, then each N."""
    root = prompt_ids[-1]
    most = max([*nodes, depth])
    drafts = (prompt_ids * (most // len(prompt_ids) + 1))[:most]
    shapes: list[tuple[int, str, list[int], Tensor | None, Tensor | None]] = [
        (0, "causal", [root], None, None)
    ]
    for n in nodes:
        if n == 1:  # the chain: the fresh token and depth drafts, causal as in the chain loop
            shapes.append((1, "causal", [root, *drafts[:depth]], None, None))
            continue
        positions, visible = tree_inputs(timing_tree(n, depth, width), 1, held, held)
        shapes.append((n, "tree", [root, *drafts[:n]], positions, visible))
    return shapes


@torch.no_grad()
def tree_pass_timings(
    target: Any,
    prompt_ids: list[int],
    nodes: Sequence[int],
    *,
    depth: int,
    width: int,
    repeats: int = PASS_REPEATS,
    make_cache: Callable[[Any], KVCache] = KVCache,
) -> list[PassTiming]:
    """r(N) for each N in nodes (1: the chain of `depth` drafts), over prompt_ids cached.

    Each repeat times the plain 1-token step and every shape once, in that order, cutting the
    cache back to the prompt after each pass; the first WARMUP repeats are not counted.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1 (got {repeats})")
    if len(prompt_ids) < 2:
        raise ValueError("timing a pass needs a prompt of at least 2 tokens")
    cache = make_cache(target)
    device = target.device
    cache.forward(torch.tensor(prompt_ids[:-1], device=device), keep=1)
    held = len(cache)
    shapes = _shapes(prompt_ids, nodes, depth, width, held)
    times: list[list[float]] = [[] for _ in shapes]
    for _ in range(WARMUP + repeats):
        for seconds, (_n, _mask, tokens, positions, visible) in zip(times, shapes, strict=True):
            ids = torch.tensor(tokens, device=device)  # (1 + drafts,)
            start = clock(device)
            cache.forward(
                ids,
                keep=len(tokens),
                positions=None if positions is None else positions.to(device),
                visible=None if visible is None else visible.to(device),
            )
            seconds.append(clock(device) - start)
            cache.crop(held)
    medians = [statistics.median(t[WARMUP:]) for t in times]
    return [
        PassTiming(nodes=n, tokens=len(tokens), mask=mask, seconds=s, ratio=s / medians[0])
        for (n, mask, tokens, _p, _v), s in zip(shapes, medians, strict=True)
    ]
