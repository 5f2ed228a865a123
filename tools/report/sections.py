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
from specviz.bench.tree_table import pivot_table
from specviz.endpoint.table import endpoint_table
from specviz.results.table import markdown_table
from tools.report.saved import Saved

BATCH_SWEEP_PART = "batch-sweep"
LEVERS_PART = "levers"
ENDPOINT_PART = "endpoint"
MEMORY_PART = "memory"
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


def memory(saved: Saved) -> list[str]:
    """Drafting from memory on the agent workloads, and its figure (a note until saved)."""
    lines = section_table(
        saved,
        MEMORY_PART,
        "memory",
        "drafting from memory",
        lambda s, _: render_memory(s).splitlines(),
    )
    if saved.has(MEMORY_PART):
        lines += ["", f"![Speedup against the step index](results/{MEMORY_FIGURE})"]
    return lines


def memory_figure(saved: Saved) -> Path | None:
    """Plot the memory part's speedup against the step index into the results folder, as
    MEMORY_FIGURE (None, and nothing drawn, until the part is saved)."""
    if not saved.has(MEMORY_PART):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for drafter, points in step_curves(saved.load(MEMORY_PART)["memory"]).items():
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
