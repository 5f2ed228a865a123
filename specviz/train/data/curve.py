"""A head's held-out learning curve (a training run's curve.jsonl) and the rule that stops it.

Rows: one a held-out evaluation, as the trainer appends them (specviz.train.heads.eagle): the step,
``positions`` trained (weighted positions of the batches so far), ``hours`` of training, the
``loss`` trained at that step, ``eval_positions`` (the size of the held-out set it read) and
``alpha_1`` … ``alpha_5``, the mean over held-out answer positions of Σ_x min(p, q_d): the chance
that the d-th drafted token is kept when the ones before it were the target's.

Only rows read on the same held-out set compare: the curve of a run is its rows with the last
row's ``eval_positions``.

The stop rule: training has flattened when α₁ gains less than ``min_gain`` over three
evaluations each at least ``apart_hours`` of training after the one before, the last of them the
newest. The three are the newest row, the newest row at least ``apart_hours`` before it, and the
newest at least ``apart_hours`` before that; the gain is the better α₁ of the later two less the
first's (a noisy rise counts as a rise).

The trend beside it: α₁'s gain per doubling of the positions trained, the least-squares slope of
α₁ against log₂(positions) over the comparable rows of the last doubling (positions at least
half the newest's). An hour of training holds a shrinking share of a doubling as a run grows,
so the rule can read flat on a curve that still climbs at this rate on a log axis.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEPTHS = 5  # alpha_1 ... alpha_5


@dataclass(frozen=True, kw_only=True)
class Plateau:
    """The stop rule read on a curve: the three evaluations, α₁'s gain over them, the verdict."""

    rows: tuple[dict[str, Any], ...]
    gain: float
    flat: bool


def read_curve(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a curve.jsonl, in order (ValueError naming the line for a bad one)."""
    rows = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{n} is not JSON: {err}") from None
        missing = [
            k for k in ("step", "positions", "hours", "eval_positions", "alpha_1") if k not in row
        ]
        if missing:
            raise ValueError(f"{path}:{n} lacks {', '.join(missing)}: not a curve.jsonl row")
        rows.append(row)
    return rows


def comparable(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows read on the newest row's held-out set, in order ([] for none)."""
    if not rows:
        return []
    held_out = rows[-1]["eval_positions"]
    return [r for r in rows if r["eval_positions"] == held_out]


def plateau(
    rows: Sequence[dict[str, Any]], *, min_gain: float = 0.01, apart_hours: float = 1.0
) -> Plateau | None:
    """The stop rule on the comparable rows (None while three evaluations that far apart are
    not there yet)."""
    curve = comparable(rows)
    picked: list[dict[str, Any]] = []
    for row in reversed(curve):
        if not picked or row["hours"] <= picked[-1]["hours"] - apart_hours:
            picked.append(row)
        if len(picked) == 3:
            break
    if len(picked) < 3:
        return None
    first, *later = reversed(picked)
    gain = max(r["alpha_1"] for r in later) - first["alpha_1"]
    return Plateau(rows=(first, *later), gain=gain, flat=gain < min_gain)


def per_doubling(rows: Sequence[dict[str, Any]]) -> float | None:
    """α₁'s least-squares gain per doubling of positions over the last doubling's comparable
    rows (None with fewer than three of them)."""
    curve = comparable(rows)
    if not curve:
        return None
    last = [r for r in curve if 2 * r["positions"] >= curve[-1]["positions"]]
    if len(last) < 3:
        return None
    xs = [math.log2(r["positions"]) for r in last]
    ys = [float(r["alpha_1"]) for r in last]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mx) ** 2 for x in xs)
    if spread == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / spread
