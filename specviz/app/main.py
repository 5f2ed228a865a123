"""specviz app: watch speculative decoding happen, token by token (`specviz app`, `python app.py`).

This module only assembles the page: the settings column (specviz.app.tabs.form) and, beside
it, the decode area and its tabs (specviz.app.tabs: decode, batch, lab, results), every one
building its own components and wiring its own events; the model pairs, their loading and the
one decode slot are the session's (specviz.app.session).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.events import api

from specviz.app import views
from specviz.app.scheduler import Admission
from specviz.app.session import Loading, Session, parameter_counts
from specviz.app.tabs import decode_panels, results
from specviz.app.tabs.batch import PAIR_FIELDS, BatchTab, default_drafter
from specviz.app.tabs.complete import Completion
from specviz.app.tabs.decode import DecodeTab
from specviz.app.tabs.form import Form
from specviz.app.tabs.lab import LabTab
from specviz.app.views.form import DEFAULTS, FIELDS, Settings, examples, settings_from
from specviz.app.views.page import INTRO, MONO, SANS
from specviz.drafters.names import DEFAULT_CONFIG
from specviz.models.loading import BUNDLED, DTYPES, MODEL_SPEC_HELP
from specviz.runtime import add_threads_argument, set_threads
from specviz.tune.defaults import Defaults, resolve_defaults
from specviz.tune.profile import profiles_dir

log = logging.getLogger("specviz.app")


class SpecVizApp:
    """One app instance: its session, export folder and tabs, and the Blocks they make."""

    def __init__(
        self,
        target: str = BUNDLED,
        draft: str = BUNDLED,
        dtype: str = "float32",
        heads: str | None = None,
        results_dir: str | Path = results.DEFAULT_RESULTS,
        view: results.Viewer | None = None,
        defaults: Defaults | None = None,
        admission: Admission | None = None,
    ) -> None:
        """An app whose form starts at target, draft and dtype; heads: the folder of the drafting
        heads' weights (eagle3.safetensors, medusa.safetensors; None: the
        shipped ones); results_dir: the folder of saved `specviz bench` results its Benchmark
        results tab lists (relative to the current folder; none listed when it does not exist);
        view: what shows a saved result there (the benchmark's, which `specviz app` passes; None:
        no such tab); defaults: the target's forward path every pair runs on (None: resolved for
        target, draft and dtype, from the tuned profile of this machine and that pair where there
        is one, specviz.tune.defaults); admission: how many requests decode at once and wait
        (None: the session's default, specviz.app.session)."""
        self.defaults = {"target": target, "draft": draft, "dtype": dtype}
        self.results_dir = Path(results_dir).resolve()
        self.view = view
        forward = defaults or resolve_defaults(target, draft, dtype, warn=log.warning)
        self.session = Session(heads, forward, admission)
        self.export_dir = Path(tempfile.mkdtemp(prefix="specviz-app-"))
        self.form = Form(self.session, self.defaults, examples())  # one prompt per workload
        self.decode = DecodeTab(self.session, self.export_dir)
        self.batch = BatchTab(self.session)
        self.lab = LabTab(self.session)
        self.completion = Completion(self.session, self.decode, self.defaults)

    def callbacks(self) -> dict[str, Callable[..., Any]]:
        """Every tab's API callbacks, by API name (generate, step, race, load, lab, batch), and
        complete (the prompt in, the text and the decode in short out)."""
        return {
            **self.decode.callbacks(),
            **self.form.callbacks(),
            **self.lab.callbacks(),
            **self.batch.callbacks(),
            "complete": self.completion.complete,
        }

    def build(self) -> gr.Blocks:
        """The Blocks UI: the settings on the left; on the right the buttons with the status
        line beside them, then the output and the tabs; each part wires its own events.

        The requests that load models or decode each load in a thread of their own, then hand
        their decode to the session's scheduler (every row and waiting place has a handler, so
        the scheduler, not Gradio's queue, decides who waits and says so), so a slow load never
        holds up a request whose pair is loaded already.
        """
        # plotly imports pandas on its first figure; two request threads doing that at once can
        # see a half-imported module, so it is imported here, before any request runs.
        importlib.import_module("pandas")
        handlers = self.session.scheduler.admission.handlers
        work = {"concurrency_id": "work", "concurrency_limit": handlers}
        with gr.Blocks(title="specviz: speculative decoding, token by token") as demo:
            gr.Markdown(INTRO)
            with gr.Row():
                with gr.Column(scale=1, min_width=320):
                    c = self.form.build()
                with gr.Column(scale=3):
                    d = decode_panels.build(self.decode.memory_line)
                    with gr.Tab("Batch", elem_id="sv-batch-tab"):
                        b = self.batch.build(default_drafter(self.defaults["draft"]))
                    with gr.Tab("Equivalence lab", elem_id="sv-lab-tab"):
                        lab = self.lab.build()
                    if self.view is not None:
                        with gr.Tab("Benchmark results", elem_id="sv-bench-tab") as bench_tab:
                            r = results.build(bench_tab, self.results_dir)
            form = [c[name] for name in FIELDS]  # in FIELDS order, as every callback takes them
            self.form.wire(c, d.status, work)
            self.decode.wire(d, form, work)
            self.batch.wire(b, [c[name] for name in PAIR_FIELDS], work)
            self.lab.wire(lab, form, work)
            if self.view is not None:
                results.wire(r, self.view, {"concurrency_id": "bench", "concurrency_limit": 2})
            api(self.completion.complete, api_name="complete", **work)  # for scripts only
        blocks: gr.Blocks = demo
        return blocks

    def start_settings(self) -> Settings:
        """The settings the form starts with: its defaults and the first example prompt."""
        prompt = next(iter(self.form.examples.values()))
        return settings_from({**DEFAULTS, **self.defaults, "prompt": prompt})

    def preload(self) -> threading.Thread:
        """Load the pair the form starts on (and its target's lean forward, where the app runs
        one) in a thread of its own, logging each stage as it goes (the bundled target's first
        fetch: its download, check and conversion, with MB and seconds), then how long it took;
        a Generate meanwhile waits for the same load and shows its progress. Returns the
        thread."""
        s = self.start_settings()

        def run() -> None:
            started = time.monotonic()
            try:
                pair = Loading(self.session.pairs, s).pair()
                if self.session.defaults.lean:  # its fused weights too, made once for all
                    self.session.lean_target(pair)
            except Exception as err:  # the first request that needs the pair shows it
                log.warning("could not load the model pair: %s (Generate tries again)", err)
                return
            took = time.monotonic() - started
            log.info(
                "model pair ready (%s) after %.1f s: Generate decodes at once",
                parameter_counts(pair),
                took,
            )

        thread = threading.Thread(target=run, name="specviz-preload", daemon=True)
        thread.start()
        return thread

    def launch(self, demo: gr.Blocks, host: str, port: int, **kwargs: Any) -> Any:
        """Start loading the form's pair (preload), then queue (bounded) and serve on host:port
        with the app's CSS, no share link: the page is up while the models load."""
        self.preload()
        handlers = self.session.scheduler.admission.handlers
        demo.queue(max_size=2 * handlers, default_concurrency_limit=1)
        return demo.launch(
            server_name=host,
            server_port=port,
            share=False,
            css=views.CSS,
            ssr_mode=False,
            theme=gr.themes.Default(font=SANS, font_mono=MONO),
            allowed_paths=[str(self.export_dir)],
            **kwargs,
        )


def log_to_terminal() -> None:
    """Show the app's INFO messages (model loads and their progress) on stderr, once."""
    logger = logging.getLogger("specviz")
    if not any(h.get_name() == "specviz-app" for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.set_name("specviz-app")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def startup_defaults(target: str, draft: str, dtype: str, threads: int | None) -> Defaults:
    """The app's forward path for the pair it starts on (specviz.tune.defaults: the tuned
    profile's, else the shipped DEFAULT_CONFIG's), and torch's threads set once for the whole
    process: threads where given (--threads), else the defaults'."""
    defaults = resolve_defaults(target, draft, dtype, warn=log.warning)
    used = set_threads(defaults.threads if threads is None else threads)
    log.info("target forward: %s (%s); threads: %s", defaults.forward, defaults.source, used)
    return defaults


def main(argv: Sequence[str] | None = None, view: results.Viewer | None = None) -> int:
    """Parse flags, set torch's threads once, build the app and serve it until interrupted;
    view: what shows a saved benchmark result (None: no Benchmark results tab)."""
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
    parser = argparse.ArgumentParser(prog="specviz app", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument("--target", default=BUNDLED, help=MODEL_SPEC_HELP)
    parser.add_argument("--draft", default=BUNDLED, help=MODEL_SPEC_HELP)
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    parser.add_argument(
        "--heads",
        metavar="DIR",
        help="the drafting heads' weights (eagle3.safetensors, "
        "medusa.safetensors) trained for the target (default: the ones shipped for the "
        "bundled target)",
    )
    parser.add_argument(
        "--results",
        metavar="DIR",
        help="the folder of saved `specviz bench` results the Benchmark results tab lists "
        f"(default: {results.DEFAULT_RESULTS} under the current folder, when it exists)",
    )
    add_threads_argument(
        parser,
        default="the tuned profile's for this machine and --target/--draft/--dtype, where "
        f"`specviz tune` saved one (in {profiles_dir()}), else OMP_NUM_THREADS where set, else 1",
    )
    parser.add_argument(
        "--rows",
        type=int,
        default=DEFAULT_CONFIG.batch_rows,
        help="requests decoded at once, sharing batches (default: %(default)s, where the batch "
        "sweep's served tokens/s stopped growing)",
    )
    parser.add_argument(
        "--queue", type=int, help="requests that may wait for a row (default: 4 times --rows)"
    )
    parser.add_argument(
        "--no-batch",
        action="store_true",
        help="decode every request by itself (with --rows 1: one at a time, as before batching)",
    )
    parser.add_argument(
        "--own-gamma",
        action="store_true",
        help="every row of a shared batch drafts its request's γ (default: at most the γ the "
        "batch sweep measured best for that many rows)",
    )
    args = parser.parse_args(argv)
    if args.rows < 1 or (args.queue is not None and args.queue < 0):
        parser.error("--rows must be at least 1 and --queue at least 0")
    admission = Admission.of(
        args.rows, args.queue, batch=not args.no_batch, cap_gamma=not args.own_gamma
    )
    if args.heads is not None and not Path(args.heads).is_dir():
        parser.error(f"--heads {args.heads}: no such folder")
    if args.results is not None and not Path(args.results).is_dir():
        parser.error(f"--results {args.results}: no such folder")
    log_to_terminal()
    defaults = startup_defaults(args.target, args.draft, args.dtype, args.threads)
    folder = results.DEFAULT_RESULTS if args.results is None else args.results
    app = SpecVizApp(
        args.target,
        args.draft,
        args.dtype,
        heads=args.heads,
        results_dir=folder,
        view=view,
        defaults=defaults,
        admission=admission,
    )
    app.launch(app.build(), args.host, args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
