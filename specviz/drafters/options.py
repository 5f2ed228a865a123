"""What a registered drafter is: its options (DrafterOptions) and its entry (DrafterSpec)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specviz.core.config import SamplingConfig

if TYPE_CHECKING:
    from specviz.core.cache import CachedForward
    from specviz.core.drafter import Drafter
    from specviz.drafters.model import ModelDrafter
    from specviz.tree.drafter import TreeDrafter


@dataclass(frozen=True, kw_only=True)
class DrafterOptions:
    """The knobs a drafter may read; each factory uses the ones that apply to it.

    ngram_min None: 1 for n-gram lookup alone, 2 in front of a draft model (keeps chance
    one-token matches out). model_cls and make_cache swap the draft-model drafter's class and
    cached forward (the statistical suite's mutants; transformers' forward for a benchmark).
    tree_nodes, tree_depth and tree_width bound the tree drafters' trees: at most that many
    nodes, levels, and children per node. heads: the folder with the drafting heads' weights
    (eagle.safetensors, medusa.safetensors) trained for this target; None: the shipped ones.
    A tree drafter drafts through specviz.fast.lean's
    forward where it applies, or transformers' (a KVCache) when make_cache is given.
    tokenizer and draft_tokenizer: the target's and the draft's tokenizers, read by the
    cross-tokenizer drafters (cross-text, cross-tli); None: the tokenizer saved beside each
    model (the folder it was loaded from). Given both, the other draft-model drafters refuse
    two different tokenizers.
    """

    exit_layer: int = 8
    ngram_max: int = 3
    ngram_min: int | None = None
    min_confidence: float = 0.0
    model_gamma: int | None = None
    model_cls: type[ModelDrafter] | None = None  # None: ModelDrafter
    make_cache: Callable[[Any], CachedForward] | None = None  # None: the fast one where it applies
    tree_nodes: int = 8  # the sweep's best budget on the bundled pair (benchmarks/RESULTS.md)
    tree_depth: int = 4
    tree_width: int = 4
    heads: str | None = None  # folder of eagle/medusa .safetensors (None: the shipped ones)
    tokenizer: Any = field(default=None, compare=False)  # the target's (None: saved beside it)
    draft_tokenizer: Any = field(default=None, compare=False)  # the draft's (same)

    def __post_init__(self) -> None:
        for flag, value in (
            ("tree_nodes", self.tree_nodes),
            ("tree_depth", self.tree_depth),
            ("tree_width", self.tree_width),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{flag} must be an integer >= 1 (got {value!r})")
        if self.exit_layer < 1:
            raise ValueError(f"exit_layer must be >= 1 (got {self.exit_layer})")
        if self.model_gamma is not None and self.model_gamma < 1:
            raise ValueError(f"model_gamma must be >= 1 or None (got {self.model_gamma})")
        if not 0.0 <= self.min_confidence <= 1.0:
            raise ValueError(f"min_confidence must be in [0, 1] (got {self.min_confidence})")
        lowest = 1 if self.ngram_min is None else self.ngram_min
        if lowest < 1 or self.ngram_max < lowest:
            raise ValueError(
                "n-gram sizes must satisfy 1 <= min_ngram <= max_ngram "
                f"(got min_ngram={self.ngram_min}, max_ngram={self.ngram_max})"
            )


Factory = Callable[[Any, Any, SamplingConfig, DrafterOptions], "Drafter | TreeDrafter"]


@dataclass(frozen=True, kw_only=True)
class DrafterSpec:
    """A registered drafter: its factory(target, draft, sampling, options) and how to show it."""

    name: str
    label: str  # the app's menu label
    description: str  # one line, for --help and the docs
    uses_draft_model: bool  # False: drafts without a separate draft model
    build: Factory
    tree: bool = False  # True: proposes token trees (specviz.tree), verified in one pass
