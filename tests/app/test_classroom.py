"""A classroom on the app: concurrent requests share the scheduler's batches, each request's
text is the text it gets decoded alone, bad requests get their messages, and a page that stops
listening frees its row (the tiny pair; timings are the load study's, never asserted here)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from specviz.app.main import SpecVizApp
from specviz.app.scheduler import Admission, Job, Ticket
from specviz.app.views.form import Settings
from specviz.bench.report import load_result_view

from .test_app import form, free_port, model_dirs

__all__ = ["model_dirs"]  # the session fixture shared with test_app

pytestmark = [  # gradio's queue calls pandas in ways pandas 3 deprecates: not ours to fix
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting':Warning"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated:Warning"),
]
# Mixed requests: batched drafters at two γ (two groups), greedy and seeded sampling with
# top-k/top-p, different lengths, and a drafter with no batched form (a lane of its own).
REQUESTS: list[dict[str, Any]] = [
    {"drafter": "model", "gamma": 3, "temperature": 0.0, "max_new_tokens": 20},
    {"drafter": "model", "gamma": 3, "temperature": 1.0, "seed": 7, "max_new_tokens": 12},
    {"drafter": "model", "gamma": 3, "temperature": 0.8, "top_p": 0.9, "seed": 2},
    {"drafter": "ngram+model", "gamma": 4, "temperature": 1.0, "top_k": 5, "seed": 11},
    {"drafter": "ngram+model", "gamma": 4, "temperature": 0.0, "max_new_tokens": 16},
    {"drafter": "suffix", "gamma": 3, "temperature": 0.0, "max_new_tokens": 10},
]
PROMPTS = ["the cat sat", "a dog ran", "the bird sang", "the cat ran", "a cat sat", "one fish"]


@pytest.fixture(scope="module")
def classroom(model_dirs: tuple[str, str]) -> SpecVizApp:
    """Every row drafts its request's γ: a sampled row then draws what it draws alone."""
    return SpecVizApp(*model_dirs, admission=Admission.of(rows=4, queue=8, cap_gamma=False))


def alone(app: SpecVizApp, dirs: tuple[str, str], prompt: str, asked: dict[str, Any]) -> str:
    """The request decoded by itself (the Step and race path: no scheduler, no batch)."""
    values = form(dirs, prompt=prompt, **{k: v for k, v in asked.items() if k != "max_new_tokens"})
    values["max_new"] = asked.get("max_new_tokens", values["max_new"])
    s = Settings.parse(values)
    pair = app.session.pair(s)
    run = app.decode.start(s, pair)
    run.finish()
    return run.text()


def concurrently(app: SpecVizApp) -> dict[int, str]:
    """Every request of REQUESTS sent at once, each from its own thread: their texts."""
    texts: dict[int, str] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(len(REQUESTS))

    def user(i: int) -> None:
        try:
            start.wait()
            texts[i], _ = app.completion.complete(PROMPTS[i], **REQUESTS[i])
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=user, args=(i,)) for i in range(len(REQUESTS))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert app.session.scheduler.peak_rows >= 2  # requests really decoded together
    return texts


def test_concurrent_requests_share_batches_and_each_gets_the_text_it_gets_alone(
    classroom: SpecVizApp, model_dirs: tuple[str, str]
) -> None:
    texts = concurrently(classroom)
    for i, asked in enumerate(REQUESTS):
        assert texts[i] == alone(classroom, model_dirs, PROMPTS[i], asked), (i, asked)


def test_with_gamma_capped_by_the_batch_size_greedy_texts_are_still_the_solo_ones(
    model_dirs: tuple[str, str],
) -> None:
    """The app's default admission: rows sharing a batch draft at most the batch sweep's best γ
    for its size, which changes how a sampled row spends its random numbers (its law stays the
    target's: tests/batch/test_law.py) but never a greedy row's text."""
    app = SpecVizApp(*model_dirs, admission=Admission.of(rows=4, queue=8))
    assert app.session.scheduler.admission.gamma_cap is not None
    texts = concurrently(app)
    for i, asked in enumerate(REQUESTS):
        if asked["temperature"] == 0.0:
            assert texts[i] == alone(app, model_dirs, PROMPTS[i], asked), (i, asked)
        else:
            assert i in texts  # answered (a tiny model's text may be empty)


class Endless:
    """A lane whose one request never ends by itself: a round is one "round" event."""

    def __init__(self) -> None:
        self.ticket: Ticket | None = None

    @property
    def rows(self) -> int:
        return 0 if self.ticket is None else 1

    def admit(self, ticket: Ticket) -> None:
        self.ticket = ticket

    def advance(self) -> None:
        if self.ticket is not None:
            self.ticket.put("round")
            time.sleep(0.01)

    def drop(self, ticket: Ticket) -> None:
        self.ticket = None


def test_a_page_that_stops_listening_frees_its_row(
    classroom: SpecVizApp, model_dirs: tuple[str, str]
) -> None:
    """Session.serve, as Generate and /complete call it: closing its iterator (Gradio does when
    the tab is closed or Stop pressed) cancels the request, which leaves its lane."""
    scheduler = classroom.session.scheduler
    s = Settings.parse(form(model_dirs))

    def job(_pair: Any) -> Job:
        return Job(group="endless", make_lane=Endless, request=None)

    def work(_pair: Any, events: Iterator[Any]) -> Iterator[str]:
        yield from events

    outputs = classroom.session.serve(s, lambda message: f"status: {message}", job, work, repr)
    shown = next(outputs)
    while shown != "round":  # the load's and the queue's status lines first
        assert shown.startswith("status: "), shown
        shown = next(outputs)
    assert scheduler.rows == 1
    outputs.close()
    deadline = time.monotonic() + 5
    while scheduler.rows and time.monotonic() < deadline:
        time.sleep(0.01)
    assert scheduler.rows == 0


@pytest.fixture(scope="module")
def served(model_dirs: tuple[str, str]) -> Iterator[str]:
    """The app serving the tiny pair with 2 rows and a queue of 2, on a free local port, every
    row drafting its request's γ (so a sampled row's text is its solo text)."""
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
    admission = Admission.of(2, 2, cap_gamma=False)
    app = SpecVizApp(*model_dirs, view=load_result_view, admission=admission)
    demo = app.build()
    port = free_port()
    app.preload().join()  # loaded before any test goes on (launch finds it cached)
    app.launch(demo, "127.0.0.1", port, prevent_thread_lock=True, quiet=True)
    yield f"http://127.0.0.1:{port}/"
    demo.close()


def test_four_users_two_requests_each_through_gradio_client(
    served: str, classroom: SpecVizApp, model_dirs: tuple[str, str]
) -> None:
    """Each of 4 sessions sends a good request and a bad one; every good one gets its own
    text, every bad one its message, and the server keeps serving."""
    from gradio_client import Client

    answers: dict[int, tuple[str, str]] = {}
    failures: list[BaseException] = []

    def user(i: int) -> None:
        client = Client(served, verbose=False)
        asked = REQUESTS[i]
        try:
            text, _ = client.predict(prompt=PROMPTS[i], **asked, api_name="/complete")
            try:
                client.predict(prompt=PROMPTS[i], **{**asked, "top_p": 0}, api_name="/complete")
                message = "accepted"
            except Exception as err:  # the app's message, through gradio_client
                message = str(err)
            answers[i] = (text, message)
        except BaseException as err:  # reported below
            failures.append(err)

    threads = [threading.Thread(target=user, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    for i in range(4):
        text, message = answers[i]
        assert text == alone(classroom, model_dirs, PROMPTS[i], REQUESTS[i]), i
        assert "top-p must be greater than 0 and at most 1 (got 0)" in message, message
