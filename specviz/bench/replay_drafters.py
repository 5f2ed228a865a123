"""The drafters a replay runs (specviz.bench.replay), and what each would keep along a path.

A draft model, n-gram lookup and their hybrid are read off one step per position of the path
(specviz.bench.lookahead); a drafting head off rounds drafted at each start position
(specviz.bench.head_lookahead).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from specviz.bench.head_lookahead import head_lookaheads
from specviz.bench.lookahead import (
    Lookahead,
    TargetPath,
    draft_probabilities,
    keep_probabilities,
    lookup_then_model,
    model_lookahead,
    ngram_lookahead,
)
from specviz.core.config import SamplingConfig
from specviz.core.drafter import Drafter
from specviz.drafters.hybrid import LookupThenModelDrafter
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter
from specviz.drafters.registry import (
    DRAFTER_NAMES,
    HEAD_DRAFTERS,
    MEMORY_DRAFTERS,
    TREE_DRAFTERS,
    DrafterOptions,
    build_drafter,
)
from specviz.heads.drafters import HeadDrafter
from specviz.heads.lookup import head_forward

# the chain drafters but the shared early exit, whose draft runs inside the target's forward (a
# tree's rounds are not a lookahead's prefixes), and the suffix drafters, which draft from a
# memory of earlier requests that one replayed path does not hold; the heads read the target's
# features
DRAFTERS = tuple(
    n
    for n in DRAFTER_NAMES
    if n != "early-exit-shared" and n not in TREE_DRAFTERS and n not in MEMORY_DRAFTERS
)
LOOKAHEAD = 16  # the most tokens a policy drafts (specviz.gamma.policies' max_gamma)


def drafter_factory(
    name: str,
    pair: Any,
    sampling: SamplingConfig,
    model_gamma: int | None = None,
    *,
    heads: str | None = None,
    lean_target: bool = False,
) -> Callable[[], Drafter]:
    """Fresh drafters of one registered chain kind, as the bench builds them (model_gamma: the
    draft model's share of a round ahead of lookup; heads: the drafting heads' weights folder,
    their target forward lean with lean_target); ValueError for a tree drafter."""
    if name not in DRAFTERS:
        raise ValueError(f"replay supports the chain drafters {', '.join(DRAFTERS)} (got {name!r})")
    head = name in HEAD_DRAFTERS
    options = DrafterOptions(
        model_gamma=model_gamma if name.startswith("ngram+") else None,
        make_cache=head_forward(lean_target) if head else None,
        heads=heads if head else None,
    )

    def make() -> Drafter:
        drafter = build_drafter(
            name, target=pair.target, draft=pair.draft, sampling=sampling, options=options
        )
        assert isinstance(drafter, Drafter)  # DRAFTERS holds chain drafters only
        return drafter

    return make


def lookaheads(
    drafter: Drafter, path: TargetPath, draws: int, seed: int, target: Any = None
) -> list[Lookahead]:
    """draws lookaheads of one path (a lookup's or a greedy draft's verdicts are certain: 1);
    a drafting head drafts from target's features (target: the model that decoded path)."""
    if isinstance(drafter, HeadDrafter):
        if target is None:
            raise ValueError("a drafting head drafts from the target's features: pass target")
        return head_lookaheads(drafter, target, path, draws, seed, LOOKAHEAD)
    if isinstance(drafter, NgramDrafter):
        return [ngram_lookahead(drafter, path, LOOKAHEAD)]
    if isinstance(drafter, LookupThenModelDrafter):
        lookup = ngram_lookahead(drafter.lookup, path, LOOKAHEAD)
        models = lookaheads(drafter.model, path, draws, seed, target)
        limit = min(LOOKAHEAD, drafter.model_gamma or LOOKAHEAD)  # the model's share of a round
        return [lookup_then_model(lookup, model, limit) for model in models]
    assert isinstance(drafter, ModelDrafter)
    keeps = keep_probabilities(draft_probabilities(drafter, path), path.p_tokens)
    generator = torch.Generator().manual_seed(seed)
    certain = all(k in (0.0, 1.0) for k in keeps)
    return [model_lookahead(keeps, generator) for _ in range(1 if certain else draws)]
