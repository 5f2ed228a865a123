"""The drafter each setting asks for, and the rule that verifies its trees (Gradio-free)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from specviz.app.views.form import Settings
from specviz.core.drafter import Drafter
from specviz.drafters.early_exit import adapter_path
from specviz.drafters.names import CROSS_TOKENIZER_DRAFTERS, HEAD_DRAFTERS
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.drafters.suffix.memory import SuffixMemory
from specviz.heads.build import head_forward
from specviz.models.loading import CROSS_DRAFTER, ModelPair
from specviz.tree.drafter import TreeDrafter
from specviz.tree.verify import EXACT_TREE, TYPICAL, TreeRule

TREE_RULES = {rule.name: rule for rule in (EXACT_TREE, TYPICAL)}  # form's TREE_RULE_CHOICES


def for_pair(s: Settings, pair: ModelPair) -> Settings:
    """The settings as the pair can run them: where the draft has a tokenizer of its own, a
    cross-tokenizer drafter drafts (the form's, if it names one, else the one load_pair picked,
    CROSS_DRAFTER); a pair with one tokenizer runs the settings as they are."""
    if s.drafter in CROSS_TOKENIZER_DRAFTERS or pair.draft_tokenizer is None:
        return s
    if pair.same_tokenizer:
        return s
    return replace(s, drafter=pair.drafter or CROSS_DRAFTER)


def make_drafter(
    s: Settings,
    pair: ModelPair,
    heads: str | None = None,
    memory: SuffixMemory | None = None,
    lean: bool = False,
) -> Drafter | TreeDrafter:
    """The drafter the settings name, built by the registry with the settings' options (a tree
    drafter for the tree drafters; a drafting head with the weights in heads, None: the shipped
    ones; a suffix drafter reading and feeding memory, None: a fresh one). It explains its
    rounds where it can (DrafterOptions.explain), for the round detail panel. A head verifies
    through the target forward the app's plain decoding runs on (lean: specviz.fast.lean's,
    else transformers'), so that the race compares the two on the same forward."""
    options = app_options(s, heads, memory)
    if s.drafter in HEAD_DRAFTERS:
        options = replace(options, make_cache=head_forward(lean_target=lean))
    return build_drafter(
        s.drafter, target=pair.target, draft=pair.draft, sampling=s.sampling, options=options
    )


def app_options(
    s: Settings, heads: str | None = None, memory: SuffixMemory | None = None
) -> DrafterOptions:
    """The options the app builds a drafter with: the settings', the heads' weights, the
    memory a suffix drafter reads and feeds, and explain on (for the round detail panel)."""
    return replace(s.options(heads), memory=memory, explain=True)


def tree_rule(s: Settings) -> TreeRule:
    """The rule that verifies the settings' trees (exact unless the lossy one is chosen)."""
    return TREE_RULES[s.tree_rule]


def early_exit_note(k: Any) -> str:
    """Markdown under the drafter control: which early exit the exit layer k gives."""
    try:
        path = adapter_path(int(k))
    except (TypeError, ValueError, OverflowError):
        return "Early exit: the exit layer must be a whole number."
    if path.is_file():
        return f"Early exit at layer {int(k)} uses the trained adapter `{path.name}`."
    return (
        f"Early exit at layer {int(k)}: no trained adapter (`{path.name}` not shipped), so the "
        "plain early exit drafts (first k layers, then the target's final norm and head)."
    )
