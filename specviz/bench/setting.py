"""A bench setting: one point of a sweep (drafter, gamma, temperature, ...), and its label."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specviz.bench.trees import check_tree_setting, is_exact, tree_label
from specviz.drafters.registry import (
    CHAIN_MODEL_DRAFTERS,
    DRAFTER_NAMES,
    EXIT_DRAFTERS,
    HYBRID_DRAFTERS,
    TREE_DRAFTERS,
)
from specviz.gamma.policies import POLICY_NAMES


@dataclass(frozen=True, kw_only=True)
class BenchSetting:
    """One point of a sweep; a tree drafter's gamma is its depth (specviz.bench.trees)."""

    drafter: str  # one of DRAFTERS
    gamma: int
    temperature: float
    draft_name: str = "draft"
    exit_layer: int = 8
    policy: str = "fixed"  # "fixed", "heuristic", "theory" or "confidence" (see POLICIES)
    model_gamma: int | None = None  # hybrids: at most this many draft-model tokens a round
    tree_nodes: int | None = None  # tree drafters: at most this many nodes a round
    tree_width: int | None = None  # tree drafters: at most this many children a node
    tree_rule: str | None = None  # tree drafters: "exact", or "typical" (lossy)

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


# gamma policies of the bench: the first three are specviz.gamma.policies; "confidence" drafts up to
# gamma tokens but stops after one whose draft top probability is below CONFIDENCE (the same
# rule and default as transformers' assistant_confidence_threshold).
POLICIES = (*POLICY_NAMES, "confidence")
DRAFTERS = DRAFTER_NAMES
CONFIDENCE = 0.4


def drafter_label(setting: Mapping[str, Any]) -> str:
    """A setting's drafter in a few words: its exit layer, draft folder or draft-model cap; a
    tree's node budget and width, and a lossy rule's warning."""
    drafter = str(setting["drafter"])
    if drafter in TREE_DRAFTERS and setting.get("tree_nodes") is not None:
        return tree_label(setting)
    if drafter in EXIT_DRAFTERS:
        return f"{drafter} k={setting['exit_layer']}"
    if drafter in CHAIN_MODEL_DRAFTERS and setting["draft_name"] != "bundled":
        return f"{drafter} ({Path(str(setting['draft_name'])).name})"
    if drafter in HYBRID_DRAFTERS and setting["model_gamma"] is not None:
        return f"{drafter} (model ≤ {setting['model_gamma']})"
    return drafter
