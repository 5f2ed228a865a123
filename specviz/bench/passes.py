"""The pass-cost table (`specviz bench passes`): what a target pass over k new tokens costs
against a 1-token step (r), on transformers' forward and specviz.fast.lean's where it applies.

--tree-nodes N also times a tree verification as the tree decoder runs it: the next token (the
root) and N drafted nodes in one pass, then the compaction that keeps the prefix and one path.
r(N) is its time over a 1-token step's on the same forward, the two timed interleaved, on
transformers' forward, specviz.fast.lean's, and specviz.fast.lean's recording the fused layers
an EAGLE-3 head reads (what `tree-eagle --lean-target` verifies through). The timings are
specviz.tune.timing's.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

import torch

from specviz.core.cache import CachedForward, KVCache
from specviz.fast.lean import lean_problem, lean_target_cache
from specviz.heads.tap import FusedFeatureLean
from specviz.models.loading import load_pair
from specviz.tune.timing import PASS_PROMPT, causal_pass_seconds, tree_verify_seconds

WARMUP = 3  # untimed passes of each width before any is counted


def passes_command(argv: Sequence[str]) -> int:
    """`specviz bench passes`: the pass-cost table for the target of `--target` (default: the
    bundled one), and with --tree-nodes a tree verification's r(N)."""
    parser = argparse.ArgumentParser(
        prog="specviz bench passes",
        description="What a target pass over k new tokens costs "
        "against a 1-token step (r), on transformers' forward and specviz.fast.lean's.",
    )
    parser.add_argument("--target", default="bundled")
    parser.add_argument("--widths", default="1,2,4,5,9", help="tokens per pass, comma-separated")
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument("--no-pack", action="store_true", help="no oneDNN weight pre-packing")
    parser.add_argument(
        "--tree-nodes", type=int, default=0, help="also time a tree of this many nodes (r(N))"
    )
    args = parser.parse_args(argv)
    try:
        widths = sorted({1, *(int(w) for w in args.widths.split(",") if w.strip())})
    except ValueError:
        parser.error(f"--widths must be comma-separated integers (got {args.widths!r})")
    if args.repeats <= WARMUP or min(widths) < 1:  # r needs the 1-token step: always timed
        parser.error(f"--repeats must exceed the {WARMUP} warm-up passes, --widths be >= 1")
    if args.tree_nodes < 0:
        parser.error(f"--tree-nodes must be 0 (no tree) or more (got {args.tree_nodes})")
    pair = load_pair(args.target, draft=None, pack=not args.no_pack)
    prompt_ids = pair.tokenizer(PASS_PROMPT).input_ids
    forwards: dict[str, Callable[[Any], CachedForward]] = {"transformers": KVCache}
    problem = lean_problem(pair.target, wide=True)
    if problem is None:
        forwards["specviz.fast.lean"] = lean_target_cache
    results = {
        name: causal_pass_seconds(make, pair.target, prompt_ids, widths, args.repeats)
        for name, make in forwards.items()
    }
    print(f"threads: {torch.get_num_threads()}, target: {args.target}")
    if problem is not None:
        print(f"specviz.fast.lean does not apply: {problem}")
    print("\n".join(passes_table(results)))
    if args.tree_nodes:
        print("\n".join(tree_table(pair.target, prompt_ids, args.tree_nodes, args.repeats)))
    return 0


def passes_table(results: dict[str, dict[int, float]]) -> list[str]:
    """Markdown rows: ms per pass and r against the same forward's 1-token step."""
    names = list(results)
    out = ["| tokens | " + " | ".join(f"{n}: ms (r)" for n in names) + " |"]
    out.append("|---|" + "---|" * len(names))
    for k in next(iter(results.values())):
        cells = [f"{r[k] * 1e3:.1f} ({r[k] / r[min(r)]:.3f})" for r in results.values()]
        out.append(f"| {k} | " + " | ".join(cells) + " |")
    return out


def tree_table(target: Any, prompt_ids: list[int], nodes: int, repeats: int) -> list[str]:
    """Markdown rows: per forward, a 1-token step, a tree verification of `nodes`, and r."""
    forwards: dict[str, Callable[[Any], Any]] = {"transformers": KVCache}
    if lean_problem(target, wide=True) is None:
        forwards["specviz.fast.lean"] = lean_target_cache
        if int(target.config.num_hidden_layers) >= 2:
            forwards["specviz.fast.lean, fused layers"] = FusedFeatureLean
    out = [f"| forward | 1 token: ms | root + {nodes} tree nodes, kept path: ms | r({nodes}) |"]
    out.append("|---|---|---|---|")
    for name, make in forwards.items():
        one, tree = tree_verify_seconds(make, target, prompt_ids, nodes, repeats, WARMUP)
        out.append(f"| {name} | {one * 1e3:.1f} | {tree * 1e3:.1f} | {tree / one:.3f} |")
    return out
