"""On-policy replay for the EAGLE-3 head: the positions where its drafts are rejected, trained on
again (after Draft-OPD, arXiv 2605.29343).

*Collect.* The head drafts along the target's own answers in the training shards, round after
round as speculation runs at T = 1: from a root position r it drafts `depth` tokens, the d-th
judged at position r + d - 1 (the training-time-test unroll, ``specviz.train.heads.unroll``,
computes exactly these chained drafts). Draft d is kept with probability α_d = Σ_x min(p, q_d) (one
uniform draw from the collection's generator); at the first rejection, at position j, the
round ends and the next starts at j + 1, after the token the target wrote there (the shard's
next token, a sample of the target's law); when all `depth` are kept the target adds a bonus
token and the next root is r + depth + 1. Rounds start at the first answer position. A
sequence's rejected positions are where its replay loss falls.

The answers stand in for the tokens a live round would accept: a kept draft is distributed as
min(p, q) / α rather than as p, so the later drafts of a collected round read the target's
token where a live round reads the kept draft. The rejection events themselves are drawn with
their exact probabilities under the head at collection time.

*Train.* Every `every`-th step of ``specviz.train.heads.eagle`` then draws its batch from the
collected sequences (chosen by the step's own generator, so a resumed run draws the same), with
weight 1 on the rejected positions and 0 elsewhere; the other steps read the regen stream as
before. ``python -m specviz.train heads replay`` runs both from a heads train checkpoint, and with
``--every 0`` the same steps without replay (the control the gain is measured against).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from specviz.train.data.stream import Seq, StreamConfig, collate, load_shard, ready_shards
from specviz.train.heads.accept import alpha
from specviz.train.heads.eagle import EagleConfig, EagleTrainer, run_eagle

LOG = logging.getLogger("specviz.train.heads.replay")
Batch = dict[str, Tensor]
INDEX = "replay.json"  # in the run's folder: (shard, sequence, rejected positions) triples


@dataclass(frozen=True, kw_only=True)
class ReplayConfig:
    """What is collected and how often a replay batch is trained."""

    shards: int = 16  # the first this many training shards are collected from
    every: int = 2  # every `every`-th step trains a replay batch (0: none, the control)
    rows: int = 8  # sequences a replay batch holds
    seed: int = 97531


def simulated_rejections(alphas: Tensor, start: int, generator: torch.Generator) -> list[int]:
    """The positions where drafts are rejected along one sequence.

    alphas (depth, m): α of the head's d-th chained draft judged at each position (row d - 1);
    start: the first answer position (the first round's root). See the module docstring.
    """
    depth, m = int(alphas.shape[0]), int(alphas.shape[1])
    rejected: list[int] = []
    root = start
    while root < m:
        for d in range(1, depth + 1):
            j = root + d - 1
            if j >= m:
                return rejected
            if float(torch.rand((), generator=generator)) >= float(alphas[d - 1, j]):
                rejected.append(j)
                root = j + 1
                break
        else:
            root += depth + 1  # every draft kept, and the bonus token
    return rejected


@torch.no_grad()
def per_position_alphas(trainer: Any, batch: Batch) -> Tensor:
    """α_d at every answer position of a collated batch: (depth, B, L), 0 off them."""
    batch = {k: v.to(trainer.device) for k, v in batch.items()}
    shape = batch["answer"].shape
    out = torch.zeros(trainer.cfg.depth, *shape)
    for d, p, q_log, mask in trainer._depths(batch, batch["answer"]):
        out[d - 1][mask.cpu()] = alpha(p, q_log).float().cpu()
    return out


def collect(trainer: Any, stream: StreamConfig, cfg: ReplayConfig) -> list[list[int]]:
    """[shard, sequence, *rejected positions] for each collected sequence with a rejection."""
    generator = torch.Generator().manual_seed(cfg.seed)
    found: list[list[int]] = []
    trainer.head.eval()
    for shard in ready_shards(stream)[0][: cfg.shards]:
        seqs = load_shard(stream, shard)
        for at in range(0, len(seqs), 8):
            part = [
                (j, s)
                for j, s in enumerate(seqs[at : at + 8], start=at)
                if s["tokens"].shape[0] > 1
            ]
            if not part:
                continue
            batch = collate([s for _, s in part], stream.max_len, 0.0)
            alphas = per_position_alphas(trainer, batch)
            for row, (j, seq) in enumerate(part):
                first = max(0, int(seq["start"]) - 1)
                hits = simulated_rejections(alphas[:, row], first, generator)
                if hits:
                    found.append([shard, j, *hits])
    trainer.head.train()
    return found


def save_index(folder: Path, found: list[list[int]], meta: dict[str, Any]) -> None:
    """The collected triples and how they were collected, as JSON."""
    (folder / INDEX).write_text(json.dumps({**meta, "sequences": found}), encoding="utf-8")


def load_index(folder: Path) -> list[list[int]] | None:
    """The collected triples of folder, or None where none were saved."""
    path = folder / INDEX
    return json.loads(path.read_text(encoding="utf-8"))["sequences"] if path.is_file() else None


def replay_batches(
    found: list[list[int]], stream: StreamConfig, cfg: ReplayConfig
) -> Callable[[int], Batch]:
    """step → a replay batch (see the module docstring); the sequences are loaded once."""
    if not found:
        raise ValueError("no rejected positions were collected: nothing to replay")
    shards = sorted({int(f[0]) for f in found})
    loaded = {s: load_shard(stream, s) for s in shards}
    items: list[tuple[Seq, list[int]]] = [(loaded[f[0]][f[1]], f[2:]) for f in found]

    def batch(step: int) -> Batch:
        generator = torch.Generator().manual_seed(cfg.seed + step)
        picks = torch.randint(len(items), (cfg.rows,), generator=generator).tolist()
        chosen = [items[i] for i in picks]
        out = collate([s for s, _ in chosen], stream.max_len, 0.0)
        weight = torch.zeros_like(out["weight"])
        for row, (_, hits) in enumerate(chosen):
            kept = [j for j in hits if j < weight.shape[1]]
            weight[row, kept] = 1.0
        out["weight"] = weight * out["answer"]
        return out

    return batch


def run_replay(
    cfg: ReplayConfig,
    target: Any,
    source: Path,
    out: Path,
    ids: Path,
    feats: Path,
    steps: int,
    rescore: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Train `steps` past source's heads train checkpoint into out, with replay (cfg.every > 0) or
    without (the control); the collection runs once, before the first of out's steps, and a
    run started again resumes; rescore rebuilds a shard's missing features (heads train --rescore).
    Returns the progress (specviz.train.heads.eagle.run_eagle's)."""
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "ckpt.pt").is_file():
        shutil.copyfile(source / "ckpt.pt", out / "ckpt.pt")
    ckpt = torch.load(out / "ckpt.pt", weights_only=False)
    eagle_cfg = EagleConfig(**ckpt["config"])
    stream = eagle_cfg.stream(feats, ids, rescore)
    if load_index(out) is None:
        trainer = EagleTrainer(eagle_cfg, target, ckpt["head"]["vocab"].cpu())
        trainer.head.load_state_dict(ckpt["head"])
        began = time.monotonic()
        found = collect(trainer, stream, cfg) if cfg.every > 0 else []
        meta = {
            "from": str(source),
            "start": int(ckpt["state"]["step"]),
            "every": cfg.every,
            "shards": cfg.shards,
            "rejected": sum(len(f) - 2 for f in found),
            "seconds": round(time.monotonic() - began, 1),
        }
        save_index(out, found, meta)
        LOG.info("collected %s", meta)
    meta = json.loads((out / INDEX).read_text(encoding="utf-8"))
    found = meta["sequences"]
    replay = (replay_batches(found, stream, cfg), cfg.every) if cfg.every > 0 else None
    end = int(meta["start"]) + steps
    return run_eagle(eagle_cfg, target, stream, out, end, None, final_eval=True, replay=replay)
