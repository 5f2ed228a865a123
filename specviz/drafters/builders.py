"""How each drafter family builds its chain and its tree, and how a lookup goes before one.

Every builder takes (target, draft, sampling, options, variant) and returns a fresh drafter;
`build(choice, ...)` builds what a parsed name (specviz.drafters.names.Choice) stands for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from specviz.checks import check_pair, vocab_size
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig
from specviz.core.drafter import Drafter, SharesTargetCache
from specviz.drafters.cross_text import CrossTextDrafter
from specviz.drafters.cross_tli import CrossTLIDrafter
from specviz.drafters.cross_vocab import cross_tokenizers, tokenizer_of
from specviz.drafters.early_exit import build_early_exit
from specviz.drafters.hybrid import LookupThenModelDrafter, LookupThenShared
from specviz.drafters.model import ModelDrafter
from specviz.drafters.names import CROSS_TOKENIZER_DRAFTERS, Choice
from specviz.drafters.ngram import NgramDrafter
from specviz.drafters.options import DrafterOptions
from specviz.drafters.shared_exit import early_exit_drafter
from specviz.drafters.suffix.drafter import SuffixConfig, SuffixDrafter, TreeSuffixDrafter
from specviz.drafters.suffix.hybrid import SuffixThenModelDrafter, SuffixThenShared
from specviz.drafters.tree_model import TreeModelDrafter, TreeShape
from specviz.drafters.tree_ngram import TreeNgramDrafter
from specviz.drafters.trimmed import load_head_tokens
from specviz.fast.lean import draft_cache, tree_draft_cache
from specviz.heads.build import build_head_drafter
from specviz.tree.drafter import TreeDrafter

Builder = Callable[[Any, Any, SamplingConfig, DrafterOptions, str], Drafter]
TreeBuilder = Callable[[Any, Any, SamplingConfig, DrafterOptions, str], TreeDrafter]


def build(
    choice: Choice, target: Any, draft: Any, sampling: SamplingConfig, o: DrafterOptions
) -> Drafter | TreeDrafter:
    """A fresh drafter for the parsed name choice."""
    chain, tree = BUILDERS[choice.family]
    if choice.tree:
        assert tree is not None  # names.parse refuses trees of the others
        return tree(target, draft, sampling, o, choice.variant)
    drafter = chain(target, draft, sampling, o, choice.variant)
    if choice.lookup is None:
        return drafter
    return _after_lookup(choice, drafter, target, draft, sampling, o)


def _after_lookup(
    choice: Choice, drafter: Any, target: Any, draft: Any, s: SamplingConfig, o: DrafterOptions
) -> Drafter:
    """Lookup first, drafter elsewhere: n-gram lookup (n >= 2 unless options say otherwise) or
    suffix decoding, whose memory keeps the drafter's kept share under its name."""
    assert isinstance(drafter, ModelDrafter)  # parse allows only these after a lookup
    shared = isinstance(drafter, SharesTargetCache)
    if choice.lookup == "ngram":
        cls = LookupThenShared if shared else LookupThenModelDrafter
        return cls(drafter, lookup(target, o, shortest=2), model_gamma=o.model_gamma)
    found = suffix(target, draft, s, o, "")
    assert isinstance(found, SuffixDrafter)
    hybrid = SuffixThenShared if shared else SuffixThenModelDrafter
    return hybrid(
        drafter,
        found,
        min_score=o.suffix_min_score,
        model_gamma=o.model_gamma,
        min_model_alpha=o.model_min_alpha,
        share_key=Choice(family=choice.family, variant=choice.variant).name,
    )


def _needs_draft(draft: Any) -> None:
    if draft is None:
        raise ValueError("this drafter needs a draft model: pass draft=...")


def _check_pair(target: Any, draft: Any) -> None:
    """check_pair for a drafter that needs the target's tokenizer: a refusal of two
    vocabularies names the family that translates between tokenizers."""
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


def _model(target: Any, draft: Any, sampling: SamplingConfig, o: DrafterOptions, v: str) -> Any:
    """The draft model drafting a chain (variant "trimmed": over its top-ranked tokens only)."""
    _needs_draft(draft)
    _check_pair(target, draft)
    check_same_tokenizers(o)
    head = load_head_tokens(draft) if v == "trimmed" else None
    cls = o.model_cls or ModelDrafter
    make_cache = o.make_cache or draft_cache
    return cls(
        draft,
        sampling,
        vocab_size(target),
        make_cache=make_cache,
        min_confidence=o.min_confidence,
        head_tokens=head,
    )


def _model_tree(
    target: Any, draft: Any, sampling: SamplingConfig, o: DrafterOptions, v: str
) -> TreeDrafter:
    """The draft model growing a tree: top-k children (EAGLE-2 style), or sampled from q."""
    _needs_draft(draft)
    _check_pair(target, draft)
    check_same_tokenizers(o)
    return TreeModelDrafter(
        draft,
        sampling,
        vocab_size(target),
        shape=tree_shape(o),
        sampled=v == "sampled",
        make_cache=tree_draft_cache if o.make_cache is None else KVCache,
    )


def tree_shape(o: DrafterOptions) -> TreeShape:
    """The options' tree budget."""
    return TreeShape(nodes=o.tree_nodes, depth=o.tree_depth, width=o.tree_width)


def lookup(target: Any, o: DrafterOptions, shortest: int) -> NgramDrafter:
    """N-gram lookup over the committed text (shortest n-gram: options' or `shortest`)."""
    return NgramDrafter(
        vocab_size(target),
        max_ngram=o.ngram_max,
        min_ngram=o.ngram_min or shortest,
        device=str(target.device),
    )


def _ngram(target: Any, _draft: Any, _s: SamplingConfig, o: DrafterOptions, _v: str) -> Any:
    return lookup(target, o, shortest=1)


def _ngram_tree(
    target: Any, _draft: Any, _s: SamplingConfig, o: DrafterOptions, _v: str
) -> TreeDrafter:
    return TreeNgramDrafter(
        vocab_size(target),
        nodes=o.tree_nodes,
        depth=o.tree_depth,
        max_ngram=o.ngram_max,
        min_ngram=o.ngram_min or 1,
    )


def suffix(target: Any, _draft: Any, _s: SamplingConfig, o: DrafterOptions, _v: str) -> Any:
    """Suffix decoding's chain, reading and feeding the options' memory."""
    return suffix_chain(target, o)


def suffix_chain(target: Any, o: DrafterOptions) -> SuffixDrafter:
    """Suffix decoding's chain drafter for target, reading and feeding o's memory (None: a
    fresh one of its own)."""
    return SuffixDrafter(
        vocab_size(target),
        memory=o.memory,
        config=_suffix_config(o),
        device=str(target.device),
        explain=o.explain,
    )


def _suffix_tree(
    target: Any, _draft: Any, _s: SamplingConfig, o: DrafterOptions, _v: str
) -> TreeDrafter:
    return TreeSuffixDrafter(
        vocab_size(target),
        nodes=o.tree_nodes,
        depth=o.tree_depth,
        memory=o.memory,
        config=_suffix_config(o),
        explain=o.explain,
    )


def _suffix_config(o: DrafterOptions) -> SuffixConfig:
    """The suffix drafters' speculation bounds from the options."""
    return SuffixConfig(factor=o.suffix_factor, min_prob=o.suffix_min_prob)


def _early_exit(
    target: Any, _draft: Any, sampling: SamplingConfig, o: DrafterOptions, v: str
) -> Any:
    """The target's first exit_layer layers: a model of their own with its own cache, or
    (variant "shared") drafting into the target's own cache."""
    if v == "shared":
        return early_exit_drafter(
            target,
            o.exit_layer,
            sampling,
            vocab_size(target),
            share=True,
            min_confidence=o.min_confidence,
        )
    model, _adapter = build_early_exit(target, o.exit_layer)
    cls = o.model_cls or ModelDrafter
    return cls(
        model,
        sampling,
        vocab_size(target),
        make_cache=o.make_cache or draft_cache,
        min_confidence=o.min_confidence,
    )


def _head(kind: str) -> tuple[Builder, TreeBuilder]:
    """A drafting head's chain and tree builders (specviz.heads)."""

    def chain(target: Any, _d: Any, sampling: SamplingConfig, o: DrafterOptions, _v: str) -> Any:
        return build_head_drafter(kind, target, sampling, lean=o.make_cache is None, folder=o.heads)

    def tree(target: Any, _d: Any, sampling: SamplingConfig, o: DrafterOptions, _v: str) -> Any:
        return build_head_drafter(
            kind, target, sampling, tree=tree_shape(o), lean=o.make_cache is None, folder=o.heads
        )

    return chain, tree


def _cross(target: Any, draft: Any, sampling: SamplingConfig, o: DrafterOptions, v: str) -> Any:
    """A draft model with a tokenizer of its own: the shared tokens (tli), or its text (text)."""
    _needs_draft(draft)
    check_pair(target, draft, cross_tokenizers=True)
    pair = o.translation or cross_tokenizers(
        tokenizer_of(target, o.tokenizer, "target"),
        tokenizer_of(draft, o.draft_tokenizer, "draft"),
        target_vocab=vocab_size(target),
        draft_vocab=vocab_size(draft),
    )
    make_cache = o.make_cache or draft_cache
    if v == "text":
        return CrossTextDrafter(draft, pair, make_cache=make_cache, explain=o.explain)
    return CrossTLIDrafter(draft, sampling, pair, make_cache=make_cache, explain=o.explain)


_EAGLE, _EAGLE_TREE = _head("eagle3")
_MEDUSA, _MEDUSA_TREE = _head("medusa")
BUILDERS: Mapping[str, tuple[Builder, TreeBuilder | None]] = MappingProxyType(
    {
        "model": (_model, _model_tree),
        "ngram": (_ngram, _ngram_tree),
        "suffix": (suffix, _suffix_tree),
        "early-exit": (_early_exit, None),
        "eagle": (_EAGLE, _EAGLE_TREE),
        "medusa": (_MEDUSA, _MEDUSA_TREE),
        "cross": (_cross, None),
    }
)
