"""The tables of the sweep parts (batch sweep, levers, endpoint, memory, trees) and the memory
study's figure.

A sweep part saves its own section (result[KEY]); until the part is saved, its table is a
one-line note naming the command that measures it. Each reads the saved parts through a Saved
(tools.report.saved).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from specviz.endpoint.table import endpoint_table
from specviz.results.lever_tables import lever_rows, levers_table
from specviz.results.memory_tables import render_memory, step_curves
from specviz.results.table import markdown_table, number_cell, spread_cell
from tools.report.saved import Saved

BATCH_SWEEP_PART = "batch-sweep"
LEVERS_PART = "levers"
ENDPOINT_PART = "endpoint"
MEMORY_WORKLOADS = ("agent-code", "agent-tools", "agent-sql", "repeat", "code")
MEMORY_PARTS = tuple(f"memory-{w}" for w in MEMORY_WORKLOADS)  # cpu_bench.sh: one a workload
MEMORY_FIGURE = "memory-steps.png"  # beside the saved results
SUFFIX_FACTORS_PART = "suffix-factors"  # the suffix drafter at several factors, every workload
LEAN_MEMORY_PART = "memory-lean"  # the chain drafters on the lean target forward, repeat and code
CHAT_MEMORY_PART = "memory-chat"  # the same through the chat template, as `specviz generate` sends
COST_MEMORY_PART = "memory-cost"  # the suffix chain on the lean forward, every workload: its c
COST_TREE_MEMORY_PART = "memory-cost-tree"  # the suffix tree's, on transformers' forward
TREE_PARTS = ("tree-sweep", "tree-sweep-t1")


def not_measured(part: str, title: str) -> list[str]:
    """The one-line note a table shows until its part is saved."""
    command = f"bash benchmarks/cpu_bench.sh benchmarks/results {part}"
    return markdown_table(
        [title], [[f"not measured yet: {command} writes benchmarks/results/{part}.json"]]
    )


def section_table(
    saved: Saved,
    part: str,
    key: str,
    title: str,
    render: Callable[[dict[str, Any], float], list[str]],
) -> list[str]:
    """A sweep part's section rendered at its price per hour (the note until it is saved)."""
    result = saved.load(part) if saved.has(part) else {}
    if result.get(key) is None:
        return not_measured(part, title)
    return render(result[key], float(result["meta"]["price_per_hour"]))


def batch_sweep(saved: Saved) -> list[str]:
    """The batch sweep part at each batch size, at its best γ (a note until the part is saved)."""
    return section_table(
        saved, BATCH_SWEEP_PART, "batch_sweep", "batch sweep", lambda s, _: batch_headline(s)
    )


def levers(saved: Saved) -> list[str]:
    """The levers part over all its workloads (a one-line note until the part is saved)."""
    return section_table(saved, LEVERS_PART, "levers", "levers", levers_headline)


def levers_headline(section: dict[str, Any], price_per_hour: float) -> list[str]:
    """Each lever over all workloads: speed, cost and weights beside its distance."""
    rows = lever_rows(section, price_per_hour)
    return levers_table([r for r in rows if r["workload"] == rows[-1]["workload"]])


def endpoint(saved: Saved) -> list[str]:
    """The served-model part: lookup on against off at each concurrency (a note until saved)."""
    return section_table(saved, ENDPOINT_PART, "endpoint", "endpoint", endpoint_table)


def memory_section(saved: Saved) -> dict[str, Any] | None:
    """The memory parts saved so far as one section: their rows and sizes in the parts' order,
    the first one's plan (each part runs the same plan on one workload); None before any."""
    sections = [saved.load(p)["memory"] for p in MEMORY_PARTS if saved.has(p)]
    if not sections:
        return None
    return {
        "plan": sections[0]["plan"],
        "rows": [  # each row says how its part passed the prompt (the parts may differ)
            {"prefix_cache": s["plan"].get("prefix_cache", False)} | r
            for s in sections
            for r in s["rows"]
        ],
        "sizes": [r for s in sections for r in s["sizes"]],
    }


def memory(saved: Saved) -> list[str]:
    """Drafting from memory on every workload measured so far, a note naming the parts still
    to run, and the figure of the agent workloads (a note until a part is saved)."""
    section = memory_section(saved)
    if section is None:
        command = "bash benchmarks/cpu_bench.sh benchmarks/results memory"
        note = f"not measured yet: {command} writes benchmarks/results/memory-WORKLOAD.json"
        return markdown_table(["drafting from memory"], [[note]])
    heading, _, *lines = render_memory(section).splitlines()  # the tables, then the plan
    lines += ["", heading.removeprefix("### ") + "."]
    missing = [p for p in MEMORY_PARTS if not saved.has(p)]
    if missing:
        run = f"bash benchmarks/cpu_bench.sh benchmarks/results {' '.join(missing)}"
        lines += ["", f"Not measured yet: {', '.join(missing)} (`{run}`)."]
    return [*lines, "", f"![Speedup against the step index](results/{MEMORY_FIGURE})"]


def _memory_table(section: dict[str, Any], _: float) -> list[str]:
    """A memory section's first table alone (its speedups, without the steps or sizes)."""
    lines = render_memory(section).splitlines()[2:]
    return lines[: lines.index("")] if "" in lines else lines


def suffix_factors(saved: Saved) -> list[str]:
    """The suffix drafter at each speculation factor on every memory workload, from one part:
    the memory table alone (a note until the part is saved)."""
    return section_table(saved, SUFFIX_FACTORS_PART, "memory", "speculation factor", _memory_table)


def memory_lean(saved: Saved) -> list[str]:
    """The chain drafters with and without memory on the lean target forward (plain decoding
    on it too), from one part: the memory table alone (a note until the part is saved)."""
    return section_table(saved, LEAN_MEMORY_PART, "memory", "lean target forward", _memory_table)


def memory_chat(saved: Saved) -> list[str]:
    """memory_lean's plan with each prompt through the target's chat template (the default of
    `specviz generate` and the app) instead of as raw text to continue, from one part."""
    return section_table(saved, CHAT_MEMORY_PART, "memory", "chat template", _memory_table)


def memory_cost(saved: Saved) -> list[str]:
    """The suffix chain on the lean target forward on every memory workload, from one part:
    where its cost a round c is largest (the faster plain step); the memory table alone."""
    return section_table(saved, COST_MEMORY_PART, "memory", "cost a round", _memory_table)


def memory_cost_tree(saved: Saved) -> list[str]:
    """memory_cost for the suffix tree, on transformers' forward (the trees verify through it)."""
    return section_table(saved, COST_TREE_MEMORY_PART, "memory", "cost a round", _memory_table)


def memory_figure(saved: Saved) -> Path | None:
    """Plot the agent workloads' speedup against the step index, end to end and of the decode
    alone, into the results folder as MEMORY_FIGURE (None, and nothing drawn, until a memory
    part is saved)."""
    section = memory_section(saved)
    if section is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, decode in zip(axes, (False, True), strict=True):
        for drafter, points in step_curves(section, decode).items():
            ax.plot([s for s, _ in points], [x for _, x in points], marker="o", label=drafter)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        title = "the decode, less the prompt pass" if decode else "end to end"
        ax.set(xlabel="step of the agent's task", title=title)
    axes[0].set(ylabel="speedup over plain decoding")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    path = saved.folder / MEMORY_FIGURE
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def trees(saved: Saved) -> list[str]:
    """The node-budget sweeps: tokens a pass, r(N) and the speedup at each N (tree parts)."""
    return pivot_table([saved.load(p)["tree_sweep"] for p in TREE_PARTS if saved.has(p)])


def batch_headline(section: dict[str, Any]) -> list[str]:
    """One row per batch size at its best γ: throughput, speedup, α, latency, cost, theory
    (a T and drafter column where the sweep ran several)."""
    best = section["best"]
    several = len({(r["temperature"], r["drafter"]) for r in best}) > 1
    gammas = sorted({r["gamma"] for r in section["rows"]})
    ratios = {
        (r["temperature"], r["drafter"], r["batch_size"], r["gamma"]): r["verify_ratio"]
        for r in section["rows"]
    }
    header = [*(["T", "drafter"] if several else []), "B", "plain tok/s"]
    header += ["speculative tok/s (best γ)", "speedup (min–max)", "best γ", "α"]
    header += ["tokens a round", f"r at γ = {' / '.join(map(str, gammas))}"]
    header += ["latency plain / speculative, s", "$/1k tokens plain / speculative"]
    header += ["predicted speedup"]
    body = [
        [
            *([f"{r['temperature']:g}", r["drafter"]] if several else []),
            str(r["batch_size"]),
            f"{r['plain']['tokens_per_second']:.1f}",
            f"{r['speculative']['tokens_per_second']:.1f}",
            spread_cell(r["speedup"]),
            str(r["gamma"]),
            number_cell(r["alpha"]),
            f"{r['tokens_per_round']:.2f}",
            " / ".join(
                f"{ratios[r['temperature'], r['drafter'], r['batch_size'], g]:.2f}"
                for g in gammas
                if (r["temperature"], r["drafter"], r["batch_size"], g) in ratios
            ),
            f"{r['plain']['latency']:.2f} / {r['speculative']['latency']:.2f}",
            f"{r['plain']['cost_per_1k_tokens']:.3g} / "
            f"{r['speculative']['cost_per_1k_tokens']:.3g}",
            f"{r['predicted_speedup']:.2f}",
        ]
        for r in best
    ]
    return markdown_table(header, body)


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
                "tokens a pass": [_pivot_median(by_n.get(n), "tokens_per_pass") for n in budgets],
                "r(N)": [_ratio(by_n.get(n)) for n in budgets],
                "speedup vs plain": [_pivot_median(by_n.get(n), "speedup") for n in budgets],
            }
            for i, (measure, values) in enumerate(cells.items()):
                first = [workload, f"{temperature:g}", drafter] if i == 0 else ["", "", ""]
                lines.append("| " + " | ".join([*first, measure, *values]) + " |")
    return lines


def _budget(n: int) -> str:
    return "N = 1 (chain)" if n == 1 else f"N = {n}"


def _pivot_median(row: dict[str, Any] | None, key: str) -> str:
    return "–" if row is None or row.get(key) is None else f"{row[key]['median']:.2f}"


def _ratio(row: dict[str, Any] | None) -> str:
    return "–" if row is None else f"{row['pass_ratio']:.2f}"
