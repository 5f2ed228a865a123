"""Step ``data teacher``: cache the target's top-k log-probs, in resumable shards.

Jobs alternate between (a) the target answering chat prompts (sampled at T=1, T=0.7 or greedily;
the T=1 log-probs along its own answers are stored) and (b) teacher-forced corpus windows. Job ``i``
is a pure function of ``(seed, i)``, so a restarted run skips finished shards and continues.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from specviz.train.common import fill_shards, load_target, work_dir
from specviz.train.data.batching import left_pad, next_tokens, topk_logp
from specviz.train.data.corpus import load_docs
from specviz.train.data.prompts import training_prompts

LOG = logging.getLogger("specviz.train.data.teacher")
TEMPERATURES = (1.0, 1.0, 0.0, 0.7)


@dataclass
class TeacherConfig:
    """Knobs of the teacher pass."""

    seed: int = 1234
    topk: int = 32
    gen_batch: int = 64
    max_new: int = 128
    max_prompt: int = 256
    score_batch: int = 16
    score_len: int = 256
    score_every: int = 5


def shard_dir() -> Path:
    """Folder of ``shard_XXXXX.pt`` files."""
    return work_dir("teacher")


def shard_path(index: int) -> Path:
    """Teacher shard index's file."""
    return shard_dir() / f"shard_{index:05d}.pt"


def prompt_batch(
    tokenizer: Any, prompts: list[str], count: int, limit: int, gen: torch.Generator
) -> list[list[int]]:
    """A random slice of count prompts (sorted by length: little padding), as chat token ids
    of at most limit tokens each."""
    first = int(torch.randint(len(prompts) - count, (1,), generator=gen))
    return [chat_ids(tokenizer, prompts[i], limit) for i in range(first, first + count)]


def chat_ids(tokenizer: Any, prompt: str, limit: int) -> list[int]:
    """Token ids [P] of a one-turn chat prompt with the generation header appended."""
    messages = [{"role": "user", "content": prompt}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids: list[int] = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids[-limit:]


def _topk_rows(model: Any, hidden: torch.Tensor, topk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k ids [B, L, K] (int32) and log-probs (fp16) from hidden states [B, L, D], row by row."""
    ids, vals = zip(*(topk_logp(model, row, topk) for row in hidden), strict=True)
    return torch.stack(ids), torch.stack(vals)


@torch.inference_mode()
def sample_batch(
    model: Any,
    prompts: list[list[int]],
    eos: int,
    max_new: int,
    temperature: float,
    topk: int,
    gen: torch.Generator,
) -> list[dict[str, torch.Tensor | int]]:
    """Sample answers to left-padded prompts; keep T=1 top-k log-probs [L-1, K] per sequence."""
    ids, mask, pos = left_pad(prompts, eos)
    width = ids.shape[1]
    base = model.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
    prompt_ids, prompt_logp = _topk_rows(model, base.last_hidden_state[:, :-1], topk)
    cache, logits = base.cache, model.lm_head(base.last_hidden_state[:, -1])
    done = torch.zeros(len(prompts), dtype=torch.bool)
    steps: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    for _ in range(max_new):
        logp = torch.log_softmax(logits.float(), dim=-1)
        top = logp.topk(topk, dim=-1)
        token = next_tokens(logp, temperature, gen)
        token = torch.where(done, torch.full_like(token, eos), token)
        steps.append((token, top.indices.to(torch.int32), top.values.to(torch.float16)))
        done |= token == eos
        if bool(done.all()):
            break
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        pos = pos[:, -1:] + 1
        out = model(
            input_ids=token[:, None],
            attention_mask=mask,
            position_ids=pos,
            cache=cache,
            use_cache=True,
        )
        cache, logits = out.cache, out.logits[:, -1]
    tokens = torch.stack([s[0] for s in steps], 1)
    top_ids, top_logp = torch.stack([s[1] for s in steps], 1), torch.stack([s[2] for s in steps], 1)
    records: list[dict[str, torch.Tensor | int]] = []
    for row, p in enumerate(prompts):
        hits = (tokens[row] == eos).nonzero()
        n = int(hits[0]) + 1 if len(hits) else tokens.shape[1]
        keep = slice(width - len(p), width - 1)
        records.append(
            {
                "tokens": torch.tensor(p + tokens[row, :n].tolist(), dtype=torch.int32),
                "start": 0,
                "ids": torch.cat([prompt_ids[row, keep], top_ids[row, :n]]),
                "logp": torch.cat([prompt_logp[row, keep], top_logp[row, :n]]),
            }
        )
    return records


@torch.inference_mode()
def score_batch(
    model: Any, windows: torch.Tensor, topk: int
) -> list[dict[str, torch.Tensor | int]]:
    """Teacher-forced top-k log-probs [L-1, K] for each window of ``windows`` [B, L]."""
    logp = torch.log_softmax(model(input_ids=windows).logits[:, :-1].float(), dim=-1)
    top = logp.topk(topk, dim=-1)
    ids, vals = top.indices.to(torch.int32), top.values.to(torch.float16)
    return [
        {"tokens": windows[r].to(torch.int32), "start": 0, "ids": ids[r], "logp": vals[r]}
        for r in range(windows.shape[0])
    ]


def corpus_windows(
    tokenizer: Any, docs: list[dict[str, str]], count: int, length: int, gen: torch.Generator
) -> torch.Tensor:
    """``count`` random token windows [count, length], half code and half prose."""
    by_kind = {k: [d["text"] for d in docs if d["kind"] == k] for k in ("code", "prose")}
    rows: list[list[int]] = []
    while len(rows) < count:
        pool = by_kind["code" if len(rows) % 2 == 0 else "prose"] or by_kind["code"]
        text = pool[int(torch.randint(len(pool), (1,), generator=gen))]
        start = int(torch.randint(max(1, len(text) - length * 3), (1,), generator=gen))
        start = text.rfind("\n", 0, start) + 1
        ids = tokenizer(text[start : start + length * 8], add_special_tokens=False)["input_ids"]
        if len(ids) >= length:
            rows.append(ids[:length])
    return torch.tensor(rows, dtype=torch.long)


def run_job(
    index: int,
    cfg: TeacherConfig,
    models: tuple[Any, Any],
    tokenizer: Any,
    prompts: list[str],
    docs: list[dict[str, str]],
) -> dict[str, Any]:
    """Compute shard ``index`` (deterministic in ``cfg.seed`` and ``index``).

    ``models`` is (fp32 target for sampling, bf16 copy for the cheaper corpus scoring);
    ``prompts`` must be sorted by length so that one batch (a random slice) needs little padding.
    """
    gen = torch.Generator().manual_seed(cfg.seed * 100_003 + index)
    model, scorer = models
    if index % cfg.score_every == cfg.score_every - 1:
        windows = corpus_windows(tokenizer, docs, cfg.score_batch, cfg.score_len, gen)
        return {"kind": "score", "records": score_batch(scorer, windows, cfg.topk)}
    batch = prompt_batch(tokenizer, prompts, cfg.gen_batch, cfg.max_prompt, gen)
    temperature = TEMPERATURES[index % len(TEMPERATURES)]
    records = sample_batch(
        model, batch, int(tokenizer.eos_token_id), cfg.max_new, temperature, cfg.topk, gen
    )
    return {"kind": f"gen@T={temperature}", "records": records}


def run_teacher(cfg: TeacherConfig, max_jobs: int, seconds: float | None, threads: int) -> None:
    """Fill ``shard_dir()`` with shards ``0..max_jobs-1``, skipping finished ones, until budget."""
    model, tokenizer = load_target(threads)
    models = (model, copy.deepcopy(model).to(torch.bfloat16))
    prompts = sorted(training_prompts(torch.Generator().manual_seed(cfg.seed)), key=len)
    docs = load_docs()
    total = 0
    for index, shard, took in fill_shards(
        range(max_jobs),
        shard_path,
        lambda index: run_job(index, cfg, models, tokenizer, prompts, docs),
        seconds,
        LOG,
    ):
        n = sum(int(r["ids"].shape[0]) for r in shard["records"])
        total += n
        rate = n / took
        LOG.info(
            "shard %d %s: %d positions, %.0f pos/s, %d this run",
            index,
            shard["kind"],
            n,
            rate,
            total,
        )
