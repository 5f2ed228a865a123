"""The one Markdown table every result table renders through, and the cells they share.

A *spread* is a saved {"median", "low", "high"} (specviz.results.records.Spread as a dict); a
*column* is a header and the function that writes a row's cell under it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

Column = tuple[str, Callable[[Any], str]]
NONE = "–"  # the cell of a value that was not measured


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A GitHub Markdown table: its header, the rule under it, a line per row."""
    return _table(header, rows)


def column_table(columns: Sequence[Column], rows: Iterable[Any]) -> list[str]:
    """A GitHub Markdown table with one column per (header, cell), one line per row."""
    return _table([h for h, _ in columns], [[cell(r) for _, cell in columns] for r in rows])


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """The header, the rule under it, a line per row."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def spread_cell(s: dict[str, float] | None, fmt: str = ".2f") -> str:
    """'median (low–high)' of a spread (NONE for none)."""
    return NONE if s is None else f"{s['median']:{fmt}} ({s['low']:{fmt}}–{s['high']:{fmt}})"


def number_cell(value: float | None, fmt: str = ".2f", none: str = NONE) -> str:
    """The value in fmt (none for none)."""
    return none if value is None else format(value, fmt)
