"""The app's Batch tab: a few prompts decoded together as one batch (specviz.batch).

The tab's fields (BATCH_FIELDS, with elem_id `sv-batch-` + name) give the prompts,
one per line, and the batched drafter, γ, temperature, max new tokens and seed; the model pair
is the form's (target, draft, dtype). Row r is seeded seed + r, so its tokens are those a
single decode of prompt r with that seed writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from specviz.app import views, wiring
from specviz.app.session import NO_PROGRESS, Session, decoder
from specviz.app.views.batch import BatchRun, batch_html
from specviz.app.views.form import BUNDLED, RANGES
from specviz.app.views.page import BATCH_INTRO
from specviz.app.views.panels import status_html
from specviz.app.wiring import callback
from specviz.batch.api import batch_prompts, speculative_stream_batch
from specviz.batch.cache import BatchCache
from specviz.batch.drafters import build_batch_drafter
from specviz.checks import check_pair, check_prompt
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.drafters.names import BATCH_DRAFTERS, REGISTRY
from specviz.drafters.trimmed import ranking_path
from specviz.models import bundled
from specviz.models.chat import prompt_format, prompt_ids
from specviz.models.loading import ModelPair

log = logging.getLogger("specviz.app")
MIN_ROWS, MAX_ROWS = 2, 8
BATCH_FIELDS = ("prompts", "drafter", "gamma", "temperature", "max_new", "seed", "raw")
PAIR_FIELDS = ("target", "draft", "dtype")  # read from the form's model pair
BATCH_OUTPUTS = ("status", "view")  # BatchPanels fields, in the order the tab's events set them
BATCH_CHOICES = {name: REGISTRY[name].label for name in BATCH_DRAFTERS}  # the menu's labels
DEFAULT_PROMPTS = (  # code, where the bundled draft agrees often, and two where it does less
    "Write a Python function that returns the number of vowels in a string.",
    "Write a Python function is_palindrome(s) that ignores case.",
    "Describe the city of Paris as JSON with keys name, country, population, landmarks.",
    "List three tips for writing clear emails.",
)
BATCH_DEFAULTS: dict[str, Any] = {"prompts": "\n".join(DEFAULT_PROMPTS), "gamma": 3}
BATCH_DEFAULTS |= {"temperature": 0.0, "max_new": 48, "seed": 0, "raw": False}
BATCH_NUMBERS = {  # number field → its label (the allowed range is added to it)
    "gamma": "γ: draft tokens per round",
    "temperature": "temperature (0 = greedy)",
    "max_new": "max new tokens per row",
    "seed": "seed (row r: seed + r)",
}
REDRAW_SECONDS = 0.25  # while a batch decodes, its rows are redrawn at most this often


def default_drafter(draft: str) -> str:
    """'model:trimmed' when the draft folder holds a token ranking (the bundled one does),
    else 'model'; a hub id, unknown until loaded, gets 'model'."""
    try:
        folder = Path(draft).expanduser()
        if draft == BUNDLED:
            folder = bundled.bundled_draft_dir()
        return "model:trimmed" if ranking_path(folder).is_file() else "model"
    except Exception:  # a folder that cannot be read: the drafter that needs no ranking
        return "model"


def split_prompts(text: Any) -> tuple[str, ...]:
    """The prompts, one per non-blank line; ValueError unless there are 2 to 8."""
    lines = tuple(line.strip() for line in str(text or "").splitlines() if line.strip())
    if len(lines) < MIN_ROWS:
        got = "none" if not lines else "1"
        raise ValueError(
            f"a batch needs {MIN_ROWS} to {MAX_ROWS} prompts, one per line (got {got}): "
            "add lines, or use Generate for a single prompt"
        )
    if len(lines) > MAX_ROWS:
        raise ValueError(
            f"a batch takes at most {MAX_ROWS} prompts, one per line (got {len(lines)}): "
            "remove some lines"
        )
    return lines


@dataclass(frozen=True, kw_only=True)
class BatchRequest:
    """Validated Batch tab inputs: the pair, the prompts, the drafter and the configs."""

    target: str
    draft: str | None  # None: the drafter needs no draft model (n-gram lookup)
    dtype: str
    prompts: tuple[str, ...]
    drafter: str  # a name in BATCH_DRAFTERS
    raw: bool  # True: each prompt as raw text; False: through the chat template
    sampling: SamplingConfig
    speculation: SpeculationConfig

    @property
    def seeds(self) -> tuple[int, ...]:
        """Row r's seed: sampling.seed + r."""
        return tuple(self.sampling.seed + r for r in range(len(self.prompts)))

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> BatchRequest:
        """From PAIR_FIELDS and BATCH_FIELDS by name; ValueError saying what to change (a
        number outside its range is refused with the range, never clamped)."""
        prompts = split_prompts(values["prompts"])
        drafter = values["drafter"]
        if drafter not in BATCH_DRAFTERS:
            names = ", ".join(BATCH_DRAFTERS)
            raise ValueError(f"batch drafter must be one of {names} (got {drafter!r})")
        n = {name: RANGES[name].check(values[name]) for name in BATCH_NUMBERS}
        return cls(
            target=(values["target"] or "").strip() or BUNDLED,
            draft=None if drafter == "ngram" else (values["draft"] or "").strip() or BUNDLED,
            dtype=str(values["dtype"]),
            prompts=prompts,
            drafter=drafter,
            raw=bool(values["raw"]),
            sampling=SamplingConfig(temperature=n["temperature"], seed=int(n["seed"])),
            speculation=SpeculationConfig(gamma=int(n["gamma"]), max_new_tokens=int(n["max_new"])),
        )


def start(req: BatchRequest, pair: ModelPair, cache: BatchCache | None = None) -> BatchRun:
    """Validate every prompt against the models, build the batched drafter and return a run
    whose events have not started (each prompt through the chat template unless raw); cache:
    the target's empty batch cache (None: specviz.batch.cache.batch_cache's)."""
    max_new = req.speculation.max_new_tokens
    texts = [prompt_ids(pair.tokenizer, p, raw=req.raw) for p in req.prompts]
    ids = batch_prompts(pair.target, pair.tokenizer, texts, max_new)
    if req.drafter != "ngram":
        check_pair(pair.target, pair.draft)
        for r, row in enumerate(ids):
            try:
                check_prompt(row, max_new, pair.draft)
            except ValueError as err:
                raise ValueError(f"prompt {r}: {err}") from None
    drafter = build_batch_drafter(req.drafter, target=pair.target, draft=pair.draft)
    _, stream = speculative_stream_batch(
        pair.target,
        drafter,
        pair.tokenizer,
        ids,
        sampling=req.sampling,
        speculation=req.speculation,
        cache=cache,
    )
    return BatchRun(
        stream=stream,
        decode=decoder(pair.tokenizer),
        prompts=req.prompts,
        seeds=req.seeds,
        prompt_format=prompt_format(pair.tokenizer, raw=req.raw),
    )


def outputs(message: str, run: BatchRun | None = None, error: bool = False) -> list[Any]:
    """The tab's outputs (BATCH_OUTPUTS): its status line, and its rows (None: left as they
    are)."""
    rows = {} if run is None else {"view": batch_html(run)}
    return wiring.outputs(BATCH_OUTPUTS, status=status_html(message, error=error), **rows)


def status(run: BatchRun) -> str:
    """The status line after a batch round, or once the batch has finished."""
    if run.done:
        return f"finished: {len(run.prompts)} rows, {run.tokens} new tokens"
    return f"batch round {run.rounds} · running…"


@dataclass(frozen=True)
class BatchPanels:
    """The tab's components: its fields by their BATCH_FIELDS names, the run button, the status
    line and the rows."""

    fields: Mapping[str, Any]
    run: gr.Button
    status: gr.HTML
    view: gr.HTML


class BatchTab:
    """The Batch tab of one app, decoding through its session."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @staticmethod
    def build(drafter: str) -> BatchPanels:
        """The tab's controls (the pair is the form's; drafter: the first batched drafter), its
        run button and status line, then every row's coloured tokens."""
        gr.Markdown(BATCH_INTRO)
        f: dict[str, Any] = {}
        with gr.Row(equal_height=False):
            f["prompts"] = gr.Textbox(
                BATCH_DEFAULTS["prompts"],
                lines=MIN_ROWS + 2,
                max_lines=MAX_ROWS + 2,
                scale=3,
                label=f"prompts: one per line, {MIN_ROWS} to {MAX_ROWS}",
                elem_id="sv-batch-prompts",
            )
            with gr.Column(scale=2, min_width=260):
                f["drafter"] = gr.Dropdown(
                    [(label, name) for name, label in BATCH_CHOICES.items()],
                    value=drafter,
                    label="batched drafter",
                    elem_id="sv-batch-drafter",
                )
                f["raw"] = gr.Checkbox(
                    BATCH_DEFAULTS["raw"],
                    label="raw completion (no chat template)",
                    elem_id="sv-batch-raw",
                )
        with gr.Row():
            for name, label in BATCH_NUMBERS.items():
                f[name] = gr.Number(
                    BATCH_DEFAULTS[name],
                    label=f"{label}: {RANGES[name].text()}",
                    elem_id=f"sv-batch-{name}",
                    min_width=150,
                )
        with gr.Row(elem_id="sv-batch-actions", equal_height=True):
            run = gr.Button(
                "Run batch", variant="primary", elem_id="sv-batch-run", scale=0, min_width=140
            )
            status = gr.HTML(views.status_html("not run yet"), elem_id="sv-batch-status")
        gr.HTML(views.legend_html(), elem_id="sv-batch-legend")
        view = gr.HTML(views.batch_html(None), elem_id="sv-batch-view")
        return BatchPanels(fields=f, run=run, status=status, view=view)

    def batch(self, req: BatchRequest, progress: gr.Progress = NO_PROGRESS) -> Iterator[list[Any]]:
        """Load the pair (progress live), wait for the decode slot, then decode the batch,
        redrawing every row after a batch round (at most every REDRAW_SECONDS, and once at the
        end: eight long rows are a lot to redraw); any error shows in the status line."""

        def work(pair: ModelPair) -> Iterator[list[Any]]:
            run, drawn = start(req, pair, self.session.target_batch_cache(pair)), 0.0
            for r in run.run_to_end():
                if r.done or time.monotonic() - drawn >= REDRAW_SECONDS:
                    yield outputs(status(r), r)
                    drawn = time.monotonic()

        yield from self.session.decode(req, outputs, work, failed)

    def callbacks(self) -> dict[str, Callable[..., Any]]:
        """The tab's API callback: batch, taking PAIR_FIELDS and BATCH_FIELDS by name."""

        def with_batch(values: Mapping[str, Any]) -> tuple[BatchRequest]:
            return (BatchRequest.parse(values),)

        names = (*PAIR_FIELDS, *BATCH_FIELDS)
        return {"batch": callback(self.batch, names, with_batch, failed)}

    def wire(self, w: BatchPanels, pair: list[Any], work: Mapping[str, Any]) -> None:
        """Connect the tab's run button; pair: the form's widgets in PAIR_FIELDS order; work:
        the queue settings of the requests that load models or decode."""
        batch_in = [*pair, *(w.fields[n] for n in BATCH_FIELDS)]
        on = self.callbacks()["batch"]
        w.run.click(on, batch_in, [getattr(w, n) for n in BATCH_OUTPUTS], api_name="batch", **work)


def failed(err: Exception) -> list[Any]:
    """Bad input or a load error: what to change, in the tab; any other error: its type and
    message, never a stack trace."""
    if isinstance(err, ValueError):
        return outputs(str(err), error=True)
    log.exception("batch decode failed")
    return outputs(f"{type(err).__name__}: {err}", error=True)
