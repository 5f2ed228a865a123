"""String-level drafting across tokenizers: the draft writes text greedily, the target's
tokenizer reads it (Universal Assisted Generation).

Each round the committed target ids are decoded to text and re-encoded with the draft's
tokenizer (CrossTokenizers.draft_ids; the draft's cache rolled back to the longest common prefix
of its ids); the draft continues greedily in its own vocabulary; the text it adds after its own
writing of that context (which may differ from the target's: a normaliser, a special token the
draft does not read) is encoded with the target's tokenizer. Only the stable target tokens are
proposed: those that the encoding still gives when the draft's last token is dropped, and never
the last one (the last piece of text may be a partial target token that more text would merge
into a longer one). A merge that text further ahead would make (' c' before 'at' -> ' cat') can
still slip through: it costs acceptance, never exactness. A draft end-of-sequence ends the text:
then all its tokens are stable, followed by the target's end-of-sequence token.

The proposals are a deterministic function of the committed tokens (greedy drafting), so q is
one-hot on each and the rule min(1, p/q) with its residual keeps the target's law at any
temperature, as for n-gram lookup (docs/tokenizers.md). Under sampling a proposal x is kept
with probability p(x) only; the token-level intersection (specviz.drafters.cross_tli) reports
the draft's whole law instead.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import torch

from specviz.core.cache import CachedForward, KVCache
from specviz.core.drafter import Draft
from specviz.core.events import CrossTranslation
from specviz.drafters.cross_vocab import CrossTokenizers, SyncedCache
from specviz.fast.prefix import common_prefix

DRAFT_TOKENS_PER_TARGET = 4  # the draft writes at most this many tokens per target token asked


@dataclass(frozen=True, kw_only=True)
class Written:
    """One round's writing: the committed text, its draft ids (context), the draft ids written
    after them, whether the draft ended its text, how many target tokens were stable and how
    many of those were proposed."""

    text: str
    context: list[int]
    written: list[int]
    ended: bool
    stable: int
    proposed: int


class CrossTextDrafter:
    """Proposes the target tokens of the text a draft of another tokenizer writes greedily."""

    def __init__(
        self,
        model: Any,
        pair: CrossTokenizers,
        make_cache: Callable[[Any], CachedForward] = KVCache,
        explain: bool = False,
    ) -> None:
        """model: the draft (a causal LM over pair.draft's ids); pair: the checked tokenizers
        (specviz.drafters.cross_vocab.cross_tokenizers); make_cache: the draft's cached forward;
        explain: say how each round drafted (explain)."""
        self.pair, self.explaining = pair, explain
        self.last: Written | None = None  # the last round's writing, when explaining
        self.device = model.device
        self.synced = SyncedCache(make_cache(model), self.device)
        self.target_vocab, self.draft_vocab = pair.target.vocab, pair.draft.vocab

    def prefill(self, prefix: list[int]) -> None:
        """Cache the draft's keys/values for the prefix's text in the draft's tokens."""
        ids = self.pair.draft_ids(prefix)
        if ids:
            self.synced.next_logits(ids)

    def propose(
        self,
        ids: list[int],
        gamma: int,
        generator: torch.Generator,
        stop_ids: Collection[int],
    ) -> Draft:
        """Up to gamma stable target tokens of the draft's greedy text; q_draft (k, V_target)
        one-hot; stop after a stop token. generator is unused (nothing is sampled)."""
        context = self.pair.draft_ids(ids)
        text = self.pair.draft.decode(context)  # the committed text as the draft writes it
        written: list[int] = []
        ended = False
        calls = 0
        while context and len(written) < DRAFT_TOKENS_PER_TARGET * gamma:
            logits = self.synced.next_logits([*context, *written])[: self.draft_vocab]
            calls += 1
            token = int(logits.argmax())
            if token == self.pair.draft.eos:
                ended = True
                break
            written.append(token)
            full = self._continuation(text, context, written)
            if full is None or len(full) > gamma:
                break
        stable = self._stable(text, context, written, ended)
        tokens = stable[:gamma]
        stop = next((i for i, t in enumerate(tokens) if t in stop_ids), None)
        tokens = tokens if stop is None else tokens[: stop + 1]
        if self.explaining:
            self.last = Written(
                text=text,
                context=context,
                written=written,
                ended=ended,
                stable=len(stable),
                proposed=len(tokens),
            )
        q_draft = torch.zeros(len(tokens), self.target_vocab)  # (k, V_target) one-hot rows
        q_draft[torch.arange(len(tokens)), torch.tensor(tokens, dtype=torch.long)] = 1.0
        return Draft(
            tokens=torch.tensor(tokens, dtype=torch.long, device=self.device),
            q_draft=q_draft.to(self.device),
            forward_calls=calls,
        )

    def explain(self, round_index: int) -> CrossTranslation | None:
        """The last proposal's draft tokens, their text and its target tokens (None unless
        built with explain)."""
        w = self.last
        if w is None:
            return None
        full = self._continuation(w.text, w.context, w.written) if w.written else []
        targets = [*(full or []), *([self.pair.target.eos] if w.ended else [])]
        drawn = self.pair.draft.decode([*w.context, *w.written])
        if not drawn.startswith(w.text):  # the draft could not write the committed text back
            drawn = w.text + self.pair.draft.decode(w.written)
        return CrossTranslation(
            round=round_index,
            draft_tokens=tuple(w.written),
            draft_texts=tuple(self.pair.draft.decode([t]) for t in w.written),
            text=drawn[len(w.text) :],
            target_tokens=tuple(t for t in targets if t is not None),
            stable=w.stable,
            proposed=w.proposed,
        )

    def _continuation(self, text: str, context: list[int], written: list[int]) -> list[int] | None:
        """The target ids of the text the draft added after text, the draft's own writing of
        its context (None when the draft's text does not start with it: the written tokens
        changed the context's last characters)."""
        full = self.pair.draft.decode([*context, *written])
        if not full.startswith(text):
            return None
        ids = self.pair.target.encode_continuation(full[len(text) :]) if full != text else []
        return [t for t in ids if t < self.target_vocab]

    def _stable(self, text: str, context: list[int], written: list[int], ended: bool) -> list[int]:
        """The target ids of the draft's text that do not change when its last token is
        dropped, the last one left out; all of them, then the target's EOS, when the draft
        ended its text."""
        full = self._continuation(text, context, written) if written else []
        if full is None:
            return []
        if ended:
            eos = self.pair.target.eos
            return [*full, eos] if eos is not None else full
        shorter = self._continuation(text, context, written[:-1]) if written else []
        return full[: min(common_prefix(full, shorter or []), len(full) - 1)]

    def rollback(self, committed: int) -> None:
        """Nothing to do here: the next proposal re-encodes the committed text and rolls the
        draft's cache back to the longest common prefix of its ids."""
