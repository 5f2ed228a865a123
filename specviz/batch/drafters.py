"""Drafters for a batch of requests: what the batch verifier needs, and the registered ones.

A batch drafter proposes a Draft per row, each row with its own gamma, sampling settings and
generator, so a row draws exactly what it would draw decoded alone. Rows join (continuous
batching: specviz.batch.decoding) and leave at round boundaries, so one drafter serves any
number of requests. The draft model (and its trimmed-head form) drafts every row in one pass per
step through a batch cache (specviz.batch.cache); a drafter without a model (n-gram lookup,
suffix decoding) runs row by row (PerRow); lookup first, else the draft model, tries each row's
lookup and drafts the rest in one pass. Suffix decoding's rows read one memory, which each row
that ends feeds (RemembersRows), and say how they drafted where their drafters explain
(ExplainsRows).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from specviz.batch.cache import admitted, batch_cache
from specviz.checks import vocab_size
from specviz.core.config import SamplingConfig
from specviz.core.drafter import Draft, Drafter, ExplainsRounds, Remembers
from specviz.core.events import DrafterRound
from specviz.core.sampling import logits_to_probs, sample
from specviz.drafters.builders import lookup, suffix_chain
from specviz.drafters.names import BATCH_DRAFTERS, parse
from specviz.drafters.options import DrafterOptions
from specviz.drafters.suffix.memory import SuffixMemory
from specviz.drafters.trimmed import load_head_tokens, spread, trim_head


@dataclass(frozen=True, kw_only=True)
class Joining:
    """A row joining a batch drafter: its prompt but the last token, its sampling settings, and
    which drafter drafts it (a RoutedDrafter's key; "" for a drafter of one kind)."""

    prefix: list[int]
    sampling: SamplingConfig
    drafter: str = ""


@runtime_checkable
class BatchDrafter(Protocol):
    """What the batch verifier needs from a drafter; rows are indexed as in the live batch."""

    def join(self, rows: Sequence[Joining]) -> None:
        """New rows join after the others."""

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


@runtime_checkable
class ExplainsRows(Protocol):
    """A batch drafter whose rows can say how they drafted (specviz.core.drafter's
    ExplainsRounds, row by row): the batch decoder emits it before the row's proposal."""

    def explain_row(self, row: int, round_index: int) -> DrafterRound | None:
        """How row's last proposal was drafted, as round round_index's event (None: nothing)."""


@runtime_checkable
class RemembersRows(Protocol):
    """A batch drafter whose rows learn from finished requests (specviz.core.drafter's
    Remembers, row by row): the batch decoder gives it each row that ends."""

    def remember_row(self, row: int, ids: list[int], prompt_len: int) -> None:
        """Row ended: ids, its first prompt_len the prompt, for its drafter to learn from."""


class BatchModelDrafter:
    """A small causal LM drafting all rows at once, one batched pass per draft step."""

    def __init__(self, model: Any, vocab_size: int, head_tokens: Tensor | None = None) -> None:
        """Wrap model, with no rows yet; head_tokens (S,): draft among these ids only
        (trimmed)."""
        self.head_tokens = None if head_tokens is None else head_tokens.to(model.device)
        drafting = model if head_tokens is None else trim_head(model, head_tokens)
        self.cache = batch_cache(drafting)
        self.samplings: list[SamplingConfig] = []  # each row's
        self.vocab_size, self.device = vocab_size, model.device

    def join(self, rows: Sequence[Joining]) -> None:
        """New rows (their prompts read in the next draft pass, or first in a pass of their
        own where the cache pads: specviz.batch.cache.admitted)."""
        admitted(self.cache, [row.prefix for row in rows])
        self.samplings += [row.sampling for row in rows]

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
                token, q = self._draw(logits[r], self.samplings[r], generators[r])
                drafted[r].append(token)
                rows[r].append(q)
                pending[r] = [token]
                live[r] = len(drafted[r]) < gammas[r] and token not in stop_ids
        return [self._draft(t, q) for t, q in zip(drafted, rows, strict=True)]

    def _draw(
        self, logits: Tensor, sampling: SamplingConfig, generator: torch.Generator
    ) -> tuple[int, Tensor]:
        """One token from the warped logits (V',) and the q (V,) it was drawn from."""
        q = logits_to_probs(logits, sampling)
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
        self.samplings = [self.samplings[r] for r in rows]


class PerRow:
    """Any one-request Drafter, one per row, drafting row after row (fits model-free ones)."""

    def __init__(self, make: Callable[[], Drafter]) -> None:
        """One drafter from make() per row, made as the row joins."""
        self.make = make
        self.drafters: list[Drafter] = []

    def join(self, rows: Sequence[Joining]) -> None:
        """Each new row's drafter, its prefix processed."""
        for row in rows:
            drafter = self.make()
            drafter.prefill(row.prefix)
            self.drafters.append(drafter)

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

    def explain_row(self, row: int, round_index: int) -> DrafterRound | None:
        """What row's drafter says of its last proposal (None if it does not explain)."""
        drafter = self.drafters[row]
        return drafter.explain(round_index) if isinstance(drafter, ExplainsRounds) else None

    def remember_row(self, row: int, ids: list[int], prompt_len: int) -> None:
        """Row's drafter learns from its finished request, if it learns."""
        drafter = self.drafters[row]
        if isinstance(drafter, Remembers):
            drafter.remember(ids, prompt_len)


class LookupThenModel:
    """N-gram lookup first, row by row; the rows it finds nothing for drafted by the draft
    model in one pass per step (the batched form of specviz.drafters.hybrid's)."""

    def __init__(
        self, model: BatchModelDrafter, lookup: Callable[[], Drafter], model_gamma: int | None
    ) -> None:
        """lookup() makes each row's lookup; model_gamma: at most this many draft-model tokens
        a round (None: gamma's)."""
        self.model, self.lookups, self.model_gamma = model, PerRow(lookup), model_gamma

    def join(self, rows: Sequence[Joining]) -> None:
        """New rows join both."""
        self.lookups.join(rows)
        self.model.join(rows)

    def propose(
        self,
        ids: Sequence[list[int]],
        gammas: Sequence[int],
        generators: Sequence[torch.Generator],
        stop_ids: Collection[int],
    ) -> list[Draft]:
        """Each row's lookup continuation where it has one, else the draft model's tokens."""
        copied = self.lookups.propose(ids, gammas, generators, stop_ids)
        cap = [g if self.model_gamma is None else min(g, self.model_gamma) for g in gammas]
        wanted = [0 if len(c.tokens) else g for c, g in zip(copied, cap, strict=True)]
        drafted = self.model.propose(ids, wanted, generators, stop_ids)
        return [c if len(c.tokens) else d for c, d in zip(copied, drafted, strict=True)]

    def rollback(self, committed: Sequence[int]) -> None:
        """The draft model forgets past each row's committed tokens (lookup keeps no state)."""
        self.model.rollback(committed)

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Drop the rows not listed."""
        self.lookups.keep_rows(rows)
        self.model.keep_rows(rows)


def build_batch_drafter(
    name: str,
    *,
    target: Any,
    draft: Any,
    options: DrafterOptions | None = None,
) -> BatchDrafter:
    """The batched form of a registered drafter, serving any number of rows and batches (rows
    join and leave with their requests); ValueError naming the ones that have one."""
    options = options or DrafterOptions()
    if name not in BATCH_DRAFTERS:
        raise ValueError(
            f"drafter {name!r} has no batched form: use one of {', '.join(BATCH_DRAFTERS)}"
        )
    choice = parse(name)
    shortest = 2 if choice.lookup else 1  # lookup first: n >= 2 keeps chance one-token matches out

    def make_lookup() -> Drafter:
        return lookup(target, options, shortest)

    if choice.family == "ngram":
        return PerRow(make_lookup)
    if choice.family == "suffix":  # every row reads and feeds one memory
        memory = SuffixMemory() if options.memory is None else options.memory
        remembering = replace(options, memory=memory)
        return PerRow(lambda: suffix_chain(target, remembering))
    if draft is None:
        raise ValueError(f"drafter {name!r} needs a draft model: pass draft=...")
    if options.min_confidence:
        raise ValueError("a batched draft model drafts its full gamma: drop min_confidence")
    head = load_head_tokens(draft) if choice.variant == "trimmed" else None
    model = BatchModelDrafter(draft, vocab_size(target), head_tokens=head)
    if choice.lookup is None:
        return model
    return LookupThenModel(model, make_lookup, options.model_gamma)
