"""The batch sweep's decodes: the same requests at each batch size, plainly and speculatively.

N requests (token ids, checked) are decoded in consecutive groups of B rows for each batch size
B: plainly (batch_autoregressive_events) and speculatively (BatchSpeculativeDecoder with each
batched drafter at each fixed gamma), on the same requests with the same seeds: request i of
repetition k is seeded k N + i whatever B, so at T = 0 every run writes the same tokens. One
untimed warm-up runs each setting's first group of each B; then per repetition each B runs its
plain decode and every speculative setting, in an order that rotates each repetition. A run
keeps its wall time over all N requests, each request's tokens and latency (its
Finished.seconds within its group) and its verdict counts (`specviz bench batch` turns runs
into rows: specviz.bench.sweeps.batch).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from specviz.batch.decoding import BatchSpeculativeDecoder, batch_autoregressive_events
from specviz.batch.drafters import build_batch_drafter
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.decoding import clock
from specviz.core.events import EMITTING, Accepted, Event, Finished, Rejected, RoundSummary, Sampled

Setting = tuple[str, int]  # (batched drafter, gamma)
Run = Callable[[list[list[int]], list[int]], Iterator[Event]]  # (group prompts, seeds) → events
Progress = Callable[[int, int, str], None]  # (done, total, label)


@dataclass(frozen=True, kw_only=True)
class Decode:
    """One decode of all N requests: wall seconds and, per request, its tokens and latency."""

    seconds: float
    tokens: tuple[tuple[int, ...], ...]
    latency: tuple[float, ...]
    # rounds (batch rounds; plain: steps), row_rounds (each row's rounds, summed), proposed,
    # accepted, rejected, and the batch passes' draft_seconds and target_seconds
    counts: dict[str, float]


def _tally(
    events: Sequence[Event], rows: int
) -> tuple[list[list[int]], list[float], dict[str, float]]:
    """A group's events: each row's tokens and latency, and the group's counts (a batch
    round's, or plain step's, shared timings counted once, not once per row)."""
    tokens: list[list[int]] = [[] for _ in range(rows)]
    latency = [0.0] * rows
    counts = dict.fromkeys(("row_rounds", "proposed", "accepted", "rejected"), 0.0)
    rounds: dict[int, tuple[float, float]] = {}
    for e in events:
        if isinstance(e, EMITTING):
            tokens[e.row].append(e.token)
        if isinstance(e, Sampled):
            rounds.setdefault(e.position, (0.0, e.target_seconds))
            counts["row_rounds"] += 1
        elif isinstance(e, Finished):
            latency[e.row] = e.seconds
        elif isinstance(e, RoundSummary):
            rounds.setdefault(e.round, (e.draft_seconds, e.target_seconds))
            counts["proposed"] += e.proposed
            counts["row_rounds"] += 1
        elif isinstance(e, Accepted | Rejected):
            counts["accepted" if isinstance(e, Accepted) else "rejected"] += 1
    counts["rounds"] = len(rounds)
    counts["draft_seconds"] = sum(d for d, _ in rounds.values())
    counts["target_seconds"] = sum(t for _, t in rounds.values())
    return tokens, latency, counts


def decode_all(
    run: Run,
    prompts: Sequence[list[int]],
    seeds: Sequence[int],
    size: int,
    device: Any,
    groups: int | None = None,
) -> Decode:
    """Decode the prompts in consecutive groups of `size`; groups: only the first this many
    (None: all). run(group prompts, seeds) sets a group's decode up (a drafter, a decoder) and
    returns its lazy event stream: only draining the stream is timed."""
    seconds, tokens, latency = 0.0, [], []
    total: dict[str, float] = {}
    starts = range(0, len(prompts), size)  # consecutive groups (the last may be shorter)
    for group in [range(s, min(s + size, len(prompts))) for s in starts][:groups]:
        stream = run([list(prompts[i]) for i in group], [seeds[i] for i in group])
        start = clock(device)
        events = list(stream)
        seconds += clock(device) - start
        rows, times, counts = _tally(events, len(group))
        tokens += [tuple(t) for t in rows]
        latency += times
        total = {k: total.get(k, 0.0) + v for k, v in counts.items()}
    return Decode(seconds=seconds, tokens=tuple(tokens), latency=tuple(latency), counts=total)


def _entry(
    decode: Decode, setting: Setting | None, size: int, rep: int, t: float, base: Decode | None
) -> dict[str, Any]:
    """One timed run as saved: its setting (drafter and gamma None for plain), its numbers."""
    same = (
        None
        if base is None
        else sum(a == b for a, b in zip(decode.tokens, base.tokens, strict=True))
    )
    drafter, gamma = setting or (None, None)
    return {
        "temperature": t,
        "batch_size": size,
        "drafter": drafter,
        "gamma": gamma,
        "repetition": rep,
        "seconds": decode.seconds,
        "tokens": [len(x) for x in decode.tokens],
        "latency": list(decode.latency),
        **decode.counts,
        "same_tokens_as_plain": same,
    }


def run_batch_sweep(
    target: Any,
    draft: Any,
    prompts: Sequence[list[int]],
    *,
    batch_sizes: Sequence[int],
    settings: Sequence[Setting],
    new_tokens: int,
    temperature: float,
    repetitions: int,
    stop: frozenset[int],
    progress: Progress,
) -> list[dict[str, Any]]:
    """Every batch size's plain and speculative decodes (each setting) of the N prompts (token
    ids, checked), at most new_tokens each, `repetitions` times after a warm-up: the runs."""
    sampling = SamplingConfig(temperature=temperature, seed=0)
    new, n = new_tokens, len(prompts)

    def plain_run(rows: list[list[int]], seeds: list[int]) -> Iterator[Event]:
        return batch_autoregressive_events(
            target, rows, sampling=sampling, max_new_tokens=new, stop_ids=stop, seeds=seeds
        )

    def speculative(drafter: str, gamma: int) -> Run:
        def run(rows: list[list[int]], seeds: list[int]) -> Iterator[Event]:
            batch = build_batch_drafter(drafter, target=target, draft=draft)
            speculation = SpeculationConfig(gamma=gamma, max_new_tokens=new)
            return BatchSpeculativeDecoder(
                target,
                batch,
                rows,
                sampling=sampling,
                speculation=speculation,
                stop_ids=stop,
                seeds=seeds,
            ).events()

        return run

    runs: list[dict[str, Any]] = []
    steps = list(itertools.product(range(-1, repetitions), batch_sizes))
    for i, (rep, size) in enumerate(steps):
        when = "warm-up" if rep < 0 else f"repetition {rep + 1}"
        progress(i, len(steps), f"batch sweep B={size} T={temperature} {when}")
        seeds = [max(rep, 0) * n + k for k in range(n)]
        first = 1 if rep < 0 else None  # the warm-up decodes each setting's first group only
        base = decode_all(plain_run, prompts, seeds, size, target.device, first)
        k = max(rep, 0) % len(settings)  # no setting always runs first
        for setting in [*settings[k:], *settings[:k]]:
            spec = decode_all(speculative(*setting), prompts, seeds, size, target.device, first)
            if rep >= 0:
                runs.append(_entry(spec, setting, size, rep, temperature, base))
        if rep >= 0:
            runs.append(_entry(base, None, size, rep, temperature, None))
    progress(len(steps), len(steps), "batch sweep done")
    return runs


KNEE_GAIN = 0.10  # a batch size pays when it serves at least this much more than the last


def knee(best: Sequence[dict[str, Any]], gain: float = KNEE_GAIN) -> int:
    """The batch size where served speculative tokens/s stops growing: the last size, in
    increasing order, that serves at least `gain` more than the size before it. best: a batch
    sweep's best entries (batch_size, speculative.tokens_per_second) at one temperature."""
    served = sorted((b["batch_size"], b["speculative"]["tokens_per_second"]) for b in best)
    if not served:
        raise ValueError("a batch sweep with no entries has no knee")
    chosen = served[0][0]
    for (_, before), (size, now) in itertools.pairwise(served):
        if now < (1 + gain) * before:
            break
        chosen = size
    return int(chosen)
