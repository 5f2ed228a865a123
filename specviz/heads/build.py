"""Build the head drafters by name (the registry's factories for eagle3* and medusa*)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specviz.checks import vocab_size
from specviz.core.config import SamplingConfig
from specviz.drafters.ngram import NgramDrafter
from specviz.drafters.options import DrafterOptions
from specviz.drafters.tree_model import TreeShape
from specviz.heads.cache import HeadCache, MedusaCache
from specviz.heads.drafters import HeadDrafter, HeadTreeDrafter, LookupThenHead, MakeTargetCache
from specviz.heads.eagle_lean import LeanEagle3Cache
from specviz.heads.tap import (
    FeatureCache,
    FusedFeatureCache,
    feature_cache,
    fused_feature_cache,
)
from specviz.heads.weights import head_path, load_eagle, load_head


def head_cache(kind: str, target: Any, folder: str | Path | None = None) -> HeadCache:
    """The head of `kind` ('eagle3' or 'medusa') for target, as a cached forward.

    folder: where {kind}.safetensors lies (None: the heads shipped for the bundled target).
    """
    path = None if folder is None else Path(folder) / f"{kind}.safetensors"
    if kind == "eagle3":
        return LeanEagle3Cache(target, load_eagle(target, path or head_path(kind)))
    module, head_tokens = load_head(kind, target, path)
    return MedusaCache(target, module, head_tokens)


def build_head_drafter(
    kind: str,
    target: Any,
    sampling: SamplingConfig,
    *,
    tree: TreeShape | None = None,
    sampled: bool = False,
    lean: bool = True,
    folder: str | Path | None = None,
) -> HeadDrafter | HeadTreeDrafter:
    """A chain (tree None) or tree drafter over the shipped head of `kind` for target.

    lean: verify through specviz.fast.lean's forward where it applies (else transformers').
    folder: where the weights lie (head_cache). A Medusa tree is no deeper than its heads.
    """
    cache = head_cache(kind, target, folder)
    make_target = target_forward(kind, lean)
    if tree is None:
        return HeadDrafter(cache, sampling, make_target_cache=make_target)
    if isinstance(cache, MedusaCache) and tree.depth > cache.heads.k:
        raise ValueError(
            f"the Medusa drafter has {cache.heads.k} heads: set the tree depth to at most "
            f"{cache.heads.k} (got {tree.depth})"
        )
    return HeadTreeDrafter(
        cache, sampling, shape=tree, sampled=sampled, make_target_cache=make_target
    )


def target_forward(kind: str, lean: bool) -> MakeTargetCache:
    """The target forward that records what a head of `kind` reads: its fused layers for
    EAGLE-3, its last feature otherwise; specviz.fast.lean's where it applies when lean, else
    transformers'."""
    if kind == "eagle3":
        return fused_feature_cache if lean else FusedFeatureCache
    return feature_cache if lean else FeatureCache


def build_registered(
    kind: str,
    target: Any,
    sampling: SamplingConfig,
    options: DrafterOptions,
    *,
    tree: bool,
    sampled: bool,
    lookup: bool,
) -> HeadDrafter | HeadTreeDrafter | LookupThenHead:
    """The registry's head drafters: a chain, a tree, or n-gram lookup then the chain."""
    shape = TreeShape(nodes=options.tree_nodes, depth=options.tree_depth, width=options.tree_width)
    drafter = build_head_drafter(
        kind,
        target,
        sampling,
        tree=shape if tree else None,
        sampled=sampled,
        lean=options.make_cache is None,
        folder=options.heads,
    )
    if not lookup:
        return drafter
    assert isinstance(drafter, HeadDrafter)
    ngram = NgramDrafter(
        vocab_size(target),
        max_ngram=options.ngram_max,
        min_ngram=options.ngram_min or 2,
        device=str(target.device),
    )
    return LookupThenHead(drafter, ngram, options.model_gamma)
