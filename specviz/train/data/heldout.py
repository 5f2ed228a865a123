"""The held-out set that a head's curve reads.

Shards whose index % val_every == val_shard are held out
(``specviz.train.data.stream.is_held_out``). The prompt pool is drawn from the text installed on the
machine that answers it (``specviz.train.data.regen.prompt_pool``), so shards made on different
machines can hold one prompt under different indices. A held-out sequence whose *prompt* (its
chat-formatted token ids before the answer, ``specviz.train.data.regen.prompt_key``) a training
shard also holds is therefore not held out, and the set leaves it out: the held-out set is the
held-out shards' sequences whose prompts no training shard holds, lowest shard first. Step ``regen``
does not answer a prompt that a shard already holds, so the shards it adds later leave the set as it
is.
"""

from __future__ import annotations

from torch import Tensor

from specviz.train.data.shards import prompt_key, shard_prompts
from specviz.train.data.stream import Seq, StreamConfig, collate, load_shard, ready_shards

Batch = dict[str, Tensor]


def held_out_sequences(stream: StreamConfig, count: int) -> list[Seq]:
    """Up to count held-out sequences of ≥ 2 tokens whose prompts no ready training shard holds,
    lowest shard first, in shard order."""
    train, held = ready_shards(stream)
    trained = shard_prompts(stream.ids_dir, train)
    seqs: list[Seq] = []
    for index in held:
        seqs += [
            s
            for s in load_shard(stream, index)
            if prompt_key(s["tokens"].tolist(), s["start"]) not in trained
        ]
        if len(seqs) >= count:
            break
    return [s for s in seqs[:count] if s["tokens"].shape[0] > 1]


def held_out_batches(stream: StreamConfig, count: int, max_len: int) -> list[Batch]:
    """The held-out sequences (``held_out_sequences``) sorted by length, collated 8 a batch."""
    seqs = sorted(held_out_sequences(stream, count), key=lambda s: int(s["tokens"].shape[0]))
    return [collate(seqs[at : at + 8], max_len, 0.0) for at in range(0, len(seqs), 8)]
