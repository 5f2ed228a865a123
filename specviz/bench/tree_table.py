"""The tree sweep's results: one row per node budget N, where the tree pays, a Markdown table.

Each row (workload, T, tree drafter, N) reads its records and the pass timings r(N):
tokens a target pass emits (the mean a round), r(N), the speedup over plain decoding paired
run by run, the speedup over the chain in the same repetitions (vs chain) and the same
comparison priced from its parts (tokens a pass over draft plus pass cost, in plain steps:
free of end-to-end timing noise), and over transformers' assisted generation of the chain.
A tree "pays" where it is faster than the chain. Every number is recomputed from the records
and timings a result saves (sweep_section).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from specviz.bench.tree_sweep import PASS_REPEATS, PassTiming, SweepPlan
from specviz.results.records import Record, RequestMetrics, spread
from specviz.results.setting import CHAIN_OF, LOSSY, BenchSetting, tree_label
from specviz.results.table import markdown_table

Pair = tuple[str, int]  # (request id, repetition)


def sweep_section(
    plan: SweepPlan,
    timings: Sequence[PassTiming],
    prompt_tokens: int,
    records: Sequence[Record],
    repeats: int = PASS_REPEATS,
) -> dict[str, Any]:
    """What a result saves as its tree_sweep: the plan, the pass timings, rows and verdicts."""
    passes = {
        "prompt_tokens": prompt_tokens,
        "repeats": repeats,
        "timings": [asdict(t) for t in timings],
    }
    return resweep({"plan": plan.to_dict(), "passes": passes}, records)


def resweep(section: dict[str, Any], records: Sequence[Record]) -> dict[str, Any]:
    """A saved section with its rows and verdicts recomputed from the records and timings."""
    plan = SweepPlan.from_dict(section["plan"])
    ratios = {int(t["nodes"]): float(t["ratio"]) for t in section["passes"]["timings"]}
    rows = sweep_rows(plan, ratios, records)
    return {
        "plan": section["plan"],
        "passes": section["passes"],
        "rows": rows,
        "verdicts": verdicts(rows),
    }


Runs = dict[Pair, RequestMetrics]


def _runs(records: Sequence[Record], workload: str, match: dict[str, Any]) -> tuple[Any, Runs]:
    """The setting of workload's records whose setting has the `match` fields, and its metrics
    by (request, repetition) (None, {} where none ran)."""
    chosen = [
        r
        for r in records
        if r.category == workload and all(getattr(r.setting, k) == v for k, v in match.items())
    ]
    setting = chosen[0].setting if chosen else None
    return setting, {(r.request_id, r.repetition): r.metrics for r in chosen}


def _hf_per_token(records: Sequence[Record]) -> dict[tuple[str, BenchSetting, Pair], float]:
    """transformers' seconds per token, by workload, chain setting and (request, repetition)."""
    return {
        (r.category, r.setting, (r.request_id, r.repetition)): r.hf_latency / r.hf_tokens
        for r in records
        if r.hf_latency is not None and r.hf_tokens
    }


def _per_token(m: RequestMetrics) -> float:
    return m.latency / m.tokens


def _draft_steps(m: RequestMetrics) -> float:
    """Draft seconds a round, in plain decode steps."""
    return m.draft_seconds / m.rounds / m.step_seconds


def sweep_rows(
    plan: SweepPlan, ratios: dict[int, float], records: Sequence[Record]
) -> list[dict[str, Any]]:
    """One row per (workload, T, tree drafter, N) that has records, N ascending (1: chain)."""
    hf = _hf_per_token(records)
    rows = []
    for workload, temperature in dict.fromkeys(
        (r.category, r.setting.temperature) for r in records
    ):
        for drafter in plan.drafters:
            common = {"temperature": temperature, "gamma": plan.depth}
            chain_match = common | {"drafter": CHAIN_OF[drafter], "tree_nodes": None}
            chain, chain_runs = _runs(records, workload, chain_match)
            if chain is None:
                continue
            base = _summary(chain_runs, ratios[1])
            for n in plan.nodes:
                tree = {"drafter": drafter, "tree_nodes": n, "tree_width": plan.width}
                match = chain_match if n == 1 else common | tree | {"tree_rule": plan.rule}
                setting, runs = _runs(records, workload, match)
                if setting is None:
                    continue
                versus = [
                    hf[workload, chain, k] / _per_token(m)
                    for k, m in runs.items()
                    if (workload, chain, k) in hf
                ]
                rows.append(
                    {"workload": workload, "drafter": drafter}
                    | _row(setting, n, runs, chain_runs, ratios[n], base)
                    | {"vs_transformers": asdict(spread(versus)) if versus else None}
                )
    return rows


def _summary(ms: Runs, ratio: float) -> dict[str, float]:
    """Median tokens a pass and a round's cost in plain steps (draft + r), priced at r."""
    tokens = statistics.median(m.tokens_per_round for m in ms.values())
    draft = statistics.median(_draft_steps(m) for m in ms.values())
    return {"tokens_per_pass": tokens, "round_cost": draft + ratio}


def _row(
    setting: BenchSetting, n: int, ms: Runs, chain: Runs, ratio: float, base: dict[str, float]
) -> dict[str, Any]:
    """A row's own numbers and its comparison with the chain, pair by pair."""
    values = list(ms.values())
    own = _summary(ms, ratio)
    versus = [_per_token(chain[k]) / _per_token(m) for k, m in ms.items() if k in chain]
    is_chain = n == 1
    priced = (own["tokens_per_pass"] / base["tokens_per_pass"]) * (
        base["round_cost"] / own["round_cost"]
    )
    vs_chain = None if is_chain or not versus else asdict(spread(versus))
    label = f"chain ({setting.drafter} γ={setting.gamma})" if is_chain else None
    return {
        "temperature": setting.temperature,
        "nodes": n,
        "label": label or tree_label(asdict(setting)),
        "setting": asdict(setting),
        "exact": setting.exact,  # False: a lossy tree rule, not the target's law
        "runs": len(values),
        "nodes_per_round": statistics.median(m.mean_gamma for m in values),
        "draft_calls_per_round": statistics.median(m.draft_calls / m.rounds for m in values),
        "tokens_per_pass": asdict(spread([m.tokens_per_round for m in values])),
        "pass_ratio": ratio,
        "run_pass_ratio": asdict(spread([m.verify_ratio for m in values])),
        "draft_steps_per_round": statistics.median(_draft_steps(m) for m in values),
        "speedup": asdict(spread([m.speedup for m in values])),
        "vs_chain": vs_chain,
        "priced_vs_chain": None if is_chain else priced,
        "pays": None if vs_chain is None else vs_chain["median"] > 1.0,
    }


def verdicts(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (workload, T, tree drafter): the N where a tree beats the chain, the fastest N
    against the chain (the chain itself counts 1.0), and the N after it, from which more
    nodes stopped paying."""
    groups: dict[tuple[str, float, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row["workload"], row["temperature"], row["drafter"]].append(row)
    out = []
    for (workload, temperature, drafter), group in groups.items():
        best = max(group, key=_vs_chain)
        later = [r["nodes"] for r in group if r["nodes"] > best["nodes"]]
        out.append(
            {
                "workload": workload,
                "temperature": temperature,
                "drafter": drafter,
                "best_nodes": best["nodes"],
                "best_vs_chain": _vs_chain(best),
                "best_speedup": best["speedup"]["median"],
                "pays_at": [r["nodes"] for r in group if r["pays"]],
                "slower_from": min(later) if later else None,
                "exact": all(r["exact"] for r in group),
            }
        )
    return out


def _vs_chain(row: dict[str, Any]) -> float:
    """A row's median speedup over the chain (1.0 for the chain; 0.0 where none was paired)."""
    if row["nodes"] == 1:
        return 1.0
    return float(row["vs_chain"]["median"]) if row["vs_chain"] else 0.0


def verdict_text(v: dict[str, Any]) -> str:
    """One sentence: where the tree pays and where it stops paying."""
    head = f"{v['workload']}, T = {v['temperature']:g}, {v['drafter']}"
    if not v["pays_at"]:
        told = "no tree was faster than the chain"
    else:
        told = f"faster than the chain at N = {', '.join(map(str, v['pays_at']))}"
    if v["best_nodes"] == 1:
        best = f"fastest: the chain ({v['best_speedup']:.2f}× plain)"
    else:
        best = (
            f"fastest: N = {v['best_nodes']} ({v['best_vs_chain']:.2f}× the chain, "
            f"{v['best_speedup']:.2f}× plain)"
        )
    text = f"{head}: {told}; {best}"
    if v["slower_from"] is not None:
        text += f"; more nodes stopped paying from N = {v['slower_from']}"
    return text + ("." if v["exact"] else f" [trees {LOSSY}].")


def _cell(s: dict[str, float] | None, fmt: str = ".2f") -> str:
    return "–" if s is None else f"{s['median']:{fmt}} ({s['low']:{fmt}}–{s['high']:{fmt}})"


def sweep_table(section: dict[str, Any]) -> list[str]:
    """The sweep as GitHub Markdown lines: a note on the plan, the table, the verdicts."""
    plan, passes = section["plan"], section["passes"]
    header = ["workload", "T", "N", "setting", "exact", "nodes/round", "draft calls/round"]
    header += ["tokens/pass", "r(N)", "r in the run", "draft cost/round (plain steps)"]
    header += ["speedup vs plain", "vs chain", "priced vs chain", "vs transformers", "pays"]
    body = [
        [
            row["workload"],
            f"{row['temperature']:g}",
            str(row["nodes"]),
            row["label"],
            "yes" if row["exact"] else f"no: {LOSSY}",
            f"{row['nodes_per_round']:.1f}",
            f"{row['draft_calls_per_round']:.1f}",
            _cell(row["tokens_per_pass"]),
            f"{row['pass_ratio']:.2f}",
            _cell(row["run_pass_ratio"]),
            f"{row['draft_steps_per_round']:.2f}",
            _cell(row["speedup"]),
            _cell(row["vs_chain"]),
            "–" if row["priced_vs_chain"] is None else f"{row['priced_vs_chain']:.2f}",
            _cell(row["vs_transformers"]),
            "–" if row["pays"] is None else ("yes" if row["pays"] else "no"),
        ]
        for row in section["rows"]
    ]
    note = (
        f"Tree sweep at depth D = {plan['depth']}, width {plan['width']}, rule {plan['rule']}: "
        f"N = 1 is the chain at γ = {plan['depth']}, as many draft calls a round as a tree. "
        f"r(N): one target pass over the fresh token and N tree nodes (the chain: its "
        f"{plan['depth']} drafts) after {passes['prompt_tokens']} cached tokens, over a plain "
        f"1-token step (median of {passes['repeats']}). vs transformers: against its assisted "
        "generation of the chain."
    )
    return [
        note,
        "",
        *markdown_table(header, body),
        "",
        *(f"- {verdict_text(v)}" for v in section["verdicts"]),
    ]


def render_sweep(section: dict[str, Any]) -> str:
    """The sweep section of a result as Markdown (what `python -m specviz.bench.markdown`
    prints under its other tables)."""
    return "\n".join(sweep_table(section))


def pivot_table(sections: Sequence[dict[str, Any]]) -> list[str]:
    """The sweeps in one compact table: per workload, T and tree drafter, a row each for tokens
    a pass, r(N) and the speedup over plain decoding, one column per node budget N."""
    budgets = sorted({int(r["nodes"]) for s in sections for r in s["rows"]})
    head = ["workload", "T", "tree drafter", "", *(_budget(n) for n in budgets)]
    lines = markdown_table(head, [])
    for section in sections:
        groups: dict[tuple[str, float, str], dict[int, dict[str, Any]]] = defaultdict(dict)
        for row in section["rows"]:
            groups[row["workload"], row["temperature"], row["drafter"]][int(row["nodes"])] = row
        for (workload, temperature, drafter), by_n in groups.items():
            cells = {
                "tokens a pass": [_median(by_n.get(n), "tokens_per_pass") for n in budgets],
                "r(N)": [_ratio(by_n.get(n)) for n in budgets],
                "speedup vs plain": [_median(by_n.get(n), "speedup") for n in budgets],
            }
            for i, (measure, values) in enumerate(cells.items()):
                first = [workload, f"{temperature:g}", drafter] if i == 0 else ["", "", ""]
                lines.append("| " + " | ".join([*first, measure, *values]) + " |")
    return lines


def _budget(n: int) -> str:
    return "N = 1 (chain)" if n == 1 else f"N = {n}"


def _median(row: dict[str, Any] | None, key: str) -> str:
    return "–" if row is None or row.get(key) is None else f"{row[key]['median']:.2f}"


def _ratio(row: dict[str, Any] | None) -> str:
    return "–" if row is None else f"{row['pass_ratio']:.2f}"
