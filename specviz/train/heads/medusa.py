"""Step ``heads medusa``: train the Medusa heads on the cached target features.

Reads the shards of step ``features`` (shards with index % 20 == 1 are held out for
validation), keeps the target frozen (its embeddings and output head rows for the head tokens
are only read) and trains the new parameters with AdamW, checkpointing every few minutes, so
that a stopped run resumes where it stopped. The loss: for each head k, the cross entropy of
its guess at x_{i+1+k} against p_target(x_{i+1+k}) (the target's own distribution there, from
f_{i+k}), per position i.

Validation reports α = Σ_x min(p, q) at T = 1 for each head's guess given the true features,
and the greedy agreement argmax q = argmax p.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from specviz.heads.medusa import MedusaHeads
from specviz.heads.weights import bundled_head_tokens, save_head
from specviz.train.common import (
    Deadline,
    descend,
    fresh_shards,
    learning_rate,
    load_target,
    save_atomic,
    work_dir,
    write_json_atomic,
)
from specviz.train.data.features import feature_dir

LOG = logging.getLogger("specviz.train.heads.medusa")
Seq = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class MedusaConfig:
    """Knobs of the head training."""

    which: str = "medusa"  # the head kind trained (its folder and weights file)
    medusa_heads: int = 4
    lr: float = 1e-3
    warmup: int = 50
    total_steps: int = 2000
    batch_positions: int = 2048
    max_len: int = 448
    val_every: int = 50
    refresh_every: int = 50  # steps between looks for new feature shards
    ckpt_every_s: float = 300.0
    seed: int = 97531


def head_dir(which: str) -> Path:
    """Folder with ``ckpt.pt`` and ``metrics.json`` for one head kind."""
    return work_dir(f"head-{which}")


class ShardPool:
    """Feature sequences in memory; shards with index % 20 == 1 are held out for validation."""

    def __init__(self) -> None:
        """Nothing loaded yet."""
        self.train: list[Seq] = []
        self.val: list[Seq] = []
        self.names: list[str] = []

    def refresh(self) -> int:
        """Load the shards that appeared since the last call; return how many."""
        fresh = fresh_shards(feature_dir(), "features_*.pt", self.names)
        for name, held_out, shard in fresh:
            (self.val if held_out else self.train).extend(shard["seqs"])
            self.names.append(name)
        return len(fresh)

    def digest(self) -> str:
        """A short hash of the loaded shards' names and contents' sizes."""
        sizes = [f"{n}:{(feature_dir() / n).stat().st_size}" for n in sorted(self.names)]
        return hashlib.sha256("\n".join(sizes).encode()).hexdigest()[:16]


def collate(seqs: list[Seq], max_len: int) -> dict[str, Tensor]:
    """Right-padded tokens (B, L), features (B, L, D), log-normalisers (B, L), loss mask (B, L)."""
    length = min(max_len, max(int(s["tokens"].shape[0]) for s in seqs))
    b, d = len(seqs), int(seqs[0]["features"].shape[1])
    tokens = torch.zeros(b, length, dtype=torch.long)
    feats = torch.zeros(b, length, d)
    logz = torch.zeros(b, length)
    mask = torch.zeros(b, length, dtype=torch.bool)
    for row, s in enumerate(seqs):
        n = min(length, int(s["tokens"].shape[0]))
        tokens[row, :n] = s["tokens"][:n].long()
        feats[row, :n] = s["features"][:n].float()
        logz[row, :n] = s["logz"][:n]
        mask[row, max(0, int(s["start"]) - 1) : n] = True
    return {"tokens": tokens, "features": feats, "logz": logz, "mask": mask}


def pick(pool: list[Seq], budget: int, max_len: int, gen: torch.Generator) -> list[Seq]:
    """Random sequences holding about `budget` positions."""
    out, used = [], 0
    while used < budget:
        s = pool[int(torch.randint(len(pool), (1,), generator=gen))]
        out.append(s)
        used += min(max_len, int(s["tokens"].shape[0]))
    return out


class Trainer:
    """The frozen target parts, the head being trained and its losses."""

    def __init__(self, cfg: MedusaConfig, target: Any) -> None:
        """Build a fresh head for target and keep its embeddings and head-token output rows."""
        self.cfg = cfg
        self.head_tokens = bundled_head_tokens()
        self.embed = target.get_input_embeddings().weight.detach()  # (V, D)
        out = target.get_output_embeddings().weight.detach()
        self.rows = out.index_select(0, self.head_tokens).contiguous()  # (S, D)
        torch.manual_seed(cfg.seed)  # parameter init only; data order has its own generator
        self.module = MedusaHeads(int(target.config.hidden_size), cfg.medusa_heads)

    def p_target(self, feats: Tensor, logz: Tensor) -> Tensor:
        """p_target over the head tokens (…, S) from features (…, D) (mass off S left out)."""
        return torch.exp(feats @ self.rows.T - logz[..., None])

    def losses(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """Mean loss (with grad) and, without grad, α and greedy agreement per head."""
        feats, mask = batch["features"], batch["mask"]
        with torch.no_grad():
            p = self.p_target(feats, batch["logz"])  # (B, L, S): x_{i+1} from f_i
        guessed = self.module(feats)  # (B, L, K, D)
        total, out = torch.zeros(()), {}
        for k in range(1, self.module.k + 1):  # head k at i guesses x_{i+1+k}: p at i + k
            q_log = torch.log_softmax(guessed[:, :-k, k - 1] @ self.rows.T, -1)
            m = (mask[:, :-k] & mask[:, k:]).float()
            total = total + (-(p[:, k:] * q_log).sum(-1) * m).sum() / m.sum()
            for name, value in self._quality(p[:, k:], q_log.detach(), m).items():
                out[f"{name}_{k}"] = value
        return {"loss": total / self.module.k, **out}

    @staticmethod
    def _quality(p: Tensor, q_log: Tensor, m: Tensor) -> dict[str, Tensor]:
        """α = Σ min(p, q) and greedy agreement, averaged over the masked positions."""
        alpha = torch.minimum(p, q_log.exp()).sum(-1)
        agree = (p.argmax(-1) == q_log.argmax(-1)).float()
        return {"alpha": (alpha * m).sum() / m.sum(), "agree": (agree * m).sum() / m.sum()}


@torch.no_grad()
def validate(trainer: Trainer, val: list[Seq], cfg: MedusaConfig) -> dict[str, float]:
    """Mean losses and quality over (up to 48 of) the held-out sequences."""
    trainer.module.eval()
    sums: dict[str, float] = {}
    chunks = [val[i : i + 8] for i in range(0, min(len(val), 48), 8)]
    for chunk in chunks:
        for name, value in trainer.losses(collate(chunk, cfg.max_len)).items():
            sums[name] = sums.get(name, 0.0) + float(value) / len(chunks)
    trainer.module.train()
    return {f"val_{k}": round(v, 4) for k, v in sums.items()}


def run_medusa(cfg: MedusaConfig, max_steps: int, seconds: float | None, threads: int) -> Path:
    """Train until max_steps or the time budget; checkpoint; export the weights; return them."""
    target, _ = load_target(threads)
    trainer = Trainer(cfg, target)
    optimizer = torch.optim.AdamW(trainer.module.parameters(), lr=cfg.lr, weight_decay=0.0)
    folder = head_dir(cfg.which)
    state: dict[str, Any] = {"step": 0, "elapsed": 0.0, "positions": 0, "history": []}
    if (folder / "ckpt.pt").is_file():
        ckpt = torch.load(folder / "ckpt.pt", weights_only=False)
        trainer.module.load_state_dict(ckpt["module"])
        optimizer.load_state_dict(ckpt["optimizer"])
        state = ckpt["state"]
        LOG.info("resumed %s at step %d", cfg.which, state["step"])
    pool = ShardPool()
    pool.refresh()
    if not pool.train or not pool.val:
        raise SystemExit(f"no feature shards in {feature_dir()}; run the `features` step first")
    LOG.info("%d train / %d validation sequences", len(pool.train), len(pool.val))
    gen = torch.Generator().manual_seed(cfg.seed + state["step"])
    deadline, began, last = Deadline(seconds), time.monotonic(), time.monotonic()
    base = state["elapsed"]
    trainer.module.train()
    while state["step"] < max_steps and not deadline.passed():
        if state["step"] % cfg.refresh_every == 0 and pool.refresh():
            LOG.info("now %d train / %d validation sequences", len(pool.train), len(pool.val))
        batch = collate(pick(pool.train, cfg.batch_positions, cfg.max_len, gen), cfg.max_len)
        out = trainer.losses(batch)
        lr = learning_rate(cfg, state["step"])
        descend(optimizer, out["loss"], trainer.module.parameters(), lr)
        state["step"] += 1
        state["positions"] += int(batch["mask"].sum())
        state["elapsed"] = base + time.monotonic() - began
        if state["step"] % cfg.val_every == 0:
            row = {
                "step": state["step"],
                "elapsed": round(state["elapsed"]),
                "loss": float(out["loss"]),
            }
            row.update(validate(trainer, pool.val, cfg))
            state["history"].append(row)
            LOG.info("%s", row)
        if time.monotonic() - last > cfg.ckpt_every_s or deadline.passed():
            _checkpoint(folder, trainer, optimizer, state)
            last = time.monotonic()
    _checkpoint(folder, trainer, optimizer, state)
    summary = {
        "config": asdict(cfg),
        "data": pool.digest(),
        "shards": len(pool.names),
        "train_sequences": len(pool.train),
        "train_positions": sum(int(s["tokens"].shape[0]) for s in pool.train),
        **state,
    }
    write_json_atomic(folder / "metrics.json", summary)
    return save_head(trainer.module, cfg.which, trainer.head_tokens, target, summary, folder)


def _checkpoint(folder: Path, trainer: Trainer, optimizer: Any, state: dict[str, Any]) -> None:
    """Save the head, optimizer and progress (atomic)."""
    save_atomic(
        {
            "module": trainer.module.state_dict(),
            "optimizer": optimizer.state_dict(),
            "state": state,
        },
        folder / "ckpt.pt",
    )
