"""Token-level intersection (TLI): a draft with another tokenizer, exact under sampling.

The draft's logits (V_draft,) are restricted to the shared tokens (specviz.drafters.cross_vocab:
same text in both tokenizers), warped (temperature, top-k, top-p over what is left) and
renormalised; the draft samples a target token from that law placed on the target's
vocabulary, q_draft (V_target,) = 0 outside the shared tokens. Each proposed token is one
target token drawn from exactly q, so min(1, p/q) and the residual norm(max(0, p - q)) keep the
target's law (docs/tokenizers.md; Timor et al., ICML 2025).

The draft reads the committed text re-encoded with its own tokenizer (its cache rolled back to
the longest common prefix of its ids), then the drafted tokens as its own ids.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import torch
from torch import Tensor

from specviz.core.cache import CachedForward, KVCache
from specviz.core.config import SamplingConfig
from specviz.core.drafter import Draft
from specviz.core.events import CrossTranslation
from specviz.core.sampling import logits_to_probs, sample
from specviz.drafters.cross_vocab import CrossTokenizers, SyncedCache


class CrossTLIDrafter:
    """Drafts target tokens with a draft model of another tokenizer, over the shared tokens."""

    def __init__(
        self,
        model: Any,
        sampling: SamplingConfig,
        pair: CrossTokenizers,
        make_cache: Callable[[Any], CachedForward] = KVCache,
        explain: bool = False,
    ) -> None:
        """model: the draft (a causal LM over pair.draft's ids); sampling: the target's
        warping, applied to the restricted logits; pair: the checked tokenizers
        (specviz.drafters.cross_vocab.cross_tokenizers); make_cache: the draft's cached forward;
        explain: say how each round drafted (explain)."""
        self.sampling, self.pair, self.explaining = sampling, pair, explain
        self.last: tuple[list[int], list[int]] | None = None  # (draft ids, target ids) drawn
        self.device = model.device
        self.synced = SyncedCache(make_cache(model), self.device)
        self.shared_draft = pair.shared.draft_ids.to(self.device)  # (S,)
        self.shared_target = pair.shared.target_ids.to(self.device)  # (S,)
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
        """Sample up to gamma target tokens; q_draft (k, V_target) rows are the laws sampled
        from (zero outside the shared tokens); stop after a stop token."""
        context = self.pair.draft_ids(ids)
        tokens: list[int] = []
        drawn: list[int] = []  # the same tokens, as the draft's ids
        rows: list[Tensor] = []
        while context and len(tokens) < gamma:
            logits = self.synced.next_logits(context)[: self.draft_vocab]  # (V_draft,)
            token, draft_token, q = self.draw(logits, generator)
            tokens.append(token)
            drawn.append(draft_token)
            rows.append(q)
            if token in stop_ids:
                break
            context = [*context, draft_token]
        if self.explaining:
            self.last = (drawn, tokens)
        return Draft(
            tokens=torch.tensor(tokens, dtype=torch.long, device=self.device),
            q_draft=torch.stack(rows) if rows else torch.empty(0, self.target_vocab),
            forward_calls=len(tokens),
        )

    def explain(self, round_index: int) -> CrossTranslation | None:
        """The last proposal's draft tokens, their text and the target tokens they are (None
        unless built with explain): every drawn token is shared, so all are proposed."""
        if self.last is None:
            return None
        drawn, tokens = self.last
        return CrossTranslation(
            round=round_index,
            draft_tokens=tuple(drawn),
            draft_texts=tuple(self.pair.draft.decode([t]) for t in drawn),
            text=self.pair.draft.decode(drawn),
            target_tokens=tuple(tokens),
            stable=len(tokens),
            proposed=len(tokens),
        )

    def restricted(self, logits: Tensor) -> Tensor:
        """The draft's law over its own ids (V_draft,): logits restricted to the shared tokens,
        then warped and renormalised (0 outside the shared tokens)."""
        masked = torch.full_like(logits, float("-inf"))
        masked[self.shared_draft] = logits[self.shared_draft]
        return logits_to_probs(masked, self.sampling)

    def on_target(self, law: Tensor) -> Tensor:
        """A law over the draft's ids (V_draft,) placed on the target's ids (V_target,)."""
        q = torch.zeros(self.target_vocab, dtype=law.dtype, device=law.device)
        q[self.shared_target] = law[self.shared_draft]
        return q

    def draw(self, logits: Tensor, generator: torch.Generator) -> tuple[int, int, Tensor]:
        """From the draft's logits (V_draft,): the target token drawn, the draft's id for it,
        and q (V_target,), the law it was drawn from."""
        q = self.on_target(self.restricted(logits))
        token = sample(q, generator)
        return token, self.pair.shared.to_draft[token], q

    def rollback(self, committed: int) -> None:
        """Nothing to do here: the next proposal re-encodes the committed text and rolls the
        draft's cache back to the longest common prefix of its ids."""
