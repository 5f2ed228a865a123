"""specviz app: watch speculative decoding happen, token by token (launched by `python app.py`).

Gradio wiring only: decoding comes from specviz.api, every view from specviz.app.views.
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import gradio as gr

from specviz.api import autoregressive_stream, speculative_stream
from specviz.app import layout, views
from specviz.app.lab import DEFAULT_N, LAB_FIELDS, MODELS, LabProgress, LabRequest, run_lab
from specviz.app.state import (
    PairCache,
    decoder,
    early_exit_note,
    lab_pair,
    make_drafter,
    parameter_counts,
)
from specviz.app.views.form import FIELDS, Settings, as_int, examples, settings_from
from specviz.app.views.page import INTRO, MONO, SANS
from specviz.bench.saved import load_result_view
from specviz.core.events import write_jsonl
from specviz.gamma.policies import CostModel, make_policy
from specviz.models.loading import BUNDLED, DTYPES, ModelPair

log = logging.getLogger("specviz.app")
PLOT_EVERY = 4  # while streaming a full decode, redraw the plots every this many rounds
MAIN_OUTPUTS = 8  # state, stream, status, 4 plots, summary
NO_PROGRESS = gr.Progress()  # progress outside a Gradio event: reports go nowhere


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

    def __init__(self, target: str = BUNDLED, draft: str = BUNDLED, dtype: str = "float32") -> None:
        self.defaults = {"target": target, "draft": draft, "dtype": dtype}
        self.pairs = PairCache()
        self.costs: dict[tuple[Any, ...], CostModel] = {}  # theory policy's costs, per setup
        self.export_dir = Path(tempfile.mkdtemp(prefix="specviz-app-"))
        self.examples = examples()  # label -> prompt, one per benchmark workload

    def pair(self, s: Settings, progress: gr.Progress) -> ModelPair:
        """The model pair for settings, with load messages shown as progress."""
        return self.pairs.get(s.target, s.draft, s.dtype, lambda m: progress(None, desc=m))

    def cost_model(self, s: Settings) -> CostModel:
        """Costs measured by earlier runs on the same models, drafter and confidence."""
        key = (s.target, s.draft, s.dtype, s.drafter, s.exit_layer, s.min_confidence)
        return self.costs.setdefault(key, CostModel())

    def start(self, s: Settings, progress: gr.Progress, plain: bool = False) -> views.Run:
        """Validate against the models and return a run whose events have not started."""
        p = self.pair(s, progress)
        if plain:
            max_new = s.speculation.max_new_tokens
            _, stream = autoregressive_stream(
                p.target, p.tokenizer, s.prompt, sampling=s.sampling, max_new_tokens=max_new
            )
        else:
            _, stream = speculative_stream(
                p.target, make_drafter(s, p), p.tokenizer, s.prompt, sampling=s.sampling,
                speculation=s.speculation,
                policy=make_policy(s.policy, s.speculation.gamma, self.cost_model(s)),
            )  # fmt: skip
        return views.Run(
            stream=stream, decode=decoder(p.tokenizer), prompt=s.prompt, settings=s.describe()
        )

    def render(self, run: views.Run, plots: bool = True) -> list[Any]:
        """Outputs for [state, stream, status, 4 plots, summary] after a step."""
        cells, rounds = run.cells(), run.rounds
        done = run.finished
        note = f"finished: {done.reason}, {done.new_tokens} new tokens" if done else "running…"
        figs: list[Any] = [
            views.acceptance_figure(rounds),
            views.accepted_length_figure(rounds),
            views.accepted_histogram(rounds),
            views.pq_figure(cells),
        ]
        status = views.status_html(f"round {len(rounds)} · {note}")
        return [
            run,
            views.stream_html(cells, run.prompt),
            status,
            *(figs if plots else [gr.skip()] * 4),
            views.summary_html(run.summary()),
        ]

    def fail(self, err: Exception, n_outputs: int) -> list[Any]:
        """Outputs that leave everything as it was and show the error in the status box."""
        if not isinstance(err, ValueError):
            log.exception("unexpected error")
        text = str(err) if isinstance(err, ValueError) else f"{type(err).__name__}: {err}"
        return [gr.skip(), gr.skip(), views.status_html(text, error=True)] + [gr.skip()] * (
            n_outputs - 3
        )

    def generate(self, s: Settings, progress: gr.Progress = NO_PROGRESS) -> Iterator[list[Any]]:
        """Decode to the end, streaming the token view after every round."""
        try:
            run = self.start(s, progress)
            for r in run.run_to_end():
                yield self.render(r, plots=r.done or len(r.rounds) % PLOT_EVERY == 1)
        except Exception as err:  # shown in the UI, never as a stack trace
            yield self.fail(err, MAIN_OUTPUTS)

    def step(
        self, run: views.Run | None, s: Settings, progress: gr.Progress = NO_PROGRESS
    ) -> list[Any]:
        """Advance the session's run by one round; start a new one if none, done or changed."""
        try:
            if run is None or run.done or run.settings != s.describe():
                run = self.start(s, progress)  # a fresh run when the controls changed
            run.step()
            return self.render(run)
        except Exception as err:
            return self.fail(err, MAIN_OUTPUTS)

    def race(self, s: Settings, progress: gr.Progress = NO_PROGRESS) -> Iterator[list[Any]]:
        """Plain then speculative decoding of the same prompt, timed without redraws between."""
        try:
            plain = self.start(s, progress, plain=True)
            yield self.race_update("race: plain decoding…", views.race_html({}, {}, False))
            plain_side = plain.finish()
            yield self.race_update(
                "race: speculative decoding…", views.race_html(plain_side, {}, False)
            )
            spec = self.start(s, progress)
            spec_side = spec.finish()
            spec.plain_tokens_per_second = plain_side["tokens_per_second"]
            race = views.race_html(plain_side, spec_side, s.sampling.greedy)
            yield [*self.render(spec), race]
        except Exception as err:
            yield self.fail(err, MAIN_OUTPUTS + 1)

    @staticmethod
    def race_update(message: str, race: str) -> list[Any]:
        """Race outputs that change only the status line and the race panel."""
        return [gr.skip(), gr.skip(), views.status_html(message), *[gr.skip()] * 5, race]

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

    def export(self, run: views.Run | None) -> list[str]:
        """Write the run's events (JSONL) and summary (JSON); return both paths."""
        if run is None or not run.log:
            raise gr.Error("nothing to export yet: generate first")
        folder = self.export_dir / uuid.uuid4().hex[:8]
        folder.mkdir()
        write_jsonl(run.log, folder / "events.jsonl")
        (folder / "summary.json").write_text(json.dumps(run.summary(), indent=2) + "\n")
        return [str(folder / "events.jsonl"), str(folder / "summary.json")]

    def check(self, s: Settings, progress: gr.Progress = NO_PROGRESS) -> str:
        """Load (or find cached) the pair the settings decode with and say what it is."""
        try:
            p = self.pair(s, progress)
        except Exception as err:
            return views.status_html(str(err), error=True)
        return views.status_html(f"ready: {parameter_counts(p)}")

    def lab(
        self, s: Settings, req: LabRequest, progress: gr.Progress = NO_PROGRESS
    ) -> Iterator[list[Any]]:
        """Equivalence lab: draw with progress, then both distributions and the table of tests."""
        try:
            models = self.pair(s, progress) if req.pair == MODELS else None
            g = s.speculation.gamma
            for step in run_lab(lab_pair(s, models), req, s.sampling, g,
                                lambda: make_policy(s.policy, g)):  # fmt: skip
                if isinstance(step, LabProgress):
                    progress(step.fraction, desc=step.text)
                    yield [views.status_html(step.text), *[gr.skip()] * 3]
                else:
                    yield [views.status_html(step.status()), *step.figures(), step.table_html()]
        except ValueError as err:  # bad input: a readable message, never a stack trace
            raise gr.Error(str(err)) from None
        except Exception as err:
            log.exception("equivalence lab failed")
            raise gr.Error(f"{type(err).__name__}: {err}") from None

    def bench_result(self, path: str | None, upload: str | None) -> list[Any]:
        """A saved benchmark result's figures and tables (an upload wins over the dropdown)."""
        chosen = upload or path
        if not chosen:
            raise gr.Error("choose a saved result or upload a `specviz bench --out` JSON")
        try:
            figs, tables = load_result_view(chosen)
        except ValueError as err:
            raise gr.Error(str(err)) from None
        return [*figs, tables]

    def build(self) -> gr.Blocks:
        """The Blocks UI and its event wiring."""
        with gr.Blocks(title="specviz: speculative decoding, token by token") as demo:
            state = gr.State(None)
            gr.Markdown(INTRO)
            with gr.Row():
                with gr.Column(scale=1, min_width=320):
                    c = layout.controls(self.defaults, self.examples)
                with gr.Column(scale=3):
                    o = layout.outputs()
            self.wire(state, c, o)
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
        }

    def wire(self, state: gr.State, c: dict[str, Any], o: dict[str, Any]) -> None:
        """Connect buttons and panels to the handlers."""
        form = [c[name] for name in FIELDS]  # in FIELDS order, as every callback takes them
        lab_form = [*form, *(o[f"lab_{name}"] for name in LAB_FIELDS)]
        main = [state, o["stream"], o["status"], o["acceptance"], o["lengths"], o["histogram"]]
        main += [o["pq"], o["summary"]]
        on = self.callbacks()
        one = {"concurrency_id": "decode", "concurrency_limit": 1}  # one decode at a time
        c["generate"].click(on["generate"], form, main, api_name="generate", **one)
        c["step"].click(on["step"], [state, *form], main, api_name="step", **one)
        c["race"].click(on["race"], form, [*main, o["race"]], api_name="race", **one)
        c["load"].click(on["load"], form, o["status"], api_name="load")
        c["workload"].change(self.examples.get, c["workload"], c["prompt"], api_name=False)
        panel = [o["inspector"], o["residual"]]
        o["stream"].click(self.click, state, [o["index"], *panel], api_name=False)
        o["index"].submit(self.inspect, [state, o["index"]], panel, api_name="inspect")
        o["export"].click(self.export, state, o["files"], api_name="export")
        lab_out = [o[k] for k in ("lab_status", "lab_first", "lab_joint", "lab_table")]
        o["lab_run"].click(on["lab"], lab_form, lab_out, api_name="lab", **one)
        o["lab_pair"].change(DEFAULT_N.get, o["lab_pair"], o["lab_n"], api_name=False)
        c["exit_layer"].change(early_exit_note, c["exit_layer"], c["exit_note"], api_name=False)
        bench_in, bench_out = [o["bench_path"], o["bench_upload"]], [*o["bench_plots"]]
        bench_out.append(o["bench_tables"])
        o["bench_show"].click(self.bench_result, bench_in, bench_out, api_name="bench_result")

    def launch(self, demo: gr.Blocks, host: str, port: int, **kwargs: Any) -> Any:
        """Queue (bounded) and serve on host:port with the app's CSS, no share link."""
        demo.queue(max_size=16, default_concurrency_limit=1)
        return demo.launch(
            server_name=host, server_port=port, share=False, css=views.CSS, ssr_mode=False,
            theme=gr.themes.Default(font=SANS, font_mono=MONO),
            allowed_paths=[str(self.export_dir)], **kwargs,
        )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags, build the app and serve it until interrupted."""
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument("--target", default=BUNDLED, help="folder, hub id or 'bundled'")
    parser.add_argument("--draft", default=BUNDLED, help="folder, hub id or 'bundled'")
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    args = parser.parse_args(argv)
    app = SpecVizApp(args.target, args.draft, args.dtype)
    app.launch(app.build(), args.host, args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
