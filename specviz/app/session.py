"""The app's session: the cached model pairs, their loading and the one decode slot.

Loading and decoding are kept apart so that a slow load never holds up anyone else: each
request loads its pair in a thread of its own (Loading, at most two loads at once), showing the
load's progress live in the status line. Then a Generate (and the /complete API) hands its
request to the session's scheduler (Session.serve: specviz.app.scheduler), where every
session's requests share batched decoders; a Step, a race or a Batch-tab decode takes the one
decode slot for itself (Session.decode: load → wait → work → release), which the scheduler's
rounds take too, so that two decodes never run at once on a small CPU (that would only slow
both, and a race's timings with them). Any error is handed to the caller's fail.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace
from typing import Any, Protocol, TypeVar

import gradio as gr

from specviz.app.scheduler import Admission, Job, Scheduler, Ticket
from specviz.batch.cache import BatchCache, BatchKVCache
from specviz.drafters.suffix.memory import SuffixMemory
from specviz.fast.lean import SharedLeanTarget
from specviz.fast.ragged import RaggedLean
from specviz.models.loading import ModelPair, load_pair, parse_dtype
from specviz.tune.defaults import Defaults, shipped_defaults

log = logging.getLogger("specviz.app")
Key = tuple[str, str | None, str]
T = TypeVar("T")
P = TypeVar("P")
Show = Callable[[str], T]  # a status message → the event's outputs showing it
NO_PROGRESS = gr.Progress()  # progress outside a Gradio event: reports go nowhere
LOG_EVERY = 10.0  # seconds: a load's repeated progress lines reach the terminal this often


class PairSpec(Protocol):
    """What names a model pair: the form's Settings, the Batch tab's request."""

    @property
    def target(self) -> str:
        """The target: 'bundled', a folder or a hub id."""

    @property
    def draft(self) -> str | None:
        """The draft, or None when the drafter needs no draft model."""

    @property
    def dtype(self) -> str:
        """The dtype's name."""


class PairCache:
    """Loaded pairs keyed by (target, draft or None, dtype); least recently used evicted first.

    One load per key at a time (a second caller waits for it, hears its progress from then on
    and shares the pair); different keys load side by side, at most `loads` at once, so a slow
    load (a hub id without network, the bundled target's first fetch) never holds up a pair
    that is already cached. pack: the models load on pre-packed oneDNN weights
    (specviz.fast.packed).
    """

    def __init__(self, size: int = 2, loads: int = 2, *, pack: bool = True) -> None:
        self.size, self._pairs, self.pack = size, OrderedDict[Key, ModelPair](), pack
        self._lock = threading.Lock()  # guards _pairs, _loading and _listeners, held briefly
        self._loading: dict[Key, threading.Lock] = {}
        self._listeners: dict[Key, list[Callable[[str], None]]] = {}  # who waits for a key
        self._logged: dict[Key, tuple[str, float]] = {}  # each load's last line logged, when
        self._slots = threading.Semaphore(loads)

    def cached(self, target: str, draft: str | None, dtype: str) -> ModelPair | None:
        """The pair if it is loaded already (made most recently used), else None. A target
        alone (draft None) is the target of a loaded pair where there is one: a model is loaded
        once, whichever drafters ask for it."""
        key = (target, draft, dtype)
        with self._lock:
            if key in self._pairs:
                self._pairs.move_to_end(key)
                return self._pairs[key]
            if draft is None and (full := self._with_target(target, dtype)) is not None:
                return replace(full, draft=None, draft_tokenizer=None, drafter=None)
            return None

    def _with_target(self, target: str, dtype: str) -> ModelPair | None:
        """A loaded pair of this target and dtype with a draft, made most recently used.
        Holds self._lock."""
        for (t, d, dt), pair in self._pairs.items():
            if (t, dt) == (target, dtype) and d is not None:
                self._pairs.move_to_end((t, d, dt))
                return pair
        return None

    def loaded(self) -> list[ModelPair]:
        """The pairs loaded now."""
        with self._lock:
            return list(self._pairs.values())

    def get(
        self, target: str, draft: str | None, dtype: str, say: Callable[[str], None]
    ) -> ModelPair:
        """The cached pair (draft None: target only), loaded when missing (ModelLoadError)."""
        if (pair := self.cached(target, draft, dtype)) is not None:
            return pair
        dt = parse_dtype(dtype)
        key = (target, draft, dtype)
        with self._lock:
            key_lock = self._loading.setdefault(key, threading.Lock())
            self._listeners.setdefault(key, []).append(say)
        try:
            with key_lock:
                if (pair := self.cached(target, draft, dtype)) is not None:
                    return pair  # another request loaded it while this one waited
                with self._slots:
                    tell = functools.partial(self._tell, key)
                    loaded = self.cached(target, None, dtype)  # its target, where it is loaded
                    pair = load_pair(
                        target,
                        draft,
                        dtype=dt,
                        pack=self.pack,
                        progress=tell,
                        target_model=None if loaded is None else loaded.target,
                    )
                with self._lock:
                    self._pairs[key] = pair
                    while len(self._pairs) > self.size:
                        self._pairs.popitem(last=False)
                    self._loading.pop(key, None)
                    self._logged.pop(key, None)
                return pair
        finally:
            self._forget(key, say)

    def _tell(self, key: Key, message: str) -> None:
        """A progress message of key's load, to everyone waiting for it, and to the terminal
        once (a line that repeats the last one but for its numbers, at most every LOG_EVERY s)."""
        template, now = re.sub(r"\d+(\.\d+)?", "#", message), time.monotonic()
        with self._lock:
            listeners = list(self._listeners.get(key, ()))
            last, at = self._logged.get(key, ("", -LOG_EVERY))
            repeated = template == last and now - at < LOG_EVERY
            if not repeated:
                self._logged[key] = (template, now)
        if not repeated:
            log.info("%s", message)
        for say in listeners:
            say(message)

    def _forget(self, key: Key, say: Callable[[str], None]) -> None:
        """say no longer waits for key's load."""
        with self._lock:
            waiting = self._listeners.get(key, [])
            waiting.remove(say)
            if not waiting:
                self._listeners.pop(key, None)


class Loading:
    """A pair being loaded in a thread of its own, so that the request can show its progress
    live: `updates` yields each new progress message as it comes (the bundled target's first
    fetch says its stage, MB and seconds), then `pair` is the pair or raises the load's error.
    The terminal hears the load's messages from the cache, once however many requests wait."""

    def __init__(self, cache: PairCache, s: PairSpec) -> None:
        self._messages: list[str] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._pair: ModelPair | None = None
        self._error: BaseException | None = None
        self.started = time.monotonic()
        key = (s.target, s.draft, s.dtype)
        self._pair = cache.cached(*key)
        if self._pair is not None:
            self._done.set()
            return

        def run() -> None:
            try:
                self._pair = cache.get(*key, self.say)
            except BaseException as err:  # handed to the request, which shows it
                self._error = err
            finally:
                self._done.set()

        self.say(f"loading target {s.target!r}" + (f" and draft {s.draft!r}" if s.draft else ""))
        threading.Thread(target=run, name="specviz-load", daemon=True).start()

    def say(self, message: str) -> None:
        """A progress message from the load, kept for the page."""
        with self._lock:
            self._messages.append(message)

    def updates(self, poll: float = 0.2) -> Iterator[str]:
        """The latest progress message with the seconds in all, whenever either changes, until
        the load has finished (nothing for a cached pair)."""
        shown = ("", -1)
        while not self._done.wait(poll):
            with self._lock:
                latest = self._messages[-1] if self._messages else "loading"
            now = (latest, int(time.monotonic() - self.started))
            if now != shown:
                shown = now
                yield f"{latest} · {now[1]} s in all"

    def pair(self) -> ModelPair:
        """The loaded pair, or the load's error raised here (call after updates ended)."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._pair is not None
        return self._pair


class Session:
    """One app's model-side state: its pair cache, the drafting heads' folder, the decode slot
    and the suffix drafters' memory of the app's earlier requests.

    Every request that decodes goes through decode (or check, which only loads). The memory
    persists from one decode to the next until clear_memory: every suffix drafter the app
    builds reads it, and a decode run to its end adds its request to it. defaults: the target's
    forward path every pair loads and decodes on (specviz.tune.defaults)."""

    def __init__(
        self,
        heads: str | None = None,
        defaults: Defaults | None = None,
        admission: Admission | None = None,
    ) -> None:
        """heads: the folder of the drafting heads' weights (None: the shipped ones); defaults:
        the forward path (None: the shipped DEFAULT_CONFIG's); admission: how many requests the
        scheduler decodes at once and queues (None: Admission.of())."""
        self.heads = heads
        self.defaults = defaults or shipped_defaults()
        self.pairs = PairCache(pack=self.defaults.pack)
        self.decoding = threading.Lock()  # the one decode slot (turn() waits for it)
        self.memory = SuffixMemory()
        self.scheduler = Scheduler(admission or Admission.of(), self.decoding)
        self._lean: dict[int, SharedLeanTarget] = {}  # each loaded target's fused weights
        self._lean_lock = threading.Lock()

    def lean_target(self, pair: ModelPair) -> SharedLeanTarget:
        """The lean forward of pair's target, its weights fused once for every request (those
        of targets no longer loaded are let go)."""
        with self._lean_lock:
            loaded = {id(p.target) for p in self.pairs.loaded()}
            self._lean = {key: lean for key, lean in self._lean.items() if key in loaded}
            key = id(pair.target)
            if key not in self._lean or self._lean[key].model is not pair.target:
                self._lean[key] = SharedLeanTarget(pair.target)
            return self._lean[key]

    def target_batch_cache(self, pair: ModelPair) -> BatchCache:
        """An empty batch cache of pair's target on the session's forward: lean (ragged rows,
        on the weights fused once, lean_target's) where it runs the target, else
        transformers'."""
        weights = self.lean_target(pair).weights if self.defaults.lean else None
        return BatchKVCache(pair.target, 0) if weights is None else RaggedLean(weights)

    def clear_memory(self) -> None:
        """Forget every remembered request: the next decode starts from an empty memory (one
        running now feeds the memory it started with, which is dropped)."""
        self.memory = SuffixMemory()

    def pair(self, s: PairSpec, progress: gr.Progress = NO_PROGRESS) -> ModelPair:
        """The model pair s names, loaded here (load messages shown as progress)."""
        return self.pairs.get(s.target, s.draft, s.dtype, lambda m: progress(None, desc=m))

    def pair_for(self, s: PairSpec, show: Show[T]) -> Generator[T, None, ModelPair]:
        """Load (or find cached) the pair s names in a thread, yielding show(message) for each
        progress message as it comes; returns the pair (raises the load's error)."""
        loading = Loading(self.pairs, s)
        for message in loading.updates():
            yield show(message)
        return loading.pair()

    def turn(self, show: Show[T]) -> Iterator[T]:
        """Wait for the one decode slot, yielding show(how long) while another request holds
        it; the caller releases self.decoding when done."""
        started = time.monotonic()
        while not self.decoding.acquire(timeout=0.5):
            waited = time.monotonic() - started
            yield show(f"waiting for another request's decode to finish ({waited:.0f} s)")

    def decode(
        self,
        s: PairSpec,
        show: Show[T],
        work: Callable[[ModelPair], Iterator[T]],
        fail: Callable[[Exception], T],
    ) -> Iterator[T]:
        """Load the pair s names (progress live), wait for the decode slot, run work on the pair
        holding it, release it; an error anywhere is fail(error)'s outputs (fail may raise)."""
        return self._guarded(self.pair_for(s, show), show, work, fail)

    def decode_maybe(
        self,
        s: PairSpec | None,
        show: Show[T],
        work: Callable[[ModelPair | None], Iterator[T]],
        fail: Callable[[Exception], T],
    ) -> Iterator[T]:
        """decode, where s None loads nothing (work gets None) but still takes the slot."""
        load = self.pair_for(s, show) if s is not None else no_pair()
        return self._guarded(load, show, work, fail)

    def serve(
        self,
        s: PairSpec,
        show: Show[T],
        job: Callable[[ModelPair], Job],
        work: Callable[[ModelPair, Iterator[Any]], Iterator[T]],
        fail: Callable[[Exception], T],
    ) -> Iterator[T]:
        """Load the pair s names (progress live), hand job(pair)'s request to the scheduler
        (its place in the queue shown while it waits), then work(pair, its events); an error
        anywhere (a bad request, a full queue) is fail(error)'s outputs. Closing this iterator
        (Stop, a closed tab) cancels the request."""
        ticket: Ticket | None = None
        try:
            pair = yield from self.pair_for(s, show)
            ticket = self.scheduler.submit(job(pair))
            while not ticket.wait_start(0.5):
                yield show(ticket.waiting() or "starting")
            yield from work(pair, ticket.events())
        except Exception as err:  # shown in the UI, never as a stack trace
            yield fail(err)
        finally:
            if ticket is not None:
                ticket.cancel()

    def check(
        self,
        s: PairSpec,
        show: Show[T],
        done: Callable[[ModelPair], T],
        fail: Callable[[Exception], T],
    ) -> Iterator[T]:
        """Load the pair s names (progress live) without the decode slot: done(pair), or
        fail(error)."""
        try:
            pair = yield from self.pair_for(s, show)
        except Exception as err:
            yield fail(err)
            return
        yield done(pair)

    def _guarded(
        self,
        load: Generator[T, None, P],
        show: Show[T],
        work: Callable[[P], Iterator[T]],
        fail: Callable[[Exception], T],
    ) -> Iterator[T]:
        """load → wait for the slot → work → release, errors to fail."""
        try:
            pair = yield from load
            yield from self.turn(show)
            try:
                yield from work(pair)
            finally:
                self.decoding.release()
        except Exception as err:  # shown in the UI, never as a stack trace
            yield fail(err)


def no_pair() -> Generator[Any, None, None]:
    """A load that loads nothing."""
    yield from ()


def decoder(tokenizer: Any) -> Callable[[int], str]:
    """Token id → text with the pair's tokenizer."""
    return lambda token: str(tokenizer.decode([token]))


def parameter_counts(pair: ModelPair) -> str:
    """'target N params, draft M params' for the load/check status line."""
    models = {"target": pair.target, "draft": pair.draft}
    return ", ".join(
        f"{name} {sum(x.numel() for x in m.parameters()):,} params"
        for name, m in models.items()
        if m is not None
    )
