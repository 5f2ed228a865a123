"""The drafting heads against the other drafters: one table from the saved `heads` parts.

Per workload and temperature, each drafter's fastest fixed setting: its speedup over plain
decoding (pair by pair, on the same requests and the same target forward), α, tokens a round,
the draft cost c, the verification pass's cost r, and its time per token over transformers'
assisted generation with the bundled draft model on the same requests (the best of
transformers' settings in the part, request by request: the baseline a user of transformers
would compare with).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from specviz.bench.markdown import _setting
from specviz.results.setting import drafter_label
from specviz.results.table import markdown_table

HEAD_PARTS: tuple[tuple[str, str, float], ...] = (
    ("heads-code", "code", 0.0),
    ("heads-t1", "code", 1.0),
    ("heads-json-prose", "json", 0.0),
    ("heads-json-prose", "prose", 1.0),
)
Loader = Callable[[str], dict[str, Any]]


def _per_token(records: Sequence[dict[str, Any]], hf: bool) -> dict[str, float]:
    """Seconds per generated token of each request (mean over its repetitions)."""
    runs: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if hf and r.get("hf_latency") is not None and r.get("hf_tokens"):
            runs[r["request_id"]].append(r["hf_latency"] / r["hf_tokens"])
        elif not hf and r["metrics"]["tokens"]:
            runs[r["request_id"]].append(r["metrics"]["latency"] / r["metrics"]["tokens"])
    return {k: statistics.fmean(v) for k, v in runs.items()}


def _hf_best(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """transformers' fastest setting's seconds per token on each request."""
    by_setting: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_setting[repr(sorted(r["setting"].items()))].append(r)
    best: dict[str, float] = {}
    for group in by_setting.values():
        for request, value in _per_token(group, hf=True).items():
            best[request] = min(best.get(request, value), value)
    return best


def _versus_hf(ours: Sequence[dict[str, Any]], hf: dict[str, float]) -> str:
    """'median (min–max), faster on k of n' of our time per token over transformers'."""
    mine = _per_token(ours, hf=False)
    ratios = sorted(mine[k] / hf[k] for k in mine if k in hf)
    if not ratios:
        return "–"
    faster = sum(x < 1 for x in ratios)
    middle = statistics.median(ratios)
    return f"{middle:.2f} ({ratios[0]:.2f}–{ratios[-1]:.2f}), {faster} of {len(ratios)}"


def _fastest(result: dict[str, Any], workload: str, temperature: float) -> dict[str, Any]:
    """Each drafter's fastest fixed-setting summary row for one workload and temperature."""
    best: dict[str, dict[str, Any]] = {}
    for row in result["summary"]:
        if row["workload"] != workload or row["setting"]["temperature"] != temperature:
            continue
        if row["setting"]["policy"] != "fixed":
            continue
        label = drafter_label(row["setting"])
        if label not in best or row["speedup"]["median"] > best[label]["speedup"]["median"]:
            best[label] = row
    return best


def heads_table(load: Loader) -> list[str]:
    """One row per drafter: its best speedup (α, tokens a round) per workload and temperature,
    c and r on code at T = 0, and its time per token over transformers' there."""
    columns = [f"{w} T={t:g}: speedup (α, tokens a round)" for _, w, t in HEAD_PARTS]
    header = ["drafter", *columns, "c", "r", "time/token over transformers assisted (faster on)"]
    cells: dict[str, dict[int, str]] = defaultdict(dict)
    extra: dict[str, list[str]] = {}
    for index, (part, workload, temperature) in enumerate(HEAD_PARTS):
        result = load(part)
        records = [
            r
            for r in result["records"]
            if r["category"] == workload and r["setting"]["temperature"] == temperature
        ]
        hf = _hf_best(records)
        for label, row in _fastest(result, workload, temperature).items():
            cells[label][index] = (
                f"{_setting(row['setting']).removeprefix(label).strip() or '–'}: "
                f"{row['speedup']['median']:.2f}× ({row['alpha']['median']:.2f}, "
                f"{row['tokens_per_round']['median']:.2f})"
            )
            if index == 0:
                ours = [r for r in records if r["setting"] == row["setting"]]
                extra[label] = [
                    f"{row['cost_ratio']['median']:.3f}",
                    f"{row['verify_ratio']['median']:.2f}",
                    _versus_hf(ours, hf),
                ]
    body = [
        [label, *(row.get(i, "–") for i in range(len(HEAD_PARTS))), *extra.get(label, ["–"] * 3)]
        for label, row in cells.items()
    ]
    return markdown_table(header, body)
