"""`specviz generate --prompt-file FILE --batch N`: every prompt of FILE, N decoded together.

FILE holds one prompt per non-empty line; a line that is a JSON string ("...") is decoded, so a
prompt may hold newlines. Request i (its line's rank) is seeded --seed + i, so its tokens are
those `specviz generate --prompt ... --seed <seed + i>` writes alone, whatever N is.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from typing import Any

from specviz.api import stop_ids
from specviz.batch.api import BatchResult, split
from specviz.batch.decoding import BatchSpeculativeDecoder, batch_autoregressive_events
from specviz.batch.drafters import build_batch_drafter
from specviz.cli.defaults import drafter_options
from specviz.cli.report import summary
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.events import Event
from specviz.drafters.names import BATCH_DRAFTERS
from specviz.jsonl import write_jsonl

MAX_ROWS = 256  # a sanity bound on --batch, far above what a CPU or one GPU gains from


def add_batch_argument(parser: argparse.ArgumentParser) -> None:
    """The --batch flag of `specviz generate`."""
    parser.add_argument(
        "--batch",
        type=int,
        metavar="N",
        help=f"the --prompt-file's lines, N rows at a time (drafters: {', '.join(BATCH_DRAFTERS)})",
    )


def read_prompts(text: str, where: str) -> list[str]:
    """The prompts of a prompt file: one per non-empty line, JSON string lines decoded."""
    prompts = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if line.lstrip().startswith('"'):
            try:
                line = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(
                    f"{where} line {number} starts with '\"' but is not one JSON string "
                    f"({err.msg}): escape it as JSON, or drop the leading quote"
                ) from None
            if not isinstance(line, str) or not line.strip():
                raise ValueError(f"{where} line {number}: the JSON string is empty")
        prompts.append(line)
    if not prompts:
        raise ValueError(f"{where} has no prompts: write one prompt per line")
    return prompts


def check_batch_flags(args: argparse.Namespace) -> None:
    """Refuse what a batched decode cannot take, before anything loads."""
    if args.prompt_file is None:
        raise ValueError("--batch decodes the prompts of --prompt-file (one per line): pass one")
    if not 1 <= args.batch <= MAX_ROWS:
        raise ValueError(f"--batch must be between 1 and {MAX_ROWS} rows (got {args.batch})")
    if not args.plain and args.drafter not in BATCH_DRAFTERS:
        raise ValueError(
            f"--drafter {args.drafter} has no batched form: use one of "
            f"{', '.join(BATCH_DRAFTERS)}, or --plain"
        )
    refused = {
        "--lean-target": args.lean_target,
        "--gamma-policy": args.gamma_policy != "fixed",
        "--confidence": args.confidence != 0.0,
        "--model-gamma": args.model_gamma is not None,
        "--tree-rule": args.tree_rule != "exact",
        "--preset": args.preset is not None,  # a single request's setting
    }
    for flag, given in refused.items():
        if given:
            raise ValueError(f"{flag} does not apply to a batched decode: drop it or --batch")


def run_batches(
    args: argparse.Namespace,
    pair: Any,
    prompts: list[list[int]],
    sampling: SamplingConfig,
    speculation: SpeculationConfig,
) -> BatchResult:
    """Decode the prompts args.batch at a time; rows numbered over the whole file."""
    stops, events, start = stop_ids(pair.target, pair.tokenizer), [], time.perf_counter()
    for first in range(0, len(prompts), args.batch):
        chunk = prompts[first : first + args.batch]
        seeds = [sampling.seed + first + r for r in range(len(chunk))]
        stream = (
            batch_autoregressive_events(
                pair.target,
                chunk,
                sampling=sampling,
                max_new_tokens=speculation.max_new_tokens,
                stop_ids=stops,
                seeds=seeds,
            )
            if args.plain
            else BatchSpeculativeDecoder(
                pair.target,
                build_batch_drafter(
                    args.drafter,
                    target=pair.target,
                    draft=pair.draft,
                    options=drafter_options(args),
                ),
                chunk,
                sampling=sampling,
                speculation=speculation,
                stop_ids=stops,
                seeds=seeds,
            ).events()
        )
        events += [renumbered(e, first) for e in stream]
    result = split(events, prompts, pair.tokenizer)
    return dataclasses.replace(result, seconds=time.perf_counter() - start)


def renumbered(event: Event, first: int) -> Event:
    """event with its row counted from the file's first prompt."""
    return dataclasses.replace(event, row=event.row + first)


def report(args: argparse.Namespace, result: BatchResult, fmt: Any) -> None:
    """Write the events if asked; print every request's text and counts, then the totals."""
    if args.events:
        write_jsonl(result.events, args.events)
    rate = result.new_tokens / result.seconds if result.seconds else float("nan")
    total = {
        "requests": len(result.rows),
        "batch": args.batch,
        "new_tokens": result.new_tokens,
        "seconds": result.seconds,
        "tokens_per_second": rate,
    }
    if args.json:
        print(json.dumps({"requests": [summary(r, fmt) for r in result.rows], "total": total}))
        return
    for i, row in enumerate(result.rows):
        rates = f", accepted {row.accepted}/{row.proposed}" if row.rounds else ""
        print(f"[request {i}] {row.text}")
        print(
            f"  {len(row.tokens)} tokens{rates}, {row.target_calls} target passes, stopped by "
            f"{row.finish_reason} after {row.seconds:.2f} s"
        )
    print(
        f"{total['requests']} requests, {args.batch} at a time: {result.new_tokens} tokens in "
        f"{result.seconds:.2f} s ({rate:.1f} tokens/s)"
    )
