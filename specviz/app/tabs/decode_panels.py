"""The decode area's components: the buttons with the status line beside them, the token stream
and its inspector, the round detail and the suffix memory's line, and the Plots, Tree rounds,
Summary & export and Race tabs.

They are fields of one frozen DecodePanels, and an event's outputs are a tuple of those fields'
names (MAIN, RACE), never a count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

from specviz.app import views
from specviz.app.views.page import CLICK_JS, READY, TREE_JS

# a decode's outputs: the run, the stream, the status line, the 4 plots, the summary, the
# latest tree round (its number, its tree, the tree inspector), the committed text and the
# decode in short (JSON); the API names each by its component's label
MAIN: tuple[str, ...] = (
    "run",
    "stream",
    "status",
    "acceptance",
    "lengths",
    "histogram",
    "pq",
    "summary",
)
MAIN += ("tree_round", "tree", "tree_inspector", "text", "result")
RACE = (*MAIN, "race")  # the race's: a decode's, then the race panel


@dataclass(frozen=True)
class DecodePanels:
    """The decode area's components, by name."""

    run: gr.State  # the session's views.Run (None before the first decode)
    generate: gr.Button
    stop: gr.Button  # cancels a Generate: its row is freed at the next round boundary
    step: gr.Button
    race_button: gr.Button
    status: gr.HTML  # every run's progress and every error
    stream: gr.HTML
    index: gr.Number
    inspector: gr.HTML
    residual: gr.Plot
    round_detail: gr.HTML  # how the selected (or latest) round drafted
    memory: gr.HTML  # what the suffix memory holds
    clear_memory: gr.Button
    acceptance: gr.Plot
    lengths: gr.Plot
    histogram: gr.Plot
    pq: gr.Plot
    tree_round: gr.Number
    tree_node: gr.Number
    tree: gr.HTML
    tree_inspector: gr.HTML
    summary: gr.HTML
    text: gr.Textbox  # the committed text alone: no rejected draft, no stop token
    result: gr.JSON  # the decode in short: drafter, γ, tokens, rounds, α, tok/s, ...
    export: gr.Button
    files: gr.File
    race: gr.HTML

    def listed(self, names: tuple[str, ...]) -> list[Any]:
        """The components called names, in that order (an event's inputs or outputs)."""
        return [getattr(self, name) for name in names]


def build(memory: Callable[[], str] | None = None) -> DecodePanels:
    """The decode area: the buttons with the status line beside them (it stays in view while the
    page scrolls), the legend, the stream and the token inspector, the round detail and the
    suffix memory's line (memory: its HTML, read again on every page load), then its tabs."""
    w: dict[str, Any] = {"run": gr.State(None)}
    with gr.Row(elem_id="sv-actions", equal_height=True):
        w["generate"] = gr.Button(
            "Generate", variant="primary", elem_id="sv-generate", scale=0, min_width=120
        )
        w["stop"] = gr.Button("Stop", elem_id="sv-stop", scale=0, min_width=80)
        w["step"] = gr.Button("Step one round", elem_id="sv-step", scale=0, min_width=150)
        w["race_button"] = gr.Button(
            "Race plain vs speculative", elem_id="sv-race-btn", scale=0, min_width=220
        )
        w["status"] = gr.HTML(views.status_html(READY), label="status", elem_id="sv-status")
    gr.HTML(views.legend_html(), elem_id="sv-legend")
    w["stream"] = gr.HTML(
        views.stream_html([]), js_on_load=CLICK_JS, label="token stream", elem_id="sv-stream"
    )
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=280):
            w["index"] = gr.Number(
                label="inspect token # (counts rejected drafts too; or click a token)",
                elem_id="sv-index",
            )
            w["inspector"] = gr.HTML(
                views.inspector_html(None), label="token inspector", elem_id="sv-inspector"
            )
        w["residual"] = gr.Plot(
            views.residual_figure(None, str), label="residual", elem_id="sv-residual", scale=3
        )
    w["round_detail"] = gr.HTML(
        views.round_detail_html([], None, str), label="round detail", elem_id="sv-round-detail"
    )
    with gr.Row(equal_height=True, elem_id="sv-memory-row"):
        w["memory"] = gr.HTML(
            memory or views.memory_html(0, 0), label="suffix memory", elem_id="sv-memory"
        )
        w["clear_memory"] = gr.Button(
            "Clear memory", elem_id="sv-clear-memory", scale=0, min_width=140, size="sm"
        )
    with gr.Tab("Plots"):
        with gr.Row():
            w["acceptance"] = gr.Plot(elem_id="sv-acceptance", label="acceptance")
            w["lengths"] = gr.Plot(elem_id="sv-lengths", label="accepted per round")
        with gr.Row():
            w["histogram"] = gr.Plot(elem_id="sv-histogram", label="histogram")
            w["pq"] = gr.Plot(elem_id="sv-pq", label="p vs q")
    with gr.Tab("Tree rounds", elem_id="sv-tree-tab"):
        tree_panel(w)
    with gr.Tab("Summary & export"):
        w["text"] = gr.Textbox(
            label="text (the committed tokens: no rejected draft, no stop token)",
            lines=4,
            interactive=False,
            buttons=["copy"],
            elem_id="sv-text",
        )
        w["result"] = gr.JSON(label="result", elem_id="sv-result")
        w["summary"] = gr.HTML(views.summary_html({}), label="summary", elem_id="sv-summary")
        w["export"] = gr.Button("Export events (JSONL) and summary (JSON)")
        w["files"] = gr.File(file_count="multiple", label="downloads")
    with gr.Tab("Race"):
        w["race"] = gr.HTML(views.race_html({}, {}, False), label="race", elem_id="sv-race")
    return DecodePanels(**w)


def tree_panel(w: dict[str, Any]) -> None:
    """A tree round's candidate tree, attention mask and node inspector, added to w."""
    with gr.Row():
        w["tree_round"] = gr.Number(
            label="round # (Enter; the latest after each run)", elem_id="sv-tree-round"
        )
        w["tree_node"] = gr.Number(
            label="node # (Enter; or click a node; N = the token after the kept path)",
            elem_id="sv-tree-node",
        )
    with gr.Row(equal_height=False):
        w["tree"] = gr.HTML(
            views.tree_panel_html([], None, str),
            js_on_load=TREE_JS,
            label="tree",
            elem_id="sv-tree",
        )
    w["tree_inspector"] = gr.HTML(
        views.node_html(None, None, str), label="tree inspector", elem_id="sv-tree-inspector"
    )
