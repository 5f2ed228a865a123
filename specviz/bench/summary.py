"""Summaries of benchmark records: per-setting rows, γ curves against the theory, and the
dynamic γ policies against the best fixed γ."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from scipy import stats

from specviz.gamma.policies import VerifyCost
from specviz.gamma.theory import optimal_gamma, speedup_bound
from specviz.results.records import Record, cost_per_1k_tokens, spread
from specviz.results.setting import BenchSetting, drafter_label, is_tree


def _key(r: Record) -> tuple[str, BenchSetting]:
    """Group records by workload and setting."""
    return r.category, r.setting


PricingKey = tuple[str, str, str, int, float, int | None, int | None]


def _pricing_key(r: Record) -> PricingKey:
    """Records priced together: same workload, drafter and temperature (any gamma or policy);
    a tree drafter's node budget and width too (its draft passes grow with them)."""
    s = r.setting
    return r.category, s.drafter, s.draft_name, s.exit_layer, s.temperature, *_tree_key(s)


def _tree_key(s: BenchSetting) -> tuple[int | None, int | None]:
    """A tree setting's node budget and width (None, None for a chain)."""
    return s.tree_nodes, s.tree_width


def priced_speedups(records: Sequence[Record]) -> list[float]:
    """Each record's speedup with its work priced at costs shared by its whole sweep.

    A record's work is its draft steps and its verification passes by width, and its paired
    plain run's decode steps; each is priced at the median measured over every record of the
    same workload, drafter and temperature (passes by width as the theory policy prices them:
    VerifyCost). Timing noise, which moves identical runs apart on a busy machine
    (benchmarks/RESULTS.md, section Machine and parts), is gone; what is left
    compares the policies' choices. nan where per-pass timings were not recorded.
    """
    groups: dict[PricingKey, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        groups[_pricing_key(r)].append(i)
    out = [float("nan")] * len(records)
    for idx in groups.values():
        ms = [records[i].metrics for i in idx]
        if not all(m.widths and m.plain_decode_seconds for m in ms):
            continue
        passes = VerifyCost(window=None)  # every pass of the sweep, not only the latest
        for m in ms:
            for width, seconds in zip(m.widths, m.pass_seconds, strict=True):
                passes.add(width, seconds)
        step = statistics.median(m.step_seconds for m in ms)
        drafted = [m.draft_seconds / m.draft_calls for m in ms if m.draft_calls]
        draft = statistics.median(drafted) if drafted else 0.0
        for i, m in zip(idx, ms, strict=True):
            work = m.draft_calls * draft + sum(passes(w) for w in m.widths)
            out[i] = m.tokens * step / work
    return out


def summarize(records: Sequence[Record], price_per_hour: float) -> list[dict[str, Any]]:
    """Per (workload, setting): medians with min–max, theory, cost, agreement with transformers."""
    groups: dict[tuple[str, BenchSetting], list[Record]] = defaultdict(list)
    priced: dict[tuple[str, BenchSetting], list[float]] = defaultdict(list)
    for r, speed in zip(records, priced_speedups(records), strict=True):
        groups[_key(r)].append(r)
        priced[_key(r)].append(speed)
    rows = []
    for (category, setting), rs in groups.items():
        ms = [r.metrics for r in rs]
        chain = not setting.tree  # the Leviathan bound and its kin describe chains only
        hf = [r for r in rs if r.hf_latency is not None and r.hf_tokens]
        hf_runs = [(r.hf_latency, r.hf_tokens) for r in rs if r.hf_latency and r.hf_tokens]
        spec_s, plain_s = sum(m.latency for m in ms), sum(m.plain_latency for m in ms)
        tokens = sum(m.tokens for m in ms)
        rows.append(
            {
                "workload": category,
                "setting": setting.saved(),
                "exact": setting.exact,  # False: a lossy tree rule, not the target's law
                "requests": len(rs),
                "speedup": asdict(spread([m.speedup for m in ms])),
                "mean_gamma": asdict(spread([m.mean_gamma for m in ms])),
                "bound": asdict(spread([m.bound() for m in ms])) if chain else None,
                "efficiency": asdict(spread([m.efficiency() for m in ms])) if chain else None,
                "decode_speedup": _spread_known([m.decode_speedup for m in ms]),
                "decode_efficiency": _spread_known([m.decode_efficiency() for m in ms])
                if chain
                else None,
                "priced_speedup": _spread_known(priced[category, setting]),
                "verify_ratio": asdict(spread([m.verify_ratio for m in ms])),
                "refined_bound": asdict(spread([m.refined_bound() for m in ms])) if chain else None,
                "loop_efficiency": asdict(spread([m.loop_efficiency() for m in ms]))
                if chain
                else None,
                "alpha": asdict(spread([m.alpha for m in ms if m.alpha == m.alpha] or [0.0])),
                "cost_ratio": asdict(spread([m.cost_ratio for m in ms])),
                "tokens": asdict(spread([m.tokens for m in ms])),
                "tokens_per_second": asdict(spread([m.tokens_per_second for m in ms])),
                "latency": asdict(spread([m.latency for m in ms])),
                "plain_latency": asdict(spread([m.plain_latency for m in ms])),
                "plain_tokens_per_second": asdict(spread([m.tokens / m.plain_latency for m in ms])),
                "hf_latency": asdict(spread([s for s, _ in hf_runs])) if hf_runs else None,
                "hf_tokens_per_second": asdict(spread([n / s for s, n in hf_runs]))
                if hf_runs
                else None,
                "target_calls_per_token": asdict(spread([m.target_calls_per_token for m in ms])),
                "accepted_per_round": asdict(spread([m.accepted_per_round for m in ms])),
                "tokens_per_round": asdict(spread([m.tokens_per_round for m in ms])),
                "ours_over_transformers_time_per_token": asdict(spread([_hf_ratio(r) for r in hf]))
                if hf
                else None,
                "identical_to_transformers": sum(bool(r.hf_identical) for r in hf) / len(hf)
                if hf
                else None,
                "ours_faster_than_transformers": faster_pairs([_hf_ratio(r) for r in hf])
                if hf
                else None,
                "cost_per_1k_tokens": {
                    "plain": cost_per_1k_tokens(plain_s, tokens, price_per_hour),
                    "speculative": cost_per_1k_tokens(spec_s, tokens, price_per_hour),
                    "price_per_hour": price_per_hour,
                },
            }
        )
    return rows


def _spread_known(values: Sequence[float]) -> dict[str, float] | None:
    """Spread of the values that are not nan (None when none is known)."""
    known = [v for v in values if v == v]
    return asdict(spread(known)) if known else None


def faster_pairs(ratios: Sequence[float]) -> dict[str, float]:
    """Pairs where ours took less time per token (ratio < 1), and the one-sided sign test's p
    of H0: ours is as likely to be slower as faster (ties count as not faster)."""
    faster = sum(r < 1.0 for r in ratios)
    p_value = float(stats.binomtest(faster, len(ratios), 0.5, alternative="greater").pvalue)
    return {"faster": faster, "pairs": len(ratios), "p_value": p_value}


def _hf_ratio(r: Record) -> float:
    """Our seconds per token / transformers' seconds per token for one request."""
    if r.hf_latency is None or not r.hf_tokens:
        raise ValueError("record has no transformers timing")
    return (r.metrics.latency / r.metrics.tokens) / (r.hf_latency / r.hf_tokens)


# workload, drafter, draft name, exit layer, draft-model cap, T
Curve = tuple[str, str, str, int, int | None, float]


def _curve_key(row: dict[str, Any]) -> Curve:
    """Rows that differ only in gamma and policy share a curve."""
    s = row["setting"]
    cap = s["model_gamma"]
    return row["workload"], s["drafter"], s["draft_name"], s["exit_layer"], cap, s["temperature"]


def gamma_curves(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (workload, drafter, T): measured speedup of fixed gammas, and theory's optimum
    (chain drafters only: a tree's speedup against its node budget is the tree sweep's)."""
    curves: dict[Curve, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row["setting"]["policy"] == "fixed" and not is_tree(row["setting"]):
            curves[_curve_key(row)].append(row)
    out = []
    for (workload, drafter, draft_name, exit_layer, cap, temperature), points in curves.items():
        points.sort(key=lambda r: r["setting"]["gamma"])
        gammas = [p["setting"]["gamma"] for p in points]
        measured = [p["speedup"]["median"] for p in points]
        alpha = sorted(p["alpha"]["median"] for p in points)[len(points) // 2]
        c = sorted(p["cost_ratio"]["median"] for p in points)[len(points) // 2]
        a = min(alpha, 0.999)
        out.append(
            {
                "workload": workload,
                "drafter": drafter,
                "draft_name": draft_name,
                "exit_layer": exit_layer,
                "model_gamma": cap,
                "temperature": temperature,
                "gammas": gammas,
                "measured_speedup": measured,
                "theory_speedup": [speedup_bound(a, g, c) for g in gammas],
                "measured_best_gamma": gammas[measured.index(max(measured))],
                "theory_best_gamma": optimal_gamma(a, c, max(gammas)),
                "alpha": alpha,
                "cost_ratio": c,
            }
        )
    return out


def _best_fixed(rows: Sequence[dict[str, Any]], metric: str) -> dict[Curve, tuple[float, int]]:
    """Per curve: the best fixed gamma's median `metric` and that gamma."""
    best: dict[Curve, tuple[float, int]] = {}
    for row in rows:
        if row["setting"]["policy"] == "fixed" and row[metric]:
            key, speed = _curve_key(row), row[metric]["median"]
            if key not in best or speed > best[key][0]:
                best[key] = (speed, row["setting"]["gamma"])
    return best


def policies_vs_best_fixed(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each dynamic policy's median speedup / the best fixed gamma's, on the same curve.

    Measured (wall clock, paired with plain runs) and priced (priced_speedups: the same work at
    shared costs, free of timing noise), each against the fixed gamma that is best by it.
    """
    best, best_priced = _best_fixed(rows, "speedup"), _best_fixed(rows, "priced_speedup")
    out = []
    for row in rows:
        key = _curve_key(row)
        if row["setting"]["policy"] != "fixed" and key in best:
            speed = row["speedup"]["median"]
            priced, versus = row["priced_speedup"], best_priced.get(key)
            out.append(
                {
                    "workload": row["workload"],
                    "drafter": drafter_label(row["setting"]),
                    "temperature": row["setting"]["temperature"],
                    "policy": row["setting"]["policy"],
                    "start_gamma": row["setting"]["gamma"],
                    "speedup": speed,
                    "best_fixed_gamma": best[key][1],
                    "best_fixed_speedup": best[key][0],
                    "ratio": speed / best[key][0],
                    **_priced_versus(priced, versus),
                }
            )
    return out


def _priced_versus(
    priced: dict[str, float] | None, versus: tuple[float, int] | None
) -> dict[str, float | int | None]:
    """A policy's priced median against the best fixed gamma's (None where either is unknown)."""
    if not priced or not versus:
        return dict.fromkeys(
            (
                "priced_speedup",
                "best_fixed_priced_gamma",
                "best_fixed_priced_speedup",
                "priced_ratio",
            )
        )
    return {
        "priced_speedup": priced["median"],
        "best_fixed_priced_gamma": versus[1],
        "best_fixed_priced_speedup": versus[0],
        "priced_ratio": priced["median"] / versus[0],
    }
