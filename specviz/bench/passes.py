"""What a target pass over k new tokens costs: transformers' forward and specviz.fast.lean's.

The verification ratio r (seconds per pass of γ + 1 tokens / seconds per 1-token step) is what
the Leviathan bound assumes to be 1. This measures it for both forwards of the same loaded
model, one after the other: passes of each width interleaved, one position further each time
(so the context grows as in decoding), medians after a warm-up.

    python -m specviz.bench.passes --widths 1,2,4,5,9 --repeats 25

--tree-nodes N also times a tree verification as the tree decoder runs it: the next token (the
root) and N drafted nodes in one pass (a binary tree; each node at the position of its depth,
seeing the prefix and its ancestors), then the compaction that keeps the prefix and one path.
r(N) is its time over a 1-token step's on the same forward, the two timed interleaved, on
transformers' forward, specviz.fast.lean's, and specviz.fast.lean's recording the fused layers
an EAGLE-3 head reads (what `eagle3-tree --lean-target` verifies through).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import torch

from specviz.core.cache import CachedForward, KVCache
from specviz.core.decoding import clock
from specviz.fast.lean import lean_problem, lean_target_cache
from specviz.models.loading import load_pair
from specviz.tree.decoding import tree_inputs
from specviz.tree.proposal import TokenTree

PROMPT = 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'
WARMUP = 3


def pass_seconds(
    make_cache: Callable[[Any], CachedForward],
    target: Any,
    prompt_ids: list[int],
    widths: Sequence[int],
    repeats: int,
) -> dict[int, float]:
    """Median seconds of a target pass over k tokens after the prompt, for each k in widths."""
    check(widths, repeats)
    tiled = prompt_ids * (max(widths) // len(prompt_ids) + 1)  # enough tokens for any width
    ids = torch.tensor(tiled, device=target.device)  # (≥ max width,)
    cache = make_cache(target)
    cache.forward(torch.tensor(prompt_ids, device=target.device), keep=1)
    times: dict[int, list[float]] = {k: [] for k in widths}
    for _ in range(repeats):
        for k in widths:
            start = clock(target.device)
            cache.forward(ids[:k])  # (k, V); the tokens' values do not change the cost
            times[k].append(clock(target.device) - start)
            cache.crop(len(cache) - k + 1)  # keep one position: the context grows as it decodes
    return {k: statistics.median(t[WARMUP:]) for k, t in times.items()}


def binary_tree(nodes: int) -> TokenTree:
    """A tree of `nodes` nodes, two children a node, breadth first (tokens all 0)."""
    parents = tuple(-1 if i < 2 else i // 2 - 1 for i in range(nodes))
    return TokenTree(
        tokens=torch.zeros(nodes, dtype=torch.long), parents=parents,
        q_draft=torch.zeros(nodes + 1, 1), sampled=(False,) * nodes, forward_calls=0,
    )  # fmt: skip


def tree_seconds(
    make_cache: Callable[[Any], Any],
    target: Any,
    prompt_ids: list[int],
    nodes: int,
    repeats: int,
) -> tuple[float, float]:
    """Median seconds of a 1-token step and of a tree verification (binary_tree(nodes) after the
    root, in one pass, then keep_only of the prefix and the leftmost path), interleaved."""
    check([nodes], repeats)
    tree = binary_tree(nodes)
    path, node = [], 0
    while node < nodes:  # the leftmost path: node 0, its first child, ...
        path.append(node)
        node = 2 * node + 2
    device = target.device
    cache = make_cache(target)
    cache.forward(torch.tensor(prompt_ids, device=device), keep=1)
    step, verify = [], []
    token = torch.tensor(prompt_ids[-1:], device=device)
    for _ in range(repeats):
        start = clock(device)
        cache.forward(token)
        step.append(clock(device) - start)
        held = len(cache)
        positions, visible = tree_inputs(tree, 1, held, held)
        start = clock(device)
        cache.forward(
            torch.cat([token, tree.tokens.to(device)]), keep=nodes + 1,
            positions=positions.to(device), visible=visible.to(device),
        )  # fmt: skip
        cache.keep_only(torch.tensor([*range(held + 1), *(held + 1 + i for i in path)]))
        verify.append(clock(device) - start)
        cache.crop(held)  # the context grows by one position a repetition
    return statistics.median(step[WARMUP:]), statistics.median(verify[WARMUP:])


def check(widths: Sequence[int], repeats: int) -> None:
    """Raise ValueError unless widths are positive and repeats exceed the warm-up."""
    if not widths or min(widths) < 1:
        raise ValueError(f"widths must be positive token counts (got {list(widths)})")
    if repeats <= WARMUP:
        raise ValueError(f"--repeats must exceed the {WARMUP} warm-up passes (got {repeats})")


def table(results: dict[str, dict[int, float]]) -> list[str]:
    """Markdown rows: ms per pass and r against the same forward's 1-token step."""
    names = list(results)
    out = ["| tokens | " + " | ".join(f"{n}: ms (r)" for n in names) + " |"]
    out.append("|---|" + "---|" * len(names))
    for k in next(iter(results.values())):
        cells = [f"{r[k] * 1e3:.1f} ({r[k] / r[min(r)]:.3f})" for r in results.values()]
        out.append(f"| {k} | " + " | ".join(cells) + " |")
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the pass-cost table for the target of `--target` (default: the bundled one)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="bundled")
    parser.add_argument("--widths", default="1,2,4,5,9", help="tokens per pass, comma-separated")
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument("--no-pack", action="store_true", help="no oneDNN weight pre-packing")
    parser.add_argument(
        "--tree-nodes", type=int, default=0, help="also time a tree of this many nodes (r(N))"
    )
    args = parser.parse_args(argv)
    try:
        widths = sorted({int(w) for w in args.widths.split(",") if w.strip()})
    except ValueError:
        parser.error(f"--widths must be comma-separated integers (got {args.widths!r})")
    if 1 not in widths:
        widths = [1, *widths]  # r needs the 1-token step
    try:
        check(widths, args.repeats)
        if args.tree_nodes:
            check([args.tree_nodes], args.repeats)
    except ValueError as err:
        parser.error(str(err))
    pair = load_pair(args.target, draft=None, pack=not args.no_pack)
    prompt_ids = pair.tokenizer(PROMPT).input_ids
    forwards: dict[str, Callable[[Any], CachedForward]] = {"transformers": KVCache}
    problem = lean_problem(pair.target, wide=True)
    if problem is None:
        forwards["specviz.fast.lean"] = lean_target_cache
    results = {
        name: pass_seconds(make, pair.target, prompt_ids, widths, args.repeats)
        for name, make in forwards.items()
    }
    print(f"threads: {torch.get_num_threads()}, target: {args.target}")
    if problem is not None:
        print(f"specviz.fast.lean does not apply: {problem}")
    print("\n".join(table(results)))
    if args.tree_nodes:
        print("\n".join(tree_table(pair.target, prompt_ids, args.tree_nodes, args.repeats)))
    return 0


def tree_table(target: Any, prompt_ids: list[int], nodes: int, repeats: int) -> list[str]:
    """Markdown rows: per forward, a 1-token step, a tree verification of `nodes`, and r."""
    from specviz.heads.tap import FusedFeatureLean

    forwards: dict[str, Callable[[Any], Any]] = {"transformers": KVCache}
    if lean_problem(target, wide=True) is None:
        forwards["specviz.fast.lean"] = lean_target_cache
        if int(target.config.num_hidden_layers) >= 2:
            forwards["specviz.fast.lean, fused layers"] = FusedFeatureLean
    out = [f"| forward | 1 token: ms | root + {nodes} tree nodes, kept path: ms | r({nodes}) |"]
    out.append("|---|---|---|---|")
    for name, make in forwards.items():
        one, tree = tree_seconds(make, target, prompt_ids, nodes, repeats)
        out.append(f"| {name} | {one * 1e3:.1f} | {tree * 1e3:.1f} | {tree / one:.3f} |")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
