"""specviz: exact speculative decoding, made visible.

The public API, imported on first use (importing specviz loads nothing heavy):
speculative_generate, autoregressive_generate, SamplingConfig, SpeculationConfig, load_pair,
prompt_ids, build_drafter, DrafterOptions, the drafter protocol (Drafter, Draft) and the events;
SuffixMemory and PrefixCache, the memories a caller keeps across requests;
for trees, TokenTree, TreeDrafter, TreeRule with EXACT_TREE and the lossy TYPICAL; for a batch
of requests, speculative_generate_batch, autoregressive_generate_batch, BatchResult and
build_batch_drafter (BATCH_DRAFTERS names the drafters it builds); for models at lower
precision, load_at_precision (PRECISIONS) and the distances from a reference model,
greedy_agreement, mean_total_variation and total_variation.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specviz.api import GenerationResult, autoregressive_generate, speculative_generate
    from specviz.batch.api import (
        BatchResult,
        autoregressive_generate_batch,
        speculative_generate_batch,
    )
    from specviz.batch.drafters import build_batch_drafter
    from specviz.core.config import SamplingConfig, SpeculationConfig
    from specviz.core.drafter import Draft, Drafter
    from specviz.core.events import (
        Accepted,
        Bonus,
        Event,
        Finished,
        Prefill,
        Proposed,
        Rejected,
        Resampled,
        RoundSummary,
        Sampled,
        TreeProposed,
        TreeVerified,
    )
    from specviz.drafters.names import BATCH_DRAFTERS, DEFAULT_CONFIG, DRAFTER_NAMES
    from specviz.drafters.options import DrafterOptions
    from specviz.drafters.registry import build_drafter
    from specviz.drafters.suffix.memory import SuffixMemory
    from specviz.fast.prefix import PrefixCache
    from specviz.jsonl import read_jsonl, write_jsonl
    from specviz.models.chat import prompt_ids
    from specviz.models.loading import ModelPair, load_pair
    from specviz.quant.distance import greedy_agreement, mean_total_variation, total_variation
    from specviz.quant.precision import PRECISIONS, load_at_precision
    from specviz.tree.drafter import TreeDrafter
    from specviz.tree.proposal import TokenTree
    from specviz.tree.verify import EXACT_TREE, TYPICAL, TreeRule

_EVENTS = "Accepted Bonus Event Finished Prefill Proposed Rejected Resampled RoundSummary Sampled"
_EVENTS += " TreeProposed TreeVerified"
_WHERE = {
    "speculative_generate": "specviz.api",
    "autoregressive_generate": "specviz.api",
    "GenerationResult": "specviz.api",
    "speculative_generate_batch": "specviz.batch.api",
    "autoregressive_generate_batch": "specviz.batch.api",
    "BatchResult": "specviz.batch.api",
    "build_batch_drafter": "specviz.batch.drafters",
    "BATCH_DRAFTERS": "specviz.drafters.names",
    "SamplingConfig": "specviz.core.config",
    "SpeculationConfig": "specviz.core.config",
    "Draft": "specviz.core.drafter",
    "Drafter": "specviz.core.drafter",
    "build_drafter": "specviz.drafters.registry",
    "DrafterOptions": "specviz.drafters.options",
    "DRAFTER_NAMES": "specviz.drafters.names",
    "DEFAULT_CONFIG": "specviz.drafters.names",
    "SuffixMemory": "specviz.drafters.suffix.memory",
    "PrefixCache": "specviz.fast.prefix",
    "load_pair": "specviz.models.loading",
    "prompt_ids": "specviz.models.chat",
    "ModelPair": "specviz.models.loading",
    "read_jsonl": "specviz.jsonl",
    "write_jsonl": "specviz.jsonl",
    "TokenTree": "specviz.tree.proposal",
    "TreeDrafter": "specviz.tree.drafter",
    "TreeRule": "specviz.tree.verify",
    "EXACT_TREE": "specviz.tree.verify",
    "TYPICAL": "specviz.tree.verify",
    "load_at_precision": "specviz.quant.precision",
    "PRECISIONS": "specviz.quant.precision",
    "greedy_agreement": "specviz.quant.distance",
    "mean_total_variation": "specviz.quant.distance",
    "total_variation": "specviz.quant.distance",
} | dict.fromkeys(_EVENTS.split(), "specviz.core.events")
__all__ = [
    "BATCH_DRAFTERS",
    "DEFAULT_CONFIG",
    "DRAFTER_NAMES",
    "EXACT_TREE",
    "PRECISIONS",
    "TYPICAL",
    "Accepted",
    "BatchResult",
    "Bonus",
    "Draft",
    "Drafter",
    "DrafterOptions",
    "Event",
    "Finished",
    "GenerationResult",
    "ModelPair",
    "Prefill",
    "PrefixCache",
    "Proposed",
    "Rejected",
    "Resampled",
    "RoundSummary",
    "Sampled",
    "SamplingConfig",
    "SpeculationConfig",
    "SuffixMemory",
    "TokenTree",
    "TreeDrafter",
    "TreeProposed",
    "TreeRule",
    "TreeVerified",
    "autoregressive_generate",
    "autoregressive_generate_batch",
    "build_batch_drafter",
    "build_drafter",
    "greedy_agreement",
    "load_at_precision",
    "load_pair",
    "mean_total_variation",
    "prompt_ids",
    "read_jsonl",
    "speculative_generate",
    "speculative_generate_batch",
    "total_variation",
    "write_jsonl",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines `name` on first access."""
    if name not in _WHERE:
        raise AttributeError(f"module 'specviz' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
