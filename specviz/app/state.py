"""The app's model-side state: cached model pairs and the drafter each setting asks for.

Gradio-free and separate from specviz.app.main, which only wires widgets to handlers.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from specviz.api import encode, stop_ids
from specviz.app.lab import LabPair, toy_pair
from specviz.app.views.form import Settings
from specviz.core.drafter import Drafter
from specviz.drafters.early_exit import adapter_path
from specviz.drafters.registry import build_drafter
from specviz.models.loading import ModelPair, load_pair, parse_dtype


class PairCache:
    """Loaded pairs keyed by (target, draft or None, dtype); least recently used evicted first."""

    def __init__(self, size: int = 2) -> None:
        self.size, self._pairs = size, OrderedDict[tuple[str, str | None, str], ModelPair]()
        self._lock = threading.Lock()

    def get(
        self, target: str, draft: str | None, dtype: str, say: Callable[[str], None]
    ) -> ModelPair:
        """The cached pair (draft None: target only), loaded when missing (ModelLoadError)."""
        key = (target, draft, dtype)
        with self._lock:
            if key not in self._pairs:
                dt = parse_dtype(dtype)
                self._pairs[key] = load_pair(target, draft, dtype=dt, progress=say)
                while len(self._pairs) > self.size:
                    self._pairs.popitem(last=False)
            self._pairs.move_to_end(key)
            return self._pairs[key]


def decoder(tokenizer: Any) -> Callable[[int], str]:
    """Token id → text with the pair's tokenizer."""
    return lambda token: str(tokenizer.decode([token]))


def make_drafter(s: Settings, pair: ModelPair) -> Drafter:
    """The drafter the settings name, built by the registry with the settings' options."""
    return build_drafter(
        s.drafter, target=pair.target, draft=pair.draft, sampling=s.sampling, options=s.options()
    )


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


def parameter_counts(pair: ModelPair) -> str:
    """'target N params, draft M params' for the load/check status line."""
    models = {"target": pair.target, "draft": pair.draft}
    return ", ".join(
        f"{name} {sum(x.numel() for x in m.parameters()):,} params"
        for name, m in models.items()
        if m is not None
    )


def lab_pair(s: Settings, pair: ModelPair | None) -> LabPair:
    """What the equivalence lab samples: the toy pair and its draft model (pair None), or the
    loaded pair with the drafter the settings name."""
    if pair is None:
        return replace(toy_pair(), options=s.options())
    return LabPair(
        target=pair.target, draft=pair.draft, prompt_ids=encode(pair.tokenizer, s.prompt),
        stop_ids=stop_ids(pair.target, pair.tokenizer), decode=decoder(pair.tokenizer),
        drafter=s.drafter, options=s.options(),
    )  # fmt: skip
