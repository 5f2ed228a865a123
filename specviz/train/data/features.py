"""Step ``data features``: the target's last hidden states over text, for training drafting heads.

Each job is a pure function of ``(seed, index)`` and is saved as one shard, so a restarted run
skips finished shards. Jobs alternate between the target answering training prompts (its own
text, sampled at T=1 or greedily; prompts in the styles of chat, code, JSON and prose requests)
and teacher-forced windows of the offline corpus. Every shard holds, per sequence: the tokens
(L,), the target's post-norm features (L, D) in fp16 (what its output head reads), the log of
its softmax normaliser (L,) and where the answer starts. One batched teacher-forced pass of the
target computes the features; generating the answers is the expensive part, so where the
draft pipeline's teacher step already cached the target's answers (``teacher/shard_*.pt``) the
job with the same index scores those instead.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from specviz.train.common import fill_shards, load_target, work_dir
from specviz.train.data.batching import right_pad
from specviz.train.data.corpus import load_docs
from specviz.train.data.prompts import training_prompts, workload_style_prompts
from specviz.train.data.teacher import corpus_windows, prompt_batch, sample_batch, shard_path

LOG = logging.getLogger("specviz.train.data.features")
TEMPERATURES = (1.0, 0.0, 1.0)


@dataclass(frozen=True, kw_only=True)
class FeatureConfig:
    """Knobs of the feature pass."""

    seed: int = 2468
    gen_batch: int = 32
    max_new: int = 128
    max_prompt: int = 192
    score_batch: int = 16
    score_len: int = 256
    score_every: int = 4  # every 4th job scores corpus windows


def feature_dir() -> Path:
    """Folder of ``features_XXXXX.pt`` shards."""
    return work_dir("features")


@torch.inference_mode()
def target_features(model: Any, seqs: list[list[int]], pad: int) -> list[dict[str, torch.Tensor]]:
    """Post-norm features (L, D) fp16 and log-normalisers (L,) for each sequence, one pass."""
    ids, mask = right_pad(seqs, pad)
    hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state  # (B, L, D)
    out = []
    for row, s in enumerate(seqs):
        h = hidden[row, : len(s)]  # (L, D)
        logz = torch.logsumexp(model.lm_head(h).float(), dim=-1)  # (L,)
        out.append({"features": h.to(torch.float16), "logz": logz})
    return out


def teacher_answers(index: int) -> list[dict[str, Any]] | None:
    """The records of the draft pipeline's teacher shard ``index``, if it made one."""
    path = shard_path(index)
    if not path.is_file():
        return None
    records: list[dict[str, Any]] = torch.load(path, weights_only=False)["records"]
    return records


def run_job(
    index: int, cfg: FeatureConfig, model: Any, tokenizer: Any, prompts: list[str], docs: Any
) -> dict[str, Any]:
    """Compute shard ``index`` (deterministic in ``cfg.seed`` and ``index``).

    Where the draft pipeline already cached the target's answers (its teacher shard ``index``),
    their tokens are scored teacher-forced instead of generating new answers.
    """
    gen = torch.Generator().manual_seed(cfg.seed * 100_003 + index)
    eos = int(tokenizer.eos_token_id)
    cached = teacher_answers(index)
    if cached is not None:
        seqs = [r["tokens"].tolist() for r in cached]
        starts, kind = [0] * len(seqs), "teacher-shard"
    elif index % cfg.score_every == cfg.score_every - 1:
        windows = corpus_windows(tokenizer, docs, cfg.score_batch, cfg.score_len, gen)
        seqs, starts, kind = windows.tolist(), [0] * len(windows), "corpus"
    else:
        batch = prompt_batch(tokenizer, prompts, cfg.gen_batch, cfg.max_prompt, gen)
        temperature = TEMPERATURES[index % len(TEMPERATURES)]
        records = sample_batch(model, batch, eos, cfg.max_new, temperature, 1, gen)
        seqs = [r["tokens"].tolist() for r in records]  # type: ignore[union-attr]
        starts, kind = [len(p) for p in batch], f"answers@T={temperature}"
    feats = target_features(model, seqs, eos)
    return {
        "kind": kind,
        "seqs": [
            {"tokens": torch.tensor(s, dtype=torch.int32), "start": st, **f}
            for s, st, f in zip(seqs, starts, feats, strict=True)
        ],
    }


def run_features(cfg: FeatureConfig, jobs: range, seconds: float | None, threads: int) -> None:
    """Fill ``feature_dir()`` with the shards of ``jobs``, skipping finished ones."""
    model, tokenizer = load_target(threads)
    gen = torch.Generator().manual_seed(cfg.seed)
    docs = load_docs()
    pool = training_prompts(gen) + workload_style_prompts(docs, gen)
    order = torch.randperm(len(pool), generator=gen).tolist()
    prompts = sorted((pool[i] for i in order), key=len)
    for index, shard, took in fill_shards(
        jobs,
        lambda index: feature_dir() / f"features_{index:05d}.pt",
        lambda index: run_job(index, cfg, model, tokenizer, prompts, docs),
        seconds,
        LOG,
    ):
        n = sum(int(s["tokens"].shape[0]) for s in shard["seqs"])
        LOG.info("shard %d %s: %d positions, %.0f pos/s", index, shard["kind"], n, n / took)
