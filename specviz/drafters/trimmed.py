"""A draft whose output head covers only a subset S of the vocabulary, so q = 0 outside S.

A small draft's output head is most of its cost: the bundled draft's 49,152 x 160 head holds
7.9 M of its 9.1 M parameters. Restricting it to the tokens that carry most of the target's
probability (ranked once from the teacher's distributions, shipped as TOKEN_RANKING next to the
weights) makes a draft step much cheaper (benchmarks/RESULTS.md, section Draft size: c of
model against model:trimmed). Sampling stays exact: q is the distribution the token was actually
drawn from, zero outside S, and the verifier needs nothing else.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from specviz.fast.packed import PackedLinear, is_packed

TOKEN_RANKING = "token_ranking.safetensors"  # every token id, most target probability first
HEAD_SIZE = 8192  # tokens kept by the "model:trimmed" drafter


def ranking_path(draft: Any) -> Path:
    """Where the token ranking of a loaded draft model (or a draft folder) would be."""
    folder = draft if isinstance(draft, (str, Path)) else draft.config._name_or_path
    return Path(folder) / TOKEN_RANKING


def load_head_tokens(draft: Any, size: int | None = None) -> Tensor:
    """The `size` top-ranked token ids (size,) for a draft model or folder; clear error if none.

    size None: HEAD_SIZE, or the whole ranking for a vocabulary smaller than that.
    """
    path = ranking_path(draft)
    if not path.is_file():
        raise ValueError(
            f"the trimmed-head drafter needs {TOKEN_RANKING} in the draft folder ({path.parent}); "
            "the bundled draft ships one (`python -m specviz.train draft export` writes it), or "
            "use the 'model' drafter"
        )

    ranking = load_file(str(path))["ranking"].long()  # (V,)
    size = min(HEAD_SIZE, ranking.shape[0]) if size is None else size
    if not 1 <= size <= ranking.shape[0]:
        raise ValueError(f"head size must be in [1, {ranking.shape[0]}] (got {size})")
    return ranking[:size]


def save_ranking(ranking: Tensor, folder: str | Path) -> Path:
    """Write a ranking (V,) of token ids into folder/TOKEN_RANKING."""
    path = Path(folder) / TOKEN_RANKING
    save_file({"ranking": ranking.to(torch.int32).contiguous()}, str(path))
    return path


def trim_head(model: Any, tokens: Tensor) -> Any:
    """A model sharing every module of `model` but whose head scores only `tokens` (S,).

    Its logits (..., S) are indexed by position in `tokens`; the original model is untouched.
    """
    head = model.get_output_embeddings()
    weight = head.weight.detach()[tokens.to(head.weight.device)]  # (S, hidden)
    trimmed_head = nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    trimmed_head.to(device=weight.device, dtype=weight.dtype)
    trimmed_head.weight = nn.Parameter(weight.clone(), requires_grad=False)
    trimmed = copy.copy(model)  # shallow: shares the decoder layers and embeddings
    trimmed._modules = dict(model._modules)
    trimmed.lm_head = PackedLinear(trimmed_head) if is_packed(head) else trimmed_head
    return trimmed.eval()


def spread(q_head: Tensor, tokens: Tensor, vocab_size: int) -> Tensor:
    """q over a trimmed head (S,) -> q over the whole vocabulary (V,), zero off the head."""
    return q_head.new_zeros(vocab_size).scatter_(0, tokens, q_head)  # tokens are distinct
