"""The batch sweep: where speculative decoding stops paying as more requests share a pass.

N requests (the chosen workloads' prompts, cycled where they are fewer) are decoded in
consecutive groups of B rows for each batch size B: plainly (batch_autoregressive_events) and
speculatively (BatchSpeculativeDecoder with each batched drafter at each fixed gamma), on the
same requests with the same seeds. Request i of repetition k is seeded k N + i whatever B, so at
T = 0 every run writes the same tokens. One untimed warm-up runs each setting's first group of
each B; then per repetition each B runs its plain decode and every speculative setting, in an
order that rotates each repetition. A run keeps its wall time over all N requests, each
request's tokens and latency (its Finished.seconds within its group) and its verdict counts;
specviz.bench.batch_table turns runs into rows. The target runs on transformers' forward
through specviz.batch.cache, the draft model too.
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
from specviz.drafters.registry import BATCH_DRAFTERS
from specviz.workloads import Request

Setting = tuple[str, int]  # (batched drafter, gamma)
Progress = Callable[[int, int, str], None]
Run = Callable[[list[list[int]], list[int]], Iterator[Event]]  # (group prompts, seeds) → events


@dataclass(frozen=True, kw_only=True)
class BatchPlan:
    """What a batch sweep runs: batch sizes, N requests, gammas, batched drafters, new tokens."""

    batch_sizes: tuple[int, ...]
    requests: int  # N: every batch size decodes the same N requests
    gammas: tuple[int, ...]
    drafters: tuple[str, ...]
    new_tokens: int  # max_new_tokens of every request

    def __post_init__(self) -> None:
        check_plan(self.batch_sizes, self.requests, self.gammas, self.drafters, self.new_tokens)

    def settings(self) -> list[Setting]:
        """Every speculative setting: each drafter at each gamma."""
        return [(d, g) for d in self.drafters for g in self.gammas]

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {
            "batch_sizes": list(self.batch_sizes),
            "requests": self.requests,
            "gammas": list(self.gammas),
            "drafters": list(self.drafters),
            "new_tokens": self.new_tokens,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BatchPlan:
        """Inverse of to_dict."""
        return cls(
            batch_sizes=tuple(data["batch_sizes"]),
            requests=data["requests"],
            gammas=tuple(data["gammas"]),
            drafters=tuple(data["drafters"]),
            new_tokens=data["new_tokens"],
        )


def _whole(value: object) -> bool:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_plan(
    batch_sizes: Sequence[int],
    requests: int,
    gammas: Sequence[int],
    drafters: Sequence[str],
    new_tokens: int,
) -> None:
    """ValueError, saying what to change, unless the sweep can run as planned."""
    if len(batch_sizes) < 2 or not all(_whole(b) and b >= 1 for b in batch_sizes):
        raise ValueError(
            "--batch-sizes takes two or more batch sizes >= 1, e.g. 1,2,4,8,16,32 (got "
            f"{list(batch_sizes)}); the plain decode step timing is --step-batch-sizes"
        )
    if len(set(batch_sizes)) != len(batch_sizes):
        raise ValueError(f"--batch-sizes names a batch size twice (got {list(batch_sizes)})")
    if not _whole(requests) or requests < max(batch_sizes):
        raise ValueError(
            f"--batch-requests must be at least the largest batch size, {max(batch_sizes)}, so "
            f"that each batch size fills a batch (got {requests!r})"
        )
    if not gammas or not all(_whole(g) and g >= 1 for g in gammas):
        raise ValueError(f"--gammas must be integers >= 1 (got {list(gammas)})")
    check_batch_drafters(drafters)
    if not _whole(new_tokens) or new_tokens < 1:
        raise ValueError(f"--batch-new-tokens must be an integer >= 1 (got {new_tokens!r})")


def check_batch_drafters(drafters: Sequence[str]) -> None:
    """ValueError naming BATCH_DRAFTERS unless every drafter has a batched form, once each."""
    others = [d for d in drafters if d not in BATCH_DRAFTERS]
    if not drafters or others:
        raise ValueError(
            f"--batch-sizes decodes each batch through transformers' forward (specviz.batch); "
            f"{', '.join(others) or 'no drafter'} has no batched form there: give --drafters "
            f"from {', '.join(BATCH_DRAFTERS)}"
        )
    if len(set(drafters)) != len(drafters):
        raise ValueError(f"--drafters names a drafter twice (got {', '.join(drafters)})")


def sweep_requests(pool: Sequence[Request], n: int) -> list[Request]:
    """The first n requests of pool, cycled from its start where it has fewer."""
    if not pool:
        raise ValueError("the batch sweep has no requests at this temperature: check --workloads")
    return [pool[i % len(pool)] for i in range(n)]


def _groups(n: int, size: int) -> list[range]:
    """Consecutive groups of `size` request indices out of n (the last may be shorter)."""
    return [range(s, min(s + size, n)) for s in range(0, n, size)]


def _rotated(settings: Sequence[Setting], rep: int) -> list[Setting]:
    """settings starting at a different one each repetition (no setting always runs first)."""
    k = rep % len(settings)
    return [*settings[k:], *settings[:k]]


@dataclass(frozen=True, kw_only=True)
class Decode:
    """One decode of all N requests: wall seconds and, per request, its tokens and latency."""

    seconds: float
    tokens: tuple[tuple[int, ...], ...]
    latency: tuple[float, ...]
    # rounds (batch rounds; plain: steps), row_rounds (each row's rounds, summed), proposed,
    # accepted, rejected, and the batch passes' draft_seconds and target_seconds
    counts: dict[str, float]


Tally = tuple[list[list[int]], list[float], dict[str, float]]


def _tally(events: Sequence[Event], rows: int) -> Tally:
    """A group's events: each row's tokens and latency, and the group's counts.

    A batch round's (or plain step's) shared timings are counted once, not once per row.
    """
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
    for group in _groups(len(prompts), size)[:groups]:
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
    decode: Decode, setting: Setting | None, size: int, rep: int, t: float, plain: Decode | None
) -> dict[str, Any]:
    """One timed run as saved: its setting (drafter and gamma None for plain), its numbers."""
    same = None
    if plain is not None:
        same = sum(a == b for a, b in zip(decode.tokens, plain.tokens, strict=True))
    return {
        "temperature": t,
        "batch_size": size,
        "drafter": None if setting is None else setting[0],
        "gamma": None if setting is None else setting[1],
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
    plan: BatchPlan,
    *,
    temperature: float,
    repetitions: int,
    stop: frozenset[int],
    seed: int = 0,
    progress: Progress = lambda _i, _n, _s: None,
) -> list[dict[str, Any]]:
    """Every batch size's plain and speculative decodes of the N prompts (token ids, checked),
    `repetitions` times after a warm-up; the saved runs (specviz.bench.batch_table)."""
    sampling = SamplingConfig(temperature=temperature, seed=seed)
    device = target.device
    n = len(prompts)

    def plain(rows: list[list[int]], seeds: list[int]) -> Iterator[Event]:
        return batch_autoregressive_events(
            target, rows, sampling=sampling, max_new_tokens=plan.new_tokens, stop_ids=stop,
            seeds=seeds,
        )  # fmt: skip

    def speculative(drafter: str, gamma: int) -> Run:
        config = SpeculationConfig(gamma=gamma, max_new_tokens=plan.new_tokens)

        def run(rows: list[list[int]], seeds: list[int]) -> Iterator[Event]:
            batch = build_batch_drafter(
                drafter, target=target, draft=draft, sampling=sampling, rows=len(rows)
            )
            decoder = BatchSpeculativeDecoder(
                target, batch, rows, sampling=sampling, speculation=config, stop_ids=stop,
                seeds=seeds,
            )  # fmt: skip
            return decoder.events()

        return run

    runs: list[dict[str, Any]] = []
    steps = list(itertools.product(range(-1, repetitions), plan.batch_sizes))
    for i, (rep, size) in enumerate(steps):
        when = "warm-up" if rep < 0 else f"repetition {rep + 1}"
        progress(i, len(steps), f"batch sweep B={size} T={temperature} {when}")
        seeds = [seed + max(rep, 0) * n + k for k in range(n)]
        first = 1 if rep < 0 else None  # the warm-up decodes each setting's first group only
        base = decode_all(plain, prompts, seeds, size, device, first)
        for setting in _rotated(plan.settings(), max(rep, 0)):
            spec = decode_all(speculative(*setting), prompts, seeds, size, device, first)
            if rep >= 0:
                runs.append(_entry(spec, setting, size, rep, temperature, base))
        if rep >= 0:
            runs.append(_entry(base, None, size, rep, temperature, None))
    progress(len(steps), len(steps), "batch sweep done")
    return runs
