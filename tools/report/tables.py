"""Every table the documents mark, by name, and its rendering from the saved results.

A *table* here is a function of the saved parts (a Saved, tools.report.saved) that returns the
lines of one Markdown table; the documents name it in `<!-- table: NAME -->`.
"""

from __future__ import annotations

from collections.abc import Callable

from specviz.bench.sweeps.heads import heads_table
from tools.report import analysis, audit, curve, headline, load, sections, studies
from tools.report.saved import Saved

TABLES: dict[str, Callable[[Saved], list[str]]] = {
    "headline": headline.headline,
    "limits": headline.limits,
    "machine": headline.machine,
    "parts": headline.parts,
    "draft-size": studies.draft_size,
    "gamma": studies.gamma,
    "verify-cost": studies.verify_cost,
    "temperature": studies.temperature,
    "batch": studies.batch,
    "batch-fit": studies.batch_fit,
    "batch-sweep": sections.batch_sweep,
    "levers": sections.levers,
    "endpoint": sections.endpoint,
    "memory": sections.memory,
    "suffix-factors": sections.suffix_factors,
    "memory-lean": sections.memory_lean,
    "memory-chat": sections.memory_chat,
    "memory-cost": sections.memory_cost,
    "memory-cost-tree": sections.memory_cost_tree,
    "drafters": studies.drafters,
    "dynamic": studies.dynamic,
    "transformers": studies.transformers,
    "trees": sections.trees,
    "heads": lambda saved: heads_table(saved.load),
    "heads-curve": curve.heads_curve,
    "heads-gpu": curve.heads_gpu,
    "heads-replay": curve.heads_replay,
    "heads-vocab": curve.heads_vocab,
    "copy-bound": analysis.copy_bound,
    "gate-replay": analysis.gate_replay,
    "audit": audit.audit,
    "audit-repeats": audit.audit_repeats,
    "app-load": load.app_load,
}


def render_table(name: str, saved: Saved) -> str:
    """The named table as Markdown, from the saved parts (KeyError for an unknown name)."""
    return "\n".join(TABLES[name](saved))
