"""Step ``heads vocab``: the EAGLE-3 head's draft vocabulary, picked by coverage.

The head predicts tokens over a draft vocabulary of V_d of the target's V tokens (q = 0 off
it, so drafting stays exact; FR-Spec, EAGLE-3's ``d2t``/``t2d`` maps). Which tokens: the V_d
the target itself writes most often, counted over its answers in the regen ids shards
(``specviz.train.data.regen``; answer tokens are ``tokens[start:]``), training shards only (held-out
ones, index % val_every == val_shard, are not looked at). The *coverage* of a vocabulary is the
share of those answer tokens inside it: an upper bound on how often the target's next token
can be drafted at all; measured on the held-out shards' answers too, where there are any (the
in-sample share flatters a vocabulary picked from few shards). Its *cost* is the median wall
time of one head step (one token after a cached context, the output matrix over V_d and the
softmax), batch 1, on one CPU thread.
"""

from __future__ import annotations

import logging
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from torch import Tensor
from transformers import AutoConfig

from specviz.heads.eagle import Eagle3Head, EagleShape
from specviz.heads.weights import RANKING
from specviz.models.bundled import ensure_bundled_target
from specviz.train.common import write_json_atomic
from specviz.train.data.shards import read_ids, shard_index
from specviz.train.data.stream import is_held_out

LOG = logging.getLogger("specviz.train.heads.vocab")
SIZES = (4096, 8192, 16384, 32768)


def training_ids(
    ids_dir: Path, val_every: int = 40, val_shard: int = 7, held_out: bool = False
) -> list[Path]:
    """The training shards' ids files in ids_dir by index (held_out: the held-out ones)."""
    paths = sorted(ids_dir.glob("ids_*.json.gz"), key=shard_index)
    return [p for p in paths if is_held_out(shard_index(p), val_every, val_shard) == held_out]


def answer_counts(paths: list[Path], vocab_size: int) -> Tensor:
    """How often each token (V,) int64 is an answer token in the ids files `paths`."""
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for path in paths:
        data = read_ids(path)
        for tokens, start in zip(data["tokens"], data["start"], strict=True):
            answer = torch.tensor(tokens[start:], dtype=torch.long)
            counts += torch.bincount(answer, minlength=vocab_size)[:vocab_size]
    return counts


def draft_vocab(counts: Tensor, size: int, fill: Tensor | None = None) -> Tensor:
    """The `size` most frequent tokens (size,) by count (ties: lower id first).

    Where fewer than `size` tokens were seen, the rest follow in fill's order (token ids, e.g.
    a ranking of the target's vocabulary; None: ascending ids).
    """
    if not 0 < size <= counts.shape[0]:
        raise ValueError(f"a draft vocabulary of {size} of {counts.shape[0]} tokens")
    order = torch.sort(-counts, stable=True).indices
    seen = order[counts[order] > 0]
    if seen.shape[0] >= size:
        return seen[:size].clone()
    fill = torch.arange(counts.shape[0]) if fill is None else fill.long()
    rest = fill[counts[fill] == 0]
    return torch.cat([seen, rest])[:size]


def trim_head(head: Eagle3Head, counts: Tensor, size: int) -> Eagle3Head:
    """The head cut to the `size` tokens of its draft vocabulary the target writes most often
    (counts (V,) by token id; ties keep the head's order): the same weights, with the output
    matrix's rows of those tokens only. q stays 0 off the smaller vocabulary, so drafting stays
    exact; a head step's output product shrinks in proportion (the module docstring's cost)."""
    if not 0 < size <= head.size:
        raise ValueError(f"cannot cut a draft vocabulary of {head.size} tokens to {size}")
    keep = torch.sort(-counts[head.vocab], stable=True).indices[:size]  # (size,)
    state = head.state_dict() | {"vocab": head.vocab[keep], "lm": head.lm.detach()[keep]}
    out = Eagle3Head(head.shape, head.vocab[keep])
    out.load_state_dict(state)
    return out.to(head.lm.dtype).train(head.training)


def coverage(counts: Tensor, vocab: Tensor) -> float:
    """The share of counted tokens inside vocab (0 if none were counted)."""
    total = int(counts.sum())
    return int(counts[vocab].sum()) / total if total else 0.0


@torch.inference_mode()
def head_step_ms(shape: EagleShape, size: int, reps: int = 300, past: int = 256) -> float:
    """Median ms of one head step over a draft vocabulary of `size` (one thread, batch 1).

    A step: one token after `past` cached positions through the head's layer, its logits over
    the draft vocabulary and their softmax (random weights: the cost depends on sizes only).
    """
    gen = torch.Generator().manual_seed(0)
    head = Eagle3Head(shape, torch.arange(size), generator=gen).eval()
    d = shape.width
    keys = torch.randn(1, shape.kv_heads, past, shape.head_dim, generator=gen)
    values = torch.randn(1, shape.kv_heads, past, shape.head_dim, generator=gen)
    embeds, features = torch.randn(1, 1, d, generator=gen), torch.randn(1, 1, d, generator=gen)
    positions = torch.tensor([past])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    times = []
    try:
        for rep in range(reps + 10):
            began = time.perf_counter()
            hidden, _ = head(embeds, features, positions, past=(keys, values))
            torch.softmax(head.logits(hidden), -1)
            if rep >= 10:  # the first ones warm up
                times.append((time.perf_counter() - began) * 1000)
    finally:
        torch.set_num_threads(threads)
    return statistics.median(times)


def vocab_rows(
    counts: Tensor,
    shape: EagleShape,
    sizes: tuple[int, ...] = SIZES,
    reps: int = 300,
    fill: Tensor | None = None,
    held_out: Tensor | None = None,
) -> list[dict[str, Any]]:
    """Per size (and the whole vocabulary last): coverage (in-sample, and of the held-out
    counts where given) and the head's ms per draft step."""
    rows = []
    for size in (*sizes, int(counts.shape[0])):
        vocab = draft_vocab(counts, size, fill)
        row: dict[str, Any] = {"size": size, "coverage": round(coverage(counts, vocab), 5)}
        if held_out is not None:
            row["held_out_coverage"] = round(coverage(held_out, vocab), 5)
        row["head_ms_per_step"] = round(head_step_ms(shape, size, reps), 4)
        rows.append(row)
    return rows


def run_heads_vocab(
    ids_dir: Path, out: Path, sizes: tuple[int, ...], reps: int, threads: int
) -> dict[str, Any]:
    """Count the bundled target's answer tokens in ids_dir; write the rows and ranking to out."""

    torch.set_num_threads(threads)
    config = AutoConfig.from_pretrained(ensure_bundled_target(lambda m: LOG.info("%s", m)))
    paths = training_ids(ids_dir)
    if not paths:
        raise SystemExit(f"no training ids shards in {ids_dir}; run the `regen` step first")
    counts = answer_counts(paths, int(config.vocab_size))
    held = training_ids(ids_dir, held_out=True)
    held_counts = answer_counts(held, int(config.vocab_size)) if held else None
    fill = ranking(RANKING)
    result: dict[str, Any] = {
        "shards": len(paths),
        "held_out_shards": len(held),
        "answer_tokens": int(counts.sum()),
        "distinct": int((counts > 0).sum()),
        "threads_timed": 1,
        "rows": vocab_rows(counts, EagleShape.of(config), sizes, reps, fill, held_counts),
        "ranking": draft_vocab(counts, max(sizes), fill).tolist(),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out, result)
    for row in result["rows"]:
        LOG.info("%s", row)
    return result


def ranking(path: Path) -> Tensor | None:
    """A token ranking (V,) of the target's vocabulary (``ranking`` in path), or None."""
    if not path.is_file():
        return None
    return load_file(str(path))["ranking"].long()
