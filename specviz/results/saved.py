"""The saved results in a folder, and which of them has the most to show (the app opens it)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specviz.results.schema import read_result


def saved_results(folder: Path) -> list[str]:
    """The paths of the JSON files in folder, sorted (none when folder is not a folder)."""
    return sorted(str(p) for p in folder.glob("*.json")) if folder.is_dir() else []


def informativeness(path: str | Path) -> tuple[int, int, int]:
    """How much a saved result has to show: points on γ curves of two γ or more, settings,
    records ((-1, -1, -1) for a file that is not a result)."""
    try:
        result = read_result(path)
    except ValueError:
        return -1, -1, -1
    curves = [c for c in result["gamma_curves"] if len(c["gammas"]) >= 2]
    points = sum(len(c["gammas"]) for c in curves)
    return points, len(result["summary"]), len(result["records"])


def most_informative(paths: Sequence[str]) -> str | None:
    """The saved result with the most to show (the first of equals), None for none."""
    return max(paths, key=informativeness, default=None)
