"""Known bugs of drafting from memory, each the real suffix drafter
(specviz.drafters.suffix) with one piece swapped (negative controls).

A suffix drafter's proposals are deterministic: the chain is the most frequent continuation,
so its q is one-hot, and a tree's children are verified by the deterministic-sibling rule. The
bug both mutants make is to treat such a proposal as if it had been sampled from the memory's
frequencies: the chain reports each token's continuation frequency as q (the rest of the mass
spread over the other tokens), and the tree marks its children as sampled, so the verifier
applies the sampled-sibling rule to frequencies nobody sampled from. Both move the output
away from the target's law whenever the frequencies are not one-hot.

A SuffixMutant goes into check_setting through make_drafter, with the suite's fixed seeds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass

import torch

from specviz.core.drafter import Draft
from specviz.drafters.suffix.drafter import SuffixDrafter, TreeSuffixDrafter
from specviz.drafters.suffix.speculate import Speculation
from specviz.tree.proposal import TokenTree


class FrequencyQ(SuffixDrafter):
    """Proposes the most frequent chain but reports q as the memory's frequencies: q(token) =
    its continuation frequency c, and 1 - c spread evenly over the other tokens."""

    def draft(self, found: Speculation) -> Draft:
        """The chain (k,) with q_draft (k, V) from the path's frequencies."""
        drafted = super().draft(found)
        k, v = len(found.tokens), self.vocab_size
        above = (1.0, *found.probs)[:k]
        freq = torch.tensor([p / a for p, a in zip(found.probs, above, strict=True)])  # (k,)
        q = ((1.0 - freq) / max(v - 1, 1))[:, None].expand(k, v).clone()
        q[torch.arange(k), drafted.tokens.cpu()] = freq
        return dataclasses.replace(drafted, q_draft=q.to(drafted.q_draft.device))


class SampledSiblings(TreeSuffixDrafter):
    """Proposes the most frequent children but marks them sampled from their frequencies, so
    the sampled-sibling rule verifies them."""

    def propose_tree(
        self, ids: list[int], max_depth: int, generator: torch.Generator, stop_ids: Collection[int]
    ) -> TokenTree:
        """The deterministic tree, each node flagged as drawn from q_draft."""
        tree = super().propose_tree(ids, max_depth, generator, stop_ids)
        return dataclasses.replace(tree, sampled=(True,) * len(tree.parents))


@dataclass(frozen=True, kw_only=True)
class SuffixMutant:
    """A named bug of the suffix drafters: the drafter class that makes it."""

    name: str
    description: str
    drafter_cls: type[SuffixDrafter] | type[TreeSuffixDrafter]


SUFFIX_MUTANTS = (
    SuffixMutant(
        name="suffix_frequency_q",
        description="a deterministic chain verified as if sampled from the memory's frequencies",
        drafter_cls=FrequencyQ,
    ),
    SuffixMutant(
        name="suffix_sampled_siblings",
        description="a deterministic tree verified by the sampled-sibling rule",
        drafter_cls=SampledSiblings,
    ),
)
