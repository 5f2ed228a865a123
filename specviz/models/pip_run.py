"""Running `pip download` in a subprocess and reading how far it has come from its output.

pip (24.1 and later, with --progress-bar=raw) prints 'Progress N of M' lines while it downloads;
an older pip prints only the file's size. run_pip turns what pip says into short reports and
remembers what really happened: how many bytes pip said it had received, and whether the file
came from pip's own cache (nothing downloaded). fetched() says that once the file is there.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

PIP_PROGRESS = re.compile(r"^Progress (\d+) of (\d+)$")  # pip's --progress-bar raw lines
PIP_SIZE = re.compile(r"^\s*Downloading \S+ \(([\d.]+) ([kMG]?B)\)")
PIP_CACHED = re.compile(r"^\s*Using cached \S+")
UNITS = {"B": 1e-6, "kB": 1e-3, "MB": 1.0, "GB": 1e3}


@dataclass(frozen=True, kw_only=True)
class PipRun:
    """What one pip run did: its exit status and stderr, the bytes its progress lines last
    said it had received (None: it printed none), and whether it took the file from its cache."""

    status: int
    errors: str
    received: int | None = None
    cached: bool = False


def mb(count: float) -> str:
    """Bytes as megabytes with one decimal: '92.9'."""
    return f"{count / 1e6:.1f}"


def run_pip(command: list[str], report: Callable[[str], None]) -> PipRun:
    """Run a pip command, reporting as its lines come: '92.9 MB to download' when pip names
    the file's size, 'N of M MB at R MB/s' for each progress line, 'in pip's cache' when pip
    takes the file from there; return what it did."""
    start = time.monotonic()
    received: int | None = None
    cached = False
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errors:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=errors, text=True, bufsize=1
        )
        stdout: IO[str] | None = process.stdout
        assert stdout is not None
        total_mb: float | None = None
        for line in stdout:
            line = line.rstrip()
            if (size := PIP_SIZE.match(line)) is not None:
                total_mb = float(size.group(1)) * UNITS[size.group(2)]
                report(f"{total_mb:.1f} MB to download")
            elif (bar := PIP_PROGRESS.match(line)) is not None:
                received, total = int(bar.group(1)), int(bar.group(2))
                rate = received / 1e6 / max(time.monotonic() - start, 1e-3)
                whole = mb(total) if total else f"{total_mb:.1f}" if total_mb else "?"
                report(f"{mb(received)} of {whole} MB at {rate:.1f} MB/s")
            elif PIP_CACHED.match(line):
                cached = True
                report("found in pip's cache")
        status = process.wait()
        errors.seek(0)
        return PipRun(status=status, errors=errors.read(), received=received, cached=cached)


def fetched(run: PipRun, wheel: Path) -> str:
    """What fetching wheel took, as the stage's last word: the megabytes downloaded (the file's
    size on disk), or that pip had it in its cache and downloaded nothing."""
    size = mb(wheel.stat().st_size)
    if run.cached:
        return f"already in pip's cache ({size} MB), nothing downloaded"
    return f"{size} MB downloaded"
