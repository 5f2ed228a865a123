"""The one-call API for a batch: validate every prompt, decode them together, split by row.

    results = speculative_generate_batch(pair.target, pair.draft, pair.tokenizer, prompts)
    results.rows[1].text  # the second request's text; results.events: every row's events

Row r is seeded sampling.seed + r unless seeds are given, and row r's tokens are those a
single decode of prompt r with that seed writes (specviz.batch.decoding).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from specviz.api import GenerationResult, collect, encode, stop_ids
from specviz.batch.cache import BatchCache
from specviz.batch.decoding import BatchSpeculativeDecoder, batch_autoregressive_events
from specviz.batch.drafters import BatchDrafter, build_batch_drafter
from specviz.checks import check_pair, check_prompt, check_token_ids, vocab_size
from specviz.core.acceptance import EXACT, AcceptanceRule
from specviz.core.config import SamplingConfig, SpeculationConfig, check_max_new_tokens
from specviz.core.events import Event, Finished


@dataclass(frozen=True, kw_only=True)
class BatchResult:
    """A batch decode: one GenerationResult per request, every event, the wall time."""

    rows: tuple[GenerationResult, ...]
    events: tuple[Event, ...]
    seconds: float

    @property
    def new_tokens(self) -> int:
        """Tokens written over all rows."""
        return sum(len(r.tokens) for r in self.rows)


def split(events: Sequence[Event], prompts: Sequence[list[int]], tokenizer: Any) -> BatchResult:
    """Drain a batch's events into a BatchResult (row r: the events with row r)."""
    rows = tuple(
        collect((e for e in events if e.row == r), prompt, tokenizer)
        for r, prompt in enumerate(prompts)
    )
    seconds = max((e.seconds for e in events if isinstance(e, Finished)), default=0.0)
    return BatchResult(rows=rows, events=tuple(events), seconds=seconds)


def batch_prompts(
    target: Any,
    tokenizer: Any,
    prompts: Sequence[str | list[int]],
    max_new_tokens: int,
    *drafts: Any,
) -> list[list[int]]:
    """Every prompt's ids, each checked (against the drafts' contexts too) before any model
    work; an error names the prompt."""
    if isinstance(prompts, str) or not prompts:
        raise ValueError("prompts must be a non-empty list of prompts (texts or token ids)")
    check_max_new_tokens(max_new_tokens)
    ids = []
    for r, prompt in enumerate(prompts):
        try:
            row = encode(tokenizer, prompt)
            check_prompt(row, max_new_tokens, target, *drafts)
            check_token_ids(row, vocab_size(target))
        except ValueError as err:
            raise ValueError(f"prompt {r}: {err}") from None
        ids.append(row)
    return ids


def speculative_stream_batch(
    target: Any,
    drafter: BatchDrafter | Any,
    tokenizer: Any,
    prompts: Sequence[str | list[int]],
    *,
    sampling: SamplingConfig,
    speculation: SpeculationConfig,
    rule: AcceptanceRule = EXACT,
    stop: Collection[int] | None = None,
    seeds: Sequence[int] | None = None,
    cache: BatchCache | None = None,
) -> tuple[list[list[int]], Iterator[Event]]:
    """Validate everything, then return the prompts' ids and the lazy event stream.

    drafter: a BatchDrafter (it serves any number of rows), or a draft model (the "model"
    drafter); seeds: one per prompt (default sampling.seed + row); cache: the target's empty
    batch cache (None: specviz.batch.cache.batch_cache's).
    """
    if drafter is None:
        raise ValueError("no drafter given: pass a draft model or a batch drafter")
    model = None if isinstance(drafter, BatchDrafter) else drafter
    if model is not None:
        check_pair(target, model)
    drafts = [] if model is None else [model]
    ids = batch_prompts(target, tokenizer, prompts, speculation.max_new_tokens, *drafts)
    if model is not None:
        drafter = build_batch_drafter("model", target=target, draft=model)
    decoder = BatchSpeculativeDecoder(
        target,
        drafter,
        ids,
        sampling=sampling,
        speculation=speculation,
        stop_ids=stop_ids(target, tokenizer) if stop is None else frozenset(stop),
        rule=rule,
        seeds=seeds,
        cache=cache,
    )
    return ids, decoder.events()


def speculative_generate_batch(
    target: Any,
    drafter: BatchDrafter | Any,
    tokenizer: Any,
    prompts: Sequence[str | list[int]],
    *,
    sampling: SamplingConfig | None = None,
    speculation: SpeculationConfig | None = None,
    rule: AcceptanceRule = EXACT,
    stop: Collection[int] | None = None,
    seeds: Sequence[int] | None = None,
) -> BatchResult:
    """Speculative sampling of every prompt together; each row's law is the target's.

    drafter: a draft model, or build_batch_drafter(name, target=..., draft=...) for one of
    the batched drafters (BATCH_DRAFTERS); seeds: one per prompt (default sampling.seed + row).
    """
    ids, events = speculative_stream_batch(
        target,
        drafter,
        tokenizer,
        prompts,
        sampling=sampling or SamplingConfig(),
        speculation=speculation or SpeculationConfig(),
        rule=rule,
        stop=stop,
        seeds=seeds,
    )
    return split(list(events), ids, tokenizer)


def autoregressive_generate_batch(
    target: Any,
    tokenizer: Any,
    prompts: Sequence[str | list[int]],
    *,
    sampling: SamplingConfig | None = None,
    max_new_tokens: int = 64,
    stop: Collection[int] | None = None,
    seeds: Sequence[int] | None = None,
) -> BatchResult:
    """Plain sampling of every prompt together, through the same batched cache path."""
    ids = batch_prompts(target, tokenizer, prompts, max_new_tokens)
    events = batch_autoregressive_events(
        target,
        ids,
        sampling=sampling or SamplingConfig(),
        max_new_tokens=max_new_tokens,
        stop_ids=stop_ids(target, tokenizer) if stop is None else frozenset(stop),
        seeds=seeds,
    )
    return split(list(events), ids, tokenizer)
