"""The speculative-decoding tab: Generate, Step one round and the race, the token stream and its
inspector, the round detail (how a suffix or cross-tokenizer drafter drafted the round), the
suffix memory's line and its Clear button, the plots, the tree rounds, the summary and its export.

Decoding comes from specviz.api and every view from specviz.app.views; every request that decodes
goes through the session (load → wait for the decode slot → decode → release).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import gradio as gr

from specviz.api import autoregressive_stream, speculative_stream, stop_ids
from specviz.app import views
from specviz.app.drafting import app_options, for_pair, make_drafter, tree_rule
from specviz.app.lanes import BatchLane, RowRequest, SoloLane
from specviz.app.scheduler import Job
from specviz.app.session import NO_PROGRESS, Session, decoder
from specviz.app.tabs.decode_panels import MAIN, RACE, DecodePanels
from specviz.app.views.form import FIELDS, Settings, as_int, settings_from
from specviz.app.wiring import NO_API, callback, form_only, outputs
from specviz.checks import check_prompt, check_token_ids, vocab_size
from specviz.core.cache import CachedForward, KVCache
from specviz.core.events import Event
from specviz.drafters.names import BATCH_DRAFTERS, HEAD_DRAFTERS
from specviz.gamma.policies import CostModel, make_policy
from specviz.jsonl import write_jsonl
from specviz.models.chat import prompt_format, prompt_ids
from specviz.models.loading import ModelPair
from specviz.tune.defaults import lean_applies

log = logging.getLogger("specviz.app")
Stream = Iterator[Event]
PLOT_EVERY = 4  # while streaming a full decode, redraw the plots every this many rounds,
PLOT_SECONDS = 1.0  # and at most once a second per request decoding (a figure costs more than
# the rest of a view, and every session's figures share the CPU with the decodes)
VIEW_SECONDS = 0.1  # the view itself, while requests share the decoder: at most every this
# many seconds per request decoding, after the first round (each view holds the CPU)


class DecodeTab:
    """The decode handlers of one app: its session, its export folder, the γ policy's costs."""

    def __init__(self, session: Session, export_dir: Path) -> None:
        self.session, self.export_dir = session, export_dir
        self.costs: dict[tuple[Any, ...], CostModel] = {}  # theory policy's costs, per setup

    def cost_model(self, s: Settings) -> CostModel:
        """Costs measured by earlier runs on the same models, drafter and confidence."""
        key = (s.target, s.draft, s.dtype, s.drafter, s.exit_layer, s.min_confidence)
        return self.costs.setdefault(key, CostModel())

    def start(self, s: Settings, p: ModelPair, plain: bool = False) -> views.Run:
        """Validate against the models and return a run whose events have not started (a
        decode of its own, for a Step or the race: specviz.app.session's decode slot); the
        prompt goes through the chat template unless the settings ask for raw text. A draft
        with a tokenizer of its own drafts through a cross-tokenizer drafter (for_pair). The
        target runs on the session's forward path (Session.defaults) where the decode takes it."""
        s = for_pair(s, p)
        ids = prompt_ids(p.tokenizer, s.prompt, raw=s.raw)
        return self.run_of(s, p, self.stream(s, p, ids, plain=plain))

    def stream(self, s: Settings, p: ModelPair, ids: list[int], plain: bool = False) -> Stream:
        """The lazy events of a decode of ids by itself (s: as for_pair returned them)."""
        lean = self.session.defaults.lean
        if plain:
            max_new = s.speculation.max_new_tokens
            forward: Callable[[Any], CachedForward] = (
                self.session.lean_target(p) if lean else KVCache
            )
            _, stream = autoregressive_stream(
                p.target,
                p.tokenizer,
                ids,
                sampling=s.sampling,
                max_new_tokens=max_new,
                make_cache=forward,
            )
            return stream
        # a tree drafter's depth is fixed: no γ policy; its trees verified by its rule
        policy = None if s.tree else make_policy(s.policy, s.speculation.gamma, self.cost_model(s))
        session = self.session
        own = s.drafter in HEAD_DRAFTERS or not lean_applies(s.drafter)  # its own forward
        _, stream = speculative_stream(
            p.target,
            make_drafter(s, p, session.heads, session.memory, lean=lean),
            p.tokenizer,
            ids,
            sampling=s.sampling,
            speculation=s.speculation,
            policy=policy,
            make_cache=session.lean_target(p) if lean and not own else None,
            tree_rule=tree_rule(s),
        )
        return stream

    def run_of(self, s: Settings, p: ModelPair, stream: Stream) -> views.Run:
        """The run that shows stream's events, a decode of s's prompt on pair p."""
        sent = prompt_format(p.tokenizer, raw=s.raw)
        return views.Run(
            stream=stream,
            decode=decoder(p.tokenizer),
            prompt=s.prompt,
            prompt_format=sent,
            settings={**s.describe(), "prompt_format": sent},
            request=s,
            detokenize=lambda ids: str(p.tokenizer.decode(list(ids))),
            stop=stop_ids(p.target, p.tokenizer),
        )

    def job(self, s: Settings, p: ModelPair) -> Job:
        """s's request for the session's scheduler, checked against the pair first: a batched
        drafter at a fixed γ joins the shared batch of its target (BatchLane), any other
        decodes in a lane of its own (SoloLane)."""
        s = for_pair(s, p)
        ids = prompt_ids(p.tokenizer, s.prompt, raw=s.raw)
        if not (self.session.scheduler.admission.batch and batchable(s, p)):
            return Job(
                group=None, make_lane=lambda: SoloLane(lambda: self.stream(s, p, ids)), request=s
            )
        max_new = s.speculation.max_new_tokens
        check_prompt(ids, max_new, p.target, *([p.draft] if s.draft else []))
        check_token_ids(ids, vocab_size(p.target))
        stop = frozenset(stop_ids(p.target, p.tokenizer))

        cap = self.session.scheduler.admission.gamma_cap

        def lane() -> BatchLane:
            return BatchLane(p.target, stop, self.session.target_batch_cache(p), cap)

        request = RowRequest(
            ids=ids,
            sampling=s.sampling,
            max_new_tokens=max_new,
            gamma=s.speculation.gamma,
            drafter=s.drafter,
            draft=p.draft,
            draft_name=s.draft,
            options=app_options(s, self.session.heads, self.session.memory),
        )
        group = ("batch", s.target, s.dtype)  # every batched drafter and γ on this target
        return Job(group=group, make_lane=lane, request=request)

    @staticmethod
    def render(run: views.Run, plots: bool = True, paused: bool = False) -> list[Any]:
        """The MAIN outputs after a step (paused: after Step, waiting for the next click); the
        tree view shows the latest tree round. A lossy rule's output says so in the stream and
        status."""
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
        figs = (
            {  # drawn only when shown: a figure costs more than the rest of the view
                "acceptance": views.acceptance_figure(rounds, tree=tree),
                "lengths": views.accepted_length_figure(rounds, tree=tree),
                "histogram": views.accepted_histogram(rounds, tree=tree),
                "pq": views.pq_figure(cells),
            }
            if plots
            else {}
        )
        shown = views.pick_round(trees, None)  # the latest round that drafted a tree
        latest = shown.round if shown else None
        return outputs(
            MAIN,
            run=run,
            stream=views.stream_html(
                cells, run.prompt, prompt_format=run.prompt_format, lossy=not run.exact
            ),
            status=views.status_html(f"round {len(rounds)} · {note}"),
            **figs,
            summary=views.summary_html(run.summary()),
            tree_round=latest,
            text=run.text(),
            result=run.result(),
            tree=views.tree_panel_html(trees, latest, run.text_of),
            tree_inspector=views.node_html(None, None, run.text_of),
        )

    @staticmethod
    def fail(err: Exception, names: tuple[str, ...] = MAIN) -> list[Any]:
        """Outputs that leave everything as it was and show the error in the status line."""
        if not isinstance(err, ValueError):
            log.exception("unexpected error")
        text = str(err) if isinstance(err, ValueError) else f"{type(err).__name__}: {err}"
        return outputs(names, status=views.status_html(text, error=True))

    @staticmethod
    def show(names: tuple[str, ...] = MAIN) -> Callable[[str], list[Any]]:
        """message → outputs that change only the status line."""
        return lambda message: outputs(names, status=views.status_html(message))

    def generate(self, s: Settings, progress: gr.Progress = NO_PROGRESS) -> Iterator[list[Any]]:
        """Load (progress live), queue the request with the session's scheduler (its place
        shown), then stream the view after every round of its row."""

        def work(p: ModelPair, events: Stream) -> Iterator[list[Any]]:
            drawn = shown = -PLOT_SECONDS  # when the plots, and the view, were last drawn
            for r in self.run_of(for_pair(s, p), p, events).run_to_end():
                busy, now = (
                    max(1, self.session.scheduler.rows),
                    time.monotonic(),
                )  # busy: less often
                due = len(r.rounds) % PLOT_EVERY == 1 and now - drawn >= PLOT_SECONDS * busy
                alone = busy == 1 or len(r.rounds) <= 1  # every round while none shares it
                if not (r.done or due or alone or now - shown >= VIEW_SECONDS * busy):
                    continue
                drawn = now if r.done or due else drawn
                shown = now
                yield self.render(r, plots=r.done or due)

        yield from self.session.serve(s, self.show(), lambda p: self.job(s, p), work, self.fail)

    def step(
        self, run: views.Run | None, s: Settings, progress: gr.Progress = NO_PROGRESS
    ) -> Iterator[list[Any]]:
        """Advance the session's run by one round; start a new one if none, done or changed."""

        def work(p: ModelPair) -> Iterator[list[Any]]:
            current = run
            if current is None or current.done or current.request != s:
                current = self.start(s, p)  # a fresh run when the controls changed
            current.step()
            yield self.render(current, paused=True)

        yield from self.session.decode(s, self.show(), work, self.fail)

    def race(self, s: Settings, progress: gr.Progress = NO_PROGRESS) -> Iterator[list[Any]]:
        """Plain then speculative decoding of the same prompt, timed without redraws between."""

        def update(message: str, race: str) -> list[Any]:
            return outputs(RACE, status=views.status_html(message), race=race)

        def work(p: ModelPair) -> Iterator[list[Any]]:
            plain = self.start(s, p, plain=True)
            yield update("race: plain decoding…", views.race_html({}, {}, False))
            plain_side = plain.finish()
            yield update("race: speculative decoding…", views.race_html(plain_side, {}, False))
            spec = self.start(s, p)
            spec_side = spec.finish()
            spec.plain_tokens_per_second = plain_side["tokens_per_second"]
            yield [*self.render(spec), views.race_html(plain_side, spec_side, s.sampling.greedy)]

        yield from self.session.decode(s, self.show(RACE), work, lambda err: self.fail(err, RACE))

    @staticmethod
    def stopped() -> str:
        """The status line after Stop: the decode is cancelled, its row freed at the next round
        boundary (what it streamed stays on the page)."""
        return views.status_html("stopped: the decode was cancelled; Generate starts it again")

    @staticmethod
    def inspect(run: views.Run | None, index: Any) -> list[Any]:
        """Inspector panel and residual chart for the token at index."""
        try:
            cell = run.cell(as_int("token #", index)) if run else None
        except ValueError:
            cell = None
        decode = run.text_of if run else str
        return [views.inspector_html(cell), views.residual_figure(cell, decode)]

    @staticmethod
    def round_view(run: views.Run | None, index: Any) -> str:
        """The round detail of the round the token at index belongs to (the latest round with
        a detail when there is no such token)."""
        try:
            cell = run.cell(as_int("token #", index)) if run else None
        except ValueError:
            cell = None
        if run is None:
            return views.round_detail_html([], None, str)
        return views.round_detail_html(run.log, cell.round if cell else None, run.text_of)

    def after_decode(self, run: views.Run | None) -> list[str]:
        """After a decode or a step: the latest round's detail and the memory's line."""
        return [self.round_view(run, None), self.memory_line()]

    def memory_line(self) -> str:
        """What the session's suffix memory holds, as its line."""
        memory = self.session.memory
        return views.memory_html(len(memory.requests), len(memory))

    def clear_memory(self) -> str:
        """Empty the session's suffix memory; its line, now empty."""
        self.session.clear_memory()
        return self.memory_line()

    def click(self, run: views.Run | None, evt: gr.EventData) -> list[Any]:
        """A click on a token in the stream: fill the token number and the inspector."""
        index = getattr(evt, "_data", None) or {}
        idx = index.get("idx") if isinstance(index, dict) else None
        return [idx, *self.inspect(run, idx)]

    @staticmethod
    def tree_view(run: views.Run | None, number: Any, node: Any = None) -> list[Any]:
        """The tree view of the round numbered number (the latest if there is none such) and
        the inspector on its node."""
        trees = run.trees if run else []
        decode = run.text_of if run else str
        chosen = views.pick_round(trees, number)
        return [views.tree_panel_html(trees, number, decode), views.node_html(chosen, node, decode)]

    @staticmethod
    def tree_click(run: views.Run | None, number: Any, evt: gr.EventData) -> list[Any]:
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

    def callbacks(self) -> dict[str, Callable[..., Any]]:
        """The tab's API callbacks (generate, step, race), taking the form's values by name
        (step: the run first); bad values show an error as the handler's own would."""

        def with_run(values: Mapping[str, Any]) -> tuple[Any, Settings]:
            return values["run"], settings_from(values)

        return {
            "generate": callback(self.generate, FIELDS, form_only, self.fail),
            "step": callback(self.step, ("run", *FIELDS), with_run, self.fail),
            "race": callback(self.race, FIELDS, form_only, lambda err: self.fail(err, RACE)),
        }

    def wire(self, w: DecodePanels, form: list[Any], work: Mapping[str, Any]) -> None:
        """Connect the buttons and panels w to the handlers; form: the form's widgets in FIELDS
        order; work: the queue settings of the requests that load models or decode."""
        on, main = self.callbacks(), w.listed(MAIN)
        decodes = [
            w.generate.click(on["generate"], form, main, api_name="generate", **work),
            w.step.click(on["step"], [w.run, *form], main, api_name="step", **work),
            w.race_button.click(on["race"], form, w.listed(RACE), api_name="race", **work),
        ]
        for decoded in decodes:  # then the latest round's detail, and the memory it fed
            decoded.then(self.after_decode, w.run, [w.round_detail, w.memory], api_name=NO_API)
        stoppable: list[dict[str, Any]] = [*decodes]  # Gradio's events are dicts
        w.stop.click(  # unqueued: it answers at once, however busy the decodes keep the queue
            self.stopped, None, w.status, cancels=stoppable, api_name=NO_API, queue=False
        )
        w.clear_memory.click(self.clear_memory, None, w.memory, api_name="clear_memory")
        tree_in, tree_out = [w.run, w.tree_round, w.tree_node], [w.tree, w.tree_inspector]
        w.tree_round.submit(self.tree_view, tree_in, tree_out, api_name="tree")
        w.tree_node.submit(self.tree_view, tree_in, tree_out, api_name=NO_API)
        w.tree.click(
            self.tree_click, [w.run, w.tree_round], [w.tree_node, w.tree_inspector], api_name=NO_API
        )
        panel, picked = [w.inspector, w.residual], [w.run, w.index]
        clicked = w.stream.click(self.click, w.run, [w.index, *panel], api_name=NO_API)
        typed = w.index.submit(self.inspect, picked, panel, api_name="inspect")
        for chosen in (clicked, typed):  # then the round that token belongs to
            chosen.then(self.round_view, picked, w.round_detail, api_name=NO_API)
        w.export.click(self.export, w.run, w.files, api_name="export")


def batchable(s: Settings, p: ModelPair) -> bool:
    """Whether s's request can share a batch: a batched drafter (BATCH_DRAFTERS) at a fixed γ
    that drafts its full γ, on a pair of one tokenizer."""
    fixed = s.policy == "fixed" and not s.min_confidence
    return s.drafter in BATCH_DRAFTERS and fixed and p.same_tokenizer
