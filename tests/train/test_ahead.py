"""Rescoring ahead of a training run: the dry stream names the groups the run reads, in its
order, from a fresh start and from a checkpoint's state; rescore_ahead rebuilds them in that
order, skips what has features and stops when told; and two processes never build one shard."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from specviz.train.common import build_once, claim_path
from specviz.train.data.regen import RegenConfig, rescorer
from specviz.train.data.stream import RegenStream, StreamConfig
from specviz.train.heads.ahead import rescore_ahead, stream_state, upcoming
from tests.conftest import EOS

from .test_eagle_training import _model, write_shards


def _groups_read(stream: RegenStream, groups: int) -> list[list[int]]:
    """The next `groups` groups the stream draws as it hands out batches."""
    out: list[list[int]] = []
    while len(out) < groups:
        before = (stream.epoch, list(stream.seen))
        stream.next_batch()
        if (stream.epoch, stream.seen) != before:
            out.append(list(stream.group))
    return out


def test_the_dry_stream_reads_the_runs_groups_fresh_and_from_a_state(tmp_path: Path) -> None:
    cfg = replace(write_shards(_model(), tmp_path, range(12)), group=3)
    real = RegenStream(cfg)
    first = _groups_read(real, 5)  # over an epoch's end: 11 training shards, 3 a group
    assert upcoming(cfg, None, 5) == first
    state = real.state_dict()
    later = _groups_read(real, 4)
    assert upcoming(cfg, state, 4) == later
    assert upcoming(cfg, state, 4) != upcoming(cfg, None, 4)  # the state matters


def test_rescore_ahead_rebuilds_in_the_runs_order_and_stops(tmp_path: Path) -> None:
    model = _model()
    (tmp_path / "made").mkdir()
    write_shards(model, tmp_path / "made", range(10))
    (tmp_path / "ids").mkdir()
    for path in (tmp_path / "made").glob("ids_*.json.gz"):
        (tmp_path / "ids" / path.name).write_bytes(path.read_bytes())
    bare = StreamConfig(feats_dir=tmp_path / "feats", ids_dir=tmp_path / "ids",
                        batch_positions=48, max_len=16, group=2)  # fmt: skip
    rebuild = rescorer(model, EOS, tmp_path / "ids", tmp_path / "feats", RegenConfig(topk=6))
    calls: list[int] = []

    def rescore(index: int) -> None:
        calls.append(index)
        rebuild(index)

    live = replace(bare, rescore=rescore)
    real = RegenStream(live)
    _groups_read(real, 1)  # the run has read its first group (its features built as it read)
    ckpt = tmp_path / "ckpt.pt"
    torch.save({"stream": real.state_dict(), "head": {}}, ckpt)
    assert stream_state(ckpt) is not None and stream_state(tmp_path / "none.pt") is None
    (a, b), (c, d) = upcoming(live, real.state_dict(), 2)
    calls.clear()
    taken = claim_path(tmp_path / "feats" / f"feats_{b:05d}.pt")
    taken.touch()  # another process is building b: passed over
    done = rescore_ahead(bare, ckpt, rescore, groups=2, stop=lambda: len(calls) >= 3)
    assert done == calls == [a, d, c]  # each group from its last shard, the first group first
    polls = iter(range(3))
    stop = lambda: next(polls, None) is None  # noqa: E731
    assert rescore_ahead(bare, ckpt, rescore, groups=2, stop=stop, poll_s=0.01) == []  # waits
    taken.unlink()
    assert rescore_ahead(bare, ckpt, rescore, groups=2) == [b]
    assert rescore_ahead(bare, ckpt, rescore, groups=2) == []  # nothing missing ahead
    assert sorted(p.name for p in (tmp_path / "feats").iterdir()) == sorted(
        f"feats_{i:05d}.pt" for i in {a, b, c, d, *real.group}
    )


def test_the_run_rebuilds_its_group_passing_over_shards_built_elsewhere(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A group's missing features are rebuilt first to last, but a shard another process has
    claimed comes last, and then the run waits for that process's file instead of rebuilding."""
    model = _model()
    made = write_shards(model, tmp_path, range(8))  # features in tmp_path, copied as "built"
    feats = tmp_path / "feats"
    feats.mkdir()
    rebuild = rescorer(model, EOS, tmp_path, feats, RegenConfig(topk=6))
    calls: list[int] = []

    def rescore(index: int) -> None:
        calls.append(index)
        rebuild(index)

    cfg = replace(made, feats_dir=feats, rescore=rescore)
    first, second = upcoming(cfg, None, 1)[0]
    claim = claim_path(feats / f"feats_{first:05d}.pt")
    claim.touch()

    def other_process() -> None:
        time.sleep(0.3)
        (feats / f"feats_{first:05d}.pt").write_bytes(
            (tmp_path / f"feats_{first:05d}.pt").read_bytes()
        )
        claim.unlink()

    other = threading.Thread(target=other_process)
    other.start()
    with caplog.at_level(logging.INFO, logger="specviz.train.data.regen"):
        RegenStream(cfg).next_batch()
    other.join()
    assert calls == [second, first]
    built = [r.getMessage().split(" rescored")[0] for r in caplog.records
             if "rescored" in r.getMessage()]  # fmt: skip
    assert built == [f"shard {second}"]  # the other came from the other process


def test_a_shard_is_built_once_by_processes_sharing_a_work_dir(tmp_path: Path) -> None:
    """build_once: of two racing builders one builds and the other waits for its file; a
    claim left by a dead process (an old one, or one naming a process of this host that no
    longer runs) is taken over; a claim whose builder finishes is waited out."""
    path, built = tmp_path / "feats_00001.pt", []

    def build() -> None:
        built.append(threading.get_ident())
        time.sleep(0.2)
        path.write_bytes(b"x")

    results: list[bool] = []
    racers = [threading.Thread(target=lambda: results.append(
        build_once(path, build, poll_s=0.01))) for _ in range(2)]  # fmt: skip
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()
    assert sorted(results) == [False, True] and len(built) == 1
    assert not (tmp_path / "feats_00001.pt.claim").exists()
    assert build_once(path, build) is False and len(built) == 1  # there already

    path.unlink()
    claim = tmp_path / "feats_00001.pt.claim"
    claim.touch()
    os.utime(claim, (time.time() - 3600, time.time() - 3600))  # its process died an hour ago
    assert build_once(path, build, poll_s=0.01, stale_s=60) is True and len(built) == 2

    path.unlink()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    claim.write_text(f"{socket.gethostname()} {dead.stdout.strip()}")  # killed while building
    taken: list[bool] = []  # in a thread: a claim never seen as dead would wait stale_s
    taker = threading.Thread(
        target=lambda: taken.append(build_once(path, build, poll_s=0.01)), daemon=True
    )
    taker.start()
    taker.join(timeout=10)
    assert taken == [True] and len(built) == 3  # at once, not after stale_s

    def waited_out(content: bytes) -> None:
        """Another process holds the claim and finishes path: build_once waits, builds nothing."""

        def finish() -> None:
            time.sleep(0.1)
            path.write_bytes(content)
            claim.unlink()

        other = threading.Thread(target=finish)
        other.start()
        assert build_once(path, build, poll_s=0.01) is False and len(built) == 3
        other.join()
        assert path.read_bytes() == content

    path.unlink()
    claim.write_text(f"{socket.gethostname()} {os.getpid()}")  # a live process builds it
    waited_out(b"z")
    path.unlink()
    claim.touch()  # another process is building it now, and has not yet named itself
    waited_out(b"y")
