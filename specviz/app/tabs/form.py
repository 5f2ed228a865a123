"""The settings column every tab reads: the form's widgets keyed by their names in
specviz.app.views.form.FIELDS, the presets and the Load / check button, and the form's own events
(a preset fills the form, the drafter shows the fields it reads, Load / check loads the pair).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import gradio as gr

from specviz.app import views
from specviz.app.drafting import early_exit_note
from specviz.app.session import NO_PROGRESS, Session, parameter_counts
from specviz.app.views.form import (
    DEFAULTS,
    DRAFTER_FIELDS,
    FIELDS,
    POLICIES,
    PRESET_FIELDS,
    PRESETS,
    PROMPT_FORMATS,
    RANGES,
    TREE_RULE_CHOICES,
    Settings,
    drafter_choices,
    drafter_note,
    example_is_raw,
    shown_fields,
)
from specviz.app.wiring import NO_API, callback, form_only
from specviz.models.loading import DTYPES

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
        DEFAULTS[name],
        label=f"{label}: {RANGES[name].text()}",
        elem_id=f"sv-{name}",
        visible=visible,
    )


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
    c["raw"] = gr.Radio(
        [(label, raw) for raw, label in PROMPT_FORMATS.items()],
        value=example_is_raw(first),
        label="prompt format: chat template or raw completion",
        elem_id="sv-raw",
    )
    shown = shown_fields(DEFAULTS["drafter"])
    c["drafter"] = gr.Dropdown(
        drafter_choices(), value=DEFAULTS["drafter"], label="drafter", elem_id="sv-drafter"
    )
    c["drafter_note"] = gr.Markdown(drafter_note(DEFAULTS["drafter"]), elem_id="sv-drafter-note")
    c["exit_layer"] = number("exit_layer", "early exit: layers that draft", shown["exit_layer"])
    c["exit_note"] = gr.Markdown(
        early_exit_note(DEFAULTS["exit_layer"]),
        visible=shown["exit_note"],
        elem_id="sv-exit-note",
    )
    c["confidence"] = number(
        "confidence",
        "confidence threshold: stop drafting after a token with top q below it (0 = off)",
        shown["confidence"],
    )
    tree_controls(c, shown)
    c["policy"] = gr.Dropdown(
        POLICIES,
        value=DEFAULTS["policy"],
        label="γ policy (per round)",
        elem_id="sv-policy",
        visible=shown["policy"],
    )
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
        [(label, name) for name, label in TREE_RULE_CHOICES.items()],
        value=DEFAULTS["tree_rule"],
        label="tree verification",
        elem_id="sv-tree_rule",
        visible=shown["tree_rule"],
    )


class Form:
    """The settings column: its widgets (built by build, keyed by name) and its events."""

    def __init__(
        self, session: Session, defaults: Mapping[str, str], examples: Mapping[str, str]
    ) -> None:
        """defaults: the pair's target, draft and dtype; examples: label → prompt."""
        self.session, self.defaults, self.examples = session, defaults, examples

    def build(self) -> dict[str, Any]:
        """The form's widgets, keyed by name (FIELDS, then presets, workload, the notes, load)."""
        return controls(dict(self.defaults), dict(self.examples))

    def check(self, s: Settings, progress: gr.Progress = NO_PROGRESS) -> Iterator[str]:
        """Load (or find cached) the pair the settings decode with and say what it is."""
        yield from self.session.check(
            s,
            views.status_html,
            lambda p: views.status_html(f"ready: {parameter_counts(p)}"),
            lambda err: views.status_html(str(err), error=True),
        )

    @staticmethod
    def preset(name: str) -> list[Any]:
        """A preset's values for the fields it sets (PRESET_FIELDS order; gr.skip() for those
        it leaves as they are), then the status."""
        values = PRESETS[name]
        shown = ", ".join(f"{k} {v}" for k, v in values.items() if k != "raw")
        if "raw" in values:
            shown += ", " + ("raw completion" if values["raw"] else "chat template")
        status = views.status_html(f"preset: {name} ({shown}); press Generate")
        return [*(values[f] if f in values else gr.skip() for f in PRESET_FIELDS), status]

    def example(self, label: str) -> list[Any]:
        """An example prompt and its prompt format (raw completion for code), by its label."""
        return [self.examples.get(label, ""), example_is_raw(label)]

    def drafter_fields(self, drafter: str) -> list[Any]:
        """Show the fields the drafter reads, hide the others (DRAFTER_FIELDS: exit layer, its
        note, confidence, γ and its policy, the tree's fields); then the note on what the
        drafter does (for a tree drafter: why γ is gone; for a drafting head: its weights)."""
        shown = shown_fields(drafter)
        fields = [gr.update(visible=shown[k]) for k in DRAFTER_FIELDS]
        return [*fields, drafter_note(drafter, self.session.heads)]

    def callbacks(self) -> dict[str, Callable[..., Any]]:
        """The form's own API callback: load, taking the form's values by name."""

        def in_status(err: ValueError) -> str:
            return views.status_html(str(err), error=True)

        return {"load": callback(self.check, FIELDS, form_only, in_status)}

    def wire(self, c: Mapping[str, Any], status: Any, work: Mapping[str, Any]) -> None:
        """Connect the form's widgets c; status: the status line its events write; work: the
        queue settings of the requests that load models."""
        form = [c[name] for name in FIELDS]
        c["load"].click(self.callbacks()["load"], form, status, api_name="load", **work)
        for name, button in zip(PRESETS, c["presets"], strict=True):
            button.click(
                lambda n=name: self.preset(n),
                None,
                [*(c[f] for f in PRESET_FIELDS), status],
                api_name=NO_API,
            )
        c["workload"].change(self.example, c["workload"], [c["prompt"], c["raw"]], api_name=NO_API)
        drafter_fields = [*(c[k] for k in DRAFTER_FIELDS), c["drafter_note"]]
        c["drafter"].change(self.drafter_fields, c["drafter"], drafter_fields, api_name=NO_API)
        c["exit_layer"].change(early_exit_note, c["exit_layer"], c["exit_note"], api_name=NO_API)
