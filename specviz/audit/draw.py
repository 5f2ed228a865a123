"""Drawing an audit's samples: seeds, resume from saved samples, timing, progress events.

Seeds are distinct on every request of a prompt and k: the i-th speculative request has seed
first + 2i, the i-th plain one first + 2i + 1, so no two samples share a seed (engines that
consume one random number a token would otherwise pair the two sides' tokens).

Where the source allows it (`sides_at_once`, e.g. two servers), the two sides are drawn at the
same time, one thread each, each side's requests in their usual order (a server reuses its
cached prompt from one request to the next). A sample depends on its seed alone, so the
samples, and every test on them, are the same drawn either way; only the wall time changes.
"""

from __future__ import annotations

import queue
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from specviz.audit.settings import Sample, Settings
from specviz.audit.sources import SIDES, Side, Source
from specviz.audit.store import SampleKey, Store


@dataclass(frozen=True, kw_only=True)
class Drawn:
    """Progress: `done` of the `total` requests a phase needs have been answered."""

    done: int
    total: int
    label: str


@dataclass(frozen=True, kw_only=True)
class Planned:
    """The budget, predicted from the timed probe before the audit samples in earnest."""

    requests: int
    seconds: float
    per_request: dict[str, float]  # 'side k=K' (with ' logprobs') → median seconds of one
    at_once: bool  # the two sides drawn at the same time: the slower side's time is the audit's


@dataclass(frozen=True, kw_only=True)
class Looked:
    """One look at the samples: N per side and prompt of each k, and what it decided."""

    look: int
    n: dict[int, int]
    decision: str  # 'continue', 'not exact' or 'exact'


Event = Drawn | Planned | Looked
OnEvent = Callable[[Event], None]
Want = tuple[str, int, int, bool]  # (prompt, k, samples per side, with logprobs)
Request = tuple[str, Side, int, int, bool]  # (prompt, side, k, index, with logprobs)
Answer = tuple[Request, Sample, float]  # the request, its sample, its seconds


class Drawer:
    """Draws the samples an audit asks for, reusing the saved ones; counts and times requests."""

    def __init__(
        self, source: Source, settings: Settings, store: Store, on_event: OnEvent, first_seed: int
    ) -> None:
        self.source, self.settings, self.store = source, settings, store
        self.on_event, self.first_seed = on_event, first_seed
        self.saved = store.load()
        self.requests = 0
        self.seconds: dict[tuple[Side, int, bool], list[float]] = {}

    def seed(self, side: Side, i: int) -> int:
        """The seed of the i-th request of a side."""
        return self.first_seed + 2 * i + (side == "plain")

    def key(self, prompt: str, side: Side, k: int, i: int, top: bool) -> SampleKey:
        """The saved-sample key of the i-th request of a side."""
        return (prompt, side, k, self.seed(side, i), top)

    def fill(self, wants: Sequence[Want], label: str, sides: Sequence[Side] = SIDES) -> None:
        """Draw every missing sample the wants name, with progress: the sides interleaved, or
        at the same time where the source allows it."""
        missing: list[Request] = [
            (prompt, side, k, i, top)
            for prompt, k, count, top in wants
            for i in range(count)
            for side in sides
            if self.key(prompt, side, k, i, top) not in self.saved
        ]
        for done, answer in enumerate(self._answers(missing), 1):
            self._keep(*answer)
            self.on_event(Drawn(done=done, total=len(missing), label=label))

    def _answers(self, missing: list[Request]) -> Iterator[Answer]:
        """The answers to the missing requests, in the order they come."""
        lanes = [[r for r in missing if r[1] == side] for side in SIDES]
        if not self.source.sides_at_once or not all(lanes):
            return (self._ask(r) for r in missing)
        return _at_once(self._ask, lanes)

    def _ask(self, request: Request) -> Answer:
        prompt, side, k, i, top = request
        start = time.perf_counter()
        sample = self.source.sample(
            side, prompt, self.settings, seed=self.seed(side, i), tokens=k, top=top
        )
        return request, sample, time.perf_counter() - start

    def _keep(self, request: Request, sample: Sample, seconds: float) -> None:
        prompt, side, k, i, top = request
        self.seconds.setdefault((side, k, top), []).append(seconds)
        self.requests += 1
        key = self.key(prompt, side, k, i, top)
        self.saved[key] = sample
        self.store.append(key, sample)

    def samples(self, prompt: str, side: Side, k: int, count: int, top: bool) -> list[Sample]:
        """The first count samples of a side (all drawn already)."""
        return [self.saved[self.key(prompt, side, k, i, top)] for i in range(count)]

    def median_seconds(self, side: Side, k: int, top: bool = False) -> float:
        """Median seconds of a side's requests of k tokens drawn so far (0 when none were): a
        server's first request on a prompt evaluates all of it, the later ones reuse it."""
        times = self.seconds.get((side, k, top), [])
        return statistics.median(times) if times else 0.0


def _at_once(ask: Callable[[Request], Answer], lanes: list[list[Request]]) -> Iterator[Answer]:
    """ask() every lane's requests in order, one thread a lane; the answers as they come. An
    error in a lane is raised here, and stops the other lanes before their next request."""
    answers: queue.Queue[Answer | BaseException] = queue.Queue()
    stop = threading.Event()
    for lane in lanes:
        threading.Thread(target=_lane, args=(ask, lane, answers, stop), daemon=True).start()
    try:
        for _ in range(sum(len(lane) for lane in lanes)):
            answer = answers.get()
            if isinstance(answer, BaseException):
                raise answer
            yield answer
    finally:
        stop.set()


def _lane(
    ask: Callable[[Request], Answer],
    lane: list[Request],
    answers: queue.Queue[Answer | BaseException],
    stop: threading.Event,
) -> None:
    """One thread's requests, in order, until done or stopped."""
    try:
        for request in lane:
            if stop.is_set():
                return
            answers.put(ask(request))
    except BaseException as err:  # handed to the drawing thread, raised there
        answers.put(err)
