"""What a registered drafter is: its options (DrafterOptions) and its entry (DrafterSpec)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specviz.core.cache import CachedForward
    from specviz.drafters.cross_vocab import CrossTokenizers
    from specviz.drafters.model import ModelDrafter
    from specviz.drafters.suffix.memory import SuffixMemory


# At most SUFFIX_FACTOR × (match length) suffix tokens a round: the fastest of 1, 2 and 4 on every
# memory workload (benchmarks/MEMORY.md, "How far to speculate").
SUFFIX_FACTOR = 2.0


@dataclass(frozen=True, kw_only=True)
class DrafterOptions:
    """The knobs a drafter may read; each factory uses the ones that apply to it.

    ngram_min None: 1 for n-gram lookup alone, 2 in front of a draft model (keeps chance
    one-token matches out). model_cls and make_cache swap the draft-model drafter's class and
    cached forward (the statistical suite's mutants; transformers' forward for a benchmark).
    tree_nodes, tree_depth and tree_width bound the tree drafters' trees: at most that many
    nodes, levels, and children per node. heads: the folder with the drafting heads' weights
    (eagle3.safetensors, medusa.safetensors) trained for this target; None:
    the shipped ones.
    memory: the suffix drafters' memory of earlier requests (specviz.drafters.suffix.memory),
    which they read and feed; None: a private, fresh one per drafter. suffix_factor and
    suffix_min_prob bound their speculation (at most factor * match length tokens, each kept
    while its path's frequency is at least min_prob); suffix_min_score: the score a suffix
    chain needs to be proposed before the draft model (suffix+model); model_min_alpha: the
    share of its drafted tokens the target must keep for the draft model to go on drafting
    there (suffix+model; below it the weak suffix chain or no draft, 0: always the model).
    A tree drafter drafts through specviz.fast.lean's
    forward where it applies, or transformers' (a KVCache) when make_cache is given.
    tokenizer and draft_tokenizer: the target's and the draft's tokenizers, read by the
    cross-tokenizer drafters (cross:text, cross); None: the tokenizer saved beside each
    model (the folder it was loaded from). Given both, the other draft-model drafters refuse
    two different tokenizers.
    explain: the suffix and cross-tokenizer drafters say how they drafted each round (what
    matched and what followed it; the draft's tokens, their text, the target's tokens), which
    the decoders emit as SuffixLookup and CrossTranslation events (specviz.core.events); a
    suffix drafter then counts its match again in the memory's texts every round, a cost in
    proportion to the memory's size.
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
    heads: str | None = None  # folder of the heads' .safetensors (None: the shipped ones)
    memory: SuffixMemory | None = None  # None: a private, fresh one per suffix drafter
    suffix_factor: float = SUFFIX_FACTOR
    suffix_min_prob: float = 0.1
    suffix_min_score: float = 1.0
    model_min_alpha: float = 0.2  # the gate of least loss across workloads (tools.gate_replay)
    tokenizer: Any = field(default=None, compare=False)  # the target's (None: saved beside it)
    draft_tokenizer: Any = field(default=None, compare=False)  # the draft's (same)
    # the two tokenizers' shared tokens (cross_vocab.cross_tokenizers), found once for many
    # drafters of one pair; None: found when the drafter is built
    translation: CrossTokenizers | None = field(default=None, compare=False)
    explain: bool = False  # the suffix and cross-tokenizer drafters explain their rounds

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
        if not self.suffix_factor > 0:
            raise ValueError(f"suffix_factor must be > 0 (got {self.suffix_factor}): try 1 to 4")
        if not 0.0 <= self.suffix_min_prob <= 1.0:
            raise ValueError(f"suffix_min_prob must be in [0, 1] (got {self.suffix_min_prob})")
        if not self.suffix_min_score >= 0:
            raise ValueError(f"suffix_min_score must be >= 0 (got {self.suffix_min_score})")
        if not 0.0 <= self.model_min_alpha <= 1.0:
            raise ValueError(f"model_min_alpha must be in [0, 1] (got {self.model_min_alpha})")
        lowest = 1 if self.ngram_min is None else self.ngram_min
        if lowest < 1 or self.ngram_max < lowest:
            raise ValueError(
                "n-gram sizes must satisfy 1 <= min_ngram <= max_ngram "
                f"(got min_ngram={self.ngram_min}, max_ngram={self.ngram_max})"
            )


@dataclass(frozen=True, kw_only=True)
class DefaultConfig:
    """The exact configuration a user gets without choosing one (specviz.drafters.registry's
    DEFAULT_CONFIG): `specviz generate` with no flags, the app's first preset, the README's
    example. drafter: a registered name; gamma: draft tokens per round; policy: a gamma policy
    (specviz.gamma.policies); temperature: 0 for greedy; forward: the target's forward,
    "lean" (specviz.fast.lean's, where it applies) or "transformers"; threads: torch's CPU
    threads (None: specviz.runtime's default); batch_drafter: the drafter of a batched decode
    (the batch sweep's); batch_rows: the requests a server decodes at once, the knee of the batch
    sweep's served tokens/s (specviz.batch.sweep.knee); batch_gammas: the batch sweep's best γ
    at each batch size (T = 0), the most a row drafts when that many share a batch
    (specviz.batch.gamma.GammaByRows)."""

    drafter: str
    batch_drafter: str
    gamma: int
    policy: str
    temperature: float
    forward: str
    threads: int | None = None
    batch_rows: int = 8
    batch_gammas: tuple[tuple[int, int], ...] = ((1, 4), (2, 2), (4, 2), (8, 1), (16, 1), (32, 1))


@dataclass(frozen=True, kw_only=True)
class DrafterSpec:
    """A registered drafter: its factory(target, draft, sampling, options) and how to show it."""

    name: str
    label: str  # the app's menu label
    description: str  # one line, for --help and the docs
    uses_draft_model: bool  # False: drafts without a separate draft model
    tree: bool = False  # True: proposes token trees (specviz.tree), verified in one pass
    chain: str | None = None  # a tree drafter's chain counterpart: its proposer, one child a node
    head: str | None = None  # the drafting-head kind whose weights it reads (specviz.heads)
    shares_target_cache: bool = False  # drafts into the target's own cache (SharesTargetCache)
    reads_confidence: bool = True  # stops drafting below DrafterOptions.min_confidence
    reads_exit_layer: bool = False  # drafts with the target's first DrafterOptions.exit_layer
    reads_width: bool = False  # a tree drafter that reads DrafterOptions.tree_width
    trims_head: bool = False  # scores only the draft's top-ranked tokens (needs an output head)
    untrimmed: str | None = None  # a trimmed drafter's counterpart scoring the whole head
    hybrid: bool = False  # lookup first, a model elsewhere (reads DrafterOptions.model_gamma)
    batchable: bool = False  # specviz.batch drafts it for many rows at once
    remembers: bool = False  # drafts from a memory of earlier requests (DrafterOptions.memory)
    cross_tokenizer: bool = False  # takes a draft with another tokenizer, translating
