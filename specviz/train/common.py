"""Shared helpers for the training steps: paths, logging, model loading, resumable shards, and
the optimiser's side of every training loop (the learning-rate schedule and one step)."""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from specviz.models.bundled import cache_dir, ensure_bundled_target

LOG = logging.getLogger("specviz.train")


def hours(value: str) -> float:
    """A duration in hours (a command-line value) in seconds."""
    return float(value) * 3600.0


def work_dir(sub: str = "") -> Path:
    """Root of all training state: ``cache_dir()/train`` (override with SPECVIZ_TRAIN_DIR), or
    its folder sub; made if missing."""
    override = os.environ.get("SPECVIZ_TRAIN_DIR")
    path = (Path(override).expanduser() if override else cache_dir() / "train") / sub
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


def fill_shards(
    jobs: Iterable[int],
    path_of: Callable[[int], Path],
    make: Callable[[int], dict[str, Any]],
    seconds: float | None,
    log: logging.Logger,
) -> Iterator[tuple[int, dict[str, Any], float]]:
    """Make and save (save_atomic) each job's shard that is not at path_of(index) yet, until
    seconds are spent (None: no limit); yields each made shard's index, the shard and the
    seconds it took, saving included."""
    deadline = Deadline(seconds)
    for index in jobs:
        path = path_of(index)
        if path.exists():
            continue
        if deadline.passed():
            log.info("time budget spent; stopping before job %d", index)
            break
        began = time.perf_counter()
        shard = make(index)
        save_atomic(shard, path)
        yield index, shard, time.perf_counter() - began


def fresh_shards(folder: Path, pattern: str, seen: Collection[str]) -> list[tuple[str, bool, Any]]:
    """The shard files of folder matching pattern (NAME_INDEX.pt) whose names are not in seen,
    in name order: each one's name, whether it is held out for validation (index % 20 == 1),
    and its contents."""
    fresh = [p for p in sorted(folder.glob(pattern)) if p.name not in seen]
    return [
        (p.name, int(p.stem.split("_")[1]) % 20 == 1, torch.load(p, weights_only=False))
        for p in fresh
    ]


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


class Schedule(Protocol):
    """A training config's schedule: peak rate, warm-up steps, steps to the end of decay."""

    @property
    def lr(self) -> float: ...

    @property
    def warmup(self) -> int: ...

    @property
    def total_steps(self) -> int: ...


def learning_rate(cfg: Schedule, step: int) -> float:
    """Linear warm-up, then cosine decay to 10 % at total_steps."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    frac = min(1.0, (step - cfg.warmup) / max(1, cfg.total_steps - cfg.warmup))
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def descend(
    optimizer: torch.optim.Optimizer,
    loss: torch.Tensor,
    parameters: Iterable[torch.nn.Parameter],
    lr: float,
    clip: float = 1.0,
) -> None:
    """One optimiser step down loss's gradient at rate lr, its norm clipped to clip."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)
    loss.backward()  # type: ignore[no-untyped-call]
    torch.nn.utils.clip_grad_norm_(parameters, clip)
    optimizer.step()
