"""Known bugs of drafting across tokenizers, each the real token-level intersection drafter
(specviz.drafters.cross_tli) with one piece swapped (negative controls), and the settings that
test it: the joint law of 3 target tokens at T = 0.7 and T = 1, both with top-p.

A CrossMutant is verified like specviz.stats.mutants' chain mutants: its drafter class goes in
through check_setting's make_drafter, with the same fixed seeds, level and power.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.sampling import logits_to_probs, sample
from specviz.drafters.cross_tli import CrossTLIDrafter
from specviz.stats.suite import Setting


def cross_settings() -> list[Setting]:
    """The joint law of 3 tokens at T = 0.7 with top-p 0.8 (gamma 2) and at T = 1 with top-p
    0.9 (gamma 3); max_new_tokens leaves room for a full first round."""
    return [
        Setting(
            name="gamma=2 T=0.7 top_p=0.8",
            sampling=SamplingConfig(temperature=0.7, top_p=0.8),
            speculation=SpeculationConfig(gamma=2, max_new_tokens=3),
            k=3,
        ),
        Setting(
            name="gamma=3 T=1 top_p=0.9",
            sampling=SamplingConfig(temperature=1.0, top_p=0.9),
            speculation=SpeculationConfig(gamma=3, max_new_tokens=4),
            k=3,
        ),
    ]


class NotRenormalised(CrossTLIDrafter):
    """Restricts the draft's warped law to the shared tokens without renormalising it: it
    samples in proportion to it (as any sampler of an unnormalised vector does) but reports
    the unnormalised values as q."""

    def restricted(self, logits: Tensor) -> Tensor:
        """The warped law over all draft ids (V_draft,), zeroed outside the shared tokens."""
        law = logits_to_probs(logits, self.sampling)
        kept = torch.zeros_like(law)
        kept[self.shared_draft] = law[self.shared_draft]
        return kept


class NonSharedProposed(CrossTLIDrafter):
    """Samples from the draft's whole law; a draft token whose text is no target token is
    proposed as the first target token of its text, while q keeps the shared tokens' values
    only (the mass of the tokens mapped onto them is not counted)."""

    def draw(self, logits: Tensor, generator: torch.Generator) -> tuple[int, int, Tensor]:
        """A draft token from the unrestricted law, mapped onto the target's ids somehow."""
        law = logits_to_probs(logits, self.sampling)  # (V_draft,)
        drafted = sample(law, generator)
        q = self.on_target(law)
        shared = self.pair.shared.to_target
        if drafted in shared:
            return shared[drafted], drafted, q
        draft_side = self.pair.draft
        written = draft_side.decode([*draft_side.anchor_ids, drafted])[
            len(draft_side.anchor_text) :
        ]
        target_ids = self.pair.target.encode_continuation(written)
        if not target_ids:  # text the target's tokenizer writes with no token: draw again
            return super().draw(logits, generator)
        return target_ids[0], drafted, q


class QBeforeRestriction(CrossTLIDrafter):
    """Samples from the restricted, renormalised law but reports q from the draft's warped law
    before the restriction (its values at the shared tokens)."""

    def draw(self, logits: Tensor, generator: torch.Generator) -> tuple[int, int, Tensor]:
        """The right token, with q taken from the unrestricted law."""
        token = sample(self.on_target(self.restricted(logits)), generator)
        q = self.on_target(logits_to_probs(logits, self.sampling))
        return token, self.pair.shared.to_draft[token], q


@dataclass(frozen=True, kw_only=True)
class CrossMutant:
    """A cross-tokenizer drafter with one piece swapped: its name, what it breaks, its class."""

    name: str
    description: str
    drafter_cls: type[CrossTLIDrafter]


CROSS_MUTANTS: tuple[CrossMutant, ...] = (
    CrossMutant(
        name="cross_not_renormalised",
        description="draft probabilities restricted to the shared tokens but not renormalised",
        drafter_cls=NotRenormalised,
    ),
    CrossMutant(
        name="cross_non_shared_proposed",
        description="a draft token whose text is no target token proposed as the first target "
        "token of its text, with q of the shared tokens only",
        drafter_cls=NonSharedProposed,
    ),
    CrossMutant(
        name="cross_q_before_restriction",
        description="q taken from the draft's law before the restriction to the shared tokens",
        drafter_cls=QBeforeRestriction,
    ),
)

# The cross_settings() setting in which each bug shows. Without top-k / top-p at T = 1 the
# first and the third coincide (both report the unrestricted law at the shared tokens).
CROSS_SHOWS_IN: dict[str, str] = {
    "cross_not_renormalised": "gamma=3 T=1 top_p=0.9",
    "cross_non_shared_proposed": "gamma=2 T=0.7 top_p=0.8",
    "cross_q_before_restriction": "gamma=2 T=0.7 top_p=0.8",
}
