"""The app's /complete API endpoint: a prompt in; the committed text and the decode in short out.

A script calls it through gradio_client by keyword, every argument but the prompt having the
form's default, and decodes on the pair the app started with:

    text, result = client.predict(prompt="def fibonacci(n):", raw=True, api_name="/complete")

It decodes as Generate does (the same session and scheduler: its request may share a batch with
other users'), without drawing the page. Its
annotations are real types, not strings (no `from __future__ import annotations` here): Gradio
reads them at run time to type the endpoint's parameters and outputs.
"""

import logging
from collections.abc import Iterator, Mapping
from typing import Any

import gradio as gr

from specviz.app.drafting import for_pair
from specviz.app.scheduler import Job
from specviz.app.session import Session
from specviz.app.tabs.decode import DecodeTab
from specviz.app.views.form import DEFAULTS, Settings, settings_from
from specviz.core.events import Event
from specviz.models.loading import ModelPair

log = logging.getLogger("specviz.app")
Outcome = tuple[str, dict[str, Any]]  # the committed text, the decode in short (views.Run.result)


class Completion:
    """The /complete endpoint of one app: its session, its decode tab and its pair."""

    def __init__(self, session: Session, decode: DecodeTab, pair: Mapping[str, str]) -> None:
        """pair: the target, draft and dtype the app started with."""
        self.session, self.decode, self.pair = session, decode, dict(pair)

    def settings(self, prompt: str, raw: bool, **numbers: Any) -> Settings:
        """The form's defaults on the app's pair, with the prompt, its format and the given
        drafter and numbers (by the form's names); ValueError saying what is wrong."""
        return settings_from({**DEFAULTS, **self.pair, **numbers, "prompt": prompt, "raw": raw})

    def complete(
        self,
        prompt: str,
        raw: bool = False,
        drafter: str = DEFAULTS["drafter"],
        gamma: int = DEFAULTS["gamma"],
        temperature: float = DEFAULTS["temperature"],
        top_k: int = DEFAULTS["top_k"],
        top_p: float = DEFAULTS["top_p"],
        max_new_tokens: int = DEFAULTS["max_new"],
        seed: int = DEFAULTS["seed"],
    ) -> tuple[str, dict[str, Any]]:
        """Decode prompt to its end; return the committed text (no rejected draft, no stop
        token) and the decode in short: drafter, gamma, prompt_format, new_tokens, rounds,
        alpha (the share of drafts kept), tokens_per_second, seconds, finish_reason,
        target_calls, exact. raw: send the prompt as raw completion (True: code to continue)
        instead of through the chat template (False, as `specviz generate` without --raw)."""
        numbers = {"drafter": drafter, "gamma": gamma, "temperature": temperature}
        numbers |= {"top_k": top_k, "top_p": top_p, "max_new": max_new_tokens, "seed": seed}
        try:
            s = self.settings(prompt, raw, **numbers)
        except ValueError as err:
            raise gr.Error(str(err)) from None
        outcome: list[Outcome] = []

        def work(pair: ModelPair, events: Iterator[Event]) -> Iterator[None]:
            run = self.decode.run_of(for_pair(s, pair), pair, events)
            run.finish()
            outcome.append((run.text(), run.result()))
            yield None

        def job(pair: ModelPair) -> Job:
            return self.decode.job(s, pair)

        for _ in self.session.serve(s, lambda _message: None, job, work, refuse):
            pass
        return outcome[-1]


def refuse(err: Exception) -> None:
    """A decode's error, raised for the API's caller with what to change."""
    if not isinstance(err, ValueError):  # a bad request is the caller's to fix; this is ours
        log.exception("unexpected error")
    text = str(err) if isinstance(err, ValueError) else f"{type(err).__name__}: {err}"
    raise gr.Error(text)
