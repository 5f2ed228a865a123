"""Every drafter by name: one place maps a name to its factory, menu label and description.

The command line (generate, verify, bench, replay), the app and the tutorials all build drafters
through `build_drafter`, so a name means the same drafter everywhere. The fast paths plug in
here: a model drafter drafts through specviz.fast.lean's forward unless options say otherwise.
Each factory imports its drafter when called, so the names and labels load without torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from specviz.core.checks import check_pair, vocab_size
from specviz.core.config import SamplingConfig

if TYPE_CHECKING:
    from specviz.core.cache import CachedForward
    from specviz.core.drafter import Drafter
    from specviz.drafters.model import ModelDrafter
    from specviz.drafters.ngram import NgramDrafter
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


def _model_drafter(o: DrafterOptions) -> tuple[type[ModelDrafter], Callable[[Any], CachedForward]]:
    """The draft-model drafter's class and cached forward: the options', else the defaults."""
    from specviz.drafters.model import ModelDrafter
    from specviz.fast.lean import draft_cache

    return o.model_cls or ModelDrafter, o.make_cache or draft_cache


def _model(trimmed: bool) -> Factory:
    """The draft model drafting alone (its head trimmed to its top-ranked tokens if trimmed)."""

    def build(target: Any, draft: Any, sampling: SamplingConfig, o: DrafterOptions) -> Drafter:
        if draft is None:
            raise ValueError("this drafter needs a draft model: pass draft=...")
        from specviz.drafters.trimmed import load_head_tokens

        check_pair(target, draft)
        head = load_head_tokens(draft) if trimmed else None
        cls, make_cache = _model_drafter(o)
        return cls(
            draft, sampling, vocab_size(target), make_cache=make_cache,
            min_confidence=o.min_confidence, head_tokens=head,
        )  # fmt: skip

    return build


def _lookup(target: Any, o: DrafterOptions, shortest: int) -> NgramDrafter:
    """N-gram lookup over the committed text (shortest n-gram: options' or `shortest`)."""
    from specviz.drafters.ngram import NgramDrafter

    return NgramDrafter(
        vocab_size(target), max_ngram=o.ngram_max, min_ngram=o.ngram_min or shortest,
        device=str(target.device),
    )  # fmt: skip


def _ngram(target: Any, _draft: Any, _sampling: SamplingConfig, o: DrafterOptions) -> Drafter:
    return _lookup(target, o, shortest=1)


def _hybrid(trimmed: bool) -> Factory:
    """Lookup where the text repeats, the (trimmed) draft model elsewhere."""
    model = _model(trimmed)

    def build(target: Any, draft: Any, sampling: SamplingConfig, o: DrafterOptions) -> Drafter:
        from specviz.drafters.hybrid import LookupThenModelDrafter
        from specviz.drafters.model import ModelDrafter

        drafter = model(target, draft, sampling, o)
        assert isinstance(drafter, ModelDrafter)
        lookup = _lookup(target, o, shortest=2)
        return LookupThenModelDrafter(drafter, lookup, model_gamma=o.model_gamma)

    return build


def _early_exit(share: bool) -> Factory:
    """The target's first exit_layer layers (own cache, or sharing the target's)."""

    def build(target: Any, _draft: Any, sampling: SamplingConfig, o: DrafterOptions) -> Drafter:
        from specviz.drafters.early_exit import build_early_exit
        from specviz.drafters.shared_exit import early_exit_drafter

        if share:
            return early_exit_drafter(
                target, o.exit_layer, sampling, vocab_size(target), share=True,
                min_confidence=o.min_confidence,
            )  # fmt: skip
        model, _adapter = build_early_exit(target, o.exit_layer)
        cls, make_cache = _model_drafter(o)
        return cls(
            model, sampling, vocab_size(target), make_cache=make_cache,
            min_confidence=o.min_confidence,
        )  # fmt: skip

    return build


def _tree_model(sampled: bool) -> Factory:
    """The draft model growing a tree: top-k children (EAGLE-2 style) or sampled from q."""

    def build(target: Any, draft: Any, sampling: SamplingConfig, o: DrafterOptions) -> TreeDrafter:
        if draft is None:
            raise ValueError("this drafter needs a draft model: pass draft=...")
        from specviz.core.cache import KVCache
        from specviz.drafters.tree_model import TreeModelDrafter, TreeShape
        from specviz.fast.lean import tree_draft_cache

        check_pair(target, draft)
        shape = TreeShape(nodes=o.tree_nodes, depth=o.tree_depth, width=o.tree_width)
        return TreeModelDrafter(
            draft, sampling, vocab_size(target), shape=shape, sampled=sampled,
            make_cache=tree_draft_cache if o.make_cache is None else KVCache,
        )  # fmt: skip

    return build


def _tree_ngram(
    target: Any, _draft: Any, _sampling: SamplingConfig, o: DrafterOptions
) -> TreeDrafter:
    from specviz.drafters.tree_ngram import TreeNgramDrafter

    return TreeNgramDrafter(
        vocab_size(target), nodes=o.tree_nodes, depth=o.tree_depth, max_ngram=o.ngram_max,
        min_ngram=o.ngram_min or 1,
    )  # fmt: skip


def _lookup_then_head(
    target: Any, _draft: Any, sampling: SamplingConfig, o: DrafterOptions
) -> Drafter:
    """N-gram lookup where it finds a match, the EAGLE head's chain elsewhere."""
    from specviz.heads.build import build_head_drafter
    from specviz.heads.drafters import HeadDrafter, LookupThenHead

    head = build_head_drafter("eagle", target, sampling, lean=o.make_cache is None, folder=o.heads)
    assert isinstance(head, HeadDrafter)
    return LookupThenHead(head, _lookup(target, o, shortest=2), o.model_gamma)


def _head(kind: str, tree: bool = False, sampled: bool = False) -> Factory:
    """A drafting head trained on the target's own features (specviz.heads)."""

    def build(target: Any, _draft: Any, sampling: SamplingConfig, o: DrafterOptions) -> Any:
        from specviz.drafters.tree_model import TreeShape
        from specviz.heads.build import build_head_drafter

        shape = TreeShape(nodes=o.tree_nodes, depth=o.tree_depth, width=o.tree_width)
        return build_head_drafter(
            kind, target, sampling, tree=shape if tree else None, sampled=sampled,
            lean=o.make_cache is None, folder=o.heads,
        )  # fmt: skip

    return build


SPECS = (
    DrafterSpec(
        name="model",
        label="draft model",
        description="a small causal LM drafts gamma tokens",
        uses_draft_model=True,
        build=_model(trimmed=False),
    ),
    DrafterSpec(
        name="model-trimmed",
        label="draft model, head trimmed to its top tokens",
        description="the draft model scoring only its top-ranked tokens (q = 0 elsewhere)",
        uses_draft_model=True,
        build=_model(trimmed=True),
    ),
    DrafterSpec(
        name="ngram",
        label="n-gram lookup (no model)",
        description="copy what followed the last n tokens earlier in the text",
        uses_draft_model=False,
        build=_ngram,
    ),
    DrafterSpec(
        name="ngram+model",
        label="n-gram lookup, else draft model",
        description="n-gram lookup where it finds a match, the draft model elsewhere",
        uses_draft_model=True,
        build=_hybrid(trimmed=False),
    ),
    DrafterSpec(
        name="ngram+model-trimmed",
        label="n-gram lookup, else draft model (trimmed head)",
        description="n-gram lookup where it finds a match, the trimmed draft model elsewhere",
        uses_draft_model=True,
        build=_hybrid(trimmed=True),
    ),
    DrafterSpec(
        name="early-exit",
        label="early exit (self-speculation)",
        description="the target's first exit_layer layers draft, with a cache of their own",
        uses_draft_model=False,
        build=_early_exit(share=False),
    ),
    DrafterSpec(
        name="early-exit-shared",
        label="early exit, sharing the target's KV cache",
        description="the target's first exit_layer layers draft into the target's own cache",
        uses_draft_model=False,
        build=_early_exit(share=True),
    ),
    DrafterSpec(
        name="eagle",
        label="EAGLE head on the target's features",
        description="one trained layer predicts the target's next feature, drafting gamma tokens",
        uses_draft_model=False,
        build=_head("eagle"),
    ),
    DrafterSpec(
        name="medusa",
        label="Medusa heads on the target's features",
        description="trained heads guess 2, 3, ... tokens ahead from the target's last feature",
        uses_draft_model=False,
        build=_head("medusa"),
    ),
    DrafterSpec(
        name="ngram+eagle",
        label="n-gram lookup, else EAGLE head",
        description="n-gram lookup where it finds a match, the EAGLE head elsewhere",
        uses_draft_model=False,
        build=_lookup_then_head,
    ),
    DrafterSpec(
        name="tree-model",
        label="tree: draft model's top-k children",
        description="the draft model grows a tree of its likeliest tokens (EAGLE-2 style)",
        uses_draft_model=True,
        build=_tree_model(sampled=False),
        tree=True,
    ),
    DrafterSpec(
        name="tree-sampled",
        label="tree: children sampled from the draft model",
        description="each node gets width children drawn i.i.d. from q (SpecInfer style)",
        uses_draft_model=True,
        build=_tree_model(sampled=True),
        tree=True,
    ),
    DrafterSpec(
        name="tree-ngram",
        label="tree: n-gram lookup, one branch per earlier continuation",
        description="every distinct earlier continuation of the last n tokens as a branch",
        uses_draft_model=False,
        build=_tree_ngram,
        tree=True,
    ),
    DrafterSpec(
        name="eagle-tree",
        label="tree: EAGLE head's top-k children",
        description="the EAGLE head grows a tree of its likeliest tokens (EAGLE-2 style)",
        uses_draft_model=False,
        build=_head("eagle", tree=True),
        tree=True,
    ),
    DrafterSpec(
        name="eagle-tree-sampled",
        label="tree: children sampled from the EAGLE head",
        description="each node gets width children drawn i.i.d. from the EAGLE head's q",
        uses_draft_model=False,
        build=_head("eagle", tree=True, sampled=True),
        tree=True,
    ),
    DrafterSpec(
        name="medusa-tree",
        label="tree: Medusa heads' top-k children",
        description="the Medusa heads' likeliest tokens at each depth, combined into a tree",
        uses_draft_model=False,
        build=_head("medusa", tree=True),
        tree=True,
    ),
)
TREE_DRAFTERS = tuple(s.name for s in SPECS if s.tree)
REGISTRY: Mapping[str, DrafterSpec] = MappingProxyType({s.name: s for s in SPECS})
DRAFTER_NAMES = tuple(REGISTRY)


def drafter_spec(name: str) -> DrafterSpec:
    """The registered drafter called name, or a ValueError listing the names."""
    if name not in REGISTRY:
        raise ValueError(f"unknown drafter {name!r}: choose one of {', '.join(DRAFTER_NAMES)}")
    return REGISTRY[name]


def build_drafter(
    name: str,
    *,
    target: Any,
    draft: Any = None,
    sampling: SamplingConfig,
    options: DrafterOptions | None = None,
) -> Drafter | TreeDrafter:
    """A fresh drafter called name for target (draft: the draft model, where one is used).

    Tree drafters (DrafterSpec.tree) return a TreeDrafter, which specviz.tree.decoding's
    TreeDecoder (and the one-call API) verify a whole tree at a time.
    """
    spec = drafter_spec(name)
    return spec.build(target, draft, sampling, options or DrafterOptions())
