"""The app's layout: input widgets and output panels, keyed by name (specviz.app.main wires them).

The form's controls are keyed by their names in specviz.app.views.form.FIELDS, the lab's as
`lab_` + their names in specviz.app.lab.LAB_FIELDS.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr

from specviz.app import views
from specviz.app.batch import (
    BATCH_CHOICES,
    BATCH_DEFAULTS,
    BATCH_NUMBERS,
    MAX_ROWS,
    MIN_ROWS,
)
from specviz.app.lab import DEFAULT_N, PAIRS, REAL, TOY, mutant_choices, mutant_note
from specviz.app.state import early_exit_note
from specviz.app.views.form import (
    DEFAULTS,
    POLICIES,
    PRESETS,
    RANGES,
    TREE_RULE_CHOICES,
    drafter_choices,
    drafter_note,
    shown_fields,
)
from specviz.app.views.page import (
    BATCH_INTRO,
    CLICK_JS,
    LAB_INTRO,
    MUTANT_NOTE,
    READY,
    TREE_JS,
)
from specviz.bench.saved import most_informative, saved_results
from specviz.models.loading import DTYPES

BENCH_FIGURES = 5  # speedup by drafter, gamma curves, alpha, latency CDF, batch step time
NUMBERS = {  # number field → its label; each label ends with the field's allowed range
    "gamma": "γ: draft tokens per round",
    "temperature": "temperature (0 = greedy)",
    "top_k": "top-k (0 = off)",
    "top_p": "top-p (1 = off)",
    "max_new": "max new tokens",
    "seed": "seed",
}
TREE_NUMBERS = {  # the tree drafters' fields
    "tree_nodes": "tree nodes: at most this many a round",
    "tree_depth": "tree depth: levels a round",
    "tree_width": "tree width: children per node",
}


def number(name: str, label: str, visible: bool = True) -> gr.Number:
    """A number field: its allowed range in its label, no clamping or rounding in the browser
    (Settings.parse refuses a value outside RANGES with the range instead)."""
    return gr.Number(
        DEFAULTS[name], label=f"{label}: {RANGES[name].text()}", elem_id=f"sv-{name}",
        visible=visible,
    )  # fmt: skip


def controls(d: dict[str, str], prompts: dict[str, str]) -> dict[str, Any]:
    """The input widgets, keyed by name (d: pair defaults; prompts: example label → prompt).

    The presets come first, then the prompt and the drafter; the pair sits in a closed
    accordion at the end (the bundled pair needs no setting).
    """
    c: dict[str, Any] = {}
    with gr.Row(elem_id="sv-presets"):
        c["presets"] = [
            gr.Button(name, size="sm", elem_id=f"sv-preset-{i}") for i, name in enumerate(PRESETS)
        ]
    first = next(iter(prompts))
    c["workload"] = gr.Dropdown(
        list(prompts), value=first, label="example prompt", elem_id="sv-workload"
    )
    c["prompt"] = gr.Textbox(prompts[first], lines=4, label="prompt", elem_id="sv-prompt")
    c["raw"] = gr.Checkbox(
        DEFAULTS["raw"], label="raw completion (send the prompt as plain text, no chat template)",
        elem_id="sv-raw",
    )  # fmt: skip
    shown = shown_fields(DEFAULTS["drafter"])
    c["drafter"] = gr.Dropdown(
        drafter_choices(), value=DEFAULTS["drafter"], label="drafter", elem_id="sv-drafter"
    )
    c["drafter_note"] = gr.Markdown(drafter_note(DEFAULTS["drafter"]), elem_id="sv-drafter-note")
    c["exit_layer"] = number("exit_layer", "early exit: layers that draft", shown["exit_layer"])
    c["exit_note"] = gr.Markdown(
        early_exit_note(DEFAULTS["exit_layer"]), visible=shown["exit_note"],
        elem_id="sv-exit-note",
    )  # fmt: skip
    c["confidence"] = number(
        "confidence", "confidence threshold: stop drafting after a token with top q below it "
        "(0 = off)", shown["confidence"],
    )  # fmt: skip
    tree_controls(c, shown)
    c["policy"] = gr.Dropdown(
        POLICIES, value=DEFAULTS["policy"], label="γ policy (per round)", elem_id="sv-policy",
        visible=shown["policy"],
    )  # fmt: skip
    names = list(NUMBERS)
    for pair in (names[i : i + 2] for i in range(0, len(names), 2)):
        with gr.Row():
            for name in pair:
                c[name] = number(name, NUMBERS[name], shown.get(name, True))
    with gr.Accordion("Model pair (bundled unless you change it)", open=False):
        c["target"] = gr.Textbox(d["target"], label="target: 'bundled', folder or hub id")
        c["draft"] = gr.Textbox(d["draft"], label="draft: 'bundled', folder or hub id")
        c["dtype"] = gr.Dropdown(sorted(DTYPES), value=d["dtype"], label="dtype")
        c["load"] = gr.Button("Load / check pair", size="sm", elem_id="sv-load")
    return c


def tree_controls(c: dict[str, Any], shown: dict[str, bool]) -> None:
    """The tree drafters' budget, depth and width, and the rule that verifies their trees (the
    exact one by default; the lossy one says so in its label), added to c."""
    with gr.Row():
        for name, label in TREE_NUMBERS.items():
            c[name] = number(name, label, shown[name])
    c["tree_rule"] = gr.Radio(
        [(label, name) for name, label in TREE_RULE_CHOICES.items()], value=DEFAULTS["tree_rule"],
        label="tree verification", elem_id="sv-tree_rule", visible=shown["tree_rule"],
    )  # fmt: skip


def actions() -> dict[str, Any]:
    """The decode buttons and, right beside them and above the output, the status line where
    every run's progress and every error appears (it stays in view while the page scrolls)."""
    a: dict[str, Any] = {}
    with gr.Row(elem_id="sv-actions", equal_height=True):
        a["generate"] = gr.Button(
            "Generate", variant="primary", elem_id="sv-generate", scale=0, min_width=120
        )
        a["step"] = gr.Button("Step one round", elem_id="sv-step", scale=0, min_width=150)
        a["race"] = gr.Button(
            "Race plain vs speculative", elem_id="sv-race-btn", scale=0, min_width=220
        )
        a["status"] = gr.HTML(views.status_html(READY), elem_id="sv-status")
    return a


def outputs(batch_drafter: str = "model") -> dict[str, Any]:
    """The output panels, keyed by name (batch_drafter: the Batch tab's first drafter)."""
    o: dict[str, Any] = {}
    gr.HTML(views.legend_html(), elem_id="sv-legend")
    o["stream"] = gr.HTML(views.stream_html([]), js_on_load=CLICK_JS, elem_id="sv-stream")
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=280):
            o["index"] = gr.Number(
                label="inspect token # (counts rejected drafts too; or click a token)",
                elem_id="sv-index",
            )
            o["inspector"] = gr.HTML(views.inspector_html(None), elem_id="sv-inspector")
        o["residual"] = gr.Plot(
            views.residual_figure(None, str), label="residual", elem_id="sv-residual", scale=3
        )
    with gr.Tab("Plots"):
        with gr.Row():
            o["acceptance"] = gr.Plot(elem_id="sv-acceptance", label="acceptance")
            o["lengths"] = gr.Plot(elem_id="sv-lengths", label="accepted per round")
        with gr.Row():
            o["histogram"] = gr.Plot(elem_id="sv-histogram", label="histogram")
            o["pq"] = gr.Plot(elem_id="sv-pq", label="p vs q")
    with gr.Tab("Tree rounds", elem_id="sv-tree-tab"):
        tree_panel(o)
    with gr.Tab("Summary & export"):
        o["summary"] = gr.HTML(views.summary_html({}), elem_id="sv-summary")
        o["export"] = gr.Button("Export events (JSONL) and summary (JSON)")
        o["files"] = gr.File(file_count="multiple", label="downloads")
    with gr.Tab("Race"):
        o["race"] = gr.HTML(views.race_html({}, {}, False), elem_id="sv-race")
    with gr.Tab("Batch", elem_id="sv-batch-tab"):
        batch_panel(o, batch_drafter)
    with gr.Tab("Equivalence lab", elem_id="sv-lab-tab"):
        lab_panel(o)
    with gr.Tab("Benchmark results", elem_id="sv-bench-tab") as bench_tab:
        bench_panel(o)
    o["bench_tab"] = bench_tab
    return o


def tree_panel(o: dict[str, Any]) -> None:
    """A tree round's candidate tree, attention mask and node inspector, added to o."""
    with gr.Row():
        o["tree_round"] = gr.Number(
            label="round # (Enter; the latest after each run)", elem_id="sv-tree-round"
        )
        o["tree_node"] = gr.Number(
            label="node # (Enter; or click a node; N = the token after the kept path)",
            elem_id="sv-tree-node",
        )
    with gr.Row(equal_height=False):
        o["tree"] = gr.HTML(
            views.tree_panel_html([], None, str), js_on_load=TREE_JS, elem_id="sv-tree"
        )
    o["tree_inspector"] = gr.HTML(views.node_html(None, None, str), elem_id="sv-tree-inspector")


def bench_panel(o: dict[str, Any]) -> None:
    """A saved `specviz bench` result: the same plots and tables as its HTML report, the most
    informative saved result first, the figures two by two, the tables in a scrolling box."""
    saved = saved_results()
    gr.Markdown(
        "Plots and tables of a saved `specviz bench --out result.json` run "
        "(the repository's `benchmarks/results/` are listed; or upload one)."
    )
    with gr.Row():
        o["bench_path"] = gr.Dropdown(
            [(Path(p).stem, p) for p in saved], value=most_informative(saved),
            label="saved result", allow_custom_value=True, elem_id="sv-bench-path",
        )  # fmt: skip
        o["bench_upload"] = gr.File(file_types=[".json"], label="or upload a result JSON")
    o["bench_show"] = gr.Button("Show result", elem_id="sv-bench-show")
    plots: list[Any] = []
    for row in ((0, 1), (2, 3), (4,)):
        with gr.Row():
            plots += [gr.Plot(label=f"figure {i + 1}", elem_id=f"sv-bench-{i}") for i in row]
    assert len(plots) == BENCH_FIGURES
    o["bench_plots"] = plots
    o["bench_tables"] = gr.Markdown(elem_id="sv-bench-tables")


def batch_panel(o: dict[str, Any], drafter: str) -> None:
    """The Batch tab's controls (the pair is the form's), its run button and status line, then
    every row's coloured tokens, added to o under `batch_` + their names."""
    gr.Markdown(BATCH_INTRO)
    with gr.Row(equal_height=False):
        o["batch_prompts"] = gr.Textbox(
            BATCH_DEFAULTS["prompts"], lines=MIN_ROWS + 2, max_lines=MAX_ROWS + 2, scale=3,
            label=f"prompts: one per line, {MIN_ROWS} to {MAX_ROWS}", elem_id="sv-batch-prompts",
        )  # fmt: skip
        with gr.Column(scale=2, min_width=260):
            o["batch_drafter"] = gr.Dropdown(
                [(label, name) for name, label in BATCH_CHOICES.items()], value=drafter,
                label="batched drafter", elem_id="sv-batch-drafter",
            )  # fmt: skip
            o["batch_raw"] = gr.Checkbox(
                BATCH_DEFAULTS["raw"], label="raw completion (no chat template)",
                elem_id="sv-batch-raw",
            )  # fmt: skip
    with gr.Row():
        for name, label in BATCH_NUMBERS.items():
            o[f"batch_{name}"] = gr.Number(
                BATCH_DEFAULTS[name], label=f"{label}: {RANGES[name].text()}",
                elem_id=f"sv-batch-{name}", min_width=150,
            )  # fmt: skip
    with gr.Row(elem_id="sv-batch-actions", equal_height=True):
        o["batch_run"] = gr.Button(
            "Run batch", variant="primary", elem_id="sv-batch-run", scale=0, min_width=140
        )
        o["batch_status"] = gr.HTML(views.status_html("not run yet"), elem_id="sv-batch-status")
    gr.HTML(views.legend_html(), elem_id="sv-batch-legend")
    o["batch_view"] = gr.HTML(views.batch_html(None), elem_id="sv-batch-view")


def lab_panel(o: dict[str, Any]) -> None:
    """The equivalence lab's controls and outputs, added to o."""
    gr.Markdown(LAB_INTRO)
    with gr.Row():
        o["lab_pair"] = gr.Radio(PAIRS, value=TOY, label="pair", elem_id="sv-lab-pair")
        with gr.Column():
            o["lab_mutant"] = gr.Dropdown(
                mutant_choices(), value=REAL, label="sampler (real, or a broken one)",
                elem_id="sv-lab-mutant",
            )  # fmt: skip
            o["lab_mutant_note"] = gr.Markdown(mutant_note(REAL), elem_id="sv-lab-mutant-note")
    gr.Markdown(MUTANT_NOTE)
    with gr.Row():
        o["lab_n"] = gr.Number(DEFAULT_N[TOY], label="N per sampler (20–5000)", elem_id="sv-lab-n")
        o["lab_k"] = gr.Number(2, label="k first tokens (1–4)", elem_id="sv-lab-k")
        o["lab_alpha"] = gr.Number(0.01, label="family-wise α (Holm)", elem_id="sv-lab-alpha")
    o["lab_run"] = gr.Button("Run equivalence lab", variant="primary", elem_id="sv-lab-run")
    o["lab_status"] = gr.HTML(views.status_html("not run yet"), elem_id="sv-lab-status")
    with gr.Row():
        o["lab_first"] = gr.Plot(label="first token", elem_id="sv-lab-first")
        o["lab_joint"] = gr.Plot(label="first k tokens", elem_id="sv-lab-joint")
    o["lab_table"] = gr.HTML(elem_id="sv-lab-table")
