"""Tree drafters in the bench: their verification rules, labels and the chain each replaces.

A tree setting's gamma is its depth (the levels a round drafts, so the draft-model calls a
round makes, as a chain's gamma); tree_nodes and tree_width bound its trees. Its rule is
"exact" (the output follows the target's law) or "typical" (Medusa's typical acceptance: it
does not, and every table row, summary row and record that ran it says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from specviz.drafters.registry import TREE_DRAFTERS
from specviz.tree.verify import EXACT_TREE, TYPICAL, TreeRule

TREE_RULES: Mapping[str, TreeRule] = MappingProxyType({"exact": EXACT_TREE, "typical": TYPICAL})
# the chain drafter a tree drafter is compared with: the same proposer, one child per node
CHAIN_OF: Mapping[str, str] = MappingProxyType(
    {"tree-model": "model", "tree-sampled": "model", "tree-ngram": "ngram"}
    | {"eagle-tree": "eagle", "eagle-tree-sampled": "eagle", "medusa-tree": "medusa"}
)
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


def top_k_capacity(depth: int, width: int) -> int:
    """The most nodes a top-k tree of this depth and width holds: width at the first level,
    width² at each later one (the width best nodes of a level grow width children each)."""
    return width + (depth - 1) * width * width
