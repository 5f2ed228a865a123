"""The app's layout: input widgets and output panels, keyed by name (specviz.app.main wires them).

The form's controls are keyed by their names in specviz.app.views.form.FIELDS, the lab's as
`lab_` + their names in specviz.app.lab.LAB_FIELDS.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from specviz.app import views
from specviz.app.lab import DEFAULT_N, PAIRS, REAL, TOY, mutant_choices
from specviz.app.state import early_exit_note
from specviz.app.views.form import DEFAULTS, POLICIES, drafter_choices
from specviz.app.views.page import CLICK_JS, LAB_INTRO, MUTANT_NOTE
from specviz.bench.saved import saved_results
from specviz.models.loading import DTYPES

BENCH_FIGURES = 5  # speedup by workload, gamma curves, alpha, latency CDF, batch step time


def controls(d: dict[str, str], prompts: dict[str, str]) -> dict[str, Any]:
    """The input widgets, keyed by name (d: pair defaults; prompts: example label → prompt)."""
    with gr.Accordion("Model pair", open=True):
        c: dict[str, Any] = {
            "target": gr.Textbox(d["target"], label="target: 'bundled', folder or hub id"),
            "draft": gr.Textbox(d["draft"], label="draft: 'bundled', folder or hub id"),
            "dtype": gr.Dropdown(sorted(DTYPES), value=d["dtype"], label="dtype"),
        }
        c["drafter"] = gr.Dropdown(
            drafter_choices(), value=DEFAULTS["drafter"], label="drafter", elem_id="sv-drafter"
        )
        c["exit_layer"] = gr.Number(
            DEFAULTS["exit_layer"], precision=0, label="early exit: layers that draft"
        )
        c["exit_note"] = gr.Markdown(early_exit_note(DEFAULTS["exit_layer"]))
        c["confidence"] = gr.Slider(
            0, 1, DEFAULTS["confidence"], step=0.05, elem_id="sv-confidence",
            label="confidence threshold: stop drafting after a token with top q below (0 = off)",
        )  # fmt: skip
        c["load"] = gr.Button("Load / check pair", size="sm")
    c["policy"] = gr.Dropdown(POLICIES, value=DEFAULTS["policy"], label="γ policy (per round)")
    first = next(iter(prompts))
    c["workload"] = gr.Dropdown(
        list(prompts), value=first, label="example prompt", elem_id="sv-workload"
    )
    c["prompt"] = gr.Textbox(prompts[first], lines=4, label="prompt", elem_id="sv-prompt")
    slider: dict[str, tuple[float, float, float, str]] = {
        "gamma": (1, 16, 1, "γ: draft tokens per round")
    }
    slider |= {"temperature": (0, 2, 0.05, "temperature (0 = greedy)")}
    slider |= {"top_p": (0.05, 1, 0.01, "top-p (1 = off)")}
    slider |= {"max_new": (1, 256, 1, "max new tokens")}
    for k, (lo, hi, step, label) in slider.items():
        c[k] = gr.Slider(lo, hi, DEFAULTS[k], step=step, label=label, elem_id=f"sv-{k}")
    c["top_k"] = gr.Number(DEFAULTS["top_k"], precision=0, label="top-k (0 = off)")
    c["seed"] = gr.Number(DEFAULTS["seed"], precision=0, label="seed", elem_id="sv-seed")
    with gr.Row():
        c["generate"] = gr.Button("Generate", variant="primary", elem_id="sv-generate")
        c["step"] = gr.Button("Step (one round)", elem_id="sv-step")
    c["race"] = gr.Button("Race: plain vs speculative", elem_id="sv-race-btn")
    return c


def outputs() -> dict[str, Any]:
    """The output panels, keyed by name."""
    o: dict[str, Any] = {"status": gr.HTML(views.status_html("ready"), elem_id="sv-status")}
    gr.HTML(views.legend_html(), elem_id="sv-legend")
    o["stream"] = gr.HTML(views.stream_html([]), js_on_load=CLICK_JS, elem_id="sv-stream")
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=280):
            o["index"] = gr.Number(label="inspect token # (or click a token)", precision=0)
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
    with gr.Tab("Summary & export"):
        o["summary"] = gr.HTML(views.summary_html({}), elem_id="sv-summary")
        o["export"] = gr.Button("Export events (JSONL) and summary (JSON)")
        o["files"] = gr.File(file_count="multiple", label="downloads")
    with gr.Tab("Race"):
        o["race"] = gr.HTML(views.race_html({}, {}, False), elem_id="sv-race")
    with gr.Tab("Equivalence lab", elem_id="sv-lab-tab"):
        lab_panel(o)
    with gr.Tab("Benchmark results", elem_id="sv-bench-tab"):
        bench_panel(o)
    return o


def bench_panel(o: dict[str, Any]) -> None:
    """A saved `specviz bench` result: the same plots and tables as its HTML report."""
    saved = saved_results()
    gr.Markdown(
        "Plots and tables of a saved `specviz bench --out result.json` run "
        "(the repository's `benchmarks/results/` are listed; or upload one)."
    )
    with gr.Row():
        o["bench_path"] = gr.Dropdown(
            saved, value=saved[0] if saved else None, label="saved result", allow_custom_value=True
        )
        o["bench_upload"] = gr.File(file_types=[".json"], label="or upload a result JSON")
    o["bench_show"] = gr.Button("Show result", elem_id="sv-bench-show")
    o["bench_plots"] = [gr.Plot(label=f"figure {i + 1}") for i in range(BENCH_FIGURES)]
    o["bench_tables"] = gr.Markdown(elem_id="sv-bench-tables")


def lab_panel(o: dict[str, Any]) -> None:
    """The equivalence lab's controls and outputs, added to o."""
    gr.Markdown(LAB_INTRO)
    with gr.Row():
        o["lab_pair"] = gr.Radio(PAIRS, value=TOY, label="pair", elem_id="sv-lab-pair")
        o["lab_mutant"] = gr.Dropdown(
            mutant_choices(), value=REAL, label="sampler", elem_id="sv-lab-mutant"
        )
    gr.Markdown(MUTANT_NOTE)
    with gr.Row():
        o["lab_n"] = gr.Number(DEFAULT_N[TOY], precision=0, label="N per sampler (20–5000)",
                               elem_id="sv-lab-n")  # fmt: skip
        o["lab_k"] = gr.Number(2, precision=0, label="k first tokens (1–4)", elem_id="sv-lab-k")
        o["lab_alpha"] = gr.Number(0.01, label="family-wise α (Holm)", elem_id="sv-lab-alpha")
    o["lab_run"] = gr.Button("Run equivalence lab", variant="primary", elem_id="sv-lab-run")
    o["lab_status"] = gr.HTML(views.status_html("not run yet"), elem_id="sv-lab-status")
    with gr.Row():
        o["lab_first"] = gr.Plot(label="first token", elem_id="sv-lab-first")
        o["lab_joint"] = gr.Plot(label="first k tokens", elem_id="sv-lab-joint")
    o["lab_table"] = gr.HTML(elem_id="sv-lab-table")
