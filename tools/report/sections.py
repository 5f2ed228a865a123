"""The tables of the sweep parts (batch sweep, levers, endpoint, memory, trees) and the memory
study's figure.

A sweep part saves its own section (result[KEY]); until the part is saved, its table is a
one-line note naming the command that measures it. Each reads the saved parts through a Saved
(tools.report.saved).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from specviz.bench.batch_table import headline_table
from specviz.bench.sweeps.levers import headline_table as levers_headline
from specviz.bench.sweeps.memory import render_memory, step_curves
from specviz.bench.table import markdown_table
from specviz.bench.tree_table import pivot_table
from specviz.endpoint.table import endpoint_table
from tools.report.saved import Saved

BATCH_SWEEP_PART = "batch-sweep"
LEVERS_PART = "levers"
ENDPOINT_PART = "endpoint"
MEMORY_WORKLOADS = ("agent-code", "agent-tools", "agent-sql", "repeat", "code")
MEMORY_PARTS = tuple(f"memory-{w}" for w in MEMORY_WORKLOADS)  # cpu_bench.sh: one a workload
MEMORY_FIGURE = "memory-steps.png"  # beside the saved results
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
        saved, BATCH_SWEEP_PART, "batch_sweep", "batch sweep", lambda s, _: headline_table(s)
    )


def levers(saved: Saved) -> list[str]:
    """The levers part over all its workloads (a one-line note until the part is saved)."""
    return section_table(saved, LEVERS_PART, "levers", "levers", levers_headline)


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
        "rows": [r for s in sections for r in s["rows"]],
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


def memory_figure(saved: Saved) -> Path | None:
    """Plot the agent workloads' speedup against the step index into the results folder, as
    MEMORY_FIGURE (None, and nothing drawn, until a memory part is saved)."""
    section = memory_section(saved)
    if section is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for drafter, points in step_curves(section).items():
        ax.plot([s for s, _ in points], [x for _, x in points], marker="o", label=drafter)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set(xlabel="step of the agent's task", ylabel="speedup over plain decoding")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = saved.folder / MEMORY_FIGURE
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def trees(saved: Saved) -> list[str]:
    """The node-budget sweeps: tokens a pass, r(N) and the speedup at each N (tree parts)."""
    return pivot_table([saved.load(p)["tree_sweep"] for p in TREE_PARTS if saved.has(p)])
