"""The drafter families: what each drafts with, what it needs, and the facts a name reads.

A family is one way of proposing tokens (vLLM's speculative `method`): a draft model, n-gram
lookup, suffix decoding, the target's own first layers (early exit), a drafting head on the
target's features (EAGLE, Medusa), or a draft model with another tokenizer (cross). A variant
configures a family (the draft model's trimmed head, the early exit's shared cache, the cross
drafter's mode); its first variant is the default. specviz.drafters.names combines them:
lookup first, else a family (`ngram+model`), and a tree of a family (`tree-model`);
specviz.drafters.builders builds each. Nothing here loads torch: the app's views read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True, kw_only=True)
class Family:
    """One family of drafters and its facts.

    variants: variant name → what it changes (the first is the default, written without a
    name); tree_variants: the same for its trees; needs: what a user must supply.
    """

    name: str
    label: str
    description: str
    needs: str
    variants: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({"": ""}))
    tree_variants: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({"": ""}))
    grows_trees: bool = False  # tree-FAMILY is a drafter
    uses_draft_model: bool = False
    lookup: bool = False  # drafts from the text itself: may come first ("ngram+model")
    head: str | None = None  # the drafting-head kind whose weights it reads (specviz.heads)
    reads_confidence: bool = False  # stops drafting below DrafterOptions.min_confidence
    reads_exit_layer: bool = False
    reads_width: bool = False  # its trees read DrafterOptions.tree_width
    batchable: bool = False  # specviz.batch drafts it for many rows at once
    remembers: bool = False  # drafts from a memory of earlier requests (DrafterOptions.memory)
    cross_tokenizer: bool = False  # takes a draft with another tokenizer, translating


FAMILIES: Mapping[str, Family] = MappingProxyType(
    {
        "model": Family(
            name="model",
            label="draft model",
            description="a small causal LM drafts gamma tokens",
            needs="a draft model (same tokenizer)",
            grows_trees=True,
            variants=MappingProxyType({"": "", "trimmed": "head trimmed to its top tokens"}),
            tree_variants=MappingProxyType({"": "", "sampled": "children sampled from q"}),
            uses_draft_model=True,
            reads_confidence=True,
            reads_width=True,
            batchable=True,
        ),
        "ngram": Family(
            name="ngram",
            label="n-gram lookup (no model)",
            description="copy what followed the last n tokens earlier in the text",
            needs="nothing",
            grows_trees=True,
            lookup=True,
            batchable=True,
        ),
        "suffix": Family(
            name="suffix",
            label="suffix decoding: drafts from memory (no model)",
            description="continue the best match in this request and in earlier requests' outputs",
            needs="nothing (a memory it fills)",
            grows_trees=True,
            lookup=True,
            remembers=True,
            batchable=True,
        ),
        "early-exit": Family(
            name="early-exit",
            label="early exit (self-speculation)",
            description="the target's first exit_layer layers draft",
            needs="nothing (the target's layers)",
            variants=MappingProxyType({"": "", "shared": "sharing the target's KV cache"}),
            reads_confidence=True,
            reads_exit_layer=True,
        ),
        "eagle": Family(
            name="eagle",
            label="EAGLE head on the target's fused layers",
            description="one trained layer reads a low, a middle and a high layer of the target "
            "and predicts tokens of its draft vocabulary",
            needs="head weights trained for the target (shipped for the bundled one)",
            grows_trees=True,
            head="eagle3",
            reads_width=True,
        ),
        "medusa": Family(
            name="medusa",
            label="Medusa heads on the target's features",
            description="trained heads guess 2, 3, ... tokens ahead from the target's last feature",
            needs="head weights trained for the target (shipped for the bundled one)",
            grows_trees=True,
            head="medusa",
            reads_width=True,
        ),
        "cross": Family(
            name="cross",
            label="draft model with another tokenizer",
            description="a draft of another tokenizer samples among the tokens both tokenizers "
            "share (tli), or writes greedily and its text is re-encoded (text)",
            needs="a draft model (any tokenizer)",
            variants=MappingProxyType(
                {"": "sampling the shared tokens", "text": "its greedy text re-encoded"}
            ),
            uses_draft_model=True,
            cross_tokenizer=True,
        ),
    }
)
