"""The app's one scheduler: every session's decodes share lanes run by one thread.

Terms:
- a *ticket* is one request's place: the events of its own row as they come, and its cancel;
- a *lane* decodes the tickets of one group round by round: a batched speculative decoder for
  requests that can share a batch (one pair, drafter and γ: specviz.app.lanes), or a lane of
  one request for the rest;
- *rows* are the requests decoding at once, over all lanes (Admission.rows); the others wait,
  first come first served, up to Admission.queue of them. Past that a request is refused at
  once with a Busy error that says its place and the estimated wait: never dropped silently.

The thread admits waiting tickets at round boundaries (continuous batching: a request joins
its group's running batch), then advances every busy lane by one round in turn (groups take
turns, so none starves), each round under the session's decode lock (a Step or race holds it
between rounds), and closes a lane as soon as it has no rows (its caches and drafter freed).
A cancelled ticket (Stop, a closed tab) leaves its lane at the next round boundary.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from specviz.batch.gamma import GammaByRows
from specviz.drafters.names import DEFAULT_CONFIG

log = logging.getLogger("specviz.app")
QUEUE_PER_ROW = 4  # waiting places per row by default
YIELD_SECONDS = 0.001  # after each round: the turn lock is not fair, so the thread steps aside
SWEEP_GAMMAS = GammaByRows(DEFAULT_CONFIG.batch_gammas)  # a shared batch's γ cap by default
END = object()  # a ticket's last item: its request has ended (or failed, or was cancelled)


@dataclass(frozen=True, kw_only=True)
class Admission:
    """How many requests decode at once (rows, over all lanes) and how many may wait; batch
    False: every request decodes in a lane of its own (one at a time with rows 1: the app
    before it shared batches, kept to measure against); gamma_cap: the most a row of a shared
    batch drafts at each batch size (specviz.batch.gamma; None: every row its request's γ)."""

    rows: int
    queue: int
    batch: bool = True
    gamma_cap: GammaByRows | None = SWEEP_GAMMAS

    @classmethod
    def of(
        cls,
        rows: int = DEFAULT_CONFIG.batch_rows,
        queue: int | None = None,
        batch: bool = True,
        cap_gamma: bool = True,
    ) -> Admission:
        """rows at once (default: DEFAULT_CONFIG's, the batch sweep's knee), queue waiting
        (None: QUEUE_PER_ROW per row); cap_gamma: a shared batch's rows draft at most
        DEFAULT_CONFIG's best γ for its size."""
        return cls(
            rows=rows,
            queue=QUEUE_PER_ROW * rows if queue is None else queue,
            batch=batch,
            gamma_cap=SWEEP_GAMMAS if cap_gamma else None,
        )

    @property
    def handlers(self) -> int:
        """Requests a server should hand to the scheduler at once: every row and waiting place,
        and a few more that the scheduler refuses with its busy message."""
        return self.rows + self.queue + 4

    def __post_init__(self) -> None:
        if self.rows < 1 or self.queue < 0:
            raise ValueError(f"admission needs rows >= 1 and queue >= 0 (got {self})")


class Busy(ValueError):
    """The queue is full: the request is refused, with its place and the estimated wait."""


class Lane(Protocol):
    """The decodes of one group, advanced a round at a time by the scheduler's thread."""

    def admit(self, ticket: Ticket) -> None:
        """ticket's request joins (at the next round); ValueError: it cannot (ticket fails)."""

    def advance(self) -> None:
        """One round of every row, each event put on its own ticket (ticket.put); a row that
        ends closes its ticket (ticket.end)."""

    def drop(self, ticket: Ticket) -> None:
        """A cancelled ticket's row leaves at the next round boundary."""

    @property
    def rows(self) -> int:
        """Requests in the lane (decoding or about to)."""


@dataclass(frozen=True, kw_only=True)
class Job:
    """What a request asks the scheduler for: its group, the lane that serves a new group, and
    the request itself (the lane reads it)."""

    group: Hashable  # requests of one group share a lane (None: a lane of its own)
    make_lane: Callable[[], Lane]
    request: Any


class Ticket:
    """One request's place in the scheduler: its row's events, its state, its cancel."""

    def __init__(self, job: Job, scheduler: Scheduler) -> None:
        self.job, self.scheduler = job, scheduler
        self.submitted = time.monotonic()
        self.started: float | None = None  # when its lane took it
        self.cancelled = threading.Event()
        self.finished = False  # its request has ended (end was called)
        self.error: Exception | None = None
        self._items: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def put(self, event: Any) -> None:
        """An event of this request's row (from the lane's thread)."""
        self._items.put(event)

    def end(self, error: Exception | None = None) -> None:
        """The request is over (error: why it failed); a second call changes nothing."""
        if self.finished:
            return
        self.finished, self.error = True, error
        self._items.put(END)

    def cancel(self) -> None:
        """Leave the queue or the lane (idempotent): the row is freed within a round."""
        if not self.cancelled.is_set():
            self.cancelled.set()
            self.scheduler.wake()

    def waiting(self) -> str | None:
        """While the request waits for a row: its place and estimated wait; None once it
        decodes."""
        return None if self.started is not None else self.scheduler.place_message(self)

    def events(self, poll: float = 0.25) -> Iterator[Any]:
        """The request's events as its lane produces them; raises the lane's error, if any.
        Closing the iterator early (the page stopped listening) cancels the request."""
        try:
            while True:
                try:
                    item = self._items.get(timeout=poll)
                except queue.Empty:
                    continue
                if item is END:
                    if self.error is not None:
                        raise self.error
                    return
                yield item
        finally:
            self.cancel()

    def wait_start(self, timeout: float) -> bool:
        """Wait up to timeout seconds for the lane to take the request; True once it has (or
        it has already ended)."""
        deadline = time.monotonic() + timeout
        while self.started is None and self.error is None and time.monotonic() < deadline:
            time.sleep(min(0.05, timeout))
        return self.started is not None or self.error is not None


class Scheduler:
    """One thread running every session's decodes in shared lanes (see the module's doc).

    turn: the lock each round is run under (the session's decode lock, which a Step or a race
    holds for its own decode)."""

    def __init__(self, admission: Admission, turn: threading.Lock | None = None) -> None:
        self.admission = admission
        self.turn = turn or threading.Lock()
        self._lock = threading.Condition()  # over a re-entrant lock
        self._waiting: deque[Ticket] = deque()
        self._lanes: dict[Hashable, Lane] = {}
        self._tickets: dict[Hashable, list[Ticket]] = {}  # each lane's tickets
        self._durations: deque[float] = deque(maxlen=32)  # recent requests' seconds in a lane
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.peak_rows = 0  # the most requests that have decoded at once

    def submit(self, job: Job) -> Ticket:
        """Queue job's request (the thread starts with the first); Busy when the queue is full."""
        with self._lock:
            if len(self._waiting) >= self.admission.queue and self._full():
                place = len(self._waiting) + 1
                raise Busy(
                    f"busy: {self.rows} requests are decoding and {len(self._waiting)} waiting "
                    f"(the most this app queues); yours would be number {place} in the queue, "
                    f"about {self.wait_estimate(place):.0f} s away. Try again in a moment."
                )
            ticket = Ticket(job, self)
            self._waiting.append(ticket)
            self._start()
            self._lock.notify_all()
        return ticket

    @property
    def rows(self) -> int:
        """Requests decoding now, over all lanes."""
        with self._lock:  # re-entrant: callers may hold it already
            return sum(lane.rows for lane in self._lanes.values())

    def _full(self) -> bool:
        return self.rows >= self.admission.rows

    def wait_estimate(self, place: int) -> float:
        """Seconds until the request at place (1: next) takes a row, from recent requests."""
        each = sum(self._durations) / len(self._durations) if self._durations else 5.0
        return each * ((place - 1) // self.admission.rows + 1)

    def place_message(self, ticket: Ticket) -> str:
        """'queued: number N, about S s' for a waiting ticket."""
        with self._lock:
            waiting, rows = list(self._waiting), self.rows
        place = waiting.index(ticket) + 1 if ticket in waiting else 1
        return (
            f"queued: {rows} requests decoding, yours is number {place} in line "
            f"(about {self.wait_estimate(place):.0f} s)"
        )

    def wake(self) -> None:
        """Let the thread look again (a cancel, a new request)."""
        with self._lock:
            self._lock.notify_all()

    def stop(self) -> None:
        """End the thread after its current round (the waiting requests fail)."""
        with self._lock:
            self._stopping = True
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="specviz-decode", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        """Admit, advance every busy lane a round, close empty lanes; sleep when idle."""
        while True:
            with self._lock:
                self._admit()
                while not self._lanes and not self._stopping:
                    self._lock.wait()
                    self._admit()
                if self._stopping:
                    break
                lanes = list(self._lanes.items())
            for group, lane in lanes:
                self._advance(group, lane)
        for ticket in self._waiting:
            ticket.end(ValueError("the app is shutting down"))

    def _admit(self) -> None:
        """Waiting tickets take free rows, first come first served (the cancelled leave);
        cancelled tickets in lanes are dropped. Holds self._lock."""
        for group, tickets in list(self._tickets.items()):
            for ticket in [t for t in tickets if t.cancelled.is_set()]:
                self._lanes[group].drop(ticket)
                ticket.end()
                self._forget(group, ticket, completed=False)
            if self._lanes[group].rows == 0:  # closed at once: its caches and drafter freed
                self._close(group)
        while self._waiting and not self._full():
            ticket = self._waiting.popleft()
            if ticket.cancelled.is_set():
                ticket.end()
                continue
            group = ticket.job.group if ticket.job.group is not None else ticket
            try:
                lane = self._lanes.get(group) or ticket.job.make_lane()
                lane.admit(ticket)
            except Exception as err:  # a request the lane cannot take: its page says why
                ticket.end(err if isinstance(err, ValueError) else _unexpected(err))
                continue
            ticket.started = time.monotonic()
            self._lanes[group] = lane
            self._tickets.setdefault(group, []).append(ticket)
            self.peak_rows = max(self.peak_rows, self.rows)

    def _advance(self, group: Hashable, lane: Lane) -> None:
        """One round of lane, under the turn lock; a lane that fails ends its tickets."""
        try:
            with self.turn:
                lane.advance()
            time.sleep(YIELD_SECONDS)  # a Step or race waiting for the turn gets it now
        except Exception as err:
            with self._lock:
                for ticket in self._tickets.get(group, []):
                    ticket.end(err if isinstance(err, ValueError) else _unexpected(err))
                self._tickets.pop(group, None)
                self._lanes.pop(group, None)
            return
        with self._lock:
            done = [t for t in self._tickets.get(group, []) if t.finished]
            for ticket in done:
                self._forget(group, ticket, completed=ticket.error is None)
            if lane.rows == 0:
                self._close(group)

    def _close(self, group: Hashable) -> None:
        """The lane of group has no rows left: it goes (its caches and drafter with it)."""
        self._lanes.pop(group, None)
        self._tickets.pop(group, None)

    def _forget(self, group: Hashable, ticket: Ticket, *, completed: bool) -> None:
        """A ticket that ended leaves its lane's list; a completed one's time joins the wait
        estimate."""
        self._tickets[group].remove(ticket)
        if completed and ticket.started is not None:
            self._durations.append(time.monotonic() - ticket.started)


def _unexpected(err: Exception) -> ValueError:
    """An error the app did not expect, logged, as the message its page shows."""
    log.error("decode failed", exc_info=err)
    return ValueError(f"{type(err).__name__}: {err}")
