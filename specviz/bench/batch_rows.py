"""The batch sweep's rows: per batch size and setting, and where speculation stops paying.

Each row (T, drafter, B, gamma) pairs every repetition's speculative decode of the N requests
with that repetition's plain decode at the same B: throughput over all N (total tokens / wall
seconds), the mean per-request tokens per second and latency, the cost per 1k tokens, the
speedup (plain seconds per token over speculative seconds per token: plain wall / speculative
wall where both wrote the same tokens), alpha, and the speedup the theory below predicts from the
pass timings. Every number is recomputed from the runs and timings a result saves (rebatch).

What a batched pass costs, and the speedup theory predicts from it at each batch size.

At B rows a plain step is one target pass of B x 1 tokens, t_plain(B); a speculative round is
gamma batched draft steps, t_draft(B) each, and one verification pass of B x (gamma + 1) tokens,
t_verify(B, gamma + 1). All are timed through specviz.batch.cache.BatchKVCache, the path the
batch sweep decodes on, over the first B requests' prompts, interleaved, medians after a
warm-up. With alpha measured at B, a round emits E = (1 - alpha^(gamma+1)) / (1 - alpha) tokens a
row, so

    predicted speedup = E * t_plain(B) / (gamma * t_draft(B) + t_verify(B, gamma + 1)).

While the target is weight-bound (reading its weights dominates), the verification pass costs
about a plain step: r = t_verify / t_plain is near 1. As B(gamma + 1) tokens fill the device, r
climbs toward gamma + 1, the cost of as many plain steps. The pass is called token-bound from the
first B where it has gone at least halfway: (r - 1) / gamma >= TOKEN_BOUND.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from specviz.batch.cache import BatchKVCache
from specviz.bench.batch_sweep import BatchPlan
from specviz.core.decoding import clock
from specviz.drafters.trimmed import load_head_tokens, trim_head
from specviz.gamma.theory import expected_tokens_per_round
from specviz.results.records import cost_per_1k_tokens, spread

MEASURES: tuple[str, ...] = ("seconds", "tokens", "tokens_per_second", "latency")
MEASURES += ("request_tokens_per_second", "cost_per_1k_tokens")


def measures(run: dict[str, Any], price_per_hour: float) -> dict[str, float]:
    """A run's totals over its N requests, and its per-request means."""
    tokens = sum(run["tokens"])
    per_request = [n / s for n, s in zip(run["tokens"], run["latency"], strict=True) if s > 0]
    return {
        "seconds": run["seconds"],
        "tokens": tokens,
        "tokens_per_second": tokens / run["seconds"],
        "request_tokens_per_second": statistics.fmean(per_request),
        "latency": statistics.fmean(run["latency"]),
        "cost_per_1k_tokens": cost_per_1k_tokens(run["seconds"], tokens, price_per_hour),
    }


def speedup(spec: dict[str, Any], plain: dict[str, Any]) -> float:
    """Plain seconds per token over speculative seconds per token, over all N requests."""
    plain_per_token: float = plain["seconds"] / sum(plain["tokens"])
    spec_per_token: float = spec["seconds"] / sum(spec["tokens"])
    return plain_per_token / spec_per_token


def alpha(run: dict[str, Any]) -> float | None:
    """Accepted drafts over verified drafts (None where nothing was verified)."""
    accepted, verified = float(run["accepted"]), float(run["accepted"] + run["rejected"])
    return accepted / verified if verified else None


def _medians(runs: Sequence[dict[str, Any]], price: float) -> dict[str, float]:
    """Each measure's median over the runs."""
    values = [measures(r, price) for r in runs]
    return {k: statistics.median(v[k] for v in values) for k in MEASURES}


Key = tuple[float, str, int, int]  # temperature, drafter, batch size, gamma


def batch_rows(section: dict[str, Any], price: float) -> list[dict[str, Any]]:
    """One row per (T, drafter, B, gamma) that ran, in that order."""
    timed = pass_seconds(section["passes"])
    plain = {
        (r["temperature"], r["batch_size"], r["repetition"]): r
        for r in section["runs"]
        if r["drafter"] is None
    }
    groups: dict[Key, list[dict[str, Any]]] = defaultdict(list)
    for r in section["runs"]:
        if r["drafter"] is not None:
            groups[r["temperature"], r["drafter"], r["batch_size"], r["gamma"]].append(r)
    rows = []
    for (t, drafter, size, gamma), specs in sorted(groups.items()):
        pairs = [(s, plain[t, size, s["repetition"]]) for s in specs]
        alphas = [a for a in (alpha(s) for s, _ in pairs) if a is not None]
        a = statistics.median(alphas) if alphas else None
        step = timed[size, TARGET, 1]
        verify = timed[size, TARGET, gamma + 1]
        draft = timed.get((size, drafter, 1), 0.0)  # n-gram lookup: no model pass
        same = sum(s["same_tokens_as_plain"] for s, _ in pairs)
        rows.append(
            {
                "temperature": t,
                "drafter": drafter,
                "batch_size": size,
                "gamma": gamma,
                "runs": len(pairs),
                "plain": _medians([p for _, p in pairs], price),
                "speculative": _medians([s for s, _ in pairs], price),
                "speedup": asdict(spread([speedup(s, p) for s, p in pairs])),
                "alpha": a,
                "tokens_per_round": statistics.median(
                    sum(s["tokens"]) / s["row_rounds"] for s, _ in pairs
                ),
                "verify_ratio": verify / step,
                "draft_ratio": draft / step,
                "predicted_speedup": predicted_speedup(a or 0.0, gamma, step, draft, verify),
                "same_tokens": same / sum(len(s["tokens"]) for s, _ in pairs),
            }
        )
    return rows


def best_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (T, drafter, B): the row of the gamma with the highest median speedup, with the
    gamma theory would pick (the highest predicted speedup) beside it."""
    groups: dict[tuple[float, str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row["temperature"], row["drafter"], row["batch_size"]].append(row)
    out = []
    for group in groups.values():
        best = max(group, key=lambda r: r["speedup"]["median"])
        theory = max(group, key=lambda r: r["predicted_speedup"])
        out.append(
            best
            | {"predicted_gamma": theory["gamma"], "predicted_best": theory["predicted_speedup"]}
        )
    return out


def _stops_from(points: Sequence[tuple[int, float]]) -> int | None:
    """The least batch size from which every larger one has a speedup <= 1 (None: the largest
    still pays)."""
    stops = None
    for size, value in sorted(points, reverse=True):
        if value > 1.0:
            break
        stops = size
    return stops


def verdicts(best: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (T, drafter): the batch sizes where speculation pays (its best gamma beats plain
    decoding), from which it stops paying, and from which theory says it does."""
    groups: dict[tuple[float, str], list[dict[str, Any]]] = defaultdict(list)
    for row in best:
        groups[row["temperature"], row["drafter"]].append(row)
    out = []
    for (t, drafter), group in groups.items():
        measured = [(r["batch_size"], r["speedup"]["median"]) for r in group]
        predicted = [(r["batch_size"], r["predicted_best"]) for r in group]
        top = max(group, key=lambda r: r["speedup"]["median"])
        out.append(
            {
                "temperature": t,
                "drafter": drafter,
                "pays_at": [b for b, s in measured if s > 1.0],
                "stops_from": _stops_from(measured),
                "predicted_pays_at": [b for b, s in predicted if s > 1.0],
                "predicted_stops_from": _stops_from(predicted),
                "best_batch_size": top["batch_size"],
                "best_gamma": top["gamma"],
                "best_speedup": top["speedup"]["median"],
            }
        )
    return out


def verify_costs(section: dict[str, Any]) -> list[dict[str, Any]]:
    """Per gamma: r(B) = t_verify(B, gamma + 1) / t_plain(B) at each B, and from which B the
    pass is token-bound (TOKEN_BOUND)."""
    plan = BatchPlan.from_dict(section["plan"])
    timed = pass_seconds(section["passes"])
    out = []
    for gamma in plan.gammas:
        ratios = [(b, timed[b, TARGET, gamma + 1] / timed[b, TARGET, 1]) for b in plan.batch_sizes]
        out.append(
            {
                "gamma": gamma,
                "ratios": [[b, r] for b, r in ratios],
                "token_bound_from": token_bound_from(ratios, gamma),
            }
        )
    return out


def rebatch(section: dict[str, Any], price: float) -> dict[str, Any]:
    """A saved section with rows, best rows, verdicts and verification costs recomputed from
    its plan, requests, runs and pass timings."""
    rows = batch_rows(section, price)
    best = best_rows(rows)
    return {
        "plan": section["plan"],
        "requests": section["requests"],
        "runs": section["runs"],
        "passes": section["passes"],
        "rows": rows,
        "best": best,
        "verdicts": verdicts(best),
        "verify": verify_costs(section),
    }


PASS_REPEATS = 7  # timed passes of each shape, after WARMUP untimed ones
WARMUP = 2
TOKEN_BOUND = 0.5  # (r - 1) / gamma from which a verification pass counts as token-bound
TARGET = "target"


@dataclass(frozen=True, kw_only=True)
class BatchPass:
    """One pass shape's median seconds: `model` (the target, or a drafter's draft model) over
    batch_size rows of tokens_per_row new tokens each."""

    batch_size: int
    model: str
    tokens_per_row: int
    seconds: float


def drafting_models(draft: Any, drafters: Sequence[str]) -> dict[str, Any]:
    """The model each batched drafter drafts with (model-trimmed: its trimmed head); n-gram
    lookup has none (its lookups are priced at 0)."""
    models: dict[str, Any] = {}
    for name in drafters:
        if name == "model":
            models[name] = draft
        elif name == "model-trimmed":
            models[name] = trim_head(draft, load_head_tokens(draft))
    return models


def _fed(prompt: list[int], width: int) -> list[int]:
    """A row's tokens for a pass of `width`: its last prompt token, then prompt tokens again
    (a pass's cost does not depend on which tokens it scores)."""
    drafts = list(prompt) * (width // len(prompt) + 1)
    return [prompt[-1], *drafts[: width - 1]]


@torch.no_grad()
def batch_pass_timings(
    target: Any,
    drafting: dict[str, Any],
    prompts: Sequence[list[int]],
    batch_sizes: Sequence[int],
    widths: Sequence[int],
    *,
    repeats: int = PASS_REPEATS,
) -> list[BatchPass]:
    """Per batch size B: the target over B rows of 1 token and of each width in widths, and each
    drafting model over B rows of 1 token, after the first B prompts (all but their last token)
    are cached; each repeat times every shape once, cutting the caches back after each pass."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1 (got {repeats})")
    if max(batch_sizes) > len(prompts):
        raise ValueError(f"{len(prompts)} prompts cannot fill a batch of {max(batch_sizes)}")
    out: list[BatchPass] = []
    for size in batch_sizes:
        rows = [list(p) for p in prompts[:size]]
        shapes = [(TARGET, target, w) for w in dict.fromkeys([1, *widths])]
        shapes += [(name, model, 1) for name, model in drafting.items()]
        models = {TARGET: target, **drafting}
        caches = {name: BatchKVCache(model, size) for name, model in models.items()}
        for cache in caches.values():
            if any(len(p) > 1 for p in rows):
                cache.forward([p[:-1] for p in rows], keep=1)
        held = {name: cache.lengths for name, cache in caches.items()}
        times: list[list[float]] = [[] for _ in shapes]
        for _ in range(WARMUP + repeats):
            for seconds, (name, model, width) in zip(times, shapes, strict=True):
                fed = [_fed(p, width) for p in rows]
                start = clock(model.device)
                caches[name].forward(fed, keep=width)
                seconds.append(clock(model.device) - start)
                caches[name].crop(held[name])
        out += [
            BatchPass(
                batch_size=size,
                model=name,
                tokens_per_row=width,
                seconds=statistics.median(t[WARMUP:]),
            )
            for t, (name, _, width) in zip(times, shapes, strict=True)
        ]
    return out


def pass_seconds(passes: Sequence[dict[str, Any]]) -> dict[tuple[int, str, int], float]:
    """Saved pass timings by (batch size, model, tokens a row)."""
    return {
        (int(p["batch_size"]), str(p["model"]), int(p["tokens_per_row"])): float(p["seconds"])
        for p in passes
    }


def predicted_speedup(alpha: float, gamma: int, plain: float, draft: float, verify: float) -> float:
    """E[tokens a round](alpha, gamma) * t_plain / (gamma t_draft + t_verify): seconds a pass."""
    a = min(max(alpha, 0.0), 1.0) if alpha == alpha else 0.0  # nan (nothing verified): 0
    return expected_tokens_per_round(a, gamma) * plain / (gamma * draft + verify)


def token_bound_share(ratio: float, gamma: int) -> float:
    """(r - 1) / gamma: 0 where the gamma + 1-token pass costs a plain step, 1 where it costs
    gamma + 1 of them."""
    return (ratio - 1.0) / gamma


def token_bound_from(ratios: Sequence[tuple[int, float]], gamma: int) -> int | None:
    """The first batch size (ascending) whose verification pass is token-bound, None if none."""
    for size, ratio in sorted(ratios):
        if token_bound_share(ratio, gamma) >= TOKEN_BOUND:
            return size
    return None
