"""The memory study's tables, from its saved section (`specviz bench memory`: drafting from
memory on agent workloads, specviz.bench.sweeps.memory).

Per workload, drafter, temperature and prompt pass: the speedup over plain decoding of cold
requests (step 0 of their task) and warm ones, end to end and of the decode alone, tokens a
target pass, α, c, greedy identity and the speedup over transformers; the speedup by step; and
each memory's size after each workload.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from specviz.results.records import grouped
from specviz.results.table import markdown_table
from specviz.stats.identity import TIE_TOLERANCE

Curves = dict[str, list[tuple[int, float]]]  # per curve, (step, speedup) in step order


def _sum(rows: Sequence[dict[str, Any]], key: str) -> float:
    return float(sum(r[key] for r in rows))


def _ratio(rows: Sequence[dict[str, Any]], decode: bool = False) -> float:
    """Plain seconds over speculative seconds summed over rows; decode: each less its prompt
    pass (nan where a row lacks the split)."""
    if not decode:
        return _sum(rows, "plain_latency") / _sum(rows, "latency")
    if any(not r.get("plain_decode_seconds") for r in rows):
        return float("nan")
    speculative = _sum(rows, "latency") - _sum(rows, "prefill_seconds")
    return _sum(rows, "plain_decode_seconds") / speculative


def _speedup(rows: Sequence[dict[str, Any]], decode: bool = False) -> str:
    """_ratio as a cell ("—" for no rows or no split)."""
    x = _ratio(rows, decode) if rows else float("nan")
    return f"{x:.2f}×" if x == x else "—"


def _cells(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Cold and warm speedup (end to end, and of the decode alone), tokens a pass, α, c,
    greedy identity, vs transformers."""
    cold = [r for r in rows if not r["step"]]
    warm = [r for r in rows if r["step"]]
    verified = _sum(rows, "verified")
    c = _sum(rows, "draft_seconds") / sum(r["rounds"] * r["step_seconds"] for r in rows)
    same = sum(r["identical"] for r in rows)
    ties = sum(r.get("tie_gap") is not None and r["tie_gap"] <= TIE_TOLERANCE for r in rows)
    identity = "—" if rows[0]["temperature"] > 0 else f"{same}/{len(rows)}"
    identity += f" (+{ties} tie{'s' * (ties > 1)})" if ties else ""
    hf = [r for r in rows if r.get("hf_latency") is not None]
    vs_hf = f"{_sum(hf, 'hf_latency') / _sum(hf, 'latency'):.2f}×" if hf else "—"
    return [
        _speedup(cold),
        _speedup(warm),
        _speedup(cold, decode=True),
        _speedup(warm, decode=True),
        f"{_sum(rows, 'tokens') / _sum(rows, 'rounds'):.2f}",
        f"{_sum(rows, 'accepted') / verified:.2f}" if verified else "—",
        f"{c:.4f}",
        identity,
        vs_hf,
    ]


def _grouped(rows: Sequence[dict[str, Any]], *keys: str) -> dict[Any, list[Any]]:
    """rows by their values under keys, in order."""
    return grouped(rows, lambda r: tuple(r[k] for k in keys))


def _rows(section: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows, each with its prompt pass: "prefix kept" (a PrefixCache) or "whole" (rows
    saved before the prefix cache say nothing: their plan's, else whole)."""
    kept = section.get("plan", {}).get("prefix_cache", False)
    return [
        r | {"prompt": "prefix kept" if r.get("prefix_cache", kept) else "whole"}
        for r in section["rows"]
    ]


def step_curves(section: dict[str, Any], decode: bool = False) -> Curves:
    """Per drafter, (step, plain seconds over speculative seconds summed over every task's
    request at that step and every repetition; decode: each less its prompt pass), steps in
    order."""
    rows = [r for r in _rows(section) if r["step"] is not None]
    mixed = len({r["prompt"] for r in rows}) > 1  # then each curve names its prompt pass
    for r in rows:
        r["curve"] = f"{r['drafter']}, {r['prompt']}" if mixed else r["drafter"]
    curves: Curves = {}
    for (curve, step), rs in sorted(_grouped(rows, "curve", "step").items(), key=lambda x: x[0][1]):
        curves.setdefault(curve, []).append((int(step), _ratio(rs, decode)))
    return {d: curves[d] for d in dict.fromkeys(r["curve"] for r in rows)}


def _step_table(curves: Curves) -> list[str]:
    """One row a drafter, one column a step ("—" where a drafter has no ratio there)."""
    steps = sorted({s for points in curves.values() for s, _ in points})
    cell = {(d, s): f"{x:.2f}×" for d, points in curves.items() for s, x in points if x == x}
    return markdown_table(
        ["drafter", *map(str, steps)],
        [[d, *(cell.get((d, s), "—") for s in steps)] for d in curves],
    )


def render_memory(section: dict[str, Any]) -> str:
    """The memory study's tables: per workload and drafter; speedup by step; memory size."""
    rows, plan = _rows(section), section["plan"]
    head = ["workload", "drafter", "T", "prompt", "cold", "warm", "cold decode", "warm decode",
            "tokens/pass", "α", "c", "greedy =", "vs transformers"]  # fmt: skip
    by = _grouped(rows, "workload", "drafter", "temperature", "prompt")
    cells = [[w, d, f"{t:g}", p, *_cells(rs)] for (w, d, t, p), rs in by.items()]
    out = [
        f"### Drafting from memory (suffix drafters up to {plan['suffix_gamma']} tokens a "
        f"round, others at γ = {plan['gamma']}; {plan['reps']} repetitions)",
        "",
        *markdown_table(head, cells),
    ]
    for decode, what in ((False, "end to end"), (True, "the decode alone, less the prompt")):
        out += [
            "",
            f"Speedup over plain decoding by step, {what} (every task of every workload):",
            "",
        ]
        out += _step_table(step_curves(section, decode))
    sizes = _grouped(section["sizes"], "workload", "drafter")
    out += [
        "",
        "Memory after each workload (a fresh replay of what it stored):",
        "",
        *markdown_table(
            ["workload", "drafter", "tokens", "MB per M tokens", "µs per token"],
            [
                [
                    w,
                    d,
                    f"{statistics.median(x['tokens'] for x in xs):.0f}",
                    f"{statistics.median(x['bytes_per_token'] for x in xs):.0f}",
                    f"{1e6 * statistics.median(x['update_seconds_per_token'] for x in xs):.1f}",
                ]
                for (w, d), xs in sizes.items()
            ],
        ),
    ]
    return "\n".join(out)
