"""Step ``draft student``: distil a small tied-embedding Llama from the cached teacher shards.

Loss per position: forward KL from the teacher's top-k distribution plus one "rest" bucket,
``sum_k p_k log(p_k/q_k) + p_rest log(p_rest/q_rest)``. Embeddings start from a PCA of the
target's embedding matrix. Checkpoints go to ``work_dir()/student`` and a run resumes from them.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import LlamaConfig, LlamaForCausalLM

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
from specviz.train.data.teacher import shard_dir

LOG = logging.getLogger("specviz.train.draft.student")
Record = dict[str, Any]


@dataclass
class StudentConfig:
    """Architecture and optimisation knobs of the draft."""

    hidden: int = 160
    layers: int = 3
    heads: int = 5
    intermediate: int = 640
    lr: float = 2e-3
    warmup: int = 100
    total_steps: int = 3000
    batch_positions: int = 2048
    max_len: int = 512
    val_every: int = 20
    ckpt_every_s: float = 300.0
    seed: int = 4321
    answers_only: bool = True  # chat records: train only where the target answers
    header_id: int = 1  # <|im_start|>; the answer follows "<|im_start|>assistant\n"
    header_len: int = 3


def student_dir() -> Path:
    """Folder with ``ckpt.pt`` and ``metrics.json``."""
    return work_dir("student")


def make_student(cfg: StudentConfig, target_config: Any) -> Any:
    """A fresh LlamaForCausalLM draft sharing the target's vocabulary and special tokens."""
    config = LlamaConfig(
        vocab_size=target_config.vocab_size,
        hidden_size=cfg.hidden,
        intermediate_size=cfg.intermediate,
        num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads,
        num_key_value_heads=cfg.heads,
        max_position_embeddings=2048,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
        bos_token_id=target_config.bos_token_id,
        eos_token_id=target_config.eos_token_id,
        pad_token_id=target_config.pad_token_id,
    )
    return LlamaForCausalLM(config)


def pca_embeddings(target_embed: torch.Tensor, width: int) -> torch.Tensor:
    """Project the target's embeddings [V, D] onto their top principal axes: [V, width]."""
    centered = target_embed - target_embed.mean(0, keepdim=True)
    _, _, vh = torch.linalg.svd(centered[:: max(1, len(centered) // 20000)], full_matrices=False)
    projected: torch.Tensor = target_embed @ vh[:width].T
    return projected


def init_student(cfg: StudentConfig) -> Any:
    """Build the student and copy the PCA-projected target embeddings into it."""
    target, _ = load_target()
    student = make_student(cfg, target.config)
    gen = torch.Generator().manual_seed(cfg.seed)
    with torch.no_grad():
        for name, param in student.named_parameters():
            if param.ndim == 2 and "embed" not in name:
                param.normal_(0.0, 0.02, generator=gen)
        student.get_input_embeddings().weight.copy_(
            pca_embeddings(target.get_input_embeddings().weight.float(), cfg.hidden)
        )
        student.model.norm.weight.fill_(0.15)  # keeps the initial logits soft (a small initial KL)
    student.tie_weights()
    return student


class ShardPool:
    """Teacher records in memory; shards with index % 20 == 1 are held out for validation."""

    def __init__(self, cfg: StudentConfig) -> None:
        self.cfg = cfg
        self.loaded: set[str] = set()
        self.train: list[Record] = []
        self.val: list[Record] = []

    def refresh(self) -> int:
        """Load shards that appeared since the last call; return the number of new ones."""
        fresh = fresh_shards(shard_dir(), "shard_*.pt", self.loaded)
        for name, held_out, shard in fresh:
            records = [r for r in map(self.mark, shard["records"]) if int(r["n"]) > 0]
            (self.val if held_out else self.train).extend(records)
            self.loaded.add(name)
        return len(fresh)

    def mark(self, record: Record) -> Record:
        """Add ``from`` (first trained position) and ``n`` (trained positions) to a record."""
        start = int(record["start"])
        first = start
        hits = (record["tokens"] == self.cfg.header_id).nonzero()
        if self.cfg.answers_only and len(hits):
            first = max(start, int(hits[-1]) + self.cfg.header_len)
        n = min(start + int(record["ids"].shape[0]), self.cfg.max_len - 1) - first
        return {**record, "from": first, "n": n}

    def positions(self) -> int:
        """Number of training positions loaded."""
        return sum(int(r["n"]) for r in self.train)


def collate(records: list[Record], max_len: int) -> dict[str, torch.Tensor]:
    """Right-padded tokens [B, L], loss mask [B, L] and teacher top-k ids/logp [N, K]."""
    rows = [r for r in records if int(r["n"]) > 0]
    width = min(max_len, max(len(r["tokens"]) for r in rows)) - 1
    tokens = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    ids, logp = [], []
    for row, r in enumerate(rows):
        seq = r["tokens"][: width + 1].long()
        tokens[row, : len(seq) - 1] = seq[:-1]
        first, n, skip = int(r["from"]), int(r["n"]), int(r["from"]) - int(r["start"])
        mask[row, first : first + n] = True
        ids.append(r["ids"][skip : skip + n].long())
        logp.append(r["logp"][skip : skip + n].float())
    return {"tokens": tokens, "mask": mask, "ids": torch.cat(ids), "logp": torch.cat(logp)}


def kl_loss(logits: torch.Tensor, ids: torch.Tensor, logp: torch.Tensor) -> tuple[Any, Any]:
    """Mean top-k+rest KL [] and mean estimated overlap sum(min(p, q)) [] from logits [N, V]."""
    logq = torch.log_softmax(logits.float(), dim=-1)
    logq_k = logq.gather(1, ids)
    p_k = logp.exp()
    p_rest = (1 - p_k.sum(1)).clamp(min=1e-8)
    q_rest = (1 - logq_k.exp().sum(1)).clamp(min=1e-8)
    kl = (p_k * (logp - logq_k)).sum(1) + p_rest * (p_rest.log() - q_rest.log())
    overlap = torch.minimum(p_k, logq_k.exp()).sum(1) + torch.minimum(p_rest, q_rest)
    return kl.mean(), overlap.mean().detach()


def batch_loss(model: Any, batch: dict[str, torch.Tensor]) -> tuple[Any, Any]:
    """Forward the student on a collated batch; returns (kl, overlap)."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        hidden = model.model(input_ids=batch["tokens"]).last_hidden_state
        logits = model.lm_head(hidden[batch["mask"]])
    return kl_loss(logits, batch["ids"], batch["logp"])


def sample_batch(pool: list[Record], budget: int, gen: torch.Generator) -> list[Record]:
    """Random records until about ``budget`` loss positions are collected."""
    chosen: list[Record] = []
    count = 0
    while count < budget:
        record = pool[int(torch.randint(len(pool), (1,), generator=gen))]
        chosen.append(record)
        count += int(record["n"])
    return chosen


@torch.no_grad()
def validate(model: Any, pool: ShardPool, cfg: StudentConfig) -> dict[str, float]:
    """Mean KL and overlap on (up to 64 of) the held-out records."""
    model.eval()
    records = pool.val[:64]
    results = [
        batch_loss(model, collate(records[i : i + 8], cfg.max_len))
        for i in range(0, len(records), 8)
    ]
    model.train()
    if not results:
        return {}
    return {
        "val_kl": float(sum(r[0] for r in results) / len(results)),
        "val_overlap": float(sum(r[1] for r in results) / len(results)),
    }


def _load_or_init(cfg: StudentConfig) -> tuple[Any, torch.optim.Optimizer, dict[str, Any]]:
    """Resume model/optimizer/state from ``ckpt.pt`` if present, else initialise them."""
    path = student_dir() / "ckpt.pt"
    if path.exists():
        ckpt = torch.load(path, weights_only=False)
        model = LlamaForCausalLM(LlamaConfig.from_dict(ckpt["config"]))
        model.load_state_dict(ckpt["model"])
        model.tie_weights()
    else:
        ckpt, model = None, init_student(cfg)
    decay = [p for n, p in model.named_parameters() if p.ndim == 2 and "embed" not in n]
    other = [p for n, p in model.named_parameters() if not (p.ndim == 2 and "embed" not in n)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": other, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(0.9, 0.98),
    )
    state: dict[str, Any] = {"step": 0, "elapsed": 0.0, "positions": 0, "history": []}
    if ckpt is not None:
        optimizer.load_state_dict(ckpt["optimizer"])
        state = ckpt["state"]
        LOG.info("resumed from %s at step %d", path, state["step"])
    return model, optimizer, state


def _checkpoint(
    model: Any, optimizer: torch.optim.Optimizer, state: dict[str, Any], cfg: StudentConfig
) -> None:
    """Write ``ckpt.pt`` (resumable) and ``metrics.json`` atomically."""
    save_atomic(
        {
            "config": model.config.to_dict(),
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "state": state,
            "cfg": asdict(cfg),
        },
        student_dir() / "ckpt.pt",
    )
    write_json_atomic(student_dir() / "metrics.json", {"cfg": asdict(cfg), **state})


def _wait_for_data(pool: ShardPool, wait: bool) -> None:
    """Block until there is training and validation data (only with ``wait``)."""
    while (not pool.train or not pool.val) and wait:
        time.sleep(30)
        pool.refresh()
    if not pool.train:
        raise SystemExit(f"no teacher shards in {shard_dir()}; run the `teacher` step first")


def run_student(
    cfg: StudentConfig, max_steps: int, seconds: float | None, threads: int, wait: bool
) -> None:
    """Train until ``max_steps`` or the time budget; checkpoint every ``cfg.ckpt_every_s``."""
    torch.set_num_threads(threads)
    model, optimizer, state = _load_or_init(cfg)
    model.train()
    pool = ShardPool(cfg)
    pool.refresh()
    _wait_for_data(pool, wait)
    gen = torch.Generator().manual_seed(cfg.seed + state["step"])
    deadline, last_ckpt, began = Deadline(seconds), time.monotonic(), time.monotonic()
    base_elapsed = state["elapsed"]
    while state["step"] < max_steps and not deadline.passed():
        batch = collate(sample_batch(pool.train, cfg.batch_positions, gen), cfg.max_len)
        kl, overlap = batch_loss(model, batch)
        descend(optimizer, kl, model.parameters(), learning_rate(cfg, state["step"]))
        state["step"] += 1
        state["positions"] += int(batch["ids"].shape[0])
        state["elapsed"] = base_elapsed + time.monotonic() - began
        if state["step"] % cfg.val_every == 0:
            new = pool.refresh()
            entry = {
                "step": state["step"],
                "kl": float(kl.detach()),
                "overlap": float(overlap),
                "elapsed": round(state["elapsed"]),
                **validate(model, pool, cfg),
            }
            state["history"].append(entry)
            LOG.info("%s new_shards=%d train_positions=%d", entry, new, pool.positions())
        if time.monotonic() - last_ckpt > cfg.ckpt_every_s:
            _checkpoint(model, optimizer, state, cfg)
            last_ckpt = time.monotonic()
    _checkpoint(model, optimizer, state, cfg)
    LOG.info("stopped at step %d after %.0f s", state["step"], state["elapsed"])
