"""The regen shards as a resumable stream of training batches, and their collation.

A shard is ready once both its ``feats_XXXXX.pt`` and its ``ids_XXXXX.json.gz`` exist (both are
written atomically; the features first), or, with a `rescore` function, once its ids exist: its
features are then rebuilt from them when the shard is first read (a fresh machine trains at
once, paying one teacher-forced pass per shard it reads instead of one for every shard first).
Training shards are read a *group* of `group` shards at a time (the only ones in memory): each
epoch visits every training shard once, in an order drawn from the stream's generator, and
shards that appear during an epoch join its queue when the next group is drawn. A group's
sequences are shuffled, sorted by length in pools of `pool` (so that a batch's rows have similar
lengths and little padding), cut into batches of at most `batch_positions` padded positions, and
the batches shuffled: the *plan*. The state (epoch, queue, group, plan, cursor and the
generator's state) is small and saved with a checkpoint, so a resumed run reads exactly the
batches an uninterrupted one would.

A sequence of n tokens x_0..x_{n-1} trains positions i = 0..m-1, m = min(n - 1, max_len):
position i reads x_i and g_{i-1} (g_{-1} = 0) and learns the target's law of x_{i+1}, an
*answer* position when x_{i+1} is an answer token (i >= start - 1), else a *prompt* one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from specviz.train.common import claim_path
from specviz.train.data.shards import feats_path, ids_path, read_ids, shard_index

Seq = dict[str, Any]


def is_held_out(index: int, val_every: int = 40, val_shard: int = 7) -> bool:
    """Whether shard `index` is held out for validation."""
    return index % val_every == val_shard


@dataclass(frozen=True, kw_only=True)
class StreamConfig:
    """Where the shards are and how they are batched."""

    feats_dir: Path
    ids_dir: Path
    batch_positions: int = 4096  # padded positions per batch, at most (one longer row alone)
    max_len: int = 512  # trained positions per sequence, at most
    group: int = 8  # shards in memory at once
    pool: int = 64  # sequences sorted by length together
    val_every: int = 40
    val_shard: int = 7
    seed: int = 24680
    # builds shard i's missing features from its ids (specviz.train.data.regen.rescorer); None:
    # a shard without features is not ready
    rescore: Callable[[int], None] | None = field(default=None, compare=False)


def ready_shards(cfg: StreamConfig) -> tuple[list[int], list[int]]:
    """Indices of the ready training and held-out shards, ascending."""
    ids = {shard_index(p) for p in cfg.ids_dir.glob("ids_*.json.gz")}
    feats = set(map(shard_index, cfg.feats_dir.glob("feats_*.pt")))
    ready = sorted(ids if cfg.rescore is not None else feats & ids)
    held = [i for i in ready if is_held_out(i, cfg.val_every, cfg.val_shard)]
    return [i for i in ready if i not in set(held)], held


def load_shard(cfg: StreamConfig, index: int) -> list[Seq]:
    """Shard index's sequences: tokens (n,) long, start, hidden (n-1, 3D), top_ids/top_logp
    (its features rebuilt first where they are missing and cfg.rescore is set)."""
    path = feats_path(cfg.feats_dir, index)
    if cfg.rescore is not None and not path.is_file():
        cfg.rescore(index)
    if not path.is_file():
        raise ValueError(
            f"shard {index} has no features in {cfg.feats_dir}: rebuild them from its ids "
            "(python -m specviz.train data regen), or pass --rescore to rebuild each as it is read"
        )
    feats = torch.load(path, weights_only=False)
    ids = read_ids(ids_path(cfg.ids_dir, index))
    seqs = []
    for tokens, start, rec in zip(ids["tokens"], ids["start"], feats["seqs"], strict=True):
        if rec["hidden"].shape[0] != len(tokens) - 1:
            raise ValueError(
                f"shard {index}: features of {rec['hidden'].shape[0]} positions "
                f"for {len(tokens)} tokens"
            )
        seqs.append({"tokens": torch.tensor(tokens, dtype=torch.long), "start": int(start), **rec})
    return seqs


def trained_length(seq: Seq, max_len: int) -> int:
    """m: the positions of seq that are trained."""
    return min(int(seq["tokens"].shape[0]) - 1, max_len)


def collate(seqs: list[Seq], max_len: int, prompt_weight: float) -> dict[str, Tensor]:
    """Right-padded rows of a batch (B rows, L = the longest m):

    tokens (B, L) long: x_i; first (B, L, 3D) float: g_{i-1}, zero at i = 0 and padding;
    top_ids (B, L, K) long and top_logp (B, L, K) float: the target's law of x_{i+1};
    answer (B, L) bool; weight (B, L): 1 on answer positions, prompt_weight on prompt ones,
    0 on padding.
    """
    lengths = [trained_length(s, max_len) for s in seqs]
    b, length = len(seqs), max(lengths)
    width, k = int(seqs[0]["hidden"].shape[1]), int(seqs[0]["top_ids"].shape[1])
    tokens = torch.zeros(b, length, dtype=torch.long)
    first = torch.zeros(b, length, width)
    top_ids = torch.zeros(b, length, k, dtype=torch.long)
    top_logp = torch.full((b, length, k), -torch.inf)
    answer = torch.zeros(b, length, dtype=torch.bool)
    weight = torch.zeros(b, length)
    for row, (s, m) in enumerate(zip(seqs, lengths, strict=True)):
        tokens[row, :m] = s["tokens"][:m]
        first[row, 1:m] = s["hidden"][: m - 1].float()
        top_ids[row, :m] = s["top_ids"][:m].long()
        top_logp[row, :m] = s["top_logp"][:m].float()
        answer[row, max(0, s["start"] - 1) : m] = True
        weight[row, :m] = prompt_weight
        weight[row, answer[row]] = 1.0
    return {
        "tokens": tokens,
        "first": first,
        "top_ids": top_ids,
        "top_logp": top_logp,
        "answer": answer,
        "weight": weight,
    }


class RegenStream:
    """Batches of training sequences, group by group (see the module docstring)."""

    def __init__(self, cfg: StreamConfig) -> None:
        """Epoch 0, nothing drawn yet."""
        self.cfg = cfg
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.epoch = 0
        self.queue: list[int] = []  # shards still to visit this epoch
        self.seen: list[int] = []  # shards visited this epoch
        self.group: list[int] = []
        self.plan: list[list[tuple[int, int]]] = []  # batches of (shard, sequence)
        self.cursor = 0
        self.loaded: dict[int, list[Seq]] = {}

    def next_batch(self) -> list[Seq]:
        """The next batch's sequences (a new group drawn when the plan is used up)."""
        while self.cursor >= len(self.plan):
            self._next_group()
        batch = [self.loaded[s][j] for s, j in self.plan[self.cursor]]
        self.cursor += 1
        return batch

    def _next_group(self) -> None:
        """Draw the next group from the queue (a new epoch when it is empty); plan its batches."""
        train, _ = ready_shards(self.cfg)
        known = set(self.queue) | set(self.seen)
        self.queue += [i for i in train if i not in known]
        if not self.queue:
            if not train:
                raise FileNotFoundError(
                    f"no training shards in {self.cfg.feats_dir} (with ids in {self.cfg.ids_dir})"
                )
            self.epoch, self.seen, self.queue = self.epoch + 1, [], list(train)
        order = torch.randperm(len(self.queue), generator=self.gen).tolist()
        self.queue = [self.queue[i] for i in order]
        self.group, self.queue = self.queue[: self.cfg.group], self.queue[self.cfg.group :]
        self.seen += self.group
        self._load(self.group)
        self.plan, self.cursor = self._plan(), 0

    def _load(self, group: list[int]) -> None:
        """Keep exactly the group's shards in memory (rebuilding missing features first)."""
        if self.cfg.rescore is not None:
            self._rebuild(group, self.cfg.rescore)
        self.loaded = {i: self.loaded.get(i) or load_shard(self.cfg, i) for i in group}

    def _rebuild(self, group: list[int], rescore: Callable[[int], None]) -> None:
        """Rebuild the group's missing features first to last, passing over those another
        process is building (specviz.train.heads.ahead) and waiting for them only when none is
        left."""
        paths = {i: feats_path(self.cfg.feats_dir, i) for i in group}
        while missing := [i for i in group if not paths[i].is_file()]:
            free = [i for i in missing if not claim_path(paths[i]).exists()]
            rescore((free or missing)[0])  # a claimed one: waits for its file

    def _plan(self) -> list[list[tuple[int, int]]]:
        """The group's batches (see the module docstring)."""
        cfg = self.cfg
        items = [
            (s, j, trained_length(seq, cfg.max_len))
            for s in self.group
            for j, seq in enumerate(self.loaded[s])
        ]
        items = [items[i] for i in torch.randperm(len(items), generator=self.gen).tolist()]
        items = [it for it in items if it[2] > 0]
        batches: list[list[tuple[int, int]]] = []
        for at in range(0, len(items), cfg.pool):
            pool = sorted(items[at : at + cfg.pool], key=lambda it: -it[2])
            batch: list[tuple[int, int]] = []
            width = 0  # the batch's padded width: its first (longest) sequence's length
            for s, j, m in pool:
                if batch and (len(batch) + 1) * width > cfg.batch_positions:
                    batches.append(batch)
                    batch = []
                width = width if batch else m
                batch.append((s, j))
            if batch:
                batches.append(batch)
        return [batches[i] for i in torch.randperm(len(batches), generator=self.gen).tolist()]

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps to resume the stream exactly."""
        return {
            "epoch": self.epoch,
            "queue": list(self.queue),
            "seen": list(self.seen),
            "group": list(self.group),
            "plan": [list(b) for b in self.plan],
            "cursor": self.cursor,
            "gen": self.gen.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from state_dict's output (reloading the current group's shards)."""
        self.epoch, self.queue, self.seen = state["epoch"], state["queue"], state["seen"]
        self.group, self.cursor = state["group"], state["cursor"]
        self.plan = [[(int(s), int(j)) for s, j in b] for b in state["plan"]]
        self.gen.set_state(state["gen"])
        self._load(self.group)
