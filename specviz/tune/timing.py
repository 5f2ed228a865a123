"""What a model's forward pass costs, timed on the machine at hand.

A *pass* is one forward of a model over some new tokens after a cached prefix. Passes of
several shapes are timed interleaved: every repeat times each shape once, in order, so that
the machine's drift touches them alike; the first `warmup` repeats are not counted, and each
shape's seconds are the median of the rest. Ratios against a plain 1-token step are what the
speedup arithmetic reads: r(k) for a causal pass over k tokens (a chain's verification), r(N)
for a pass over a token tree of N nodes, and the same at B rows through the batched cache.
measure_costs prices a drafter's rounds: a draft step right after a target pass, and a target
pass over 1..k tokens (PassCosts, what `specviz bench replay` replays policies at).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache

from specviz.batch.cache import batch_cache
from specviz.core.cache import CachedForward, KVCache, forward_kwargs
from specviz.core.decoding import clock
from specviz.core.drafter import Drafter, SharesTargetCache
from specviz.tree.decoding import tree_inputs
from specviz.tree.proposal import TokenTree, top_k_shape

PASS_PROMPT = 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'  # passes' prefix
TARGET = "target"  # the target's passes among batch_pass_timings' (the others: each drafter's)
Pass = tuple[Any, Any, dict[str, Any], Any]  # (cache, its input, forward's keywords, held)


def interleaved(shapes: Sequence[Callable[[], float]], repeats: int, warmup: int) -> list[float]:
    """Each shape's median seconds (a shape times itself and returns its seconds), every repeat
    timing each shape once, in order; the first warmup repeats are not counted. ValueError for
    fewer than one counted repeat."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1 (got {repeats})")
    times: list[list[float]] = [[] for _ in shapes]
    for _ in range(warmup + repeats):
        for seconds, shape in zip(times, shapes, strict=True):
            seconds.append(shape())
    return [statistics.median(t[warmup:]) for t in times]


def pass_medians(passes: Sequence[Pass], device: Any, repeats: int, warmup: int) -> list[float]:
    """Each pass's median seconds, interleaved: the cache's forward over its input, timed on
    device, then the cache cut back to what it held before (crop(held))."""

    def timer(cache: Any, fed: Any, kwargs: dict[str, Any], held: Any) -> Callable[[], float]:
        def timed() -> float:
            start = clock(device)
            cache.forward(fed, **kwargs)
            seconds = clock(device) - start
            cache.crop(held)
            return seconds

        return timed

    return interleaved([timer(*p) for p in passes], repeats, warmup)


def causal_pass_seconds(
    make_cache: Callable[[Any], CachedForward],
    target: Any,
    prompt_ids: list[int],
    widths: Sequence[int],
    repeats: int,
    warmup: int = 3,
) -> dict[int, float]:
    """Median seconds of a target pass over k tokens after the prompt, for each k in widths, on
    the forward make_cache builds; each pass keeps one position, so the context grows as it
    does in decoding. ValueError unless widths are positive and repeats exceed the warm-up."""
    if not widths or min(widths) < 1:
        raise ValueError(f"widths must be positive token counts (got {list(widths)})")
    if repeats <= warmup:
        raise ValueError(f"--repeats must exceed the {warmup} warm-up passes (got {repeats})")
    tiled = prompt_ids * (max(widths) // len(prompt_ids) + 1)  # enough tokens for any width
    ids = torch.tensor(tiled, device=target.device)  # (≥ max width,)
    cache = make_cache(target)
    cache.forward(torch.tensor(prompt_ids, device=target.device), keep=1)

    def timer(k: int) -> Callable[[], float]:
        def timed() -> float:
            start = clock(target.device)
            cache.forward(ids[:k])  # (k, V); the tokens' values do not change the cost
            seconds = clock(target.device) - start
            cache.crop(len(cache) - k + 1)
            return seconds

        return timed

    medians = interleaved([timer(k) for k in widths], repeats - warmup, warmup)
    return dict(zip(widths, medians, strict=True))


def binary_tree(nodes: int) -> TokenTree:
    """A tree of `nodes` nodes, two children a node, breadth first (tokens all 0)."""
    parents = tuple(-1 if i < 2 else i // 2 - 1 for i in range(nodes))
    return TokenTree(
        tokens=torch.zeros(nodes, dtype=torch.long),
        parents=parents,
        q_draft=torch.zeros(nodes + 1, 1),
        sampled=(False,) * nodes,
        forward_calls=0,
    )


@torch.no_grad()
def tree_verify_seconds(
    make_cache: Callable[[Any], Any],
    target: Any,
    prompt_ids: list[int],
    nodes: int,
    repeats: int,
    warmup: int = 3,
) -> tuple[float, float]:
    """Median seconds of a 1-token step and of a tree verification as the tree decoder runs it
    (the root and binary_tree(nodes) in one pass, each node at its depth's position seeing the
    prefix and its ancestors, then keep_only of the prefix and the leftmost path), interleaved
    on the forward make_cache builds. ValueError unless repeats exceed the warm-up."""
    if nodes < 1 or repeats <= warmup:
        raise ValueError(f"--repeats must exceed the {warmup} warm-up passes, nodes be >= 1")
    tree, path = binary_tree(nodes), [0]
    while 2 * path[-1] + 2 < nodes:  # the leftmost path: node 0, its first child, ...
        path.append(2 * path[-1] + 2)
    device = target.device
    cache = make_cache(target)
    cache.forward(torch.tensor(prompt_ids, device=device), keep=1)
    token = torch.tensor(prompt_ids[-1:], device=device)

    def step() -> float:
        start = clock(device)
        cache.forward(token)  # the context grows by one position a repetition
        return clock(device) - start

    def verify() -> float:
        held = len(cache)
        positions, visible = tree_inputs(tree, 1, held, held)
        start = clock(device)
        cache.forward(
            torch.cat([token, tree.tokens.to(device)]),
            keep=nodes + 1,
            positions=positions.to(device),
            visible=visible.to(device),
        )
        cache.keep_only(torch.tensor([*range(held + 1), *(held + 1 + i for i in path)]))
        seconds = clock(device) - start
        cache.crop(held)
        return seconds

    one, verified = interleaved([step, verify], repeats - warmup, warmup)
    return one, verified


@dataclass(frozen=True, kw_only=True)
class PassTiming:
    """One tree pass shape's median seconds and its ratio to the plain 1-token step."""

    nodes: int  # N: 1 the chain (depth drafts, causal), else N tree nodes; 0 the plain step
    tokens: int  # tokens in the pass: the fresh token and the drafts
    mask: str  # "causal" (plain step, chain) or "tree" (4D mask)
    seconds: float
    ratio: float  # r(N): seconds / the plain 1-token step's seconds


@torch.no_grad()
def tree_pass_timings(
    target: Any,
    ids: list[int],
    nodes: Sequence[int],
    *,
    depth: int,
    width: int,
    repeats: int = 15,
    warmup: int = 3,
) -> list[PassTiming]:
    """r(N) for each N in nodes over ids cached, through transformers' forward: the plain
    1-token step, the chain (N = 1: the fresh token and `depth` drafts, causal) and each top-k
    tree of N nodes (specviz.tree.proposal.top_k_shape, a 4D tree mask), the cache cut back to
    the prompt after each pass."""
    if len(ids) < 2:
        raise ValueError("timing a pass needs a prompt of at least 2 tokens")
    cache, device = KVCache(target), target.device
    cache.forward(torch.tensor(ids[:-1], device=device), keep=1)
    held, root, most = len(cache), ids[-1], max([*nodes, depth])
    drafts = (ids * (most // len(ids) + 1))[:most]
    shapes: list[tuple[int, str, list[int], dict[str, Any]]] = [(0, "causal", [root], {})]
    for n in nodes:
        if n == 1:
            shapes.append((1, "causal", [root, *drafts[:depth]], {}))
            continue
        positions, visible = tree_inputs(top_k_shape(n, depth, width), 1, held, held)
        masks = {"positions": positions.to(device), "visible": visible.to(device)}
        shapes.append((n, "tree", [root, *drafts[:n]], masks))
    passes = [
        (cache, torch.tensor(tokens, device=device), {"keep": len(tokens), **masks}, held)
        for _n, _mask, tokens, masks in shapes
    ]
    medians = pass_medians(passes, device, repeats, warmup)
    return [
        PassTiming(nodes=n, tokens=len(tokens), mask=mask, seconds=s, ratio=s / medians[0])
        for (n, mask, tokens, _), s in zip(shapes, medians, strict=True)
    ]


@torch.no_grad()
def batch_pass_timings(
    target: Any,
    drafting: dict[str, Any],
    prompts: Sequence[list[int]],
    batch_sizes: Sequence[int],
    widths: Sequence[int],
    *,
    repeats: int = 7,
    warmup: int = 2,
) -> list[dict[str, Any]]:
    """Per batch size B: the target (TARGET) over B rows of 1 token and of each width in
    widths, and each drafting model (by name) over B rows of 1 token, through the batch
    decoders' cache (specviz.batch.cache.batch_cache) after the first B prompts (all but their
    last token) are cached. A row's tokens are its
    last prompt token, then prompt tokens again (a pass's cost does not depend on which tokens
    it scores). Each a dict: batch_size, model, tokens_per_row, seconds."""
    if max(batch_sizes) > len(prompts):
        raise ValueError(f"{len(prompts)} prompts cannot fill a batch of {max(batch_sizes)}")
    out: list[dict[str, Any]] = []
    models = {TARGET: target, **drafting}
    kinds = {name: batch_cache(model) for name, model in models.items()}  # lean weights fused once
    for size in batch_sizes:
        rows = [list(p) for p in prompts[:size]]
        caches = {name: kind.empty() for name, kind in kinds.items()}
        for cache in caches.values():
            cache.add_rows(size)
            if any(len(p) > 1 for p in rows):
                cache.forward([p[:-1] for p in rows], keep=1)
        shapes = [(TARGET, w) for w in dict.fromkeys([1, *widths])] + [(d, 1) for d in drafting]
        passes = [
            (
                caches[name],
                [[p[-1], *(p * (w // len(p) + 1))[: w - 1]] for p in rows],
                {"keep": w},
                caches[name].lengths,
            )
            for name, w in shapes
        ]
        seconds = pass_medians(passes, target.device, repeats, warmup)
        out += [
            {"batch_size": size, "model": name, "tokens_per_row": w, "seconds": s}
            for (name, w), s in zip(shapes, seconds, strict=True)
        ]
    return out


@torch.no_grad()
def step_times(
    target: Any, batch_sizes: Sequence[int], context: int = 64, steps: int = 5
) -> list[tuple[int, float]]:
    """Seconds per plain decode step (one new token per row) against batch size, through
    transformers' cache: each size a prompt pass of `context` random tokens a row (seeded), one
    untimed step (a new shape builds its kernels on first use), then the median of `steps`."""
    out = []
    gen = torch.Generator().manual_seed(0)
    for b in batch_sizes:
        ids = torch.randint(int(target.config.vocab_size), (b, context), generator=gen)
        ids = ids.to(target.device)
        kv = {forward_kwargs(target)[0]: DynamicCache(config=target.config)}
        target(input_ids=ids, use_cache=True, **kv)
        target(input_ids=ids[:, -1:], use_cache=True, **kv)
        times = []
        for _ in range(steps):
            start = clock(target.device)
            target(input_ids=ids[:, -1:], use_cache=True, **kv)
            times.append(clock(target.device) - start)
        out.append((b, statistics.median(times)))
    return out


@dataclass(frozen=True, kw_only=True)
class PassCosts:
    """Measured seconds: one draft step, and a target pass over k tokens (verify[k - 1])."""

    draft_step: float
    verify: tuple[float, ...]

    def target(self, k: int) -> float:
        """Seconds of a k-token pass; beyond the measured widths, the last step extrapolated."""
        n = len(self.verify)
        if k <= n:
            return self.verify[k - 1]
        slope = self.verify[-1] - self.verify[-2] if n > 1 else 0.0
        return self.verify[-1] + max(slope, 0.0) * (k - n)


@torch.no_grad()
def measure_costs(
    target: Any,
    drafter: Drafter,
    prompt_ids: list[int],
    widths: int,
    repeats: int = 7,
    make_cache: Callable[[Any], CachedForward] = KVCache,
) -> PassCosts:
    """Time the target's passes over 1..widths tokens, each followed by 3 draft steps.

    As in a real round, draft steps run right after a target pass (which has pushed the draft's
    weights out of the CPU's caches): timed alone, back to back, they would look cheaper.
    make_cache: the target's forward (transformers' by default; specviz.fast.lean's for a lean
    target). A drafter that shares the target's cache (a drafting head) is timed on its own
    forward of the target instead: the one its rounds verify through, which records the
    features it drafts from.
    """
    if isinstance(drafter, SharesTargetCache):
        cache = drafter.target_cache(target)
    else:
        cache = make_cache(target)
    cache.forward(torch.tensor(prompt_ids, device=target.device))
    held = len(cache)
    drafter.prefill(prompt_ids[:-1])
    generator = torch.Generator(device=target.device)
    verify: dict[int, list[float]] = {k: [] for k in range(1, widths + 1)}
    steps: list[float] = []
    for repeat in range(repeats + 1):  # interleaved, so that drift touches every width alike
        for k, times in verify.items():
            start = clock(target.device)
            cache.forward(torch.tensor(prompt_ids[-1:] * k, device=target.device))
            middle = clock(target.device)
            for _ in range(3):
                drafter.propose(prompt_ids, 1, generator, ())
                drafter.rollback(len(prompt_ids))
            end = clock(target.device)
            cache.crop(held)
            if repeat:  # the first round warms up every width
                times.append(middle - start)
                steps.append((end - middle) / 3)
    return PassCosts(
        draft_step=statistics.median(steps),
        verify=tuple(statistics.median(v) for v in verify.values()),
    )
