"""Build the head drafters (specviz.drafters.builders' eagle and medusa families): the head of a
kind as a cached forward, its chain or tree drafter, and the target forward it verifies on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from specviz.core.cache import CachedForward, KVCache
from specviz.core.config import SamplingConfig
from specviz.drafters.tree_model import TreeShape
from specviz.heads.cache import HeadCache, MedusaCache
from specviz.heads.drafters import HeadDrafter, HeadTreeDrafter, MakeTargetCache
from specviz.heads.eagle_lean import LeanEagle3Cache
from specviz.heads.lookup import head_path
from specviz.heads.tap import (
    FeatureCache,
    FusedFeatureCache,
    feature_cache,
    fused_feature_cache,
)
from specviz.heads.weights import load_eagle, load_head


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


def head_forward(lean_target: bool) -> Callable[[Any], CachedForward] | None:
    """DrafterOptions.make_cache for a head drafter: None (its target forward is then
    specviz.fast.lean's where it applies, as --lean-target's) with lean_target, else a KVCache
    (transformers' forward, as plain decoding's without --lean-target)."""
    return None if lean_target else KVCache
