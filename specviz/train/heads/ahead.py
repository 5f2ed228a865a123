"""Rebuilding a training run's features ahead of it, on another core, in the order it reads them.

On a machine without the features, `heads train --rescore` rebuilds each shard's when it first reads
it: one teacher-forced pass of the target per shard, which costs the run about as much time as
its training steps on that shard. `heads ahead` runs beside it and rebuilds them first.

The run's order is known ahead: a RegenStream draws its groups from its own generator, and a
group's draws depend only on its shards' sequence lengths (specviz.train.data.stream). So a
*dry* stream that reads only the token ids follows the same groups. Started from the stream state
in the run's latest checkpoint (or from a fresh stream when the run has none yet), it names the
shards the run will read next, group by group. Of the first group with shards lacking features,
the last one that no process is building is rebuilt (specviz.train.common.build_once: a process
claims the shard it rebuilds); the run rebuilds what its group still lacks first to last, passing
over claimed shards, so the two meet in the middle. The order is read again from the checkpoint
after each shard, so the rebuilding keeps ahead of the run.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from specviz.train.common import Deadline, claim_path, load_target
from specviz.train.data.regen import rescorer
from specviz.train.data.shards import feats_path, ids_path, read_ids
from specviz.train.data.stream import RegenStream, StreamConfig
from specviz.train.heads.eagle import EagleConfig

LOG = logging.getLogger(__name__)


class _DryStream(RegenStream):
    """A RegenStream that loads only its shards' token ids (all its plans need)."""

    def _load(self, group: list[int]) -> None:
        """The group's sequences as their tokens alone."""
        self.loaded = {
            i: [
                {"tokens": torch.tensor(t)}
                for t in read_ids(ids_path(self.cfg.ids_dir, i))["tokens"]
            ]
            for i in group
        }

    def next_group(self) -> list[int]:
        """Draw the next group, as the run will; its shards."""
        self._next_group()
        return self.group


def upcoming(cfg: StreamConfig, state: dict[str, Any] | None, groups: int) -> list[list[int]]:
    """The next `groups` groups a stream in `state` (None: a fresh one) reads, in order. With
    cfg.rescore set every shard with ids is ready, as for the run."""
    dry = _DryStream(cfg)
    if state is not None:
        dry.load_state_dict(state)
    return [list(dry.next_group()) for _ in range(groups)]


def pick(groups: list[list[int]], missing: set[int], feats_dir: Path) -> int | None:
    """The shard to rebuild next: the last one of `missing` (those without features) that no
    process is building, of the first group that has one (the run rebuilds its group's shards
    first to last, so the two meet in the middle); None when all of them are being built."""
    for group in groups:
        free = [
            i for i in group if i in missing and not claim_path(feats_path(feats_dir, i)).exists()
        ]
        if free:
            return free[-1]
    return None


def stream_state(ckpt: Path) -> dict[str, Any] | None:
    """The stream state saved in a heads train checkpoint (None when there is no checkpoint yet)."""
    if not ckpt.is_file():
        return None
    saved = torch.load(ckpt, weights_only=False, mmap=True)
    state: dict[str, Any] = saved["stream"]
    return state


def rescore_ahead(
    cfg: StreamConfig,
    ckpt: Path,
    rescore: Callable[[int], None],
    *,
    groups: int = 64,
    stop: Callable[[], bool] = lambda: False,
    poll_s: float = 5.0,
) -> list[int]:
    """Rebuild, one at a time, the shard `pick` names among those the run reads in its next
    `groups` groups (its order read again from ckpt each time), until none is missing or stop()
    says so; the shards rebuilt, in order."""
    cfg = dataclasses.replace(cfg, rescore=rescore)
    done: list[int] = []
    while not stop():
        began = time.perf_counter()
        ahead = upcoming(cfg, stream_state(ckpt), groups)
        missing = {i for g in ahead for i in g if not feats_path(cfg.feats_dir, i).is_file()}
        if not missing:
            LOG.info("the next %d groups' shards all have features", groups)
            break
        index = pick(ahead, missing, cfg.feats_dir)
        LOG.info(
            "order read in %.1f s; %d shards ahead lack features; next: %s",
            time.perf_counter() - began,
            len(missing),
            index,
        )
        if index is None:  # all of them being built elsewhere
            time.sleep(poll_s)
            continue
        rescore(index)
        done.append(index)
    return done


def run_rescore_ahead(
    *,
    ids: Path,
    feats: Path,
    run_dir: Path,
    batch_positions: int,
    groups: int,
    seconds: float | None,
    threads: int,
) -> list[int]:
    """The heads ahead step: rebuild the features heads train (batch_positions, its run_dir) reads
    next, for at most `seconds`; the shards rebuilt."""
    target, tokenizer = load_target(threads)
    cfg = EagleConfig(batch_positions=batch_positions).stream(feats, ids)
    rescore = rescorer(target, int(tokenizer.eos_token_id), ids, feats)
    deadline = Deadline(seconds)
    return rescore_ahead(cfg, run_dir / "ckpt.pt", rescore, groups=groups, stop=deadline.passed)
