"""The scheduler's lanes (specviz.app.scheduler): a shared batch, or one request on its own.

A BatchLane decodes every batched request on one target (any batched drafter, any fixed γ)
through one continuous BatchSpeculativeDecoder: a request joins at the next round boundary and
leaves when it ends, each row drafted by its own drafter (specviz.batch.routed) and drawing
with its own sampling settings and seed, so its law is the one it has decoded alone
(specviz.batch.decoding). A SoloLane runs the one
request of a drafter that has no batched form (heads, trees, a γ policy, ...)
through its single-request event stream, a round per turn. Both hand each event to the
request's own ticket as row 0: every request sees a decode of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from specviz.app.scheduler import Ticket
from specviz.app.views.run import STEP_ENDS
from specviz.batch.cache import BatchCache
from specviz.batch.decoding import BatchSpeculativeDecoder
from specviz.batch.drafters import BatchDrafter, build_batch_drafter
from specviz.batch.routed import RoutedDrafter
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.events import Event, Finished
from specviz.drafters.names import MEMORY_DRAFTERS
from specviz.drafters.options import DrafterOptions


@dataclass(frozen=True, kw_only=True)
class RowRequest:
    """A request for a batch lane: its prompt's ids, sampling settings, budget and γ, and the
    batched drafter that drafts it with its draft model (None for lookup) and that model's
    name, built with options (a suffix drafter's memory among them)."""

    ids: list[int]
    sampling: SamplingConfig
    max_new_tokens: int
    gamma: int
    drafter: str
    draft: Any
    draft_name: str | None
    options: DrafterOptions

    @property
    def route(self) -> str:
        """The key of its drafter in the lane's RoutedDrafter: the drafter, its draft, and the
        memory it reads (after the memory is cleared, rows read the new one)."""
        route = f"{self.drafter} with {self.draft_name}"
        if self.drafter in MEMORY_DRAFTERS:
            route += f" reading memory {id(self.options.memory)}"
        return route


class BatchLane:
    """Every batched request on one target in one continuous decoder: rows of any batched
    drafter and any γ share the target's pass (specviz.batch.routed)."""

    def __init__(
        self,
        target: Any,
        stop_ids: frozenset[int],
        cache: BatchCache,
        gamma_cap: Callable[[int], int] | None = None,
    ) -> None:
        """A lane for target's requests; stop_ids end a row; cache: the target's empty batch
        cache (specviz.batch.cache); gamma_cap(B): the most a row drafts while B rows decode
        (specviz.batch.gamma; None: its request's γ)."""
        self.target = target
        self.routes: dict[str, RowRequest] = {}  # a request of each route: its drafter's maker
        self.decoder = BatchSpeculativeDecoder(
            target,
            RoutedDrafter(self._drafter),
            [],
            sampling=SamplingConfig(),
            speculation=SpeculationConfig(),
            stop_ids=stop_ids,
            cache=cache,
            gamma_cap=gamma_cap,
        )
        self.tickets: dict[int, Ticket] = {}  # each row's

    def _drafter(self, route: str) -> BatchDrafter:
        """The batch drafter of a route, built when its first row joins."""
        r = self.routes[route]
        return build_batch_drafter(r.drafter, target=self.target, draft=r.draft, options=r.options)

    @property
    def rows(self) -> int:
        """Requests in the batch or joining it."""
        return self.decoder.rows

    def admit(self, ticket: Ticket) -> None:
        """The ticket's RowRequest joins at the next round."""
        request: RowRequest = ticket.job.request
        self.routes.setdefault(request.route, request)
        row = self.decoder.join(
            request.ids,
            sampling=request.sampling,
            max_new_tokens=request.max_new_tokens,
            seed=request.sampling.seed,
            gamma=request.gamma,
            drafter=request.route,
        )
        self.tickets[row] = ticket

    def advance(self) -> None:
        """One round of the batch; each event to its row's ticket, a finished row's closed."""
        for event in self.decoder.advance():
            ticket = self.tickets.get(event.row)
            if ticket is None:
                continue
            ticket.put(dataclasses.replace(event, row=0))  # row 0: a decode of its own
            if isinstance(event, Finished):
                ticket.end()
                del self.tickets[event.row]

    def drop(self, ticket: Ticket) -> None:
        """The ticket's row leaves at the next round."""
        for row, held in list(self.tickets.items()):
            if held is ticket:
                self.decoder.leave(row)
                del self.tickets[row]


class SoloLane:
    """One request decoded alone through its event stream, one round per turn."""

    def __init__(self, start: Callable[[], Iterator[Event]]) -> None:
        """start(): the request's lazy event stream, made when the lane takes the request."""
        self.start = start
        self.stream: Iterator[Event] | None = None
        self.ticket: Ticket | None = None

    @property
    def rows(self) -> int:
        """1 while its request decodes, then 0."""
        return 0 if self.ticket is None else 1

    def admit(self, ticket: Ticket) -> None:
        """The lane's one request starts (its drafter built, its settings checked)."""
        self.stream, self.ticket = self.start(), ticket

    def advance(self) -> None:
        """The stream's events through the next round (or plain token, or finish)."""
        if self.stream is None or self.ticket is None:
            return
        for event in self.stream:
            self.ticket.put(event)
            if isinstance(event, STEP_ENDS) and not isinstance(event, Finished):
                return
        self.ticket.end()
        self._close()

    def drop(self, ticket: Ticket) -> None:
        """Stop decoding: the stream is closed, its caches freed."""
        self._close()

    def _close(self) -> None:
        close = getattr(self.stream, "close", None)
        if close is not None:
            close()
        self.stream, self.ticket = None, None
