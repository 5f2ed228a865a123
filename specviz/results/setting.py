"""A bench setting: one point of a sweep (drafter, gamma, temperature, ...), and its label.

Tree drafters in the bench: their verification rules, labels and the chain each replaces.

A tree setting's gamma is its depth (the levels a round drafts, so the draft-model calls a
round makes, as a chain's gamma); tree_nodes and tree_width bound its trees. Its rule is
"exact" (the output follows the target's law) or "typical" (Medusa's typical acceptance: it
does not, and every table row, summary row and record that ran it says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from specviz.drafters.names import CHAIN_MODEL_DRAFTERS, EXIT_DRAFTERS, HYBRID_DRAFTERS
from specviz.drafters.names import TREE_DRAFTERS as REGISTERED_TREES
from specviz.gamma.policies import POLICY_NAMES
from specviz.results.names import RENAMED
from specviz.tree.verify import EXACT_TREE, TYPICAL, TreeRule


@dataclass(frozen=True, kw_only=True)
class BenchSetting:
    """One point of a sweep; a tree drafter's gamma is its depth (specviz.results.setting)."""

    drafter: str  # a drafter's name (specviz.drafters.names)
    gamma: int
    temperature: float
    draft_name: str = "draft"
    exit_layer: int = 8
    policy: str = "fixed"  # "fixed", "heuristic", "theory" or "confidence" (see POLICIES)
    model_gamma: int | None = None  # hybrids: at most this many draft-model tokens a round
    tree_nodes: int | None = None  # tree drafters: at most this many nodes a round
    tree_width: int | None = None  # tree drafters: at most this many children a node
    tree_rule: str | None = None  # tree drafters: "exact", or "typical" (lossy)
    suffix_factor: float | None = None  # suffix drafters: at most factor × match (None: default)

    def __post_init__(self) -> None:
        check_tree_setting(self.drafter, self.tree_nodes, self.tree_width, self.tree_rule)

    @property
    def tree(self) -> bool:
        """Whether this setting runs a tree drafter."""
        return self.drafter in TREE_DRAFTERS

    @property
    def exact(self) -> bool:
        """False where a lossy tree rule chose tokens: not the target's law."""
        return is_exact(asdict(self))

    def saved(self) -> dict[str, Any]:
        """The fields as a result file keeps them: suffix_factor only where it is set."""
        fields = asdict(self)
        if self.suffix_factor is None:
            del fields["suffix_factor"]
        return fields


# Drafters no longer in the registry that saved results still name, as specviz.results.names
# renames them: the EAGLE-1 head's (its chain needs no entry: an unknown name reads as a plain
# chain). They read as the kind they were, so those results keep their labels.
RETIRED_TREE_DRAFTERS = (RENAMED["eagle-tree"], RENAMED["eagle-tree-sampled"])
RETIRED_HYBRID_DRAFTERS = (RENAMED["ngram+eagle"],)
TREE_DRAFTERS = (*REGISTERED_TREES, *RETIRED_TREE_DRAFTERS)
_HYBRIDS = (*HYBRID_DRAFTERS, *RETIRED_HYBRID_DRAFTERS)

# gamma policies of the bench: the first three are specviz.gamma.policies; "confidence" drafts up to
# gamma tokens but stops after one whose draft top probability is below CONFIDENCE (the same
# rule and default as transformers' assistant_confidence_threshold).
POLICIES = (*POLICY_NAMES, "confidence")
CONFIDENCE = 0.4


def drafter_label(setting: Mapping[str, Any]) -> str:
    """A setting's drafter in a few words: its exit layer, draft folder or draft-model cap; a
    tree's node budget and width, and a lossy rule's warning."""
    label = _drafter_label(setting)
    factor = setting.get("suffix_factor")
    return label if factor is None else f"{label}, factor {factor:g}"


def _drafter_label(setting: Mapping[str, Any]) -> str:
    """drafter_label without the suffix factor."""
    drafter = str(setting["drafter"])
    if drafter in TREE_DRAFTERS and setting.get("tree_nodes") is not None:
        return tree_label(setting)
    if drafter in EXIT_DRAFTERS:
        return f"{drafter} k={setting['exit_layer']}"
    if drafter in CHAIN_MODEL_DRAFTERS and setting["draft_name"] != "bundled":
        return f"{drafter} ({Path(str(setting['draft_name'])).name})"
    if drafter in _HYBRIDS and setting["model_gamma"] is not None:
        return f"{drafter} (model ≤ {setting['model_gamma']})"
    return drafter


def setting_label(setting: Mapping[str, Any]) -> str:
    """Drafter, policy and gamma in a few words (a tree's depth D for its gamma)."""
    drafter = drafter_label(setting)
    if is_tree(setting):
        return f"{drafter} D={setting['gamma']}"
    policy = "" if setting["policy"] == "fixed" else f" {setting['policy']} from"
    return f"{drafter}{policy} γ={setting['gamma']}"


TREE_RULES: Mapping[str, TreeRule] = MappingProxyType({"exact": EXACT_TREE, "typical": TYPICAL})
LOSSY = "LOSSY (typical acceptance): not the target's law"


def is_tree(setting: Mapping[str, Any]) -> bool:
    """Whether a setting (as a dict) runs a tree drafter."""
    return str(setting["drafter"]) in TREE_DRAFTERS


def is_exact(setting: Mapping[str, Any]) -> bool:
    """False for a setting whose tree rule does not follow the target's law."""
    rule = setting.get("tree_rule")
    return rule is None or TREE_RULES[str(rule)].exact


def tree_label(setting: Mapping[str, Any]) -> str:
    """A tree setting in a few words: drafter, node budget, width, and a lossy rule's warning."""
    label = f"{setting['drafter']} N={setting['tree_nodes']} w={setting['tree_width']}"
    return label if is_exact(setting) else f"{label} [{LOSSY}]"


def tree_rule(name: str) -> TreeRule:
    """The tree rule called name, or a ValueError listing the names."""
    if name not in TREE_RULES:
        raise ValueError(f"tree rule must be one of {', '.join(TREE_RULES)} (got {name!r})")
    return TREE_RULES[name]


def check_tree_setting(
    drafter: str, nodes: int | None, width: int | None, rule: str | None
) -> None:
    """ValueError unless a setting's tree fields are set exactly when its drafter is a tree's."""
    fields = (nodes, width, rule)
    if drafter in TREE_DRAFTERS:
        if any(f is None for f in fields):
            raise ValueError(f"{drafter} needs tree_nodes, tree_width and tree_rule")
        tree_rule(str(rule))
        if min(int(nodes or 0), int(width or 0)) < 1:
            raise ValueError(f"tree_nodes and tree_width must be >= 1 (got {nodes}, {width})")
    elif any(f is not None for f in fields):
        raise ValueError(f"{drafter} is not a tree drafter: leave its tree fields unset")
