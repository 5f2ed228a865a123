"""Drafter names as results written before schema 6 spell them, and their names now.

Until schema 5 every combination of a family had a name of its own (model-trimmed,
ngram+eagle3, tree-sampled, ...); since 6 a name is a family with its variant, maybe after a
lookup or as a tree (specviz.drafters.registry). Reading an older result renames its drafters
here, and only here: in settings, rows and labels, and in the commands that ran them. The
EAGLE-1-style head (the old "eagle" drafters) is retired; its rows keep a name of their own,
which no drafter answers to.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

RENAMED: Mapping[str, str] = MappingProxyType(
    {
        "model-trimmed": "model:trimmed",
        "ngram+model-trimmed": "ngram+model:trimmed",
        "suffix+model-trimmed": "suffix+model:trimmed",
        "early-exit-shared": "early-exit:shared",
        "eagle3": "eagle",
        "ngram+eagle3": "ngram+eagle",
        "suffix+eagle3": "suffix+eagle",
        "cross-tli": "cross",
        "cross-text": "cross:text",
        "tree-sampled": "tree-model:sampled",
        "eagle3-tree": "tree-eagle",
        "medusa-tree": "tree-medusa",
        "eagle": "eagle-1 (retired)",
        "ngram+eagle": "ngram+eagle-1 (retired)",
        "eagle-tree": "tree-eagle-1 (retired)",
        "eagle-tree-sampled": "tree-eagle-1:sampled (retired)",
    }
)
# an old name standing alone: not inside a longer name (ngram+model-trimmed holds model-trimmed)
_OLD = re.compile(
    r"(?<![\w+\-])("
    + "|".join(re.escape(n) for n in sorted(RENAMED, key=len, reverse=True))
    + r")(?![\w+\-])"
)
_KEYS = frozenset(
    {"drafter", "drafters", "model", "chain", "label", "command"}
)  # names written there


def rename(text: str) -> str:
    """text with every old drafter name in it replaced by its name now."""
    return _OLD.sub(lambda m: RENAMED[m.group(1)], text)


def renamed(data: Any) -> Any:
    """data (a result's JSON) with the drafter names under the keys that hold them renamed."""
    if isinstance(data, dict):
        return {k: _value(v) if k in _KEYS else renamed(v) for k, v in data.items()}
    if isinstance(data, list):
        return [renamed(v) for v in data]
    return data


def _value(value: Any) -> Any:
    """A value under a key that holds names: its strings renamed, at any depth."""
    if isinstance(value, str):
        return rename(value)
    if isinstance(value, list):
        return [_value(v) for v in value]
    return renamed(value)
