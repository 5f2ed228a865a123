"""The target's batched passes of ``data regen``: answering prompts, and scoring sequences.

Both return, per row, what an EAGLE-3 head reads and learns from: the hidden states of a low, a
middle and a high layer concatenated (bf16) and the target's top-k next-token log-probabilities
at T = 1 with their token ids, at every position but the last.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from specviz.core.cache import forward_kwargs
from specviz.heads.eagle import fused_layers
from specviz.train.data.batching import left_pad, next_tokens, right_pad, topk_logp

Record = dict[str, Any]


def _fused(states: tuple[Tensor, ...], layers: tuple[int, ...]) -> Tensor:
    """The chosen hidden states (B, T, D) each, concatenated: (B, T, len(layers) * D), bf16."""
    return torch.cat([states[i] for i in layers], dim=-1).to(torch.bfloat16)


@torch.inference_mode()
def answer_batch(
    model: Any,
    prompts: list[list[int]],
    eos: int,
    temperature: float,
    gen: torch.Generator,
    *,
    max_new: int,
    topk: int,
) -> list[Record]:
    """The target's answers to B prompts, with fused hidden states and top-k soft labels.

    Returns per row: tokens (L,) int32 (prompt + answer, ending at the first eos), start (the
    prompt's length), hidden (L - 1, 3D) bf16 and top_ids / top_logp (L - 1, K) for positions
    0..L-2, all taken from the passes that generated the answer.
    """
    layers = fused_layers(int(model.config.num_hidden_layers))
    dev = model.device
    ids, mask, pos = (t.to(dev) for t in left_pad(prompts, eos))
    width, kwarg = ids.shape[1], forward_kwargs(model)[0]
    out = model.model(
        input_ids=ids,
        attention_mask=mask,
        position_ids=pos,
        use_cache=True,
        output_hidden_states=True,
    )
    hidden = [_fused(out.hidden_states, layers)]  # (B, W, 3D), then (B, 1, 3D) per step
    finals = [out.last_hidden_state]
    cache = getattr(out, "past_key_values", None) or getattr(out, "cache", None)
    logits = model.lm_head(out.last_hidden_state[:, -1])
    done = torch.zeros(len(prompts), dtype=torch.bool, device=dev)
    tokens: list[Tensor] = []
    for _ in range(max_new):
        token = next_tokens(logits, temperature, gen)
        token = torch.where(done, torch.full_like(token, eos), token)
        tokens.append(token)
        done |= token == eos
        if bool(done.all()) or len(tokens) == max_new:
            break
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        pos = pos[:, -1:] + 1
        out = model.model(
            input_ids=token[:, None],
            attention_mask=mask,
            position_ids=pos,
            use_cache=True,
            output_hidden_states=True,
            **{kwarg: cache},
        )
        cache = getattr(out, "past_key_values", None) or getattr(out, "cache", None)
        hidden.append(_fused(out.hidden_states, layers))
        finals.append(out.last_hidden_state)
        logits = model.lm_head(out.last_hidden_state[:, -1])
    answers, feats, last = torch.stack(tokens, 1), torch.cat(hidden, 1), torch.cat(finals, 1)
    records = []
    for row, p in enumerate(prompts):
        hits = (answers[row] == eos).nonzero()
        n = int(hits[0]) + 1 if len(hits) else answers.shape[1]
        seq = p + answers[row, :n].tolist()
        keep = slice(width - len(p), width - len(p) + len(seq) - 1)  # positions 0..L-2
        top_ids, top_logp = topk_logp(model, last[row, keep], topk)
        records.append(
            {
                "tokens": torch.tensor(seq, dtype=torch.int32),
                "start": len(p),
                "hidden": feats[row, keep].cpu().clone(),
                "top_ids": top_ids.cpu(),
                "top_logp": top_logp.cpu(),
            }
        )
    return records


@torch.inference_mode()
def score_batch(model: Any, seqs: list[list[int]], pad: int, topk: int) -> list[Record]:
    """The same features for given sequences, teacher-forced in one pass (no generation)."""
    layers = fused_layers(int(model.config.num_hidden_layers))
    ids, mask = right_pad(seqs, pad)
    out = model.model(
        input_ids=ids.to(model.device),
        attention_mask=mask.to(model.device),
        output_hidden_states=True,
    )
    feats = _fused(out.hidden_states, layers)
    records = []
    for row, s in enumerate(seqs):
        keep = slice(0, len(s) - 1)
        top_ids, top_logp = topk_logp(model, out.last_hidden_state[row, keep], topk)
        records.append(
            {
                "hidden": feats[row, keep].cpu().clone(),
                "top_ids": top_ids.cpu(),
                "top_logp": top_logp.cpu(),
            }
        )
    return records
