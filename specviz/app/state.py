"""The app's model-side state: cached model pairs and the drafter each setting asks for.

Gradio-free and separate from app.py, which only wires widgets to handlers.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from specviz.app.lab import LabPair, toy_pair
from specviz.app.views.form import EARLY_EXIT_SHARED, EXITS, HYBRID, NGRAM, TRIMMED, Settings
from specviz.core.checks import check_pair
from specviz.core.config import SamplingConfig
from specviz.core.drafter import Drafter
from specviz.core.generate import encode, stop_ids
from specviz.drafters.early_exit import adapter_path, build_early_exit
from specviz.drafters.hybrid import LookupThenModelDrafter
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter
from specviz.drafters.shared_exit import early_exit_drafter
from specviz.drafters.trimmed import load_head_tokens
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


def draft_model(s: Settings, pair: ModelPair) -> Any:
    """The model that drafts for model-type drafters (None for n-gram lookup)."""
    if s.drafter == NGRAM:
        return None
    if s.drafter in EXITS:  # (the lab runs the shared exit's law on a cache of its own)
        return build_early_exit(pair.target, s.exit_layer)[0]
    check_pair(pair.target, pair.draft)
    return pair.draft


def make_drafter(s: Settings, pair: ModelPair) -> Drafter:
    """The drafter the settings ask for: draft model, n-gram lookup or early exit."""
    vocab, device = int(pair.target.config.vocab_size), str(pair.target.device)
    if s.drafter in EXITS:
        share = s.drafter == EARLY_EXIT_SHARED
        return early_exit_drafter(
            pair.target, s.exit_layer, s.sampling, vocab, share=share,
            min_confidence=s.min_confidence,
        )  # fmt: skip
    draft = draft_model(s, pair)
    if draft is None:
        return NgramDrafter(vocab, device=device)
    return with_draft_model(s, draft, s.sampling, vocab)


def with_draft_model(s: Settings, draft: Any, sampling: SamplingConfig, vocab: int) -> Drafter:
    """The draft model's drafter (head trimmed where asked), behind n-gram lookup for HYBRID."""
    head = load_head_tokens(draft) if s.drafter in (TRIMMED, HYBRID) else None
    model = ModelDrafter(draft, sampling, vocab, min_confidence=s.min_confidence, head_tokens=head)
    if s.drafter != HYBRID:
        return model
    return LookupThenModelDrafter(model)


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


def _lab_drafter(
    s: Settings, pair: ModelPair, vocab: int, device: str
) -> Callable[[SamplingConfig], Drafter] | None:
    """The lab's drafter by sampling config, where it is not the plain draft model (None)."""
    if s.drafter == NGRAM:
        return lambda _sampling: NgramDrafter(vocab, device=device)
    if s.drafter == HYBRID:
        return lambda sampling: with_draft_model(s, pair.draft, sampling, vocab)
    return None


def lab_pair(s: Settings, pair: ModelPair | None) -> LabPair:
    """What the equivalence lab samples: the toy pair (pair None) or the loaded pair's drafter."""
    if pair is None:
        return replace(toy_pair(), min_confidence=s.min_confidence)
    vocab, device = int(pair.target.config.vocab_size), str(pair.target.device)
    return LabPair(
        target=pair.target, draft=draft_model(s, pair), prompt_ids=encode(pair.tokenizer, s.prompt),
        stop_ids=stop_ids(pair.target, pair.tokenizer), decode=decoder(pair.tokenizer),
        make_drafter=_lab_drafter(s, pair, vocab, device), min_confidence=s.min_confidence,
        head_tokens=load_head_tokens(pair.draft) if s.drafter == TRIMMED else None,
    )  # fmt: skip
