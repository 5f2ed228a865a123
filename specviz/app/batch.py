"""The app's Batch tab: a few prompts decoded together as one batch (specviz.batch).

The tab's fields (BATCH_FIELDS, widgets keyed `batch_` + name in the layout) give the prompts,
one per line, and the batched drafter, γ, temperature, max new tokens and seed; the model pair
is the form's (target, draft, dtype). Row r is seeded seed + r, so its tokens are those a
single decode of prompt r with that seed writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from specviz.app.state import decoder
from specviz.app.views.batch import BatchRun, batch_html
from specviz.app.views.form import BUNDLED, RANGES
from specviz.app.views.panels import status_html
from specviz.batch.api import batch_prompts, speculative_stream_batch
from specviz.batch.drafters import build_batch_drafter
from specviz.core.checks import check_pair, check_prompt
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.drafters.registry import BATCH_DRAFTERS, REGISTRY
from specviz.drafters.trimmed import ranking_path
from specviz.models.chat import prompt_format, prompt_ids
from specviz.models.loading import ModelPair

if TYPE_CHECKING:
    from specviz.app.main import SpecVizApp

log = logging.getLogger("specviz.app")
MIN_ROWS, MAX_ROWS = 2, 8
BATCH_FIELDS = ("prompts", "drafter", "gamma", "temperature", "max_new", "seed", "raw")
PAIR_FIELDS = ("target", "draft", "dtype")  # read from the form's model pair
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
    """'model-trimmed' when the draft folder holds a token ranking (the bundled one does),
    else 'model'; a hub id, unknown until loaded, gets 'model'."""
    try:
        folder = Path(draft).expanduser()
        if draft == BUNDLED:
            from specviz.models import bundled

            folder = bundled.bundled_draft_dir()
        return "model-trimmed" if ranking_path(folder).is_file() else "model"
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
            dtype=str(values["dtype"]), prompts=prompts, drafter=drafter,
            raw=bool(values["raw"]),
            sampling=SamplingConfig(temperature=n["temperature"], seed=int(n["seed"])),
            speculation=SpeculationConfig(
                gamma=int(n["gamma"]), max_new_tokens=int(n["max_new"])
            ),
        )  # fmt: skip


def start(req: BatchRequest, pair: ModelPair) -> BatchRun:
    """Validate every prompt against the models, build the batched drafter and return a run
    whose events have not started (each prompt through the chat template unless raw)."""
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
    drafter = build_batch_drafter(
        req.drafter, target=pair.target, draft=pair.draft, sampling=req.sampling, rows=len(ids)
    )
    _, stream = speculative_stream_batch(
        pair.target, drafter, pair.tokenizer, ids, sampling=req.sampling,
        speculation=req.speculation,
    )  # fmt: skip
    return BatchRun(
        stream=stream, decode=decoder(pair.tokenizer), prompts=req.prompts, seeds=req.seeds,
        prompt_format=prompt_format(pair.tokenizer, raw=req.raw),
    )  # fmt: skip


def outputs(message: str, run: BatchRun | None = None, error: bool = False) -> list[Any]:
    """The tab's outputs: its status line, and its rows (None: left as they are)."""
    return [status_html(message, error=error), gr.skip() if run is None else batch_html(run)]


def status(run: BatchRun) -> str:
    """The status line after a batch round, or once the batch has finished."""
    if run.done:
        return f"finished: {len(run.prompts)} rows, {run.tokens} new tokens"
    return f"batch round {run.rounds} · running…"


def run_batch(app: SpecVizApp, req: BatchRequest) -> Iterator[list[Any]]:
    """Load the pair (progress live), wait for the decode slot, then decode the batch,
    redrawing every row after a batch round (at most every REDRAW_SECONDS, and once at the
    end: eight long rows are a lot to redraw); any error shows in the status line."""

    def show(message: str) -> list[Any]:
        return outputs(message)

    try:
        pair = yield from app.pair_for(req, show)
        yield from app.turn(show)
        try:
            run, drawn = start(req, pair), 0.0
            for r in run.run_to_end():
                if r.done or time.monotonic() - drawn >= REDRAW_SECONDS:
                    yield outputs(status(r), r)
                    drawn = time.monotonic()
        finally:
            app.decoding.release()
    except ValueError as err:  # bad input (or a load error): what to change, in the tab
        yield outputs(str(err), error=True)
    except Exception as err:  # shown in the tab, never as a stack trace
        log.exception("batch decode failed")
        yield outputs(f"{type(err).__name__}: {err}", error=True)
