"""Known bugs from the field, each the real sampler with one piece swapped (negative controls):
a field of a rule (AcceptanceRule, TreeRule), a drafter's draw, or the cache.

MUTANTS swap a piece of chain speculation and need a chain drafter; TREE_MUTANTS swap a piece
of tree speculation (specviz.tree) and need a tree drafter.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor

from specviz.core.acceptance import AcceptanceRule, Verdict, deterministic_step, sampled_step
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig
from specviz.core.sampling import logits_to_probs, sample, uniform
from specviz.drafters.model import ModelDrafter
from specviz.drafters.shared_exit import SharedExit
from specviz.stats.laws import Variant
from specviz.tree.drafter import TreeCache
from specviz.tree.verify import TYPICAL, TreeRule


class GreedyDraftSoftmaxQ(ModelDrafter):
    """Drafts the argmax but reports q = softmax (transformers #32867)."""

    def draw(self, logits: Tensor, generator: torch.Generator) -> tuple[int, Tensor]:
        """argmax token, warped softmax as q."""
        q = logits_to_probs(logits, self.sampling)
        return int(q.argmax()), q


class UnprocessedQ(ModelDrafter):
    """Samples from warped probs but reports q from raw logits (transformers #47932)."""

    def draw(self, logits: Tensor, generator: torch.Generator) -> tuple[int, Tensor]:
        """Token from the warped distribution, q = softmax of the raw logits."""
        token = sample(logits_to_probs(logits, self.sampling), generator)
        return token, torch.softmax(logits.to(torch.float64), dim=-1)


def _unwarped_target(logits: Tensor, sampling: SamplingConfig) -> Tensor:
    """Target p at temperature 1 with no filters, whatever the sampling config says."""
    return logits_to_probs(logits, SamplingConfig(temperature=1.0))


def _bonus_from_draft(verdict: Verdict, spare: Tensor, spare_q: Tensor) -> Verdict:
    """After a full accept, the draft's next token (spare[0], drawn from q) is the bonus."""
    if verdict.is_bonus and spare.shape[0] > 0:
        return dataclasses.replace(verdict, next_token=int(spare[0]), next_dist=spare_q[0])
    return verdict


class OffByOneCache(KVCache):
    """A cache whose rollback removes one position too few (shift=+1) or too many (shift=-1).

    Its bookkeeping still reports the intended length, as the buggy implementations' did.
    """

    def __init__(self, model: Any, shift: int) -> None:
        """shift=+1 keeps a stale position per rollback, shift=-1 drops a good one."""
        super().__init__(model)
        self.shift, self.skew = shift, 0

    def __len__(self) -> int:
        """The length the decoder believes the cache has."""
        return super().__len__() - self.skew

    def crop(self, length: int) -> None:
        """Roll back, wrongly by one position whenever a rollback is due."""
        due = len(self) - length
        if due <= 0:
            return
        actual = max(0, min(due - self.shift, super().__len__()))
        if actual:
            self.kv.crop(-actual)
        self.skew += due - actual


def _same_uniform(n: int, generator: torch.Generator, like: Tensor) -> Tensor:
    """One U[0, 1) draw reused at every position (the seed reset inside the loop)."""
    return uniform(1, generator, like).expand(n)


MUTANTS: tuple[Variant, ...] = (
    Variant(
        name="greedy_draft_softmax_q",
        description="draft proposes greedily but q is its softmax (transformers #32867)",
        drafter_cls=GreedyDraftSoftmaxQ,
    ),
    Variant(
        name="unprocessed_q",
        description="q from raw draft logits, drafting from warped ones (transformers #47932)",
        drafter_cls=UnprocessedQ,
    ),
    Variant(
        name="residual_is_p",
        description="residual replaced by p (no max(0, p - q))",
        rule=AcceptanceRule(residual=lambda p, q: p),
    ),
    Variant(
        name="bonus_from_q",
        description="bonus token sampled from the draft's q instead of the target's p",
        rule=AcceptanceRule(lookahead=1, bonus=_bonus_from_draft),
    ),
    Variant(
        name="target_unwarped",
        description="temperature / top-k / top-p applied to the draft only (vLLM #9834)",
        rule=AcceptanceRule(warp_target=_unwarped_target),
    ),
    Variant(
        name="cache_one_too_few",
        description="KV cache rolled back one token too few (a stale draft position stays)",
        make_cache=lambda model: OffByOneCache(model, shift=+1),
    ),
    Variant(
        name="cache_one_too_many",
        description="KV cache rolled back one token too many (a committed position is lost)",
        make_cache=lambda model: OffByOneCache(model, shift=-1),
    ),
    Variant(
        name="same_uniform",
        description="the same uniform draw reused at every position (seed reset in the loop)",
        rule=AcceptanceRule(uniforms=_same_uniform),
    ),
    Variant(
        name="accept_all",
        description="every draft token accepted (transformers PR #28508)",
        rule=AcceptanceRule(acceptance_prob=lambda p, q: torch.ones_like(p)),
    ),
)

# The setting of suite.default_settings() in which each bug shows (at T = 1 without filters the
# warping bugs are the real sampler, so they need warping to be caught).
SHOWS_IN: dict[str, str] = {
    "greedy_draft_softmax_q": "gamma=2 T=0.7 top_p=0.8",
    "unprocessed_q": "gamma=2 T=0.7 top_p=0.8",
    "residual_is_p": "gamma=4 T=1",
    "bonus_from_q": "gamma=1 T=1",
    "target_unwarped": "gamma=4 T=0.5",
    "cache_one_too_few": "gamma=2 T=0.7 top_p=0.8",
    "cache_one_too_many": "gamma=2 T=0.7 top_p=0.8",
    "same_uniform": "gamma=4 T=1",
    "accept_all": "gamma=4 T=1",
}


class SkipLastDraftSharedExit(SharedExit):
    """A shared early-exit cache that takes every drafted token as already run through the
    first k layers; the drafter never runs the last one, so its verification (and the bonus
    token's distribution) reads a stale hidden state (a LayerSkip-style sharing bug).

    Use as SharedExitDrafter(..., store=SkipLastDraftSharedExit).
    """

    def _reusable(self, start: int, ids: list[int]) -> int:
        """Trust every position of the pass, drafted or not."""
        return len(ids) if self.exit_len > start else 0


def _sampled_kept_r(r: Tensor, q: Tensor, x: int) -> tuple[Tensor, Tensor]:
    """The sampled step's P(keep x), but r left as it was after a rejection."""
    return sampled_step(r, q, x)[0], r


def _deterministic_kept_r(r: Tensor, q: Tensor, x: int) -> tuple[Tensor, Tensor]:
    """The deterministic step's P(keep x), but the rejected x left in r."""
    return deterministic_step(r, q, x)[0], r


def _keep_every_node(cache: TreeCache, base: int, path: tuple[int, ...]) -> None:
    """Leave the whole tree in the target's cache after a round: the next round's tokens also
    attend to the rejected branches' keys (the committed count still advances by the path)."""


TREE_MUTANTS: tuple[Variant, ...] = (
    Variant(
        name="tree_typical",
        description="LOSSY by design: Medusa's typical acceptance, which does not follow the "
        "target's law",
        tree_rule=TYPICAL,
    ),
    Variant(
        name="tree_residual_not_updated",
        description="siblings tried against p itself: r not updated after a rejection",
        tree_rule=TreeRule(
            name="residual_not_updated",
            sampled=_sampled_kept_r,
            deterministic=_deterministic_kept_r,
        ),
    ),
    Variant(
        name="tree_same_uniform",
        description="one uniform draw reused for every sibling of a node",
        tree_rule=TreeRule(name="same_uniform", uniforms=_same_uniform),
    ),
    Variant(
        name="tree_rejected_keys_kept",
        description="the rejected branches' keys left in the target's KV cache",
        tree_rule=TreeRule(name="rejected_keys_kept", compact=_keep_every_node),
    ),
)

# The tree drafter and suite.tree_settings() setting in which each tree bug shows.
# (Reusing one uniform barely shows with sampled siblings; top-k siblings show it at once.)
TREE_SHOWS_IN: dict[str, tuple[str, str]] = {
    "tree_typical": ("tree-ngram", "tree T=1"),
    "tree_residual_not_updated": ("tree-model:sampled", "tree T=1"),
    "tree_same_uniform": ("tree-model", "tree T=1"),
    "tree_rejected_keys_kept": ("tree-model:sampled", "tree T=0.7 top_p=0.8"),
}
