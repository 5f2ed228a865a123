"""Measure the suffix memory: bytes per stored token, time per added token, time per speculation.

Two token streams fill a SuffixMemory of --tokens tokens: random text (every token drawn
uniformly from --vocab ids) and a repetitive stream (requests of three of 20 fixed 100-token
templates, 5 % of their tokens replaced at random). For each it prints the bytes the memory
holds per stored token (SuffixMemory.nbytes(); with --tracemalloc also what the allocator
traced while filling it), the CPU time per token added while filling it and then while a
quarter more streams through with eviction, and the CPU time of one drafting round: speculate()
over the memory and a request's own trie, after the 200 tokens before a random point of a
remembered request, as a chain (8 tokens) and as a tree (8 nodes, 4 levels), factor 1,
min_prob 0.1. Run from the repository root:

    python benchmarks/suffix_memory.py --tokens 262144
"""

from __future__ import annotations

import argparse
import random
import time
import tracemalloc
from collections.abc import Callable

from specviz.drafters.suffix.memory import SuffixMemory
from specviz.drafters.suffix.request import RequestTrie
from specviz.drafters.suffix.speculate import speculate

Stream = Callable[[int, random.Random], list[list[int]]]


def random_text(vocab: int) -> Stream:
    """Requests of 200 to 800 tokens drawn uniformly from vocab ids, n tokens in all."""

    def stream(n: int, rng: random.Random) -> list[list[int]]:
        out, total = [], 0
        while total < n:
            length = min(rng.randrange(200, 800), n - total)
            out.append([rng.randrange(vocab) for _ in range(length)])
            total += length
        return out

    return stream


def templates(n: int, rng: random.Random) -> list[list[int]]:
    """Requests of three of 20 fixed 100-token templates, 5 % of tokens replaced, n in all."""
    fixed = random.Random(0)
    base = [[fixed.randrange(32000) for _ in range(100)] for _ in range(20)]
    out, total = [], 0
    while total < n:
        picks = [t for _ in range(3) for t in rng.choice(base)]
        request = [t if rng.random() >= 0.05 else rng.randrange(32000) for t in picks]
        out.append(request[: n - total])
        total += len(out[-1])
    return out


def fill(requests: list[list[int]], budget: int, trace: bool) -> tuple[SuffixMemory, float, int]:
    """The memory after requests, CPU seconds spent adding them, bytes traced (or 0)."""
    if trace:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0] if trace else 0
    memory = SuffixMemory(max_tokens=budget)
    start = time.process_time()
    for request in requests:
        memory.add(request)
    spent = time.process_time() - start
    traced = tracemalloc.get_traced_memory()[0] - before if trace else 0
    if trace:
        tracemalloc.stop()
    return memory, spent, traced


def round_time(memory: SuffixMemory, rng: random.Random, tree: bool, n: int) -> float:
    """Median CPU seconds of one speculate() over the memory and a request's own trie."""
    held = memory.requests
    times = []
    for _ in range(n):
        request = rng.choice(held)
        end = rng.randrange(1, len(request))
        context = list(request[max(0, end - 200) : end])
        local = RequestTrie(max_depth=memory.max_depth)
        local.append(context)
        start = time.process_time()
        for _ in range(10):
            speculate(
                (memory.store, local), context, max_tokens=8, factor=1.0, min_prob=0.1,
                vocab_size=1 << 31, stop_ids=(), tree=tree, max_depth=4 if tree else None,
            )  # fmt: skip
        times.append((time.process_time() - start) / 10)
    return sorted(times)[len(times) // 2]


def main() -> None:
    """Print the measurements for both streams."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=1 << 18, help="the memory's budget")
    parser.add_argument("--vocab", type=int, default=49152, help="random text's vocabulary")
    parser.add_argument("--rounds", type=int, default=300, help="speculations timed")
    parser.add_argument("--tracemalloc", action="store_true", help="also trace allocations")
    args = parser.parse_args()
    for name, stream in (("random", random_text(args.vocab)), ("templates", templates)):
        rng = random.Random(1)
        memory, spent, traced = fill(stream(args.tokens, rng), args.tokens, args.tracemalloc)
        held = len(memory)
        line = f"{name}: {held} tokens, {memory.nbytes() / held:.1f} bytes/token"
        if args.tracemalloc:
            line += f" ({traced / held:.1f} traced)"
        print(f"{line}, fill {1e6 * spent / held:.1f} us/token")
        more = stream(args.tokens // 4, rng)
        start = time.process_time()
        for request in more:
            memory.add(request)
        spent = time.process_time() - start
        print(
            f"  with eviction {1e6 * spent / sum(map(len, more)):.1f} us/token, "
            f"{memory.nbytes() / len(memory):.1f} bytes/token"
        )
        for tree in (False, True):
            median = round_time(memory, rng, tree, args.rounds)
            print(f"  speculate ({'tree' if tree else 'chain'}): {1e6 * median:.0f} us median")


if __name__ == "__main__":
    main()
