"""How many tokens a row drafts when B rows share a batch: the batch sweep's best γ for B.

A batched target pass scores B (γ + 1) tokens. While that is few, the pass costs about what
one token costs and drafting more is nearly free; once the pass is bound by its tokens (many
rows), every rejected draft token costs as much as a kept one, and a smaller γ serves more
tokens a second (benchmarks/RESULTS.md, "Batch size"). GammaByRows caps each row's γ at the
best γ the batch sweep measured at the largest batch size not above the rows decoding. A row
never drafts more than its own request's γ. The cap depends only on how many rows decode, not
on what any row draws, so every row stays exact (a γ chosen before a round's draws keeps the
output law the target's, as the dynamic γ policies do).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

GammaTable = tuple[tuple[int, int], ...]  # (batch size, best γ), by increasing size


@dataclass(frozen=True)
class GammaByRows:
    """The most draft tokens a row drafts a round when `rows` rows decode together."""

    table: GammaTable

    def __post_init__(self) -> None:
        sizes = [size for size, _ in self.table]
        if not sizes or sizes != sorted(set(sizes)) or sizes[0] != 1:
            raise ValueError(f"a γ table needs increasing batch sizes from 1 (got {self.table})")
        if any(gamma < 1 for _, gamma in self.table):
            raise ValueError(f"a γ table's γ are at least 1 (got {self.table})")

    def __call__(self, rows: int) -> int:
        """The best γ at the largest measured batch size <= rows."""
        return next(gamma for size, gamma in reversed(self.table) if size <= max(rows, 1))


def best_gammas(best: Sequence[dict[str, Any]]) -> GammaTable:
    """The table of a batch sweep's best entries at one temperature (batch_size, gamma)."""
    return tuple(sorted((int(b["batch_size"]), int(b["gamma"])) for b in best))
