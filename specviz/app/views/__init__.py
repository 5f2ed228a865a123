"""Views of a decode for the app: token HTML, inspector, plots and summaries, built from events.

Nothing here imports torch: views take events and a token-to-text function only.
"""

from specviz.app.views.batch import BatchRun, batch_html
from specviz.app.views.cells import OUTCOMES, Cell, Decode, cells_from_events, emitted_text
from specviz.app.views.metrics import cost_ratio, summarize
from specviz.app.views.panels import race_html, status_html, summary_html
from specviz.app.views.plots import (
    acceptance_figure,
    accepted_histogram,
    accepted_length_figure,
    bench_look,
    placeholder,
    pq_figure,
    residual_figure,
)
from specviz.app.views.round_detail import memory_html, round_detail_html
from specviz.app.views.run import Run
from specviz.app.views.style import COLORS, CSS, LABELS
from specviz.app.views.tokens import inspector_html, legend_html, lossy_html, stream_html
from specviz.app.views.tree import TreeRound, mask_html, pick_round, tree_panel_html, tree_rounds
from specviz.app.views.tree_node import node_html

__all__ = [
    "COLORS",
    "CSS",
    "LABELS",
    "OUTCOMES",
    "BatchRun",
    "Cell",
    "Decode",
    "Run",
    "TreeRound",
    "acceptance_figure",
    "accepted_histogram",
    "accepted_length_figure",
    "batch_html",
    "bench_look",
    "cells_from_events",
    "cost_ratio",
    "emitted_text",
    "inspector_html",
    "legend_html",
    "lossy_html",
    "mask_html",
    "memory_html",
    "node_html",
    "pick_round",
    "placeholder",
    "pq_figure",
    "race_html",
    "residual_figure",
    "round_detail_html",
    "status_html",
    "stream_html",
    "summarize",
    "summary_html",
    "tree_panel_html",
    "tree_rounds",
]
