"""Every drafter by name: one place maps a name to its factory, menu label and description.

The command line (generate, verify, bench, replay), the app and the tutorials all build drafters
through `build_drafter`, so a name means the same drafter everywhere. The fast paths plug in
here: a model drafter drafts through specviz.fast.lean's forward unless options say otherwise.
Each factory imports its drafter when called, so the names and labels load without torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from specviz.checks import check_pair, vocab_size
from specviz.core.config import SamplingConfig
from specviz.drafters.options import DefaultConfig as DefaultConfig
from specviz.drafters.options import DrafterOptions as DrafterOptions
from specviz.drafters.options import DrafterSpec as DrafterSpec
from specviz.drafters.options import Factory

if TYPE_CHECKING:
    from specviz.core.cache import CachedForward
    from specviz.core.drafter import Drafter
    from specviz.drafters.model import ModelDrafter
    from specviz.drafters.ngram import NgramDrafter
    from specviz.tree.drafter import TreeDrafter


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

        _check_pair(target, draft)
        check_same_tokenizers(o)
        head = load_head_tokens(draft) if trimmed else None
        cls, make_cache = _model_drafter(o)
        return cls(
            draft, sampling, vocab_size(target), make_cache=make_cache,
            min_confidence=o.min_confidence, head_tokens=head,
        )  # fmt: skip

    return build


def _check_pair(target: Any, draft: Any) -> None:
    """check_pair for a drafter that needs the target's tokenizer: a refusal of two
    vocabularies names the drafters that translate between tokenizers."""
    try:
        check_pair(target, draft)
    except ValueError as err:
        if vocab_size(target) == vocab_size(draft):
            raise
        names = ", ".join(CROSS_TOKENIZER_DRAFTERS)
        raise ValueError(
            f"{err}, or a drafter that translates between tokenizers ({names})"
        ) from None


def check_same_tokenizers(o: DrafterOptions) -> None:
    """ValueError when the options give two different tokenizers to a drafter that needs the
    target's (the draft's ids must mean the target's tokens)."""
    if o.tokenizer is None or o.draft_tokenizer is None or o.tokenizer is o.draft_tokenizer:
        return
    if o.tokenizer.get_vocab() != o.draft_tokenizer.get_vocab():
        raise ValueError(
            "the draft's and the target's tokenizers differ: this drafter needs a draft trained "
            "with the target's tokenizer; use a drafter that translates between tokenizers "
            f"({', '.join(CROSS_TOKENIZER_DRAFTERS)})"
        )


def _cross(kind: str) -> Factory:
    """A draft model with a tokenizer of its own: text re-encoded, or the shared tokens."""

    def build(target: Any, draft: Any, sampling: SamplingConfig, o: DrafterOptions) -> Drafter:
        if draft is None:
            raise ValueError("this drafter needs a draft model: pass draft=...")
        from specviz.drafters.cross_text import CrossTextDrafter
        from specviz.drafters.cross_tli import CrossTLIDrafter
        from specviz.drafters.cross_vocab import cross_tokenizers, tokenizer_of
        from specviz.fast.lean import draft_cache

        check_pair(target, draft, cross_tokenizers=True)
        pair = o.translation or cross_tokenizers(
            tokenizer_of(target, o.tokenizer, "target"),
            tokenizer_of(draft, o.draft_tokenizer, "draft"),
            target_vocab=vocab_size(target),
            draft_vocab=vocab_size(draft),
        )
        make_cache = o.make_cache or draft_cache
        if kind == "text":
            return CrossTextDrafter(draft, pair, make_cache=make_cache, explain=o.explain)
        return CrossTLIDrafter(draft, sampling, pair, make_cache=make_cache, explain=o.explain)

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

        _check_pair(target, draft)
        check_same_tokenizers(o)
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


def _suffix_config(o: DrafterOptions) -> Any:
    """The suffix drafters' speculation bounds from the options."""
    from specviz.drafters.suffix.drafter import SuffixConfig

    return SuffixConfig(factor=o.suffix_factor, min_prob=o.suffix_min_prob)


def _suffix(target: Any, _draft: Any, _sampling: SamplingConfig, o: DrafterOptions) -> Drafter:
    from specviz.drafters.suffix.drafter import SuffixDrafter

    return SuffixDrafter(
        vocab_size(target), memory=o.memory, config=_suffix_config(o), device=str(target.device),
        explain=o.explain,
    )  # fmt: skip


def _tree_suffix(
    target: Any, _draft: Any, _sampling: SamplingConfig, o: DrafterOptions
) -> TreeDrafter:
    from specviz.drafters.suffix.drafter import TreeSuffixDrafter

    return TreeSuffixDrafter(
        vocab_size(target), nodes=o.tree_nodes, depth=o.tree_depth, memory=o.memory,
        config=_suffix_config(o), explain=o.explain,
    )  # fmt: skip


def _suffix_then(fallback: Factory, name: str) -> Factory:
    """Suffix decoding where its match scores well, fallback's drafter (registered as name)
    elsewhere: a draft model (specviz.drafters.suffix.hybrid) or a drafting head
    (specviz.heads.drafters.SuffixThenHead, which shares the target's cache); the memory keeps
    the fallback's kept share under name from request to request."""

    def build(target: Any, draft: Any, sampling: SamplingConfig, o: DrafterOptions) -> Any:
        from specviz.drafters.model import ModelDrafter
        from specviz.drafters.suffix.drafter import SuffixDrafter
        from specviz.drafters.suffix.hybrid import SuffixThenModelDrafter
        from specviz.heads.drafters import HeadDrafter, SuffixThenHead

        drafter = fallback(target, draft, sampling, o)
        suffix = _suffix(target, draft, sampling, o)
        assert isinstance(drafter, ModelDrafter) and isinstance(suffix, SuffixDrafter)
        head = isinstance(drafter, HeadDrafter)
        hybrid: type[SuffixThenModelDrafter] = SuffixThenHead if head else SuffixThenModelDrafter
        return hybrid(
            drafter, suffix, min_score=o.suffix_min_score, model_gamma=o.model_gamma,
            min_model_alpha=o.model_min_alpha, share_key=name,
        )  # fmt: skip

    return build


def _head(kind: str, *, tree: bool = False, sampled: bool = False, lookup: bool = False) -> Factory:
    """A drafting head trained on the target's own features (specviz.heads), maybe after lookup."""

    def build(target: Any, _draft: Any, sampling: SamplingConfig, o: DrafterOptions) -> Any:
        from specviz.heads.build import build_registered

        return build_registered(
            kind, target, sampling, o, tree=tree, sampled=sampled, lookup=lookup
        )

    return build


SPECS = (
    DrafterSpec(
        name="model",
        label="draft model",
        description="a small causal LM drafts gamma tokens",
        uses_draft_model=True,
        build=_model(trimmed=False),
        batchable=True,
    ),
    DrafterSpec(
        name="model-trimmed",
        label="draft model, head trimmed to its top tokens",
        description="the draft model scoring only its top-ranked tokens (q = 0 elsewhere)",
        uses_draft_model=True,
        build=_model(trimmed=True),
        trims_head=True,
        untrimmed="model",
        batchable=True,
    ),
    DrafterSpec(
        name="ngram",
        label="n-gram lookup (no model)",
        description="copy what followed the last n tokens earlier in the text",
        uses_draft_model=False,
        build=_ngram,
        reads_confidence=False,
        batchable=True,
    ),
    DrafterSpec(
        name="ngram+model",
        label="n-gram lookup, else draft model",
        description="n-gram lookup where it finds a match, the draft model elsewhere",
        uses_draft_model=True,
        build=_hybrid(trimmed=False),
        hybrid=True,
    ),
    DrafterSpec(
        name="ngram+model-trimmed",
        label="n-gram lookup, else draft model (trimmed head)",
        description="n-gram lookup where it finds a match, the trimmed draft model elsewhere",
        uses_draft_model=True,
        build=_hybrid(trimmed=True),
        trims_head=True,
        untrimmed="ngram+model",
        hybrid=True,
    ),
    DrafterSpec(
        name="suffix",
        label="suffix decoding: drafts from memory (no model)",
        description="continue the best match in this request and in earlier requests' outputs",
        uses_draft_model=False,
        build=_suffix,
        reads_confidence=False,
        remembers=True,
    ),
    DrafterSpec(
        name="suffix+model",
        label="suffix decoding, else draft model",
        description="suffix decoding where its match scores well, the draft model elsewhere",
        uses_draft_model=True,
        build=_suffix_then(_model(trimmed=False), "model"),
        hybrid=True,
        remembers=True,
    ),
    DrafterSpec(
        name="suffix+model-trimmed",
        label="suffix decoding, else draft model (trimmed head)",
        description="suffix decoding where its match scores well, else the trimmed draft model",
        uses_draft_model=True,
        build=_suffix_then(_model(trimmed=True), "model-trimmed"),
        trims_head=True,
        untrimmed="suffix+model",
        hybrid=True,
        remembers=True,
    ),
    DrafterSpec(
        name="early-exit",
        label="early exit (self-speculation)",
        description="the target's first exit_layer layers draft, with a cache of their own",
        uses_draft_model=False,
        build=_early_exit(share=False),
        reads_exit_layer=True,
    ),
    DrafterSpec(
        name="early-exit-shared",
        label="early exit, sharing the target's KV cache",
        description="the target's first exit_layer layers draft into the target's own cache",
        uses_draft_model=False,
        build=_early_exit(share=True),
        reads_exit_layer=True,
        shares_target_cache=True,
    ),
    DrafterSpec(
        name="medusa",
        label="Medusa heads on the target's features",
        description="trained heads guess 2, 3, ... tokens ahead from the target's last feature",
        uses_draft_model=False,
        build=_head("medusa"),
        head="medusa",
        shares_target_cache=True,
        reads_confidence=False,
    ),
    DrafterSpec(
        name="eagle3",
        label="EAGLE-3 head on the target's fused layers",
        description="one trained layer reads a low, a middle and a high layer of the target and "
        "predicts tokens of its draft vocabulary directly, drafting gamma tokens",
        uses_draft_model=False,
        build=_head("eagle3"),
        head="eagle3",
        shares_target_cache=True,
        reads_confidence=False,
    ),
    DrafterSpec(
        name="ngram+eagle3",
        label="n-gram lookup, else EAGLE-3 head",
        description="n-gram lookup where it finds a match, the EAGLE-3 head elsewhere",
        uses_draft_model=False,
        build=_head("eagle3", lookup=True),
        head="eagle3",
        shares_target_cache=True,
        reads_confidence=False,
        hybrid=True,
    ),
    DrafterSpec(
        name="suffix+eagle3",
        label="suffix decoding, else EAGLE-3 head",
        description="suffix decoding where its match scores well, the EAGLE-3 head elsewhere",
        uses_draft_model=False,
        build=_suffix_then(_head("eagle3"), "eagle3"),
        head="eagle3",
        shares_target_cache=True,
        reads_confidence=False,
        hybrid=True,
        remembers=True,
    ),
    DrafterSpec(
        name="cross-text",
        label="draft model with another tokenizer: its greedy text re-encoded",
        description="a draft of another tokenizer writes greedily; its text, re-encoded with "
        "the target's tokenizer, is proposed (stable tokens only, one-hot q)",
        uses_draft_model=True,
        build=_cross("text"),
        reads_confidence=False,
        cross_tokenizer=True,
    ),
    DrafterSpec(
        name="cross-tli",
        label="draft model with another tokenizer: sampling over the shared tokens",
        description="a draft of another tokenizer samples among the tokens both tokenizers "
        "share (token-level intersection), its law renormalised there",
        uses_draft_model=True,
        build=_cross("tli"),
        reads_confidence=False,
        cross_tokenizer=True,
    ),
    DrafterSpec(
        name="tree-model",
        label="tree: draft model's top-k children",
        description="the draft model grows a tree of its likeliest tokens (EAGLE-2 style)",
        uses_draft_model=True,
        build=_tree_model(sampled=False),
        tree=True,
        chain="model",
        reads_width=True,
    ),
    DrafterSpec(
        name="tree-sampled",
        label="tree: children sampled from the draft model",
        description="each node gets width children drawn i.i.d. from q (SpecInfer style)",
        uses_draft_model=True,
        build=_tree_model(sampled=True),
        tree=True,
        chain="model",
        reads_width=True,
    ),
    DrafterSpec(
        name="tree-ngram",
        label="tree: n-gram lookup, one branch per earlier continuation",
        description="every distinct earlier continuation of the last n tokens as a branch",
        uses_draft_model=False,
        build=_tree_ngram,
        tree=True,
        chain="ngram",
    ),
    DrafterSpec(
        name="tree-suffix",
        label="tree: suffix decoding, the likeliest continuations from memory",
        description="the most frequent continuations of the best match, as a tree (no model)",
        uses_draft_model=False,
        build=_tree_suffix,
        tree=True,
        chain="suffix",
        remembers=True,
    ),
    DrafterSpec(
        name="eagle3-tree",
        label="tree: EAGLE-3 head's top-k children",
        description="the EAGLE-3 head grows a tree of its likeliest tokens (EAGLE-2 style)",
        uses_draft_model=False,
        build=_head("eagle3", tree=True),
        tree=True,
        chain="eagle3",
        head="eagle3",
        shares_target_cache=True,
        reads_confidence=False,
        reads_width=True,
    ),
    DrafterSpec(
        name="medusa-tree",
        label="tree: Medusa heads' top-k children",
        description="the Medusa heads' likeliest tokens at each depth, combined into a tree",
        uses_draft_model=False,
        build=_head("medusa", tree=True),
        tree=True,
        chain="medusa",
        head="medusa",
        shares_target_cache=True,
        reads_confidence=False,
        reads_width=True,
    ),
)
REGISTRY: Mapping[str, DrafterSpec] = MappingProxyType({s.name: s for s in SPECS})
DRAFTER_NAMES = tuple(REGISTRY)
# The fastest exact configuration the benchmark measured for code at T = 0 (the headline table
# of README.md, rendered from benchmarks/results/; tests/test_defaults.py ties the two).
DEFAULT_CONFIG = DefaultConfig(
    drafter="ngram+model-trimmed", batch_drafter="model-trimmed", gamma=3, policy="fixed",
    temperature=0.0, forward="lean",
)  # fmt: skip
# The fastest exact configuration measured for each kind of request at T = 0 (the headline's
# rows): `specviz generate --preset KIND` and the app's presets. Code's is DEFAULT_CONFIG, what
# runs where nothing names the kind; the forward stays the machine's (DEFAULT_CONFIG's or a
# tuned profile's). tests/test_defaults.py ties each to its row of the saved report.
WORKLOAD_CONFIGS: Mapping[str, DefaultConfig] = MappingProxyType(
    {
        "code": DEFAULT_CONFIG,
        "json": replace(DEFAULT_CONFIG, drafter="ngram+eagle3"),
        "repeat": replace(DEFAULT_CONFIG, drafter="suffix", gamma=16),
    }
)


def drafters_where(fact: Callable[[DrafterSpec], bool]) -> tuple[str, ...]:
    """The names of the registered drafters for which fact(spec) holds, in registry order."""
    return tuple(s.name for s in SPECS if fact(s))


# Every list of drafter names is derived here from the facts each DrafterSpec states.
TREE_DRAFTERS = drafters_where(lambda s: s.tree)
CHAIN_DRAFTERS = drafters_where(lambda s: not s.tree)
MODEL_DRAFTERS = drafters_where(lambda s: s.uses_draft_model)
# a tree drafter → the chain drafter it is compared with (the same proposer, one child a node)
CHAIN_OF: Mapping[str, str] = MappingProxyType({s.name: s.chain for s in SPECS if s.chain})
HEAD_DRAFTERS = drafters_where(lambda s: s.head is not None)  # all share the target's cache
HEAD_KIND: Mapping[str, str] = MappingProxyType({s.name: s.head for s in SPECS if s.head})
HEAD_KINDS = tuple(sorted(set(HEAD_KIND.values())))
SHARED_CACHE_DRAFTERS = drafters_where(lambda s: s.shares_target_cache)
EXIT_DRAFTERS = drafters_where(lambda s: s.reads_exit_layer)
UNCONFIDENT_DRAFTERS = drafters_where(lambda s: not s.reads_confidence)
WIDE_DRAFTERS = drafters_where(lambda s: s.reads_width)
HYBRID_DRAFTERS = drafters_where(lambda s: s.hybrid)
TRIMMED_DRAFTERS = drafters_where(lambda s: s.trims_head)
BATCH_DRAFTERS = drafters_where(lambda s: s.batchable)
MEMORY_DRAFTERS = drafters_where(lambda s: s.remembers)  # they read DrafterOptions.memory
CROSS_TOKENIZER_DRAFTERS = drafters_where(lambda s: s.cross_tokenizer)  # another tokenizer
# the draft model drafting a chain alone (no lookup in front, no tree)
CHAIN_MODEL_DRAFTERS = drafters_where(lambda s: s.uses_draft_model and not (s.tree or s.hybrid))


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

    DEFAULT_CONFIG names the default: the benchmark's fastest exact drafter, with its gamma,
    temperature and target forward (what `specviz generate` runs when no flag chooses).
    Tree drafters (DrafterSpec.tree) return a TreeDrafter, which specviz.tree.decoding's
    TreeDecoder (and the one-call API) verify a whole tree at a time.
    """
    spec = drafter_spec(name)
    return spec.build(target, draft, sampling, options or DrafterOptions())
