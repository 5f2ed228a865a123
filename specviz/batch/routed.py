"""One batch, many drafters: each row drafted by the batch drafter its request named.

A server's requests name different drafters (the draft model, its trimmed head, n-gram lookup,
lookup first) and different γ, yet all score their drafts with the same target. RoutedDrafter
lets them share the target's pass: it keeps one batch drafter per name (made when a row first
names it, dropped when its last row leaves), hands each its own rows, and puts the drafts back
in the batch's order. A row draws from its own generator exactly what it draws in a batch of
its drafter alone, so its law does not depend on its neighbours.

    drafter = RoutedDrafter(lambda name: build_batch_drafter(name, target=t, draft=d))
    decoder.join(prompt, sampling=s, max_new_tokens=64, seed=1, drafter="ngram", gamma=4)
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

import torch

from specviz.batch.drafters import BatchDrafter, ExplainsRows, Joining, RemembersRows
from specviz.core.drafter import Draft
from specviz.core.events import DrafterRound


class RoutedDrafter:
    """The batch's rows, each drafted by the batch drafter of its Joining.drafter name."""

    def __init__(self, make: Callable[[str], BatchDrafter]) -> None:
        """make(name): a fresh batch drafter for the rows that name it."""
        self.make = make
        self.parts: dict[str, BatchDrafter] = {}
        self.names: list[str] = []  # each row's drafter, in the batch's order

    def _rows(self, name: str) -> list[int]:
        """The batch rows drafted by name's drafter, in order (its own rows 0, 1, ...)."""
        return [i for i, n in enumerate(self.names) if n == name]

    def join(self, rows: Sequence[Joining]) -> None:
        """Each new row joins its drafter (made on first use)."""
        for row in rows:
            if row.drafter not in self.parts:
                self.parts[row.drafter] = self.make(row.drafter)
            self.parts[row.drafter].join([row])
            self.names.append(row.drafter)

    def propose(
        self,
        ids: Sequence[list[int]],
        gammas: Sequence[int],
        generators: Sequence[torch.Generator],
        stop_ids: Collection[int],
    ) -> list[Draft]:
        """Each drafter proposes for its rows; the drafts in the batch's order."""
        drafts: list[Draft | None] = [None] * len(self.names)
        for name, part in self.parts.items():
            rows = self._rows(name)
            mine = part.propose(
                [ids[i] for i in rows],
                [gammas[i] for i in rows],
                [generators[i] for i in rows],
                stop_ids,
            )
            for i, draft in zip(rows, mine, strict=True):
                drafts[i] = draft
        return [d for d in drafts if d is not None]  # every row's: each row has its drafter

    def rollback(self, committed: Sequence[int]) -> None:
        """Each drafter rolls its rows back."""
        for name, part in self.parts.items():
            part.rollback([committed[i] for i in self._rows(name)])

    def _part_of(self, row: int) -> tuple[BatchDrafter, int]:
        """The drafter of row and row's index among its rows."""
        name = self.names[row]
        return self.parts[name], self._rows(name).index(row)

    def explain_row(self, row: int, round_index: int) -> DrafterRound | None:
        """What row's drafter says of its proposal (None where it does not explain)."""
        part, mine = self._part_of(row)
        return part.explain_row(mine, round_index) if isinstance(part, ExplainsRows) else None

    def remember_row(self, row: int, ids: list[int], prompt_len: int) -> None:
        """Row's drafter learns from its finished request, if it learns."""
        part, mine = self._part_of(row)
        if isinstance(part, RemembersRows):
            part.remember_row(mine, ids, prompt_len)

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only these rows, in this order; a drafter left with none is let go."""
        kept = [self.names[r] for r in rows]
        for name in list(self.parts):
            position = {row: k for k, row in enumerate(self._rows(name))}
            mine = [position[r] for r in rows if self.names[r] == name]
            if mine:
                self.parts[name].keep_rows(mine)
            else:
                del self.parts[name]
        self.names = kept
