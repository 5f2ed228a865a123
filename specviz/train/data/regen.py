"""Step ``data regen``: the target answers many prompts; its answers and what a head reads, saved.

A drafting head learns best from the target's own text (SpecForge regenerates its training
answers with the target; DistillSpec trains on the policy it will draft for). This step has the
target answer a pool of prompts (`prompt_pool`: templated requests, Python docstrings, man
pages, Debian package descriptions, GNU info manuals), a batch of B rows at a time, sampled at
T = 1 or greedily, and saves in the same pass, with no second pass:

* the sequences as token ids (prompt + answer, and where the answer starts): small, a
  ``ids_XXXXX.json.gz`` per shard, meant to be kept with the project;
* what an EAGLE-3 head reads and learns from, at every position j < L - 1 of each sequence:
  the hidden states of a low, a middle and a high layer concatenated, h_j (3D,) in bf16, and
  the target's top-k next-token log-probabilities at T = 1, log p(x_{j+1} = k-th | x_{<=j})
  (K,) with their token ids: ``feats_XXXXX.pt``, large, rebuilt by rerunning this step.

A shard is a pure function of (seed, index, the prompt pool) less the prompts that the shards
already made hold (``prompt_key``: a prompt is answered once, and a held-out one is never
trained; the pool depends on the text a machine has installed, so shards made on two machines
can meet); a rerun skips finished shards, and where a shard's
ids exist but its features do not (a fresh machine), one teacher-forced pass over the ids
rebuilds them instead of generating (or training rebuilds them when it first reads the shard:
`rescorer`, and this step with rescore=False only generates). ``manifest.json`` records, per
shard, the file sizes, their sha256, positions and generation time. Shards with index %
`val_every` == `val_shard` are held out for validation.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from specviz.heads.eagle import fused_layers
from specviz.train.common import (
    Deadline,
    build_once,
    load_target,
    save_atomic,
    work_dir,
    write_json_atomic,
)
from specviz.train.data.corpus import load_docs
from specviz.train.data.prompts import training_prompts, workload_style_prompts
from specviz.train.data.shards import (
    _sha256,
    _write_ids,
    feats_path,
    ids_path,
    read_ids,
    shard_index,
    shard_prompts,
)
from specviz.train.data.sources import source_prompts
from specviz.train.data.target_passes import answer_batch, score_batch
from specviz.train.data.teacher import chat_ids

LOG = logging.getLogger("specviz.train.data.regen")
Record = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class RegenConfig:
    """Knobs of the generation: pool size, batch, lengths, saved layers and top-k."""

    seed: int = 8642
    prompts: int = 24_000  # size of the prompt pool (sources mixed, then shuffled)
    batch: int = 16  # rows decoded together
    per_shard: int = 64  # sequences per shard (per_shard / batch batches)
    max_prompt: int = 256  # prompt tokens kept (the last ones)
    max_new: int = 160  # answer tokens at most
    topk: int = 32  # soft labels kept per position
    greedy_every: int = 3  # shards with index % greedy_every == 1 answer greedily, others at T = 1
    val_every: int = 40
    val_shard: int = 7


def regen_dir() -> Path:
    """Folder of the features and the manifest: ``work_dir()/regen``."""
    return work_dir("regen")


def prompt_pool(cfg: RegenConfig) -> list[tuple[str, str]]:
    """(source, prompt) pairs, at most cfg.prompts: an equal share of every source, shuffled,
    then what the shares left of the larger sources, shuffled, each text once, until cfg.prompts
    (appended, so the shards made from the first part keep their prompts)."""
    gen = torch.Generator().manual_seed(cfg.seed)
    docs = load_docs()
    pools = source_prompts(gen)
    pools["templates+stdlib"] = sorted(set(training_prompts(gen)))
    pools["workload-style"] = sorted(set(workload_style_prompts(docs, gen)))
    share = cfg.prompts // len(pools)
    mixed: list[tuple[str, str]] = []
    rest: list[tuple[str, str]] = []
    for name in sorted(pools):
        items = pools[name]
        order = torch.randperm(len(items), generator=gen).tolist()
        mixed += [(name, items[i]) for i in order[:share]]
        rest += [(name, items[i]) for i in sorted(order[share:])]
    order = torch.randperm(len(mixed), generator=gen).tolist()
    first = [mixed[i] for i in order]
    seen = {text for _, text in first}
    more: list[tuple[str, str]] = []
    for i in torch.randperm(len(rest), generator=gen).tolist():
        if len(first) + len(more) >= cfg.prompts:
            break
        if rest[i][1] not in seen:  # a text once only
            seen.add(rest[i][1])
            more.append(rest[i])
    return first + more


def shard_temperature(index: int, cfg: RegenConfig) -> float:
    """0.0 (greedy) for index % greedy_every == 1, else 1.0."""
    return 0.0 if index % cfg.greedy_every == 1 else 1.0


def make_shard(
    index: int,
    cfg: RegenConfig,
    model: Any,
    tokenizer: Any,
    pool: list[tuple[str, str]],
    answered: AbstractSet[tuple[int, ...]] = frozenset(),
) -> tuple[Record, list[Record]]:
    """Generate shard index: its ids record and its per-sequence features; the pool's prompts
    among `answered` (``prompt_key``s that shards already hold) are left out."""
    gen = torch.Generator(device=model.device).manual_seed(cfg.seed * 100_003 + index)
    eos, temperature = int(tokenizer.eos_token_id), shard_temperature(index, cfg)
    first = index * cfg.per_shard
    picked = [(first + i, *pool[first + i]) for i in range(min(cfg.per_shard, len(pool) - first))]
    encoded = [(i, src, chat_ids(tokenizer, text, cfg.max_prompt)) for i, src, text in picked]
    encoded = [item for item in encoded if tuple(item[2]) not in answered]
    encoded.sort(key=lambda item: len(item[2]))  # similar lengths share a batch: less padding
    ids: Record = {"index": index, "temperature": temperature, "prompt_index": [], "source": []}
    ids |= {"tokens": [], "start": []}
    feats: list[Record] = []
    for at in range(0, len(encoded), cfg.batch):
        chunk = encoded[at : at + cfg.batch]
        for (i, src, _), rec in zip(
            chunk,
            answer_batch(
                model,
                [c[2] for c in chunk],
                eos,
                temperature,
                gen,
                max_new=cfg.max_new,
                topk=cfg.topk,
            ),
            strict=True,
        ):
            ids["prompt_index"].append(i)
            ids["source"].append(src)
            ids["tokens"].append(rec["tokens"].tolist())
            ids["start"].append(rec["start"])
            feats.append({k: rec[k] for k in ("hidden", "top_ids", "top_logp")})
    return ids, feats


def rescore_shard(ids: Record, cfg: RegenConfig, model: Any, pad: int) -> list[Record]:
    """Rebuild a shard's features from its ids, teacher-forced, cfg.batch sequences a pass."""
    seqs: list[list[int]] = ids["tokens"]
    feats: list[Record] = []
    for at in range(0, len(seqs), cfg.batch):
        feats += score_batch(model, seqs[at : at + cfg.batch], pad, cfg.topk)
    return feats


def rescorer(
    model: Any, pad: int, ids_dir: Path, feats_dir: Path, cfg: RegenConfig | None = None
) -> Callable[[int], None]:
    """A function that rebuilds shard index's features from its ids into feats_dir, as this
    step would (for training that rescores the shards it reads, specviz.train.data.stream)."""
    cfg = cfg if cfg is not None else RegenConfig()
    layers = list(fused_layers(int(model.config.num_hidden_layers)))

    def rescore(index: int) -> None:
        path = feats_path(feats_dir, index)

        def build() -> None:
            began = time.perf_counter()
            feats = rescore_shard(read_ids(ids_path(ids_dir, index)), cfg, model, pad)
            save_atomic({"index": index, "layers": layers, "seqs": feats}, path)
            LOG.info("shard %d rescored for training in %.0f s", index, time.perf_counter() - began)

        feats_dir.mkdir(parents=True, exist_ok=True)
        build_once(path, build)  # another process rebuilding it: wait for its file

    return rescore


def _file_entry(path: Path) -> Record:
    """A file's name, size in bytes and sha256."""
    return {"file": path.name, "bytes": path.stat().st_size, "sha256": _sha256(path)}


def _entry(ids_file: Path, feat_path: Path, ids: Record, seconds: float, made: str) -> Record:
    """A manifest row: files with sizes and sha256, counts, time."""
    answer = sum(len(t) - s for t, s in zip(ids["tokens"], ids["start"], strict=True))
    return {
        "ids": _file_entry(ids_file),
        "feats": _file_entry(feat_path),
        "sequences": len(ids["tokens"]),
        "positions": sum(len(t) - 1 for t in ids["tokens"]),
        "answer_tokens": answer,
        "temperature": ids["temperature"],
        "seconds": round(seconds, 2),
        "made": made,
    }


def run_regen(
    cfg: RegenConfig,
    shards: Sequence[int],
    ids_dir: Path,
    seconds: float | None,
    threads: int,
    *,
    loaded: tuple[Any, Any] | None = None,
    out_dir: Path | None = None,
    pool: list[tuple[str, str]] | None = None,
    rescore: bool = True,
) -> Record:
    """Fill ids_dir and out_dir (default regen_dir()) with the shards in `shards`; returns the
    manifest. loaded: (model, tokenizer) to answer with, on any device (default: the bundled
    target on the CPU); pool: the prompt pool (default prompt_pool(cfg)); rescore=False: skip
    the shards whose ids exist without features (training rebuilds them: `rescorer`)."""
    ids_dir.mkdir(parents=True, exist_ok=True)
    feats_dir = out_dir if out_dir is not None else regen_dir()
    feats_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = feats_dir / "manifest.json"
    manifest: Record = (
        json.loads(manifest_path.read_text()) if manifest_path.is_file() else {"shards": {}}
    )
    model, tokenizer = loaded if loaded is not None else load_target(threads)
    manifest["config"] = asdict(cfg)
    manifest["layers"] = list(fused_layers(int(model.config.num_hidden_layers)))
    deadline = Deadline(seconds)
    for index in shards:
        ids_file, feat_path = ids_path(ids_dir, index), feats_path(feats_dir, index)
        if feat_path.is_file() and ids_file.is_file():
            if str(index) not in manifest["shards"]:  # rebuilt by training (`rescorer`)
                entry = _entry(ids_file, feat_path, read_ids(ids_file), 0.0, "rescored in training")
                manifest["shards"][str(index)] = entry
                write_json_atomic(manifest_path, manifest)
            continue
        if ids_file.is_file() and not rescore:
            continue
        if deadline.passed():
            LOG.info("time budget spent; stopping before shard %d", index)
            break
        began = time.perf_counter()
        if ids_file.is_file():
            ids = read_ids(ids_file)
            feats, made = rescore_shard(ids, cfg, model, int(tokenizer.eos_token_id)), "rescored"
        else:
            pool = pool if pool is not None else prompt_pool(cfg)
            if index * cfg.per_shard >= len(pool):
                LOG.info("prompt pool used up: no shard %d", index)
                continue
            made_ids = sorted(map(shard_index, ids_dir.glob("ids_*.json.gz")))
            answered = shard_prompts(ids_dir, made_ids)  # read again: workers add shards
            ids, feats = make_shard(index, cfg, model, tokenizer, pool, answered)
            made = "generated"
        save_atomic({"index": index, "layers": manifest["layers"], "seqs": feats}, feat_path)
        if made == "generated":
            _write_ids(ids_file, ids)
        took = time.perf_counter() - began
        manifest["shards"][str(index)] = _entry(ids_file, feat_path, ids, took, made)
        write_json_atomic(manifest_path, manifest)
        row = manifest["shards"][str(index)]
        LOG.info(
            "shard %d (%s, T=%s): %d answer tokens in %.0f s, %.1f answer tok/s",
            index,
            made,
            ids["temperature"],
            row["answer_tokens"],
            took,
            row["answer_tokens"] / took,
        )
    return manifest
