"""The app's scheduler with lanes that count rounds: admission, the busy message, cancelling,
groups taking turns (torch-free; the real lanes are tests/app/test_classroom.py's)."""

from __future__ import annotations

import threading
import time

import pytest

from specviz.app.scheduler import Admission, Busy, Job, Scheduler, Ticket


class Counting:
    """A lane whose requests each take ticket.job.request rounds; every round is logged."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log
        self.left: dict[Ticket, int] = {}

    @property
    def rows(self) -> int:
        return len(self.left)

    def admit(self, ticket: Ticket) -> None:
        if ticket.job.request <= 0:
            raise ValueError("a request needs at least one round")
        self.left[ticket] = ticket.job.request

    def advance(self) -> None:
        self.log.append(self.name)
        for ticket in list(self.left):
            ticket.put(self.name)
            self.left[ticket] -= 1
            if self.left[ticket] == 0:
                del self.left[ticket]
                ticket.end()

    def drop(self, ticket: Ticket) -> None:
        self.left.pop(ticket, None)


class Setup:
    """A scheduler, its round log, and the turn lock every round takes (a test that holds it
    holds the rounds, as a Step holds the app's)."""

    def __init__(self, rows: int, queue: int) -> None:
        self.log: list[str] = []
        self.turn = threading.Lock()
        self.scheduler = Scheduler(Admission(rows=rows, queue=queue), self.turn)

    def job(self, group: str, rounds: int) -> Job:
        def make() -> Counting:
            return Counting(group, self.log)

        return Job(group=group, make_lane=make, request=rounds)

    def submit(self, group: str, rounds: int) -> Ticket:
        return self.scheduler.submit(self.job(group, rounds))


def wait_for(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_rows_past_the_limit_wait_and_past_the_queue_are_refused_with_place_and_wait() -> None:
    setup = Setup(rows=2, queue=1)
    first, second = setup.submit("a", 10**6), setup.submit("a", 10**6)
    wait_for(lambda: setup.scheduler.rows == 2)
    third = setup.submit("a", 1)  # no row free: it waits
    assert not third.wait_start(0.2)
    assert third.waiting() == ("queued: 2 requests decoding, yours is number 1 in line (about 5 s)")
    with pytest.raises(Busy, match=r"yours would be number 2 in the queue, about \d+ s away"):
        setup.submit("a", 1)
    first.cancel()
    assert list(third.events()) == ["a"]  # it took the row the first one freed
    second.cancel()
    wait_for(lambda: setup.scheduler.rows == 0)
    setup.scheduler.stop()


def test_a_cancelled_request_frees_its_row_within_a_round() -> None:
    setup = Setup(rows=1, queue=4)
    long = setup.submit("a", 10**6)
    wait_for(lambda: len(setup.log) >= 3)
    with setup.turn:  # between two rounds
        waiting = setup.submit("b", 2)
        long.cancel()
        rounds_before = len(setup.log)
    assert list(waiting.events()) == ["b", "b"]  # it got the row the cancelled one freed
    after = setup.log[rounds_before:]
    assert after.count("a") <= 1 and after[-2:] == ["b", "b"]  # at most the round under way
    assert long.finished and long.error is None
    setup.scheduler.stop()


def test_closing_the_event_stream_cancels_the_request() -> None:
    setup = Setup(rows=1, queue=4)
    ticket = setup.submit("a", 10**6)
    events = ticket.events()
    assert next(events) == "a"
    events.close()  # the page stopped listening
    assert ticket.cancelled.is_set()
    wait_for(lambda: setup.scheduler.rows == 0)
    setup.scheduler.stop()


def test_groups_take_turns_a_round_each() -> None:
    setup = Setup(rows=4, queue=4)
    with setup.turn:  # every request queued before the first round
        a = [setup.submit("a", 6) for _ in range(3)]  # one batch of three rows
        b = setup.submit("b", 3)
    for ticket in [*a, b]:
        list(ticket.events())
    first_b = setup.log.index("b")
    assert setup.log[first_b : first_b + 6] == ["b", "a", "b", "a", "b", "a"]  # no one starves
    assert setup.log.count("a") <= 7  # the three a rows shared their rounds (one batch)
    setup.scheduler.stop()


def test_a_request_its_lane_refuses_gets_the_lanes_message() -> None:
    setup = Setup(rows=2, queue=2)
    bad = setup.submit("a", 0)
    with pytest.raises(ValueError, match="at least one round"):
        list(bad.events())
    good = setup.submit("a", 2)
    assert list(good.events()) == ["a", "a"]  # the scheduler goes on
    setup.scheduler.stop()


def test_admission_defaults_and_checks() -> None:
    assert Admission.of(rows=3) == Admission(rows=3, queue=12, batch=True)
    with pytest.raises(ValueError, match="rows >= 1"):
        Admission(rows=0, queue=1)


def test_a_step_waiting_for_the_turn_gets_it_between_rounds() -> None:
    """The turn lock is not fair: the thread steps aside after each round, so a Step or a race
    (which take the same lock for their own decode) is not starved by a busy scheduler."""
    setup = Setup(rows=1, queue=1)
    busy = setup.submit("a", 10**6)
    wait_for(lambda: len(setup.log) >= 3)
    for _ in range(5):
        assert setup.turn.acquire(timeout=2.0)
        rounds = len(setup.log)
        time.sleep(0.01)
        assert len(setup.log) == rounds  # no round runs while the Step holds the turn
        setup.turn.release()
    busy.cancel()
    setup.scheduler.stop()
