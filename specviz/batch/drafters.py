"""Drafters for a batch of requests: what the batch verifier needs, and the registered ones.

A batch drafter proposes a Draft per row, each row with its own gamma and its own generator, so
a row draws exactly what it would draw decoded alone. The draft model (and its trimmed-head
form) drafts every row in one pass per step through a BatchKVCache; a drafter without a model
(n-gram lookup) runs row by row (PerRow).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from specviz.batch.cache import BatchKVCache
from specviz.core.config import SamplingConfig
from specviz.core.drafter import Draft, Drafter
from specviz.core.sampling import logits_to_probs, sample
from specviz.drafters.names import BATCH_DRAFTERS
from specviz.drafters.ngram import NgramDrafter
from specviz.drafters.options import DrafterOptions
from specviz.drafters.trimmed import load_head_tokens, spread, trim_head


@runtime_checkable
class BatchDrafter(Protocol):
    """What the batch verifier needs from a drafter; rows are indexed as in the live batch."""

    def prefill(self, prefixes: Sequence[list[int]]) -> None:
        """Process each row's prompt prefix before the first round."""

    def propose(
        self,
        ids: Sequence[list[int]],
        gammas: Sequence[int],
        generators: Sequence[torch.Generator],
        stop_ids: Collection[int],
    ) -> list[Draft]:
        """Row r proposes up to gammas[r] tokens after ids[r], drawing with generators[r]."""

    def rollback(self, committed: Sequence[int]) -> None:
        """Row r forgets everything past its first committed[r] tokens."""

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only these rows (the requests still decoding), in this order."""


class BatchModelDrafter:
    """A small causal LM drafting all rows at once, one batched pass per draft step."""

    def __init__(
        self,
        model: Any,
        sampling: SamplingConfig,
        vocab_size: int,
        rows: int,
        head_tokens: Tensor | None = None,
    ) -> None:
        """Wrap model for `rows` rows; head_tokens (S,): draft among these ids only (trimmed)."""
        self.head_tokens = None if head_tokens is None else head_tokens.to(model.device)
        drafting = model if head_tokens is None else trim_head(model, head_tokens)
        self.cache = BatchKVCache(drafting, rows)
        self.sampling, self.vocab_size, self.device = sampling, vocab_size, model.device

    def prefill(self, prefixes: Sequence[list[int]]) -> None:
        """Cache every row's prefix in one pass."""
        if any(prefixes):
            self.cache.forward(prefixes, keep=1)

    def propose(
        self,
        ids: Sequence[list[int]],
        gammas: Sequence[int],
        generators: Sequence[torch.Generator],
        stop_ids: Collection[int],
    ) -> list[Draft]:
        """Sample each row's drafts; a row stops at its gamma or after a stop token."""
        cached = self.cache.lengths
        pending = [row[n:] for row, n in zip(ids, cached, strict=True)]  # 1 or 2 tokens each
        drafted: list[list[int]] = [[] for _ in ids]
        rows: list[list[Tensor]] = [[] for _ in ids]
        live = [g > 0 for g in gammas]
        while any(live):
            fed = [p if on else [] for p, on in zip(pending, live, strict=True)]
            logits = self.cache.forward(fed, keep=1)[:, -1, : self.vocab_size]  # (B, V')
            for r in (r for r, on in enumerate(live) if on):
                token, q = self._draw(logits[r], generators[r])
                drafted[r].append(token)
                rows[r].append(q)
                pending[r] = [token]
                live[r] = len(drafted[r]) < gammas[r] and token not in stop_ids
        return [self._draft(t, q) for t, q in zip(drafted, rows, strict=True)]

    def _draw(self, logits: Tensor, generator: torch.Generator) -> tuple[int, Tensor]:
        """One token from the warped logits (V',) and the q (V,) it was drawn from."""
        q = logits_to_probs(logits, self.sampling)
        token = sample(q, generator)
        if self.head_tokens is None:
            return token, q
        return int(self.head_tokens[token]), spread(q, self.head_tokens, self.vocab_size)

    def _draft(self, tokens: list[int], rows: list[Tensor]) -> Draft:
        """A row's Draft: tokens (k,), q_draft (k, V)."""
        q_draft = torch.stack(rows) if rows else torch.empty(0, self.vocab_size)
        ids = torch.tensor(tokens, dtype=torch.long, device=self.device)
        return Draft(tokens=ids, q_draft=q_draft, forward_calls=len(tokens))

    def rollback(self, committed: Sequence[int]) -> None:
        """Keep committed[r] - 1 positions of row r (its last token is fed next round)."""
        self.cache.crop([max(0, c - 1) for c in committed])

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Drop the rows not listed."""
        self.cache.keep_rows(rows)


class PerRow:
    """Any one-request Drafter, one per row, drafting row after row (fits model-free ones)."""

    def __init__(self, make: Callable[[], Drafter], rows: int) -> None:
        """One drafter from make() per row."""
        self.drafters = [make() for _ in range(rows)]

    def prefill(self, prefixes: Sequence[list[int]]) -> None:
        """Each row's drafter processes its prefix."""
        for drafter, prefix in zip(self.drafters, prefixes, strict=True):
            drafter.prefill(prefix)

    def propose(
        self,
        ids: Sequence[list[int]],
        gammas: Sequence[int],
        generators: Sequence[torch.Generator],
        stop_ids: Collection[int],
    ) -> list[Draft]:
        """Each row's drafter proposes for its row."""
        return [
            d.propose(i, g, gen, stop_ids)
            for d, i, g, gen in zip(self.drafters, ids, gammas, generators, strict=True)
        ]

    def rollback(self, committed: Sequence[int]) -> None:
        """Each row's drafter rolls back."""
        for drafter, n in zip(self.drafters, committed, strict=True):
            drafter.rollback(n)

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Drop the rows not listed."""
        self.drafters = [self.drafters[r] for r in rows]


def build_batch_drafter(
    name: str,
    *,
    target: Any,
    draft: Any,
    sampling: SamplingConfig,
    rows: int,
    options: DrafterOptions | None = None,
) -> BatchDrafter:
    """The batched form of a registered drafter; ValueError naming the ones that have one."""
    options = options or DrafterOptions()
    vocab = int(target.config.vocab_size)
    if name == "ngram":
        device = str(target.device)

        def lookup() -> Drafter:
            return NgramDrafter(
                vocab, max_ngram=options.ngram_max, min_ngram=options.ngram_min or 1, device=device
            )

        return PerRow(lookup, rows)
    if name not in BATCH_DRAFTERS:
        raise ValueError(
            f"drafter {name!r} has no batched form: use one of {', '.join(BATCH_DRAFTERS)}"
        )
    if draft is None:
        raise ValueError(f"drafter {name!r} needs a draft model: pass draft=...")
    if options.min_confidence:
        raise ValueError("a batched draft model drafts its full gamma: drop min_confidence")
    head = load_head_tokens(draft) if name == "model:trimmed" else None
    return BatchModelDrafter(draft, sampling, vocab, rows, head_tokens=head)
