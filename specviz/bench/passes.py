"""What a target pass over k new tokens costs: transformers' forward and specviz.fast.lean's.

The verification ratio r (seconds per pass of γ + 1 tokens / seconds per 1-token step) is what
the Leviathan bound assumes to be 1. This measures it for both forwards of the same loaded
model, one after the other: passes of each width interleaved, one position further each time
(so the context grows as in decoding), medians after a warm-up.

    python -m specviz.bench.passes --widths 1,2,4,5,9 --repeats 25
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
    args = parser.parse_args(argv)
    try:
        widths = sorted({int(w) for w in args.widths.split(",") if w.strip()})
    except ValueError:
        parser.error(f"--widths must be comma-separated integers (got {args.widths!r})")
    if 1 not in widths:
        widths = [1, *widths]  # r needs the 1-token step
    try:
        check(widths, args.repeats)
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
