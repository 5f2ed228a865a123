"""Shared helpers for the training steps: paths, logging, model loading."""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from specviz.models.bundled import cache_dir, ensure_bundled_target

LOG = logging.getLogger("specviz.train")


def hours(value: str) -> float:
    """A duration in hours (a command-line value) in seconds."""
    return float(value) * 3600.0


def work_dir() -> Path:
    """Root of all training state: ``cache_dir()/train`` (override with SPECVIZ_TRAIN_DIR)."""
    override = os.environ.get("SPECVIZ_TRAIN_DIR")
    path = Path(override).expanduser() if override else cache_dir() / "train"
    path.mkdir(parents=True, exist_ok=True)
    return path


def setup_logging(name: str) -> None:
    """Log to stderr and to ``work_dir()/logs/<name>.log``."""
    logs = work_dir() / "logs"
    logs.mkdir(exist_ok=True)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    root = logging.getLogger("specviz")
    root.setLevel(logging.INFO)
    for handler in (logging.StreamHandler(), logging.FileHandler(logs / f"{name}.log")):
        handler.setFormatter(fmt)
        root.addHandler(handler)


def load_target(threads: int | None = None) -> tuple[Any, Any]:
    """Load the bundled target (fp32, eval mode) and its tokenizer."""
    if threads:
        torch.set_num_threads(threads)
    folder = ensure_bundled_target(lambda m: LOG.info("%s", m))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model: Any = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    return model.eval(), tokenizer


def load_tokenizer() -> Any:
    """The target's tokenizer."""
    return AutoTokenizer.from_pretrained(ensure_bundled_target(lambda m: LOG.info("%s", m)))


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to ``path`` via a temp file + rename."""
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def save_atomic(obj: Any, path: Path) -> None:
    """torch.save ``obj`` to ``path`` via a temp file + rename."""
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    torch.save(obj, tmp)
    os.replace(tmp, path)


class Deadline:
    """Wall-clock budget: ``Deadline(seconds).passed()`` is True once it is spent (None: never)."""

    def __init__(self, seconds: float | None) -> None:
        self.end = None if seconds is None else time.monotonic() + seconds

    def passed(self) -> bool:
        """Whether the budget is spent."""
        return self.end is not None and time.monotonic() >= self.end


def claim_path(path: Path) -> Path:
    """The file a process creates while it builds path (build_once)."""
    return path.with_name(path.name + ".claim")


def _claim(claim: Path) -> bool:
    """Create claim (exclusively), naming this host and process; whether it was free."""
    try:
        fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(f"{socket.gethostname()} {os.getpid()}")
    return True


def _abandoned(claim: Path, stale_s: float) -> bool:
    """Whether claim's builder is gone: a process of this host that no longer runs (killed
    before it could remove its claim), or a claim older than stale_s (another host's)."""
    if time.time() - claim.stat().st_mtime > stale_s:
        return True
    host, _, pid = claim.read_text(encoding="utf-8").partition(" ")
    if host != socket.gethostname() or not pid.isdigit():
        return False  # another host's, or still being written: only its age tells
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    return False


def build_once(
    path: Path, build: Callable[[], None], *, poll_s: float = 1.0, stale_s: float = 900.0
) -> bool:
    """Make path with build() unless another process is making it: processes that share a work
    dir (heads train --rescore and heads ahead) claim a file by creating ``path.claim`` first, and
    one that finds the claim taken waits for path instead. A claim whose process died (same
    host) or older than stale_s is taken over. Whether this call built path."""
    claim = claim_path(path)
    while not path.is_file():
        if not _claim(claim):
            try:
                abandoned = _abandoned(claim, stale_s)
            except FileNotFoundError:
                continue  # released just now: look again
            if abandoned:
                claim.unlink(missing_ok=True)
            else:
                time.sleep(poll_s)
            continue
        try:
            if not path.is_file():  # made between the look and the claim
                build()
                return True
        finally:
            claim.unlink(missing_ok=True)
    return False
