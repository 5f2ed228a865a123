"""What the entry points share: torch's intra-op CPU threads, applied once, help text, and
the machine they run on (its CPU and GPU, as a result records them).

torch starts with one intra-op thread per core and makes every operator wait for all of them.
When another process holds one of those cores, each operator waits for a thread that is not
running, and decoding a small model slows down many times over; one thread has no one to wait
for. So the `specviz` commands run on one thread unless told otherwise: `--threads N`, or
OMP_NUM_THREADS for every run (default_threads); an application calls set_threads at its start.

Nothing here runs at import time, and the library never calls it: a program that embeds specviz
keeps its own thread settings.
"""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path

import torch

DEFAULT_THREADS = 1  # the entry points' torch intra-op threads where OMP_NUM_THREADS is unset


def check_threads(n: object) -> int:
    """n as a thread count: an int >= 1, else ValueError saying what to give."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"threads must be an integer >= 1 (got {n!r})")
    return n


def default_threads() -> int:
    """OMP_NUM_THREADS where it is set to an integer >= 1, else DEFAULT_THREADS."""
    try:
        return check_threads(int(os.environ.get("OMP_NUM_THREADS", "")))
    except ValueError:
        return DEFAULT_THREADS


def set_threads(n: int | None = None) -> int:
    """Run torch's CPU operators on n intra-op threads (None: default_threads()); returns them.

    Raises ValueError for anything but an integer >= 1. Call it once, at a program's start
    (`specviz generate`, `verify` and `bench` do); it changes the whole process.
    """
    threads = default_threads() if n is None else check_threads(n)
    torch.set_num_threads(threads)
    return threads


def threads_type(text: str) -> int:
    """argparse type of --threads: an integer >= 1."""
    try:
        return check_threads(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be an integer >= 1 (got {text!r}): the number of CPU threads torch uses"
        ) from None


def add_threads_argument(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    """The --threads option of an entry point (applied with set_threads); default: what its
    help names as the default (None: OMP_NUM_THREADS where set, else DEFAULT_THREADS)."""
    default = default or f"OMP_NUM_THREADS where set, else {DEFAULT_THREADS}"
    parser.add_argument(
        "--threads",
        type=threads_type,
        metavar="N",
        help=f"CPU threads for torch's operators (default: {default}); more than 1 is faster "
        "only on cores no other process is using",
    )


def utf8_text(text: str, where: str, *, instead: str = "") -> str:
    """text, unless it holds bytes that were not UTF-8 (Python keeps a command line's as lone
    surrogates): then ValueError naming `where` and saying what to change (`instead`: another
    way to give the text)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        char = text[err.start]
        byte = f"byte 0x{ord(char) - 0xDC00:02x}" if 0xDC80 <= ord(char) <= 0xDCFF else repr(char)
        raise ValueError(
            f"{where} is not valid UTF-8 ({byte} at character {err.start + 1}): type it in a "
            f"UTF-8 terminal or locale (e.g. LANG=C.UTF-8){instead}"
        ) from None
    return text


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """--help with each option's default after its help, where it has one worth showing (not
    for on/off flags, options without a default, or help that already says its default)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        unshown = action.default is None or action.default is False
        if unshown or action.default == argparse.SUPPRESS or "default" in text.lower():
            return text
        return super()._get_help_string(action)


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (Linux), else platform.processor()."""
    info = Path("/proc/cpuinfo")
    if info.is_file():
        for line in info.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def gpu_meta(device: str) -> dict[str, str]:
    """The GPU's name and the CUDA version torch was built with, on a CUDA device ({} else)."""
    if not device.startswith("cuda"):
        return {}
    return {"gpu": torch.cuda.get_device_name(device), "cuda": str(torch.version.cuda)}
