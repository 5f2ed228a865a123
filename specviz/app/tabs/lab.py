"""The Equivalence lab tab: speculative vs plain samples of the first k tokens, tested as one
family (the statistics in specviz.stats.lab), optionally with a broken sampler swapped in; this
tab parses its fields, builds what the samplers run on and renders the result.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, NoReturn

import gradio as gr

from specviz.api import stop_ids
from specviz.app import views
from specviz.app.drafting import tree_rule
from specviz.app.session import NO_PROGRESS, Session, decoder
from specviz.app.views.form import FIELDS, Settings, as_float, as_int, fields_of, settings_from
from specviz.app.views.lab import LabView
from specviz.app.views.page import LAB_INTRO, MUTANT_NOTE
from specviz.app.wiring import NO_API, callback, outputs
from specviz.drafters.names import HEAD_DRAFTERS, REGISTRY
from specviz.gamma.policies import make_policy
from specviz.models.chat import prompt_format, prompt_ids
from specviz.models.loading import ModelPair
from specviz.stats.lab import REAL, LabPair, LabProgress, LabResult, run_lab, toy_pair
from specviz.stats.laws import EXACT_VARIANT, Variant
from specviz.stats.mutants import MUTANTS

log = logging.getLogger("specviz.app")
# the toy pair's tree drafter in a head tree's place: the same kind of children, from its draft
TOY_TREES = {
    name: "tree-model:sampled" if name.endswith("-sampled") else "tree-model"
    for name in HEAD_DRAFTERS
    if REGISTRY[name].tree
}
LAB_OUTPUTS = ("status", "first", "joint", "table")  # the lab's outputs, in this order
GREEDY_LAB = (
    ". At T = 0 each sampler has one outcome: set a temperature (or the classic preset) to "
    "compare distributions"
)

TOY, MODELS = "toy pair (exact law known)", "selected model pair"
PAIRS = [TOY, MODELS]
LAB_FIELDS = ("pair", "mutant", "n", "k", "alpha")  # the lab's own controls, after the form's
N_RANGE, K_RANGE = (20, 5000), (1, 4)
DEFAULT_N = {TOY: 1500, MODELS: 75}  # sized for a short wait on a small CPU


def mutant_choices() -> list[tuple[str, str]]:
    """Dropdown (label, value) pairs: the real sampler, then every mutant by its short name (its
    description goes under the menu: mutant_note)."""
    return [(REAL, REAL), *((m.name, m.name) for m in MUTANTS)]


def mutant_note(name: Any) -> str:
    """Markdown under the sampler menu: what the chosen mutant breaks."""
    described = {m.name: m.description for m in MUTANTS}
    if name in described:
        return f"**{name}**: {described[name]}"
    return "The real speculative sampler: every test should pass."


@dataclass(frozen=True, kw_only=True)
class LabRequest:
    """Validated lab inputs: which pair, which sampler, N draws per sampler, k tokens, level."""

    pair: str
    variant: Variant
    n: int
    k: int
    alpha: float

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> LabRequest:
        """From the LAB_FIELDS by name; ValueError with a readable message when one is bad."""
        v = fields_of(values, LAB_FIELDS)
        if v["pair"] not in PAIRS:
            raise ValueError(f"pair must be one of {PAIRS} (got {v['pair']!r})")
        names = {m.name: m for m in MUTANTS}
        if (mutant := v["mutant"]) not in (REAL, *names):
            raise ValueError(f"mutant must be {REAL!r} or one of {sorted(names)} (got {mutant!r})")
        sizes = {"N": as_int("N", v["n"]), "k": as_int("k", v["k"])}
        for (name, value), (lo, hi) in zip(sizes.items(), (N_RANGE, K_RANGE), strict=True):
            if not lo <= value <= hi:
                raise ValueError(f"{name} must be between {lo} and {hi} (got {value})")
        if not 0 < (level := as_float("α", v["alpha"])) < 0.5:
            raise ValueError(f"α must be between 0 and 0.5 (got {level})")
        variant = names.get(mutant, EXACT_VARIANT)
        return cls(pair=v["pair"], variant=variant, n=sizes["N"], k=sizes["k"], alpha=level)


def lab_pair(s: Settings, pair: ModelPair | None, heads: str | None = None) -> LabPair:
    """What the equivalence lab samples: the toy pair and its draft model (pair None), or the
    loaded pair with the drafter the settings name, the prompt formatted as the decode's is
    (the chat template unless raw; a drafting head with the weights in heads).

    On the toy pair a chain drafter is its draft model; a tree drafter grows its trees there
    too, a head tree with the draft model in the head's place (the toy target has no heads).
    """
    if pair is None:
        drafter = TOY_TREES.get(s.drafter, s.drafter) if s.tree else "model"
        return replace(toy_pair(), drafter=drafter, options=s.options(), tree_rule=tree_rule(s))
    return LabPair(
        target=pair.target,
        draft=pair.draft,
        prompt_ids=prompt_ids(pair.tokenizer, s.prompt, raw=s.raw),
        prompt_format=prompt_format(pair.tokenizer, raw=s.raw),
        stop_ids=stop_ids(pair.target, pair.tokenizer),
        decode=decoder(pair.tokenizer),
        drafter=s.drafter,
        options=s.options(heads),
        tree_rule=tree_rule(s),
    )


@dataclass(frozen=True)
class LabPanels:
    """The tab's components: its fields by their LAB_FIELDS names, the run button, the mutant's
    note and the outputs (LAB_OUTPUTS)."""

    fields: Mapping[str, Any]
    run: gr.Button
    mutant_note: gr.Markdown
    status: gr.HTML
    first: gr.Plot
    joint: gr.Plot
    table: gr.HTML

    def listed(self) -> list[Any]:
        """The run's output components, in LAB_OUTPUTS order."""
        return [getattr(self, name) for name in LAB_OUTPUTS]


def view_of(result: LabResult) -> LabView:
    """The result as the lab's view renders it."""
    return LabView(**{f.name: getattr(result, f.name) for f in fields(result)})


def refused(err: Exception) -> NoReturn:
    """A lab error as a Gradio error (bad input: its message; anything else logged, and its
    type and message), never a stack trace."""
    if isinstance(err, ValueError):
        raise gr.Error(str(err)) from None
    log.exception("equivalence lab failed")
    raise gr.Error(f"{type(err).__name__}: {err}") from None


class LabTab:
    """The Equivalence lab of one app, sampling through its session."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @staticmethod
    def build() -> LabPanels:
        """The lab's controls and outputs."""
        gr.Markdown(LAB_INTRO)
        f: dict[str, Any] = {}
        with gr.Row():
            f["pair"] = gr.Radio(PAIRS, value=TOY, label="pair", elem_id="sv-lab-pair")
            with gr.Column():
                f["mutant"] = gr.Dropdown(
                    mutant_choices(),
                    value=REAL,
                    label="sampler (real, or a broken one)",
                    elem_id="sv-lab-mutant",
                )
                note = gr.Markdown(mutant_note(REAL), elem_id="sv-lab-mutant-note")
        gr.Markdown(MUTANT_NOTE)
        with gr.Row():
            f["n"] = gr.Number(DEFAULT_N[TOY], label="N per sampler (20–5000)", elem_id="sv-lab-n")
            f["k"] = gr.Number(2, label="k first tokens (1–4)", elem_id="sv-lab-k")
            f["alpha"] = gr.Number(0.01, label="family-wise α (Holm)", elem_id="sv-lab-alpha")
        run = gr.Button("Run equivalence lab", variant="primary", elem_id="sv-lab-run")
        status = gr.HTML(views.status_html("not run yet"), elem_id="sv-lab-status")
        with gr.Row():
            first = gr.Plot(label="first token", elem_id="sv-lab-first")
            joint = gr.Plot(label="first k tokens", elem_id="sv-lab-joint")
        table = gr.HTML(elem_id="sv-lab-table")
        return LabPanels(
            fields=f,
            run=run,
            mutant_note=note,
            status=status,
            first=first,
            joint=joint,
            table=table,
        )

    def run(
        self, s: Settings, req: LabRequest, progress: gr.Progress = NO_PROGRESS
    ) -> Iterator[list[Any]]:
        """Equivalence lab: draw with progress, then both distributions and the table of tests."""

        def show(message: str) -> list[Any]:
            return outputs(LAB_OUTPUTS, status=views.status_html(message))

        def work(models: ModelPair | None) -> Iterator[list[Any]]:
            g = s.speculation.gamma  # a tree drafter's: its depth, and no γ policy
            policy = None if s.tree else lambda: make_policy(s.policy, g)
            pair = lab_pair(s, models, self.session.heads)
            for step in run_lab(pair, req, s.sampling, g, policy):
                if isinstance(step, LabProgress):
                    progress(step.fraction, desc=step.text)
                    yield show(step.text)
                else:
                    view = view_of(step)
                    status = view.status() + (GREEDY_LAB if s.sampling.greedy else "")
                    first, joint = view.figures()
                    yield outputs(
                        LAB_OUTPUTS,
                        status=views.status_html(status),
                        first=first,
                        joint=joint,
                        table=view.table_html(),
                    )

        spec = s if req.pair == MODELS else None
        yield from self.session.decode_maybe(spec, show, work, refused)

    def callbacks(self) -> dict[str, Callable[..., Any]]:
        """The tab's API callback: lab, taking the form's values, then LAB_FIELDS, by name."""

        def with_lab(values: Mapping[str, Any]) -> tuple[Settings, LabRequest]:
            lab = {name: values[name] for name in LAB_FIELDS}
            return settings_from(values), LabRequest.parse(lab)

        return {"lab": callback(self.run, (*FIELDS, *LAB_FIELDS), with_lab, refused)}

    def wire(self, w: LabPanels, form: list[Any], work: Mapping[str, Any]) -> None:
        """Connect the lab; form: the form's widgets in FIELDS order; work: the queue settings
        of the requests that load models or decode."""
        lab_form = [*form, *(w.fields[name] for name in LAB_FIELDS)]
        w.run.click(self.callbacks()["lab"], lab_form, w.listed(), api_name="lab", **work)
        w.fields["pair"].change(DEFAULT_N.get, w.fields["pair"], w.fields["n"], api_name=NO_API)
        w.fields["mutant"].change(mutant_note, w.fields["mutant"], w.mutant_note, api_name=NO_API)
