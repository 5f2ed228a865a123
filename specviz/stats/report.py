"""Render suite results as a table or JSON (used by `specviz verify`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict

from specviz.stats.testing import TestResult

HEADER = ("setting: test", "N", "statistic", "df", "p (Holm)", "TV", "TV bound", "power", "verdict")


def rows(results: Sequence[TestResult]) -> list[tuple[str, ...]]:
    """One row of strings per test."""
    return [
        (
            r.name,
            str(r.n),
            f"{r.statistic:.2f}",
            str(r.df),
            f"{r.p_value:.3g}",
            f"{r.tv:.3f}",
            f"{r.tv_upper:.3f}",
            "-" if r.power != r.power else f"{r.power:.3f}",
            "REJECT" if r.reject else "ok",
        )
        for r in results
    ]


def table(results: Sequence[TestResult]) -> str:
    """A plain-text table with aligned columns."""
    body = [HEADER, *rows(results)]
    widths = [max(len(row[i]) for row in body) for i in range(len(HEADER))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def to_json(results: Sequence[TestResult], meta: dict[str, object]) -> str:
    """Results and run metadata as a JSON document."""
    return json.dumps(
        {**meta, "results": [asdict(r) | {"reject": r.reject} for r in results]}, indent=2
    )
