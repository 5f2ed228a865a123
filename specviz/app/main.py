"""specviz app: watch speculative decoding happen, token by token (launched by `python app.py`).

Gradio wiring only: decoding comes from specviz.api, every view from specviz.app.views.

Loading and decoding are kept apart so that a slow load never holds up anyone else: each
request loads its pair in a thread of its own (specviz.app.state.Loading, at most two loads at
once), showing the load's progress live in the status line, and only then waits for the one
decode slot (decodes run one at a time: two at once on a small CPU would only slow both, and
the race's timings with them).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import logging
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import gradio as gr

from specviz.api import autoregressive_stream, speculative_stream
from specviz.app import layout, views
from specviz.app.batch import (
    BATCH_FIELDS,
    PAIR_FIELDS,
    BatchRequest,
    default_drafter,
    run_batch,
)
from specviz.app.batch import outputs as batch_outputs
from specviz.app.lab import (
    DEFAULT_N,
    LAB_FIELDS,
    MODELS,
    LabProgress,
    LabRequest,
    mutant_note,
    run_lab,
)
from specviz.app.state import (
    Loading,
    PairCache,
    PairSpec,
    decoder,
    early_exit_note,
    lab_pair,
    make_drafter,
    parameter_counts,
    tree_rule,
)
from specviz.app.views.form import (
    DRAFTER_FIELDS,
    FIELDS,
    PRESET_FIELDS,
    PRESETS,
    Settings,
    as_int,
    drafter_note,
    examples,
    settings_from,
    shown_fields,
)
from specviz.app.views.page import INTRO, MONO, SANS
from specviz.bench.saved import load_result_view
from specviz.core.events import write_jsonl
from specviz.gamma.policies import CostModel, make_policy
from specviz.models.chat import prompt_format, prompt_ids
from specviz.models.loading import BUNDLED, DTYPES, ModelPair
from specviz.runtime import add_threads_argument, set_threads

log = logging.getLogger("specviz.app")
PLOT_EVERY = 4  # while streaming a full decode, redraw the plots every this many rounds
MAIN_OUTPUTS = 11  # state, stream, status, 4 plots, summary, tree round #, tree, tree inspector
NO_PROGRESS = gr.Progress()  # progress outside a Gradio event: reports go nowhere
WORKERS = 4  # requests that may load or wait for the decode slot at once (the rest queue)
Show = Callable[[str], Any]  # a status message → the event's outputs showing it
GREEDY_LAB = (
    ". At T = 0 each sampler has one outcome: set a temperature (or the classic preset) to "
    "compare distributions"
)


def callback(
    handler: Callable[..., Any],
    names: Sequence[str],
    read: Callable[[dict[str, Any]], tuple[Any, ...]],
    bad: Callable[[ValueError], Any],
) -> Callable[..., Any]:
    """A Gradio callback taking the widget values called names (its inputs, in that order) and
    progress: read turns them, by name, into the handler's arguments (a ValueError: bad(error)
    is the output instead), and the handler gets those and progress.

    The callback's signature lists the names, so Gradio's API takes the values by them too.
    """
    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
    params.append(
        inspect.Parameter("progress", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=NO_PROGRESS)
    )
    signature = inspect.Signature(params)

    def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], Any]:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        progress = values.pop("progress")
        return read(values), progress

    if inspect.isgeneratorfunction(handler):

        def stream(*args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                parsed, progress = arguments(args, kwargs)
            except ValueError as err:
                yield bad(err)
                return
            yield from handler(*parsed, progress=progress)

        fn: Callable[..., Any] = stream
    else:

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                parsed, progress = arguments(args, kwargs)
            except ValueError as err:
                return bad(err)
            return handler(*parsed, progress=progress)

        fn = call
    fn.__signature__ = signature  # type: ignore[attr-defined]
    return fn


def form_only(values: Mapping[str, Any]) -> tuple[Settings]:
    """The handler arguments of an event that reads the form alone: its Settings."""
    return (settings_from(values),)


class SpecVizApp:
    """One app instance: its model cache, export folder, handlers and Blocks."""

    def __init__(
        self,
        target: str = BUNDLED,
        draft: str = BUNDLED,
        dtype: str = "float32",
        heads: str | None = None,
    ) -> None:
        """An app whose form starts at target, draft and dtype; heads: the folder of the drafting
        heads' weights (eagle.safetensors, medusa.safetensors; None: the shipped ones)."""
        self.defaults = {"target": target, "draft": draft, "dtype": dtype}
        self.heads = heads
        self.pairs = PairCache()
        self.costs: dict[tuple[Any, ...], CostModel] = {}  # theory policy's costs, per setup
        self.export_dir = Path(tempfile.mkdtemp(prefix="specviz-app-"))
        self.examples = examples()  # label -> prompt, one per benchmark workload
        self.decoding = threading.Lock()  # the one decode slot (turn() waits for it)

    def pair(self, s: Settings, progress: gr.Progress = NO_PROGRESS) -> ModelPair:
        """The model pair for settings, loaded here (load messages shown as progress)."""
        return self.pairs.get(s.target, s.draft, s.dtype, lambda m: progress(None, desc=m))

    def pair_for(self, s: PairSpec, show: Show) -> Generator[Any, None, ModelPair]:
        """Load (or find cached) the settings' pair in a thread, yielding show(message) for
        each progress message as it comes; returns the pair (raises the load's error)."""
        loading = Loading(self.pairs, s)
        for message in loading.updates():
            yield show(message)
        return loading.pair()

    def turn(self, show: Show) -> Generator[Any, None, None]:
        """Wait for the one decode slot, yielding show(how long) while another request holds
        it; the caller releases self.decoding when done."""
        started = time.monotonic()
        while not self.decoding.acquire(timeout=0.5):
            waited = time.monotonic() - started
            yield show(f"waiting for another request's decode to finish ({waited:.0f} s)")

    def cost_model(self, s: Settings) -> CostModel:
        """Costs measured by earlier runs on the same models, drafter and confidence."""
        key = (s.target, s.draft, s.dtype, s.drafter, s.exit_layer, s.min_confidence)
        return self.costs.setdefault(key, CostModel())

    def start(self, s: Settings, p: ModelPair, plain: bool = False) -> views.Run:
        """Validate against the models and return a run whose events have not started; the
        prompt goes through the chat template unless the settings ask for raw text."""
        ids = prompt_ids(p.tokenizer, s.prompt, raw=s.raw)
        sent = prompt_format(p.tokenizer, raw=s.raw)
        if plain:
            max_new = s.speculation.max_new_tokens
            _, stream = autoregressive_stream(
                p.target, p.tokenizer, ids, sampling=s.sampling, max_new_tokens=max_new
            )
        else:  # a tree drafter's depth is fixed: no γ policy; its trees verified by its rule
            policy = (
                None if s.tree else make_policy(s.policy, s.speculation.gamma, self.cost_model(s))
            )
            _, stream = speculative_stream(
                p.target, make_drafter(s, p, self.heads), p.tokenizer, ids, sampling=s.sampling,
                speculation=s.speculation, policy=policy, tree_rule=tree_rule(s),
            )  # fmt: skip
        return views.Run(
            stream=stream, decode=decoder(p.tokenizer), prompt=s.prompt, prompt_format=sent,
            settings={**s.describe(), "prompt_format": sent}, request=s,
        )  # fmt: skip

    def render(self, run: views.Run, plots: bool = True, paused: bool = False) -> list[Any]:
        """Outputs for [state, stream, status, 4 plots, summary, tree round #, tree, tree
        inspector] after a step (paused: after Step, waiting for the next click); the tree view
        shows the latest tree round. A lossy rule's output says so in the stream and status."""
        cells, rounds, trees = run.cells(), run.rounds, run.trees
        done = run.finished
        if done:
            note = f"finished: {done.reason}, {done.new_tokens} new tokens"
        elif paused:
            note = "paused: Step for the next round, Generate to run to the end"
        else:
            note = "running…"
        if not run.exact:
            note += " · LOSSY: typical acceptance, not the target's law"
        tree = bool(trees)
        figs: list[Any] = [
            views.acceptance_figure(rounds, tree=tree),
            views.accepted_length_figure(rounds, tree=tree),
            views.accepted_histogram(rounds, tree=tree),
            views.pq_figure(cells),
        ]
        status = views.status_html(f"round {len(rounds)} · {note}")
        shown = views.pick_round(trees, None)  # the latest round that drafted a tree
        latest = shown.round if shown else None
        stream = views.stream_html(
            cells, run.prompt, prompt_format=run.prompt_format, lossy=not run.exact
        )
        return [
            run,
            stream,
            status,
            *(figs if plots else [gr.skip()] * 4),
            views.summary_html(run.summary()),
            latest,
            views.tree_panel_html(trees, latest, run.text_of),
            views.node_html(None, None, run.text_of),
        ]

    @staticmethod
    def status_only(message: str, n_outputs: int, error: bool = False) -> list[Any]:
        """Outputs that change only the status line (the third of n_outputs)."""
        return [gr.skip(), gr.skip(), views.status_html(message, error=error)] + [gr.skip()] * (
            n_outputs - 3
        )

    def fail(self, err: Exception, n_outputs: int) -> list[Any]:
        """Outputs that leave everything as it was and show the error in the status line."""
        if not isinstance(err, ValueError):
            log.exception("unexpected error")
        text = str(err) if isinstance(err, ValueError) else f"{type(err).__name__}: {err}"
        return self.status_only(text, n_outputs, error=True)

    def generate(self, s: Settings, progress: gr.Progress = NO_PROGRESS) -> Iterator[list[Any]]:
        """Load (progress live), then decode to the end, streaming the view after every round."""

        def show(message: str) -> list[Any]:
            return self.status_only(message, MAIN_OUTPUTS)

        try:
            p = yield from self.pair_for(s, show)
            yield from self.turn(show)
            try:
                run = self.start(s, p)
                for r in run.run_to_end():
                    yield self.render(r, plots=r.done or len(r.rounds) % PLOT_EVERY == 1)
            finally:
                self.decoding.release()
        except Exception as err:  # shown in the UI, never as a stack trace
            yield self.fail(err, MAIN_OUTPUTS)

    def step(
        self, run: views.Run | None, s: Settings, progress: gr.Progress = NO_PROGRESS
    ) -> Iterator[list[Any]]:
        """Advance the session's run by one round; start a new one if none, done or changed."""

        def show(message: str) -> list[Any]:
            return self.status_only(message, MAIN_OUTPUTS)

        try:
            p = yield from self.pair_for(s, show)
            yield from self.turn(show)
            try:
                if run is None or run.done or run.request != s:
                    run = self.start(s, p)  # a fresh run when the controls changed
                run.step()
                yield self.render(run, paused=True)
            finally:
                self.decoding.release()
        except Exception as err:
            yield self.fail(err, MAIN_OUTPUTS)

    def race(self, s: Settings, progress: gr.Progress = NO_PROGRESS) -> Iterator[list[Any]]:
        """Plain then speculative decoding of the same prompt, timed without redraws between."""

        def show(message: str) -> list[Any]:
            return [*self.status_only(message, MAIN_OUTPUTS), gr.skip()]

        try:
            p = yield from self.pair_for(s, show)
            yield from self.turn(show)
            try:
                plain = self.start(s, p, plain=True)
                yield self.race_update("race: plain decoding…", views.race_html({}, {}, False))
                plain_side = plain.finish()
                yield self.race_update(
                    "race: speculative decoding…", views.race_html(plain_side, {}, False)
                )
                spec = self.start(s, p)
                spec_side = spec.finish()
            finally:
                self.decoding.release()
            spec.plain_tokens_per_second = plain_side["tokens_per_second"]
            race = views.race_html(plain_side, spec_side, s.sampling.greedy)
            yield [*self.render(spec), race]
        except Exception as err:
            yield self.fail(err, MAIN_OUTPUTS + 1)

    @staticmethod
    def race_update(message: str, race: str) -> list[Any]:
        """Race outputs that change only the status line and the race panel."""
        skipped = [gr.skip()] * (MAIN_OUTPUTS - 3)
        return [gr.skip(), gr.skip(), views.status_html(message), *skipped, race]

    def inspect(self, run: views.Run | None, index: Any) -> list[Any]:
        """Inspector panel and residual chart for the token at index."""
        try:
            cell = run.cell(as_int("token #", index)) if run else None
        except ValueError:
            cell = None
        decode = run.text_of if run else str
        return [views.inspector_html(cell), views.residual_figure(cell, decode)]

    def click(self, run: views.Run | None, evt: gr.EventData) -> list[Any]:
        """A click on a token in the stream: fill the token number and the inspector."""
        index = getattr(evt, "_data", None) or {}
        idx = index.get("idx") if isinstance(index, dict) else None
        return [idx, *self.inspect(run, idx)]

    def tree_view(self, run: views.Run | None, number: Any, node: Any = None) -> list[Any]:
        """The tree view of the round numbered number (the latest if there is none such) and
        the inspector on its node."""
        trees = run.trees if run else []
        decode = run.text_of if run else str
        chosen = views.pick_round(trees, number)
        return [views.tree_panel_html(trees, number, decode), views.node_html(chosen, node, decode)]

    def tree_click(self, run: views.Run | None, number: Any, evt: gr.EventData) -> list[Any]:
        """A click on a node of the tree: fill the node number and the tree inspector."""
        data = getattr(evt, "_data", None) or {}
        node = data.get("node") if isinstance(data, dict) else None
        trees = run.trees if run else []
        decode = run.text_of if run else str
        return [node, views.node_html(views.pick_round(trees, number), node, decode)]

    def export(self, run: views.Run | None) -> list[str]:
        """Write the run's events (JSONL) and summary (JSON); return both paths."""
        if run is None or not run.log:
            raise gr.Error("nothing to export yet: generate first")
        folder = self.export_dir / uuid.uuid4().hex[:8]
        folder.mkdir()
        write_jsonl(run.log, folder / "events.jsonl")
        (folder / "summary.json").write_text(json.dumps(run.summary(), indent=2) + "\n")
        return [str(folder / "events.jsonl"), str(folder / "summary.json")]

    def check(self, s: Settings, progress: gr.Progress = NO_PROGRESS) -> Iterator[str]:
        """Load (or find cached) the pair the settings decode with and say what it is."""

        def show(message: str) -> str:
            return views.status_html(message)

        try:
            p = yield from self.pair_for(s, show)
        except Exception as err:
            yield views.status_html(str(err), error=True)
            return
        yield views.status_html(f"ready: {parameter_counts(p)}")

    @staticmethod
    def preset(name: str) -> list[Any]:
        """A preset's values for the fields it sets (PRESET_FIELDS order), then the status."""
        values = PRESETS[name]
        shown = ", ".join(f"{k} {v}" for k, v in values.items())
        status = views.status_html(f"preset: {name} ({shown}); press Generate")
        return [*(values[f] for f in PRESET_FIELDS), status]

    def drafter_fields(self, drafter: str) -> list[Any]:
        """Show the fields the drafter reads, hide the others (DRAFTER_FIELDS: exit layer, its
        note, confidence, γ and its policy, the tree's fields); then the note on what the
        drafter does (for a tree drafter: why γ is gone; for a drafting head: its weights)."""
        shown = shown_fields(drafter)
        fields = [gr.update(visible=shown[k]) for k in DRAFTER_FIELDS]
        return [*fields, drafter_note(drafter, self.heads)]

    def lab(
        self, s: Settings, req: LabRequest, progress: gr.Progress = NO_PROGRESS
    ) -> Iterator[list[Any]]:
        """Equivalence lab: draw with progress, then both distributions and the table of tests."""

        def show(message: str) -> list[Any]:
            return [views.status_html(message), *[gr.skip()] * 3]

        try:
            models = (yield from self.pair_for(s, show)) if req.pair == MODELS else None
            yield from self.turn(show)
            try:
                g = s.speculation.gamma  # a tree drafter's: its depth, and no γ policy
                policy = None if s.tree else lambda: make_policy(s.policy, g)
                for step in run_lab(lab_pair(s, models, self.heads), req, s.sampling, g, policy):
                    if isinstance(step, LabProgress):
                        progress(step.fraction, desc=step.text)
                        yield show(step.text)
                    else:
                        status = step.status() + (GREEDY_LAB if s.sampling.greedy else "")
                        yield [views.status_html(status), *step.figures(), step.table_html()]
            finally:
                self.decoding.release()
        except ValueError as err:  # bad input: a readable message, never a stack trace
            raise gr.Error(str(err)) from None
        except Exception as err:
            log.exception("equivalence lab failed")
            raise gr.Error(f"{type(err).__name__}: {err}") from None

    def batch(self, req: BatchRequest, progress: gr.Progress = NO_PROGRESS) -> Iterator[list[Any]]:
        """The Batch tab: load (progress live), then decode its prompts as one batch, every
        row redrawn after each batch round (specviz.app.batch)."""
        yield from run_batch(self, req)

    def bench_result(self, path: str | None, upload: str | None) -> list[Any]:
        """A saved benchmark result's figures (in the app's look) and tables (an upload wins
        over the dropdown)."""
        chosen = upload or path
        if not chosen:
            raise gr.Error("choose a saved result or upload a `specviz bench --out` JSON")
        try:
            figs, tables = load_result_view(chosen, views.bench_look, views.placeholder)
        except ValueError as err:
            raise gr.Error(str(err)) from None
        return [*figs, tables]

    def bench_first(self, path: str | None, upload: str | None, shown: str | None) -> list[Any]:
        """On opening the Benchmark results tab: the chosen result, unless one is shown."""
        if shown:
            return [gr.skip()] * (layout.BENCH_FIGURES + 1)
        return self.bench_result(path, upload)

    def build(self) -> gr.Blocks:
        """The Blocks UI and its event wiring: the settings on the left; on the right the
        buttons with the status line beside them, then the output."""
        # plotly imports pandas on its first figure; two request threads doing that at once can
        # see a half-imported module, so it is imported here, before any request runs.
        importlib.import_module("pandas")
        with gr.Blocks(title="specviz: speculative decoding, token by token") as demo:
            state = gr.State(None)
            gr.Markdown(INTRO)
            with gr.Row():
                with gr.Column(scale=1, min_width=320):
                    c = layout.controls(self.defaults, self.examples)
                with gr.Column(scale=3):
                    buttons = layout.actions()
                    panels = layout.outputs(default_drafter(self.defaults["draft"]))
                    o = {"status": buttons.pop("status"), **panels}
            self.wire(state, {**c, **buttons}, o)
        blocks: gr.Blocks = demo
        return blocks

    def callbacks(self) -> dict[str, Callable[..., Any]]:
        """The Gradio callbacks of the form's events, by API name. Each takes the form's values
        by the names in FIELDS (then its own: the run, or the lab's LAB_FIELDS) and passes its
        handler one validated Settings; bad values show an error as the handler's own would."""

        def shown(n_outputs: int) -> Callable[[ValueError], Any]:
            return lambda err: self.fail(err, n_outputs)

        def in_status(err: ValueError) -> str:
            return views.status_html(str(err), error=True)

        def refused(err: ValueError) -> Any:
            raise gr.Error(str(err))

        def with_run(values: Mapping[str, Any]) -> tuple[Any, Settings]:
            return values["run"], settings_from(values)

        def with_batch(values: Mapping[str, Any]) -> tuple[BatchRequest]:
            return (BatchRequest.parse(values),)

        def batch_bad(err: ValueError) -> list[Any]:
            return batch_outputs(str(err), error=True)

        def with_lab(values: Mapping[str, Any]) -> tuple[Settings, LabRequest]:
            lab = {name: values[name] for name in LAB_FIELDS}
            return settings_from(values), LabRequest.parse(lab)

        lab_names = (*FIELDS, *LAB_FIELDS)
        return {
            "generate": callback(self.generate, FIELDS, form_only, shown(MAIN_OUTPUTS)),
            "step": callback(self.step, ("run", *FIELDS), with_run, shown(MAIN_OUTPUTS)),
            "race": callback(self.race, FIELDS, form_only, shown(MAIN_OUTPUTS + 1)),
            "load": callback(self.check, FIELDS, form_only, in_status),
            "lab": callback(self.lab, lab_names, with_lab, refused),
            "batch": callback(self.batch, (*PAIR_FIELDS, *BATCH_FIELDS), with_batch, batch_bad),
        }

    def wire(self, state: gr.State, c: dict[str, Any], o: dict[str, Any]) -> None:
        """Connect buttons and panels to the handlers.

        The requests that load models or decode share WORKERS slots: each loads in a thread of
        its own and then waits for the one decode slot (self.decoding), so a slow load never
        holds up a request whose pair is loaded already.
        """
        form = [c[name] for name in FIELDS]  # in FIELDS order, as every callback takes them
        lab_form = [*form, *(o[f"lab_{name}"] for name in LAB_FIELDS)]
        main = [state, o["stream"], o["status"], o["acceptance"], o["lengths"], o["histogram"]]
        main += [o["pq"], o["summary"], o["tree_round"], o["tree"], o["tree_inspector"]]
        on = self.callbacks()
        work = {"concurrency_id": "work", "concurrency_limit": WORKERS}
        c["generate"].click(on["generate"], form, main, api_name="generate", **work)
        c["step"].click(on["step"], [state, *form], main, api_name="step", **work)
        c["race"].click(on["race"], form, [*main, o["race"]], api_name="race", **work)
        c["load"].click(on["load"], form, o["status"], api_name="load", **work)
        for name, button in zip(PRESETS, c["presets"], strict=True):
            button.click(lambda n=name: self.preset(n), None,
                         [*(c[f] for f in PRESET_FIELDS), o["status"]], api_name=False)  # fmt: skip
        c["workload"].change(self.examples.get, c["workload"], c["prompt"], api_name=False)
        drafter_fields = [*(c[k] for k in DRAFTER_FIELDS), c["drafter_note"]]
        c["drafter"].change(self.drafter_fields, c["drafter"], drafter_fields, api_name=False)
        tree_in, tree_out = (
            [state, o["tree_round"], o["tree_node"]],
            [o["tree"], o["tree_inspector"]],
        )
        o["tree_round"].submit(self.tree_view, tree_in, tree_out, api_name="tree")
        o["tree_node"].submit(self.tree_view, tree_in, tree_out, api_name=False)
        o["tree"].click(self.tree_click, [state, o["tree_round"]],
                        [o["tree_node"], o["tree_inspector"]], api_name=False)  # fmt: skip
        panel = [o["inspector"], o["residual"]]
        o["stream"].click(self.click, state, [o["index"], *panel], api_name=False)
        o["index"].submit(self.inspect, [state, o["index"]], panel, api_name="inspect")
        o["export"].click(self.export, state, o["files"], api_name="export")
        lab_out = [o[k] for k in ("lab_status", "lab_first", "lab_joint", "lab_table")]
        o["lab_run"].click(on["lab"], lab_form, lab_out, api_name="lab", **work)
        o["lab_pair"].change(DEFAULT_N.get, o["lab_pair"], o["lab_n"], api_name=False)
        batch_in = [*(c[n] for n in PAIR_FIELDS), *(o[f"batch_{n}"] for n in BATCH_FIELDS)]
        batch_out = [o["batch_status"], o["batch_view"]]
        o["batch_run"].click(on["batch"], batch_in, batch_out, api_name="batch", **work)
        o["lab_mutant"].change(mutant_note, o["lab_mutant"], o["lab_mutant_note"], api_name=False)
        c["exit_layer"].change(early_exit_note, c["exit_layer"], c["exit_note"], api_name=False)
        bench_in, bench_out = [o["bench_path"], o["bench_upload"]], [*o["bench_plots"]]
        bench_out.append(o["bench_tables"])
        bench = {"concurrency_id": "bench", "concurrency_limit": 2}
        o["bench_show"].click(
            self.bench_result, bench_in, bench_out, api_name="bench_result", **bench
        )
        o["bench_path"].change(self.bench_result, bench_in, bench_out, api_name=False, **bench)
        o["bench_tab"].select(
            self.bench_first, [*bench_in, o["bench_tables"]], bench_out, api_name=False, **bench
        )

    def launch(self, demo: gr.Blocks, host: str, port: int, **kwargs: Any) -> Any:
        """Queue (bounded) and serve on host:port with the app's CSS, no share link."""
        demo.queue(max_size=16, default_concurrency_limit=1)
        return demo.launch(
            server_name=host, server_port=port, share=False, css=views.CSS, ssr_mode=False,
            theme=gr.themes.Default(font=SANS, font_mono=MONO),
            allowed_paths=[str(self.export_dir)], **kwargs,
        )  # fmt: skip


def log_to_terminal() -> None:
    """Show the app's INFO messages (model loads and their progress) on stderr, once."""
    logger = logging.getLogger("specviz")
    if not any(h.get_name() == "specviz-app" for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.set_name("specviz-app")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags, set torch's threads once, build the app and serve it until interrupted."""
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument("--target", default=BUNDLED, help="folder, hub id or 'bundled'")
    parser.add_argument("--draft", default=BUNDLED, help="folder, hub id or 'bundled'")
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    parser.add_argument(
        "--heads",
        metavar="DIR",
        help="the drafting heads' weights (eagle.safetensors, medusa.safetensors) trained for "
        "the target (default: the ones shipped for the bundled target)",
    )
    add_threads_argument(parser)
    args = parser.parse_args(argv)
    if args.heads is not None and not Path(args.heads).is_dir():
        parser.error(f"--heads {args.heads}: no such folder")
    set_threads(args.threads)  # once, for the whole process (specviz.runtime)
    log_to_terminal()
    app = SpecVizApp(args.target, args.draft, args.dtype, heads=args.heads)
    app.launch(app.build(), args.host, args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
