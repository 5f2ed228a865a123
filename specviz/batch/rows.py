"""The batch sweep's analysis of its saved runs: rows, each batch size's best γ, verdicts.

Each row (T, drafter, B, γ) pairs every repetition's speculative run with that repetition's
plain run at the same B: throughput (all tokens over wall seconds), the mean per-request tokens
per second and latency, the cost per 1k tokens, the speedup (plain over speculative seconds per
token), α, and the speedup predicted from batched passes timed at each B (specviz.tune.timing;
specviz.gamma.theory.pass_speedup). r = t_verify / t_plain is near 1 while the target is
weight-bound and climbs toward γ + 1 as B (γ + 1) tokens fill the device: token-bound from the
first B where (r - 1) / γ >= TOKEN_BOUND. rebatch recomputes every number of a saved section.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from specviz.gamma.theory import pass_speedup, token_bound_from
from specviz.results.records import cost_per_1k_tokens, grouped, spread
from specviz.tune.timing import TARGET


def pass_seconds(passes: Sequence[dict[str, Any]]) -> dict[tuple[int, str, int], float]:
    """Saved pass timings by (batch size, model, tokens a row)."""
    return {
        (int(p["batch_size"]), str(p["model"]), int(p["tokens_per_row"])): float(p["seconds"])
        for p in passes
    }


def _medians(runs: Sequence[dict[str, Any]], price: float) -> dict[str, float]:
    """Each measure's median over the runs: a run's totals over its N requests (seconds,
    tokens, tokens_per_second, cost_per_1k_tokens) and its per-request means (latency,
    request_tokens_per_second)."""
    values = [
        {
            "seconds": r["seconds"],
            "tokens": sum(r["tokens"]),
            "tokens_per_second": sum(r["tokens"]) / r["seconds"],
            "latency": statistics.fmean(r["latency"]),
            "request_tokens_per_second": statistics.fmean(
                n / s for n, s in zip(r["tokens"], r["latency"], strict=True) if s > 0
            ),
            "cost_per_1k_tokens": cost_per_1k_tokens(r["seconds"], sum(r["tokens"]), price),
        }
        for r in runs
    ]
    return {k: statistics.median(v[k] for v in values) for k in values[0]}


def batch_rows(section: dict[str, Any], price: float) -> list[dict[str, Any]]:
    """One row per (T, drafter, B, gamma) that ran, in that order."""
    timed, runs = pass_seconds(section["passes"]), section["runs"]
    plains = {
        (r["temperature"], r["batch_size"], r["repetition"]): r
        for r in runs
        if r["drafter"] is None
    }
    specs = [r for r in runs if r["drafter"] is not None]
    groups = grouped(specs, lambda r: (r["temperature"], r["drafter"], r["batch_size"], r["gamma"]))
    rows = []
    for (t, drafter, size, gamma), specs in sorted(groups.items()):
        pairs = [(s, plains[t, size, s["repetition"]]) for s in specs]
        verified = [(s["accepted"], s["accepted"] + s["rejected"]) for s, _ in pairs]
        alphas = [float(k) / v for k, v in verified if v]
        a = statistics.median(alphas) if alphas else None
        step, verify = timed[size, TARGET, 1], timed[size, TARGET, gamma + 1]
        draft = timed.get((size, drafter, 1), 0.0)  # n-gram lookup: no model pass
        per_token = [
            (p["seconds"] / sum(p["tokens"]), s["seconds"] / sum(s["tokens"])) for s, p in pairs
        ]
        rounds = [sum(s["tokens"]) / s["row_rounds"] for s, _ in pairs]
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
                "speedup": asdict(spread([p / s for p, s in per_token])),
                "alpha": a,
                "tokens_per_round": statistics.median(rounds),
                "verify_ratio": verify / step,
                "draft_ratio": draft / step,
                "predicted_speedup": pass_speedup(a or 0.0, gamma, step, draft, verify),
                "same_tokens": same / sum(len(s["tokens"]) for s, _ in pairs),
            }
        )
    return rows


def best_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (T, drafter, B): the row of the gamma with the highest median speedup, with the
    gamma theory would pick (the highest predicted speedup) beside it."""
    out = []
    by_size = grouped(rows, lambda r: (r["temperature"], r["drafter"], r["batch_size"]))
    for group in by_size.values():
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
    out = []
    for (t, drafter), group in grouped(best, lambda r: (r["temperature"], r["drafter"])).items():
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


def rebatch(section: dict[str, Any], price: float) -> dict[str, Any]:
    """A saved section with rows, best rows, verdicts and verification costs recomputed from
    its plan, requests, runs and pass timings (verify: per gamma, r(B) = t_verify(B, gamma + 1)
    / t_plain(B) at each B, and from which B the pass is token-bound)."""
    rows = batch_rows(section, price)
    best = best_rows(rows)
    timed, plan = pass_seconds(section["passes"]), section["plan"]
    verify = []
    for gamma in plan["gammas"]:
        ratios = [
            (b, timed[b, TARGET, gamma + 1] / timed[b, TARGET, 1]) for b in plan["batch_sizes"]
        ]
        verify.append(
            {
                "gamma": gamma,
                "ratios": [[b, r] for b, r in ratios],
                "token_bound_from": token_bound_from(ratios, gamma),
            }
        )
    kept = {k: section[k] for k in ("plan", "requests", "runs", "passes")}
    return kept | {"rows": rows, "best": best, "verdicts": verdicts(best), "verify": verify}
