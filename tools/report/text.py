"""How the documents' tables write numbers, and which summary row they pick.

A *spread* is a statistic's {"median", "low", "high"} over a setting's requests; a *summary
row* is one setting's statistics on one workload (see tools.report.saved).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def times(value: float) -> str:
    """A speedup: '1.59×'."""
    return f"{value:.2f}×"


def temp(value: float) -> str:
    """A temperature, as short as it reads: '0', '0.5'."""
    return f"{value:g}"


def alpha_text(value: float) -> str:
    """An α from theory.alpha_to_match: nan means no α below 1 reaches the goal."""
    return "out of reach" if math.isnan(value) else f"{value:.2f}"


def bold_spread(s: dict[str, float]) -> str:
    """A spread as '**median×** (min–max)'."""
    return f"**{times(s['median'])}** ({s['low']:.2f}–{s['high']:.2f})"


def share(values: Sequence[float]) -> str:
    """A share of requests, or its range; – where it means nothing (T > 0)."""
    if not values:
        return "–"
    low, high = min(values), max(values)
    return f"{low:.0%}" if low == high else f"{low:.0%}–{high:.0%}"


def best(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The summary row with the highest median speedup."""
    return max(rows, key=lambda r: r["speedup"]["median"])
