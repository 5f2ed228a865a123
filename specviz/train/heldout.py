"""The held-out set that a head's curve reads, and scoring an exported head on it.

Shards whose index % val_every == val_shard are held out (``specviz.train.vocab.is_held_out``).
The prompt pool is drawn from the text installed on the machine that answers it
(``specviz.train.regen.prompt_pool``), so shards made on different machines can hold one prompt
under different indices. A held-out sequence whose *prompt* (its chat-formatted token ids before
the answer, ``specviz.train.regen.prompt_key``) a training shard also holds is therefore not
held out, and the set leaves it out: the held-out set is the held-out shards' sequences whose
prompts no training shard holds, lowest shard first. Step ``regen`` does not answer a prompt
that a shard already holds, so the shards it adds later leave the set as it is.

``score_exported`` scores heads exported with its summary (``heads-export eagle3``) on that
set: a curve row each, at the step it was exported from, so the snapshots of a run can be scored
again on a corrected set, each at the positions and hours it had trained.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch import Tensor

from specviz.train.regen import prompt_key, shard_prompts
from specviz.train.regen_stream import Seq, StreamConfig, collate, load_shard, ready_shards

Batch = dict[str, Tensor]


def held_out_sequences(stream: StreamConfig, count: int) -> list[Seq]:
    """Up to count held-out sequences of ≥ 2 tokens whose prompts no ready training shard holds,
    lowest shard first, in shard order."""
    train, held = ready_shards(stream)
    trained = shard_prompts(stream.ids_dir, train)
    seqs: list[Seq] = []
    for index in held:
        seqs += [s for s in load_shard(stream, index)
                 if prompt_key(s["tokens"].tolist(), s["start"]) not in trained]  # fmt: skip
        if len(seqs) >= count:
            break
    return [s for s in seqs[:count] if s["tokens"].shape[0] > 1]


def held_out_batches(stream: StreamConfig, count: int, max_len: int) -> list[Batch]:
    """The held-out sequences (``held_out_sequences``) sorted by length, collated 8 a batch."""
    seqs = sorted(held_out_sequences(stream, count), key=lambda s: int(s["tokens"].shape[0]))
    return [collate(seqs[at : at + 8], max_len, 0.0) for at in range(0, len(seqs), 8)]


def score_exported(folders: list[Path], target: Any, stream: StreamConfig) -> list[dict[str, Any]]:
    """The curve row of each head exported in folders, scored on the held-out set (built once
    per size and length the heads' configs ask for): its step, positions, answer positions and
    hours as exported, its loss at that step, its draft vocabulary's size (``vocab``: a head
    cut by ``heads-export --vocab`` scores below its training size), the set's size and
    α_1 … α_depth
    (``specviz.train.heads3.Heads3Trainer.evaluate``)."""
    from specviz.train.heads3 import Heads3Config, Heads3Trainer, active_loss, curve_row
    from specviz.train.heads3_export import warm_start

    held: dict[tuple[int, int], list[Batch]] = {}
    rows = []
    for folder in folders:
        head, state, _ = warm_start(folder, target)
        saved = json.loads((folder / "eagle3.json").read_text(encoding="utf-8"))["config"]
        fields = Heads3Config.__dataclass_fields__
        cfg = Heads3Config(**{k: v for k, v in saved.items() if k in fields})
        trainer = Heads3Trainer(cfg, target, head.vocab.cpu())
        trainer.head.load_state_dict(head.state_dict())
        key = (cfg.eval_sequences, cfg.max_len)
        if key not in held:
            held[key] = held_out_batches(stream, *key)
        alphas, positions = trainer.evaluate(held[key])
        kind = active_loss(cfg, state["step"] - 1)
        extra = {"scored_from": "export", "vocab": head.size}
        rows.append(curve_row(state, kind, positions, alphas, extra))
    return rows
