"""Step ``heads train``: train the EAGLE-3 head on the regen shards, for acceptance at T = 1.

Data: ``specviz.train.data.stream`` (the target's own answers, its fused layers g and its
top-K laws p; shards appear while training runs and join the stream). The target stays frozen:
only its embeddings are read (and, at the start, its output rows of the draft vocabulary).

Training-time test: each batch is drafted `depth` deep in parallel (``specviz.train.heads.unroll``:
pass d's output at position i is the head's d-th chained draft from root i - d + 1, exactly what
drafting computes), and the loss of depth d weighs `depth_decay` ** (d - 1). Per position the
loss is ``specviz.train.heads.accept.position_loss`` against p restricted to the draft vocabulary:
`kl` throughout for loss 'kl'; for 'tv' and 'lk' KL for the first `kl_warmup` steps, then TV
(1 - α) or the λ-mix. Answer positions weigh 1, prompt positions `prompt_weight`.

AdamW, linear warm-up then cosine decay to 10 %, gradient clipping; resumed with another schedule,
the learning rate warms up again to the new cosine (``extend_schedule``). Every `ckpt_every_s`
seconds and at the end a checkpoint (head, optimizer, progress, the stream's state, RNG) is written
atomically to ``ckpt.pt``; a run started again resumes from it. At the end the head's weights also
go to ``eagle3.safetensors`` (``specviz.heads.weights``, for drafting). Every `eval_every` steps
(and at least every `eval_hours`) the held-out set is scored (``specviz.train.data.heldout``: the
held-out shards' sequences whose prompts no training shard holds): α_d = mean over answer positions
of Σ_x min(p, q_d), q_d the head's d-th chained draft, d = 1..depth, one JSON line appended to
``curve.jsonl``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from specviz.heads.eagle import Eagle3Head, fresh_head
from specviz.heads.weights import save_eagle
from specviz.train.common import descend, learning_rate, save_atomic
from specviz.train.data.heldout import held_out_batches
from specviz.train.data.shards import ids_path
from specviz.train.data.stream import RegenStream, StreamConfig, collate, ready_shards
from specviz.train.heads.accept import KINDS, alpha, draft_index, position_loss, soft_labels
from specviz.train.heads.export import warm_start
from specviz.train.heads.unroll import unrolled
from specviz.train.heads.vocab import answer_counts, draft_vocab

LOG = logging.getLogger("specviz.train.heads.eagle")
Batch = dict[str, Tensor]


@dataclass(frozen=True, kw_only=True)
class EagleConfig:
    """Knobs of the EAGLE-3 head's training."""

    vocab: int = 16384  # V_d
    depth: int = 5  # training-time-test depth (>= 1)
    depth_decay: float = 0.8
    loss: str = "tv"  # 'kl', 'tv' or 'lk' (see the module docstring)
    kl_warmup: int = 1000  # steps of KL before 'tv' or 'lk' take over
    lk_lambda: float = 0.5
    prompt_weight: float = 0.1
    lr: float = 5e-4
    warmup: int = 100
    total_steps: int = 20000
    weight_decay: float = 0.0
    clip: float = 1.0
    batch_positions: int = 4096
    max_len: int = 512
    group: int = 8
    eval_every: int = 500
    eval_hours: float = 1.0
    eval_sequences: int = 128
    ckpt_every_s: float = 300.0
    log_every: int = 10
    seed: int = 13579
    device: str = "cpu"
    bf16: bool = False  # autocast the head's training passes to bf16 (CUDA, or a CPU with AMX)

    def stream(
        self, feats_dir: Path, ids_dir: Path, rescore: Callable[[int], None] | None = None
    ) -> StreamConfig:
        """The data stream this training reads: its batch size, length, grouping and seed;
        rescore: rebuilds a shard's missing features when it is first read."""
        return StreamConfig(
            feats_dir=feats_dir,
            ids_dir=ids_dir,
            batch_positions=self.batch_positions,
            max_len=self.max_len,
            group=self.group,
            seed=self.seed,
            rescore=rescore,
        )


def rewarmed(cfg: EagleConfig, state: dict[str, Any], step: int) -> float:
    """After a warm start (fresh optimizer moments) or a longer schedule (schedule_start), the
    learning rate's factor: a linear warm-up again over cfg.warmup steps from the later of the
    two; 1 otherwise."""
    starts = [int(state[k]) for k in ("warm_start", "schedule_start") if k in state]
    return 1.0 if not starts else min(1.0, (step - max(starts) + 1) / cfg.warmup)


def extend_schedule(cfg: EagleConfig, saved: dict[str, Any], state: dict[str, Any]) -> None:
    """A run resumed with another schedule (total_steps, or peak lr) than its checkpoint's config
    `saved`: the cosine is cfg's from here on, reached by a warm-up from the step it stopped at
    (state['schedule_start'], carried by its curve rows), not by a jump. A longer one lets the
    curve go on; a shorter one anneals the rate sooner (to 10 % at the new total_steps)."""
    changed = cfg.total_steps != int(saved.get("total_steps", cfg.total_steps))
    if changed or cfg.lr != float(saved.get("lr", cfg.lr)):
        state["schedule_start"] = state["step"]
        LOG.info(
            "schedule of %d steps at lr %.1e from step %d (warm-up of %d steps)",
            cfg.total_steps,
            cfg.lr,
            state["step"],
            cfg.warmup,
        )


def active_loss(cfg: EagleConfig, step: int) -> str:
    """The loss trained at step: KL during the warm-up (and throughout for 'kl')."""
    return "kl" if cfg.loss == "kl" or step < cfg.kl_warmup else cfg.loss


class EagleTrainer:
    """The head, the target's embeddings and the draft vocabulary's index, on cfg.device."""

    def __init__(self, cfg: EagleConfig, target: Any, vocab: Tensor) -> None:
        """A fresh head over vocab (V_d,) for target (parameters drawn from cfg.seed)."""
        if cfg.loss not in KINDS or cfg.depth < 1:
            raise ValueError(f"loss {cfg.loss!r} (one of {KINDS}), depth {cfg.depth} (>= 1)")
        self.cfg = cfg
        self.device = torch.device(cfg.device)
        embed = target.get_input_embeddings().weight.detach()
        self.embed = embed.to(self.device, torch.float32)  # (V, D)
        gen = torch.Generator().manual_seed(cfg.seed)
        self.head: Eagle3Head = fresh_head(target, vocab, gen).float().to(self.device)
        self.t2d = draft_index(self.head.vocab, int(embed.shape[0]))  # (V,)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        """bf16 autocast where asked for, while training only: held-out α is always measured
        in float32, so rows of runs with and without bf16 compare."""
        if self.cfg.bf16 and self.head.training:
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def passes(self, batch: Batch) -> list[Tensor]:
        """The head's h of drafting depths 1..depth, each (B, L, D) (valid from i >= d - 1)."""
        with self._autocast():
            first = self.head.fused(batch["first"])
            return unrolled(self.head, self.embed[batch["tokens"]], first, self.cfg.depth)

    def _depths(self, batch: Batch, which: Tensor) -> Iterator[tuple[int, Tensor, Tensor, Tensor]]:
        """Per depth d: d, p (N, V_d), log q_d (N, V_d) on the positions `which` (B, L) and
        i >= d - 1, and those positions' mask (B, L)."""
        positions = torch.arange(which.shape[1], device=self.device)
        for d, hidden in enumerate(self.passes(batch), start=1):
            mask = which & (positions >= d - 1)[None]
            with self._autocast():
                logits = self.head.logits(hidden[mask])
            q_log = torch.log_softmax(logits.float(), -1)
            p = soft_labels(
                batch["top_ids"][mask], batch["top_logp"][mask], self.t2d, self.head.size
            )
            yield d, p, q_log, mask

    def loss(self, batch: Batch, kind: str) -> tuple[Tensor, list[float]]:
        """The depth-weighted mean loss (with grad) and each depth's α on answer positions."""
        batch = {k: v.to(self.device) for k, v in batch.items()}
        total, norm, alphas = torch.zeros((), device=self.device), 0.0, []
        for d, p, q_log, mask in self._depths(batch, batch["weight"] > 0):
            w = batch["weight"][mask]
            per = position_loss(kind, p, q_log, self.cfg.lk_lambda)
            scale = self.cfg.depth_decay ** (d - 1)
            total = total + scale * (per * w).sum() / w.sum().clamp(min=1e-9)
            norm += scale
            with torch.no_grad():
                answer = batch["answer"][mask]
                alphas.append(float(alpha(p[answer], q_log[answer]).mean()))
        return total / norm, alphas

    @torch.no_grad()
    def evaluate(self, batches: list[Batch]) -> tuple[list[float], int]:
        """α_d, d = 1..depth, over the answer positions of batches; and their count at d = 1."""
        self.head.eval()
        sums, counts = [0.0] * self.cfg.depth, [0] * self.cfg.depth
        for raw in batches:
            batch = {k: v.to(self.device) for k, v in raw.items()}
            for d, p, q_log, mask in self._depths(batch, batch["answer"]):
                sums[d - 1] += float(alpha(p, q_log).sum())
                counts[d - 1] += int(mask.sum())
        self.head.train()
        return [s / max(1, c) for s, c in zip(sums, counts, strict=True)], counts[0]


def run_eagle(
    cfg: EagleConfig,
    target: Any,
    stream_cfg: StreamConfig,
    out_dir: Path,
    max_steps: int,
    seconds: float | None,
    fill: Tensor | None = None,
    final_eval: bool = False,
    replay: tuple[Callable[[int], Batch], int] | None = None,
    init: Path | None = None,
) -> dict[str, Any]:
    """Train until step max_steps or `seconds` more wall time (resuming from out_dir/ckpt.pt);
    final_eval: score the held-out shards at the end too, where the last step was not scored;
    replay: (step → batch, every): every `every`-th step trains that batch instead of the
    stream's (``specviz.train.heads.replay``); init: without a checkpoint, start from the head
    exported in this folder (``specviz.train.heads.export.warm_start``).

    A fresh run picks the draft vocabulary from the ready training shards' answers
    (``specviz.train.heads.vocab.draft_vocab``, unseen tokens in fill's order). Returns the
    progress.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    ckpt_path = out_dir / "ckpt.pt"
    ckpt = torch.load(ckpt_path, weights_only=False) if ckpt_path.is_file() else None
    warm = warm_start(init, target) if ckpt is None and init is not None else None
    if ckpt is not None:
        vocab = ckpt["head"]["vocab"].cpu()
    elif warm is not None:
        vocab = warm[0].vocab.cpu()
    else:
        train, _ = ready_shards(stream_cfg)
        paths = [ids_path(stream_cfg.ids_dir, i) for i in train]
        counts = answer_counts(paths, int(target.get_input_embeddings().weight.shape[0]))
        vocab = draft_vocab(counts, cfg.vocab, fill)
        LOG.info("draft vocabulary of %d from %d shards' answers", cfg.vocab, len(paths))
    trainer = EagleTrainer(cfg, target, vocab)
    optimizer = torch.optim.AdamW(
        trainer.head.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay
    )
    stream = RegenStream(stream_cfg)
    state: dict[str, Any] = {
        "step": 0,
        "positions": 0,
        "answer_positions": 0,
        "elapsed": 0.0,
        "last_eval": 0.0,
    }
    if ckpt is not None:
        trainer.head.load_state_dict(ckpt["head"])
        optimizer.load_state_dict(ckpt["optimizer"])
        stream.load_state_dict(ckpt["stream"])
        torch.set_rng_state(ckpt["rng"])
        state = ckpt["state"]
        extend_schedule(cfg, ckpt.get("config", {}), state)
        _drop_later_rows(out_dir / "curve.jsonl", state["step"])
        LOG.info("resumed at step %d (%d positions)", state["step"], state["positions"])
    elif warm is not None:
        trainer.head.load_state_dict(warm[0].state_dict())
        state = warm[1]
        rows = "".join(json.dumps(r) + "\n" for r in warm[2])
        (out_dir / "curve.jsonl").write_text(rows, encoding="utf-8")
        LOG.info("warm start from %s at step %d", init, state["step"])
    held: list[Batch] = []
    value = float("nan")
    began, base, saved = time.monotonic(), state["elapsed"], time.monotonic()
    trainer.head.train()
    while state["step"] < max_steps and (seconds is None or time.monotonic() - began < seconds):
        step = state["step"]
        lr = learning_rate(cfg, step) * rewarmed(cfg, state, step)
        kind = active_loss(cfg, step)
        if replay is not None and replay[1] > 0 and step % replay[1] == 0:
            batch = replay[0](step)
        else:
            batch = collate(stream.next_batch(), cfg.max_len, cfg.prompt_weight)
        loss, alphas = trainer.loss(batch, kind)
        descend(optimizer, loss, trainer.head.parameters(), lr, cfg.clip)
        value = float(loss.detach())
        state["step"] = step + 1
        state["positions"] += int((batch["weight"] > 0).sum())
        state["answer_positions"] += int(batch["answer"].sum())
        state["elapsed"] = base + time.monotonic() - began
        if state["step"] % cfg.log_every == 0:
            LOG.info(
                "step %d %s loss %.4f alpha %s lr %.2e epoch %d",
                state["step"],
                kind,
                value,
                [round(a, 3) for a in alphas],
                optimizer.param_groups[0]["lr"],
                stream.epoch,
            )
        hourly = state["elapsed"] - state["last_eval"] >= cfg.eval_hours * 3600
        if state["step"] % cfg.eval_every == 0 or hourly:
            if len(held) * 8 < cfg.eval_sequences:
                held = held_out_batches(stream_cfg, cfg.eval_sequences, cfg.max_len)
            _curve(out_dir, trainer, held, state, kind, value)
        if time.monotonic() - saved > cfg.ckpt_every_s:
            _checkpoint(ckpt_path, trainer, optimizer, stream, state, cfg)
            saved = time.monotonic()
    if final_eval and _last_row_step(out_dir / "curve.jsonl") != state["step"]:
        held = held or held_out_batches(stream_cfg, cfg.eval_sequences, cfg.max_len)
        _curve(out_dir, trainer, held, state, active_loss(cfg, state["step"] - 1), value)
    _checkpoint(ckpt_path, trainer, optimizer, stream, state, cfg)
    save_eagle(trainer.head, target, state["step"], out_dir)
    return dict(state)


def _last_row_step(path: Path) -> int | None:
    """The step of the curve's last row (None without rows)."""
    rows = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    return int(json.loads(rows[-1])["step"]) if rows else None


def _drop_later_rows(path: Path, step: int) -> None:
    """Keep the curve's rows up to step (those after the checkpoint are measured again)."""
    if not path.is_file():
        return
    rows = path.read_text(encoding="utf-8").splitlines()
    kept = [r for r in rows if r.strip() and json.loads(r)["step"] <= step]
    if len(kept) != len(rows):
        path.write_text("".join(r + "\n" for r in kept), encoding="utf-8")


def curve_row(
    state: dict[str, Any],
    kind: str,
    eval_positions: int,
    alphas: list[float],
    extra: dict[str, Any],
) -> dict[str, Any]:
    """One row of the held-out curve: the progress in state (positions, answer positions, step,
    elapsed seconds as hours), the loss kind, what the caller adds (extra: the training loss
    and restart marks, or where a score came from), the held-out set's size and α_1 … α_depth,
    rounded as curve.jsonl keeps them."""
    row: dict[str, Any] = {
        "positions": state["positions"],
        "answer_positions": state["answer_positions"],
        "step": state["step"],
        "hours": round(state["elapsed"] / 3600, 4),
        "loss": kind,
    }
    row |= extra | {"eval_positions": eval_positions}
    return row | {f"alpha_{d}": round(a, 5) for d, a in enumerate(alphas, start=1)}


def _curve(
    out_dir: Path,
    trainer: EagleTrainer,
    held: list[Batch],
    state: dict[str, Any],
    kind: str,
    loss: float,
) -> None:
    """Score the held-out batches and append a row to curve.jsonl (none without batches)."""
    state["last_eval"] = state["elapsed"]
    if not held:
        LOG.info("no held-out shards yet: step %d not evaluated", state["step"])
        return
    alphas, positions = trainer.evaluate(held)
    extra: dict[str, Any] = {"train_loss": round(loss, 5), "vocab": trainer.head.size}
    extra |= {k: state[k] for k in ("warm_start", "schedule_start") if k in state}
    row = curve_row(state, kind, positions, alphas, extra)
    with (out_dir / "curve.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")
    LOG.info("eval %s", row)


def _checkpoint(
    path: Path,
    trainer: EagleTrainer,
    optimizer: torch.optim.Optimizer,
    stream: RegenStream,
    state: dict[str, Any],
    cfg: EagleConfig,
) -> None:
    """Save the head, optimizer, progress, stream state and RNG atomically."""
    save_atomic(
        {
            "head": trainer.head.state_dict(),
            "optimizer": optimizer.state_dict(),
            "state": dict(state),
            "stream": stream.state_dict(),
            "rng": torch.get_rng_state(),
            "config": asdict(cfg),
        },
        path,
    )
