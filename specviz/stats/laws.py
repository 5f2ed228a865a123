"""Exact laws of short continuations, enumerated by plain forward passes, and samplers of them.

An outcome is the tuple of the first k generated tokens, cut after a stop token or at
max_new_tokens, so EOS and length limits inside a round are part of the law.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import Any

import torch

from specviz.core.acceptance import EXACT, AcceptanceRule
from specviz.core.cache import CachedForward, KVCache
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.decoding import SpeculativeDecoder
from specviz.core.drafter import Drafter
from specviz.core.events import EMITTING, Event
from specviz.core.policy import GammaPolicy
from specviz.core.sampling import logits_to_probs
from specviz.drafters.model import ModelDrafter
from specviz.fast.lean import draft_cache
from specviz.plain import autoregressive_events
from specviz.tree.decoding import TreeDecoder
from specviz.tree.drafter import TreeCache, TreeDrafter
from specviz.tree.verify import EXACT_TREE, TreeRule

Outcome = tuple[int, ...]
Sampler = Callable[[int], Outcome]  # seed → outcome
Law = dict[Outcome, float]


@torch.no_grad()
def exact_law(
    model: Any,
    prompt_ids: list[int],
    k: int,
    sampling: SamplingConfig,
    stop_ids: Collection[int] = (),
) -> Law:
    """P(first k tokens = outcome) under plain sampling from model, by enumeration."""
    frontier: Law = {(): 1.0}
    law: Law = {}
    for depth in range(k):
        prefixes = list(frontier)
        batch = torch.tensor([prompt_ids + list(p) for p in prefixes], device=_device(model))
        probs = logits_to_probs(model(input_ids=batch).logits[:, -1], sampling)  # (B, V)
        grown: Law = {}
        for prefix, row in zip(prefixes, probs.tolist(), strict=True):
            for token, prob in enumerate(row):
                if prob > 0:
                    done = token in stop_ids or depth == k - 1
                    (law if done else grown)[(*prefix, token)] = frontier[prefix] * prob
        frontier = grown
    return law


def _device(model: Any) -> torch.device:
    """The device of a model's first parameter."""
    device: torch.device = next(model.parameters()).device
    return device


def outcome(events: list[Event], k: int) -> Outcome:
    """The first k emitted tokens of an event stream."""
    return tuple(e.token for e in events if isinstance(e, EMITTING))[:k]


@dataclass(frozen=True, kw_only=True)
class Variant:
    """A speculative sampler assembled from swappable pieces; the default is the real one.

    rule, drafter_cls and make_cache are the pieces of chain speculation; tree_rule is that of
    tree speculation (used with a tree drafter), and tree_cache the target's cached forward a
    tree is verified through (None: transformers' forward; specviz.fast.lean's is another real
    path, not a mutation).
    """

    name: str = "exact"
    description: str = "the real sampler"
    rule: AcceptanceRule = EXACT
    drafter_cls: type[ModelDrafter] = ModelDrafter
    make_cache: Callable[[Any], CachedForward] | None = None  # None: each component's default
    tree_rule: TreeRule = EXACT_TREE
    tree_cache: Callable[[Any], TreeCache] | None = None

    @property
    def draft_cache(self) -> Callable[[Any], CachedForward]:
        """The drafter's cached forward: make_cache, or the lean one where it applies."""
        return self.make_cache or draft_cache

    @property
    def swaps_chain(self) -> bool:
        """True when a piece of chain speculation is swapped (it then needs a chain drafter)."""
        return (self.rule, self.drafter_cls, self.make_cache) != (EXACT, ModelDrafter, None)

    @property
    def swaps_tree(self) -> bool:
        """True when a piece of tree speculation is swapped (it then needs a tree drafter)."""
        return self.tree_rule != EXACT_TREE


EXACT_VARIANT = Variant()

AnyDrafter = Drafter | TreeDrafter


def check_variant_fits(variant: Variant, *, tree: bool) -> None:
    """Raise ValueError when variant swaps a piece the drafter's kind of speculation lacks."""
    if tree and variant.swaps_chain:
        raise ValueError(
            f"{variant.name} swaps a piece of chain speculation: it needs a chain drafter, "
            "not a tree drafter"
        )
    if not tree and variant.swaps_tree:
        raise ValueError(
            f"{variant.name} swaps a piece of tree speculation: it needs a tree drafter, "
            "not a chain drafter"
        )


def speculative_sampler(
    target: Any,
    draft: Any,
    prompt_ids: list[int],
    *,
    sampling: SamplingConfig,
    speculation: SpeculationConfig,
    k: int,
    stop_ids: Collection[int] = (),
    variant: Variant = EXACT_VARIANT,
    make_drafter: Callable[[SamplingConfig], AnyDrafter] | None = None,
    make_policy: Callable[[], GammaPolicy] | None = None,
) -> Sampler:
    """seed → the first k tokens of one speculative decode with that seed.

    make_drafter builds another drafter (e.g. n-gram) instead of the variant's draft-model one;
    a tree drafter (specviz.tree.drafter.TreeDrafter) is decoded by the tree decoder to its own
    depth (speculation.gamma is then unused) with the variant's tree rule.
    """
    vocab = int(target.config.vocab_size)

    def run(seed: int) -> Outcome:
        seeded = replace(sampling, seed=seed)
        drafter = (
            make_drafter(seeded)
            if make_drafter is not None
            else variant.drafter_cls(draft, seeded, vocab, make_cache=variant.draft_cache)
        )
        check_variant_fits(variant, tree=isinstance(drafter, TreeDrafter))
        if isinstance(drafter, TreeDrafter):
            if make_policy is not None:
                raise ValueError("a gamma policy applies to chain drafters: a tree has its depth")
            tree_decoder = TreeDecoder(
                target,
                drafter,
                prompt_ids,
                sampling=seeded,
                max_new_tokens=speculation.max_new_tokens,
                stop_ids=stop_ids,
                rule=variant.tree_rule,
                make_cache=variant.tree_cache or KVCache,
            )
            return outcome(list(tree_decoder.events()), k)
        decoder = SpeculativeDecoder(
            target,
            drafter,
            prompt_ids,
            sampling=seeded,
            speculation=speculation,
            stop_ids=stop_ids,
            rule=variant.rule,
            make_cache=variant.make_cache,  # None: the default (or the drafter's share)
            policy=make_policy() if make_policy is not None else None,
        )
        return outcome(list(decoder.events()), k)

    return run


def plain_sampler(
    target: Any,
    prompt_ids: list[int],
    *,
    sampling: SamplingConfig,
    max_new_tokens: int,
    k: int,
    stop_ids: Collection[int] = (),
) -> Sampler:
    """seed → the first k tokens of one plain target decode with that seed."""

    def run(seed: int) -> Outcome:
        seeded = replace(sampling, seed=seed)
        events = autoregressive_events(
            target, prompt_ids, sampling=seeded, max_new_tokens=max_new_tokens, stop_ids=stop_ids
        )
        return outcome(list(events), k)

    return run


def draw(sampler: Sampler, n: int, first_seed: int = 0) -> list[Outcome]:
    """n outcomes with seeds first_seed, first_seed + 1, ..."""
    return [sampler(seed) for seed in range(first_seed, first_seed + n)]
