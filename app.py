"""specviz app: watch speculative decoding happen, token by token (`python app.py`).

Gradio wiring only: decoding comes from specviz.generate, every view from specviz.views.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import gradio as gr

from specviz import views
from specviz.events import write_jsonl
from specviz.generate import autoregressive_stream, speculative_stream
from specviz.models import BUNDLED, DTYPES, ModelPair, load_pair, parse_dtype
from specviz.ngram import NgramDrafter
from specviz.policies import make_policy
from specviz.views.form import (
    DEFAULTS,
    DRAFTERS,
    FIELDS,
    MODEL,
    POLICIES,
    Settings,
    as_int,
    examples,
)

log = logging.getLogger("specviz.app")
INTRO = """# specviz: speculative decoding, token by token
A draft model proposes γ tokens; the target scores them in one pass; each is kept with
probability min(1, p/q), the first rejected one is replaced by a draw from norm(max(0, p − q)),
and a bonus token follows when all are kept. Click or hover a token to see why."""
SANS = ["ui-sans-serif", "system-ui", "sans-serif"]  # system fonts: no web fonts, works offline
MONO = ["ui-monospace", "Consolas", "monospace"]
PLOT_EVERY = 4  # while streaming a full decode, redraw the plots every this many rounds
CLICK_JS = """
const pick = (t) => {
  if (!t) return;
  element.querySelectorAll('.sv-selected').forEach((s) => s.classList.remove('sv-selected'));
  t.classList.add('sv-selected');
  trigger('click', {idx: Number(t.dataset.idx)});
};
element.addEventListener('click', (e) => pick(e.target.closest('[data-idx]')));
element.addEventListener('keydown', (e) => {
  if (e.key !== 'Enter' && e.key !== ' ') return;
  const t = e.target.closest('[data-idx]');
  if (t) { e.preventDefault(); pick(t); }
});
"""  # tokens are spans with data-idx: a click (or Enter on a focused token) inspects one


class PairCache:
    """Loaded pairs keyed by (target, draft or None, dtype); least recently used evicted first."""

    def __init__(self, size: int = 2) -> None:
        self.size, self._pairs = size, OrderedDict[tuple[str, str | None, str], ModelPair]()
        self._lock = threading.Lock()

    def get(
        self, target: str, draft: str | None, dtype: str, say: Callable[[str], None]
    ) -> ModelPair:
        """The cached pair (draft None: target only), loaded when missing (ModelLoadError)."""
        key = (target, draft, dtype)
        with self._lock:
            if key not in self._pairs:
                dt = parse_dtype(dtype)
                self._pairs[key] = load_pair(target, draft, dtype=dt, progress=say)
                while len(self._pairs) > self.size:
                    self._pairs.popitem(last=False)
            self._pairs.move_to_end(key)
            return self._pairs[key]


def decoder(tokenizer: Any) -> views.Decode:
    """Token id → text with the pair's tokenizer."""
    return lambda token: str(tokenizer.decode([token]))


class SpecVizApp:
    """One app instance: its model cache, export folder, handlers and Blocks."""

    def __init__(self, target: str = BUNDLED, draft: str = BUNDLED, dtype: str = "float32") -> None:
        self.defaults = {"target": target, "draft": draft, "dtype": dtype}
        self.pairs = PairCache()
        self.export_dir = Path(tempfile.mkdtemp(prefix="specviz-app-"))
        self.examples = examples()  # label -> prompt, one per benchmark workload

    def pair(self, s: Settings, progress: gr.Progress) -> ModelPair:
        """The model pair for settings, with load messages shown as progress."""
        return self.pairs.get(s.target, s.draft, s.dtype, lambda m: progress(None, desc=m))

    def start(self, s: Settings, progress: gr.Progress, plain: bool = False) -> views.Run:
        """Validate against the models and return a run whose events have not started."""
        p = self.pair(s, progress)
        if plain:
            max_new = s.speculation.max_new_tokens
            _, stream = autoregressive_stream(
                p.target, p.tokenizer, s.prompt, sampling=s.sampling, max_new_tokens=max_new
            )
        else:
            vocab = int(p.target.config.vocab_size)
            ngram = None if s.draft else NgramDrafter(vocab, device=str(p.target.device))
            _, stream = speculative_stream(
                p.target, p.draft, p.tokenizer, s.prompt, sampling=s.sampling,
                speculation=s.speculation, drafter=ngram,
                policy=make_policy(s.policy, s.speculation.gamma),
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

    def generate(
        self, target: str, draft: str, dtype: str, drafter: str, policy: str, prompt: str,
        gamma: float, temperature: float, top_k: float, top_p: float, max_new: float, seed: float,
        progress: gr.Progress = gr.Progress(),  # noqa: B008
    ) -> Iterator[list[Any]]:  # fmt: skip
        """Decode to the end, streaming the token view after every round."""
        nums = (gamma, temperature, top_k, top_p, max_new, seed)
        try:
            run = self.start(
                Settings.parse(target, draft, dtype, drafter, policy, prompt, *nums), progress
            )
            for r in run.run_to_end():
                yield self.render(r, plots=r.done or len(r.rounds) % PLOT_EVERY == 1)
        except Exception as err:  # shown in the UI, never as a stack trace
            yield self.fail(err, 8)

    def step(
        self, run: views.Run | None, target: str, draft: str, dtype: str, drafter: str,
        policy: str, prompt: str, gamma: float, temperature: float, top_k: float, top_p: float,
        max_new: float, seed: float,
        progress: gr.Progress = gr.Progress(),  # noqa: B008
    ) -> list[Any]:  # fmt: skip
        """Advance the session's run by one round; start a new one if none, done or changed."""
        nums = (gamma, temperature, top_k, top_p, max_new, seed)
        try:
            settings = Settings.parse(target, draft, dtype, drafter, policy, prompt, *nums)
            if run is None or run.done or run.settings != settings.describe():
                run = self.start(settings, progress)  # a fresh run when the controls changed
            run.step()
            return self.render(run)
        except Exception as err:
            return self.fail(err, 8)

    def race(
        self, target: str, draft: str, dtype: str, drafter: str, policy: str, prompt: str,
        gamma: float, temperature: float, top_k: float, top_p: float, max_new: float, seed: float,
        progress: gr.Progress = gr.Progress(),  # noqa: B008
    ) -> Iterator[list[Any]]:  # fmt: skip
        """Plain then speculative decoding of the same prompt, timed without redraws between."""
        nums = (gamma, temperature, top_k, top_p, max_new, seed)
        try:
            settings = Settings.parse(target, draft, dtype, drafter, policy, prompt, *nums)
            plain = self.start(settings, progress, plain=True)
            yield self.race_update("race: plain decoding…", views.race_html({}, {}, False))
            plain_side = self.finish_side(plain)
            yield self.race_update(
                "race: speculative decoding…", views.race_html(plain_side, {}, False)
            )
            spec = self.start(settings, progress)
            spec_side = self.finish_side(spec)
            spec.plain_tokens_per_second = plain_side["tokens_per_second"]
            race = views.race_html(plain_side, spec_side, settings.sampling.greedy)
            yield [*self.render(spec), race]
        except Exception as err:
            yield [*self.fail(err, 8), gr.skip()]

    @staticmethod
    def race_update(message: str, race: str) -> list[Any]:
        """Race outputs that change only the status line and the race panel."""
        return [gr.skip(), gr.skip(), views.status_html(message), *[gr.skip()] * 5, race]

    @staticmethod
    def finish_side(run: views.Run) -> dict[str, Any]:
        """Run to the end with nothing in between (honest timing) and describe the result."""
        for _ in run.run_to_end():
            pass
        tokens = [c.token for c in run.cells() if c.emitted]
        text = "".join(run.text_of(t) for t in tokens)
        return {**run.summary(), "tokens": tokens, "text": text, "done": True}

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

    def check(
        self,
        target: str,
        draft: str,
        dtype: str,
        progress: gr.Progress = gr.Progress(),  # noqa: B008
    ) -> str:
        """Load (or find cached) the pair and say what it is."""
        try:
            s = Settings.parse(target, draft, dtype, MODEL, "fixed", "x", 1, 0, 0, 1, 1, 0)
            p = self.pair(s, progress)
        except Exception as err:
            return views.status_html(str(err), error=True)
        n = [sum(x.numel() for x in m.parameters()) for m in (p.target, p.draft)]
        return views.status_html(f"ready: target {n[0]:,} params, draft {n[1]:,} params")

    def build(self) -> gr.Blocks:
        """The Blocks UI and its event wiring."""
        with gr.Blocks(title="specviz: speculative decoding, token by token") as demo:
            state = gr.State(None)
            gr.Markdown(INTRO)
            with gr.Row():
                with gr.Column(scale=1, min_width=320):
                    c = self.controls()
                with gr.Column(scale=3):
                    o = self.outputs()
            self.wire(state, c, o)
        blocks: gr.Blocks = demo
        return blocks

    def controls(self) -> dict[str, Any]:
        """The input widgets, keyed by name."""
        d = self.defaults
        with gr.Accordion("Model pair", open=True):
            c: dict[str, Any] = {
                "target": gr.Textbox(d["target"], label="target: 'bundled', folder or hub id"),
                "draft": gr.Textbox(d["draft"], label="draft: 'bundled', folder or hub id"),
                "dtype": gr.Dropdown(sorted(DTYPES), value=d["dtype"], label="dtype"),
            }
            c["drafter"] = gr.Dropdown(DRAFTERS, value=MODEL, label="drafter", elem_id="sv-drafter")
            c["load"] = gr.Button("Load / check pair", size="sm")
        c["policy"] = gr.Dropdown(POLICIES, value="fixed", label="γ policy (per round)")
        first = next(iter(self.examples))
        c["workload"] = gr.Dropdown(
            list(self.examples), value=first, label="example prompt", elem_id="sv-workload"
        )
        c["prompt"] = gr.Textbox(self.examples[first], lines=4, label="prompt", elem_id="sv-prompt")
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

    def outputs(self) -> dict[str, Any]:
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
        return o

    def wire(self, state: gr.State, c: dict[str, Any], o: dict[str, Any]) -> None:
        """Connect buttons and panels to the handlers."""
        inputs = [c[k] for k in FIELDS]
        main = [state, o["stream"], o["status"], o["acceptance"], o["lengths"], o["histogram"]]
        main += [o["pq"], o["summary"]]
        one = {"concurrency_id": "decode", "concurrency_limit": 1}  # one decode at a time
        c["generate"].click(self.generate, inputs, main, api_name="generate", **one)
        c["step"].click(self.step, [state, *inputs], main, api_name="step", **one)
        c["race"].click(self.race, inputs, [*main, o["race"]], api_name="race", **one)
        c["load"].click(self.check, inputs[:3], o["status"], api_name="load")
        c["workload"].change(self.examples.get, c["workload"], c["prompt"], api_name=False)
        panel = [o["inspector"], o["residual"]]
        o["stream"].click(self.click, state, [o["index"], *panel], api_name=False)
        o["index"].submit(self.inspect, [state, o["index"]], panel, api_name="inspect")
        o["export"].click(self.export, state, o["files"], api_name="export")

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
