"""Progress output for the command-line tools (stderr only; the library itself never prints)."""

from __future__ import annotations

import sys


def say(message: str) -> None:
    """One line of progress text on stderr."""
    print(message, file=sys.stderr)


def progress_bar(done: int, total: int, label: str) -> None:
    """Redraw a one-line progress bar on stderr; ends the line when done == total."""
    filled = int(30 * done / max(total, 1))
    bar = f"[{'#' * filled}{'.' * (30 - filled)}] {done}/{total} {label[:50]:<50}"
    print(f"\r{bar}", end="\n" if done == total else "", file=sys.stderr)
