"""The tree sweep's verdicts and table, from its rows (`specviz bench trees`: the chain and
trees of N nodes at one depth, specviz.bench.sweeps.trees).

A verdict per (workload, T, tree drafter): the node budgets N where a tree beats the chain, the
fastest N against the chain, and the N after it from which more nodes stopped paying.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from specviz.results.setting import LOSSY
from specviz.results.table import column_table, number_cell, spread_cell


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
    told = (
        "no tree was faster than the chain"
        if not v["pays_at"]
        else f"faster than the chain at N = {', '.join(map(str, v['pays_at']))}"
    )
    best = (
        f"fastest: the chain ({v['best_speedup']:.2f}× plain)"
        if v["best_nodes"] == 1
        else f"fastest: N = {v['best_nodes']} ({v['best_vs_chain']:.2f}× the chain, "
        f"{v['best_speedup']:.2f}× plain)"
    )
    text = f"{head}: {told}; {best}"
    if v["slower_from"] is not None:
        text += f"; more nodes stopped paying from N = {v['slower_from']}"
    return text + ("." if v["exact"] else f" [trees {LOSSY}].")


COLUMNS = (
    ("workload", lambda r: r["workload"]),
    ("T", lambda r: f"{r['temperature']:g}"),
    ("N", lambda r: str(r["nodes"])),
    ("setting", lambda r: r["label"]),
    ("exact", lambda r: "yes" if r["exact"] else f"no: {LOSSY}"),
    ("nodes/round", lambda r: f"{r['nodes_per_round']:.1f}"),
    ("draft calls/round", lambda r: f"{r['draft_calls_per_round']:.1f}"),
    ("tokens/pass", lambda r: spread_cell(r["tokens_per_pass"])),
    ("r(N)", lambda r: f"{r['pass_ratio']:.2f}"),
    ("r in the run", lambda r: spread_cell(r["run_pass_ratio"])),
    ("draft cost/round (plain steps)", lambda r: f"{r['draft_steps_per_round']:.2f}"),
    ("speedup vs plain", lambda r: spread_cell(r["speedup"])),
    ("vs chain", lambda r: spread_cell(r["vs_chain"])),
    ("priced vs chain", lambda r: number_cell(r["priced_vs_chain"])),
    ("vs transformers", lambda r: spread_cell(r["vs_transformers"])),
    ("pays", lambda r: "–" if r["pays"] is None else ("yes" if r["pays"] else "no")),
)


def sweep_table(section: dict[str, Any]) -> list[str]:
    """The sweep as GitHub Markdown lines: a note on the plan, the table, the verdicts."""
    plan, passes = section["plan"], section["passes"]
    note = (
        f"Tree sweep at depth D = {plan['depth']}, width {plan['width']}, rule {plan['rule']}: "
        f"N = 1 is the chain at γ = {plan['depth']}, as many draft calls a round as a tree. "
        f"r(N): one target pass over the fresh token and N tree nodes (the chain: its "
        f"{plan['depth']} drafts) after {passes['prompt_tokens']} cached tokens, over a plain "
        f"1-token step (median of {passes['repeats']}). vs transformers: against its assisted "
        "generation of the chain."
    )
    table = column_table(COLUMNS, section["rows"])
    return [note, "", *table, "", *(f"- {verdict_text(v)}" for v in section["verdicts"])]
