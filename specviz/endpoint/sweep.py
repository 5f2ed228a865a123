"""The endpoint load sweep: the same requests sent to a server with speculation on and to a
baseline without it, at each concurrency, paired request by request.

Sides: "spec" (the server under test, speculation on) and "base" (the baseline: a second
server, interleaved with it, or an earlier run of the same server restarted without
speculation, read from its saved result). Before timing, each side answers `warmup` requests
untimed; the first also shows whether its streamed responses carry `usage` (else that side is
asked without streaming). Then for every concurrency c and repetition, requests of one
temperature form a batch that c client threads send at once, one side after the other (the
order alternating by repetition), and /metrics is scraped around each batch where the server
exposes spec-decode counters. A batch's wall time (first send to last answer) gives its
throughput and cost; each request's own TTFT and E2E give its latencies.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from specviz.endpoint.client import Endpoint, EndpointError, Job, Reply, get, send
from specviz.endpoint.engine import counter_delta, parse_metrics, spec_counters

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True, kw_only=True)
class EndpointPlan:
    """What the sweep runs: concurrency levels, timed repetitions, untimed warm-up requests per
    side, and how the baseline was run (said in the report)."""

    concurrency: tuple[int, ...]
    repetitions: int
    warmup: int
    baseline: str


def with_usage(endpoint: Endpoint, job: Job) -> Endpoint:
    """The endpoint as it must be asked to count tokens: streamed if its streamed reply carries
    usage, else unstreamed; EndpointError when neither reply carries usage."""
    if send(endpoint, job).completion_tokens is not None:
        return endpoint
    unstreamed = dataclasses.replace(endpoint, stream=False)
    if send(unstreamed, job).completion_tokens is None:
        raise EndpointError(
            f"{endpoint.url} sends no usage.completion_tokens, streamed or not: the bench counts "
            "tokens from usage only"
        )
    return unstreamed


def scrape(endpoint: Endpoint) -> dict[str, Any] | None:
    """The spec-decode counters at the server's /metrics now (None where it has none)."""
    try:
        status, text = get(endpoint.url, "/metrics")
        return spec_counters(parse_metrics(text)) if status == 200 else None
    except (EndpointError, ValueError):
        return None


def run_batch(
    endpoint: Endpoint, jobs: Sequence[Job], concurrency: int
) -> tuple[list[Reply], float]:
    """Every job sent by `concurrency` threads at once: the replies in job order, and the wall
    seconds from the first send to the last answer."""
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        replies = list(pool.map(lambda j: send(endpoint, j), jobs))
    return replies, time.perf_counter() - start


def _run_row(side: str, c: int, rep: int, copy: int, job: Job, reply: Reply) -> dict[str, Any]:
    """One timed request as saved."""
    return {
        "side": side,
        "concurrency": c,
        "rep": rep,
        "copy": copy,
        "request": job.request,
        "category": job.category,
        "temperature": job.temperature,
        "ttft": reply.ttft,
        "e2e": reply.e2e,
        "tokens": reply.completion_tokens,
        "prompt_tokens": reply.prompt_tokens,
        "chunks": reply.chunks,
        "finish_reason": reply.finish_reason,
        "text": reply.text,
        "engine": reply.engine,
    }


def _groups(jobs: Sequence[Job]) -> list[list[Job]]:
    """Jobs by temperature (greedy first), each group in job order."""
    temps = sorted({j.temperature for j in jobs})
    return [[j for j in jobs if j.temperature == t] for t in temps]


def filled(group: Sequence[Job], concurrency: int) -> list[tuple[int, Job]]:
    """The group's jobs, repeated (copy 0, 1, ...) until there are at least `concurrency` of
    them, so that `concurrency` requests are in flight at once."""
    copies = -(-concurrency // len(group))  # ceil
    return [(copy, job) for copy in range(copies) for job in group]


def run_endpoint_sweep(
    sides: dict[str, Endpoint], jobs: Sequence[Job], plan: EndpointPlan, progress: Progress
) -> dict[str, Any]:
    """Warm up and probe each side, then run every (concurrency, repetition, temperature) batch
    on each side: the saved `endpoint` section (specviz.endpoint.table reads it)."""
    if not jobs:
        raise ValueError("the endpoint bench has no requests: check --workloads and --limit")
    ready = {}
    for name, endpoint in sides.items():
        ready[name] = with_usage(endpoint, jobs[0])
        for job in jobs[1 : plan.warmup]:
            send(ready[name], job)
    counted = {name: scrape(e) is not None for name, e in ready.items()}
    runs: list[dict[str, Any]] = []
    batches: list[dict[str, Any]] = []
    groups = _groups(jobs)
    total = len(plan.concurrency) * plan.repetitions * len(groups) * len(ready)
    done = 0
    for c in plan.concurrency:
        for rep in range(plan.repetitions):
            order = list(ready) if rep % 2 == 0 else list(reversed(ready))
            for group in groups:
                for name in order:
                    endpoint = ready[name]
                    batch = filled(group, c)
                    before = scrape(endpoint) if counted[name] else None
                    replies, wall = run_batch(endpoint, [j for _, j in batch], c)
                    after = scrape(endpoint) if counted[name] else None
                    runs += [
                        _run_row(name, c, rep, copy, j, r)
                        for (copy, j), r in zip(batch, replies, strict=True)
                    ]
                    batches.append(
                        {
                            "side": name,
                            "concurrency": c,
                            "rep": rep,
                            "temperature": group[0].temperature,
                            "wall": wall,
                            "requests": len(batch),
                            "counters": counter_delta(before, after),
                        }
                    )
                    done += 1
                    progress(done, total, f"{name} c={c} T={group[0].temperature}")
    return {
        "plan": dataclasses.asdict(plan) | {"requests": [j.request for j in jobs]},
        "endpoints": {
            n: dataclasses.asdict(e) | {"counters": counted[n]} for n, e in ready.items()
        },
        "runs": runs,
        "batches": batches,
    }


def merge_baseline(section: dict[str, Any], earlier: dict[str, Any], source: str) -> dict[str, Any]:
    """A spec-only section joined with the base side of an earlier run of the same requests and
    plan (the same server restarted without speculation); ValueError, saying what differs."""
    mine, theirs = json.loads(json.dumps(section["plan"])), earlier["plan"]  # lists as saved
    for key in ("concurrency", "repetitions", "requests"):
        if mine[key] != theirs[key]:
            raise ValueError(
                f"{source} ran other {key} ({theirs[key]}) than this run ({mine[key]}): rerun "
                "both with the same --workloads, --limit, --concurrency and --reps"
            )
    if "base" not in earlier["endpoints"]:
        raise ValueError(f"{source} has no baseline side: write it with --baseline-endpoint alone")
    base = [r for r in earlier["runs"] if r["side"] == "base"]
    base_batches = [b for b in earlier["batches"] if b["side"] == "base"]
    return section | {
        "endpoints": section["endpoints"] | {"base": earlier["endpoints"]["base"]},
        "runs": section["runs"] + base,
        "batches": section["batches"] + base_batches,
    }
