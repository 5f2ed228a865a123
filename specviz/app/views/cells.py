"""Token cells: one per emitted or rejected token, flattened from an event log for display."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from specviz.core.events import (
    Accepted,
    Bonus,
    Event,
    Rejected,
    Resampled,
    Sampled,
    TreeProposed,
)

Decode = Callable[[int], str]  # token id -> its text
OUTCOMES = ("accepted", "rejected", "resampled", "bonus", "sampled")


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One token as shown in the stream: its outcome and the numbers behind the verdict."""

    index: int
    kind: str
    round: int | None
    position: int
    in_round: int | None
    token: int
    text: str
    p_x: float
    q_x: float | None = None
    u: float | None = None
    accept_prob: float | None = None
    residual_x: float | None = None
    residual_mass: float | None = None
    top: tuple[tuple[int, float, float, float], ...] = ()
    node: int | None = None  # a tree round's verdict: the node it judged (else None)
    tree: bool = False  # decided in a tree round (siblings can share a position)

    @property
    def emitted(self) -> bool:
        """True when the token is part of the output (everything but a rejected draft)."""
        return self.kind != "rejected"


def cells_from_events(events: Iterable[Event], decode: Decode) -> list[Cell]:
    """Every accepted, rejected, resampled, bonus and sampled token, in the order they happened
    (a tree round's verdicts in its walk order: several rejected siblings may share a position)."""
    cells: list[Cell] = []
    round_start: dict[int, int] = {}
    trees: set[int] = set()  # the rounds that proposed a tree
    for event in events:
        if isinstance(event, TreeProposed):
            trees.add(event.round)
        elif isinstance(event, Sampled):
            cells.append(_sampled(len(cells), event, decode))
        elif isinstance(event, Accepted | Rejected | Resampled | Bonus):
            start = round_start.setdefault(event.round, event.position)
            cell = _speculative(len(cells), event, event.position - start, decode)
            if event.round in trees:
                node = event.draft_index if isinstance(event, Accepted | Rejected) else None
                cell = replace(cell, tree=True, node=node)
            cells.append(cell)
    return cells


def _sampled(index: int, event: Sampled, decode: Decode) -> Cell:
    """A plain-decoding token."""
    return Cell(
        index=index,
        kind="sampled",
        round=None,
        position=event.position,
        in_round=None,
        token=event.token,
        text=decode(event.token),
        p_x=event.p_x,
    )


def _speculative(
    index: int, event: Accepted | Rejected | Resampled | Bonus, in_round: int, decode: Decode
) -> Cell:
    """A token decided inside a speculative round."""
    q_x = u = accept_prob = residual_x = residual_mass = None
    top: tuple[tuple[int, float, float, float], ...] = ()
    if isinstance(event, Accepted | Rejected):
        q_x, u, accept_prob = event.q_x, event.u, event.accept_prob
    elif isinstance(event, Resampled):
        q_x, residual_x, residual_mass, top = (
            event.q_x,
            event.residual_x,
            event.residual_mass,
            event.top,
        )
    return Cell(
        index=index,
        kind=event.kind,
        round=event.round,
        position=event.position,
        in_round=in_round,
        token=event.token,
        text=decode(event.token),
        p_x=event.p_x,
        q_x=q_x,
        u=u,
        accept_prob=accept_prob,
        residual_x=residual_x,
        residual_mass=residual_mass,
        top=top,
    )


def emitted_text(cells: Sequence[Cell]) -> str:
    """The generated text: the emitted cells' text joined."""
    return "".join(c.text for c in cells if c.emitted)
