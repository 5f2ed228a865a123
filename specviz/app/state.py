"""The app's model-side state: cached model pairs and the drafter each setting asks for.

Gradio-free and separate from specviz.app.main, which only wires widgets to handlers.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, Protocol

from specviz.api import stop_ids
from specviz.app.lab import LabPair, toy_pair
from specviz.app.views.form import Settings
from specviz.core.drafter import Drafter
from specviz.drafters.early_exit import adapter_path
from specviz.drafters.registry import HEAD_DRAFTERS, build_drafter
from specviz.heads.lookup import head_forward
from specviz.models.chat import prompt_format, prompt_ids
from specviz.models.loading import ModelPair, load_pair, parse_dtype
from specviz.tree.drafter import TreeDrafter
from specviz.tree.verify import EXACT_TREE, TYPICAL, TreeRule

log = logging.getLogger("specviz.app")
Key = tuple[str, str | None, str]
TREE_RULES = {rule.name: rule for rule in (EXACT_TREE, TYPICAL)}  # form's TREE_RULE_CHOICES
# the toy pair's tree drafter in a head tree's place: the same kind of children, from its draft
TOY_TREES = {"eagle-tree": "tree-model", "eagle-tree-sampled": "tree-sampled"}
TOY_TREES |= {"medusa-tree": "tree-model"}
LOG_EVERY = 10.0  # seconds: a load's repeated progress lines reach the terminal this often


class PairSpec(Protocol):
    """What names a model pair: the form's Settings, the Batch tab's request."""

    @property
    def target(self) -> str:
        """The target: 'bundled', a folder or a hub id."""

    @property
    def draft(self) -> str | None:
        """The draft, or None when the drafter needs no draft model."""

    @property
    def dtype(self) -> str:
        """The dtype's name."""


class PairCache:
    """Loaded pairs keyed by (target, draft or None, dtype); least recently used evicted first.

    One load per key at a time (a second caller waits for it and shares the pair); different
    keys load side by side, at most `loads` at once, so a slow load (a hub id without network,
    the bundled target's first fetch) never holds up a pair that is already cached.
    """

    def __init__(self, size: int = 2, loads: int = 2) -> None:
        self.size, self._pairs = size, OrderedDict[Key, ModelPair]()
        self._lock = threading.Lock()  # guards _pairs and _loading, held only briefly
        self._loading: dict[Key, threading.Lock] = {}
        self._slots = threading.Semaphore(loads)

    def cached(self, target: str, draft: str | None, dtype: str) -> ModelPair | None:
        """The pair if it is loaded already (made most recently used), else None."""
        key = (target, draft, dtype)
        with self._lock:
            if key not in self._pairs:
                return None
            self._pairs.move_to_end(key)
            return self._pairs[key]

    def get(
        self, target: str, draft: str | None, dtype: str, say: Callable[[str], None]
    ) -> ModelPair:
        """The cached pair (draft None: target only), loaded when missing (ModelLoadError)."""
        if (pair := self.cached(target, draft, dtype)) is not None:
            return pair
        dt = parse_dtype(dtype)
        key = (target, draft, dtype)
        with self._lock:
            key_lock = self._loading.setdefault(key, threading.Lock())
        with key_lock:
            if (pair := self.cached(target, draft, dtype)) is not None:
                return pair  # another request loaded it while this one waited
            with self._slots:
                pair = load_pair(target, draft, dtype=dt, progress=say)
            with self._lock:
                self._pairs[key] = pair
                while len(self._pairs) > self.size:
                    self._pairs.popitem(last=False)
                self._loading.pop(key, None)
            return pair


class Loading:
    """A pair being loaded in a thread of its own, so that the request can show its progress
    live: `updates` yields each new progress message as it comes (the bundled target's first
    fetch says its stage, MB and seconds), then `pair` is the pair or raises the load's error.
    Every message is logged to the terminal too (a repeated one at most every LOG_EVERY s)."""

    def __init__(self, cache: PairCache, s: PairSpec) -> None:
        self._messages: list[str] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._pair: ModelPair | None = None
        self._error: BaseException | None = None
        self._logged, self._logged_at = "", 0.0
        self.started = time.monotonic()
        key = (s.target, s.draft, s.dtype)
        self._pair = cache.cached(*key)
        if self._pair is not None:
            self._done.set()
            return

        def run() -> None:
            try:
                self._pair = cache.get(*key, self.say)
            except BaseException as err:  # handed to the request, which shows it
                self._error = err
            finally:
                self._done.set()

        self.say(f"loading target {s.target!r}" + (f" and draft {s.draft!r}" if s.draft else ""))
        threading.Thread(target=run, name="specviz-load", daemon=True).start()

    def say(self, message: str) -> None:
        """A progress message from the load: kept for the page, logged for the terminal."""
        with self._lock:
            self._messages.append(message)
            template = re.sub(r"\d+(\.\d+)?", "#", message)
            now = time.monotonic()
            if template == self._logged and now - self._logged_at < LOG_EVERY:
                return
            self._logged, self._logged_at = template, now
        log.info("%s", message)

    def updates(self, poll: float = 0.2) -> Iterator[str]:
        """The latest progress message with the seconds in all, whenever either changes, until
        the load has finished (nothing for a cached pair)."""
        shown = ("", -1)
        while not self._done.wait(poll):
            with self._lock:
                latest = self._messages[-1] if self._messages else "loading"
            now = (latest, int(time.monotonic() - self.started))
            if now != shown:
                shown = now
                yield f"{latest} · {now[1]} s in all"

    def pair(self) -> ModelPair:
        """The loaded pair, or the load's error raised here (call after updates ended)."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._pair is not None
        return self._pair


def decoder(tokenizer: Any) -> Callable[[int], str]:
    """Token id → text with the pair's tokenizer."""
    return lambda token: str(tokenizer.decode([token]))


def make_drafter(s: Settings, pair: ModelPair, heads: str | None = None) -> Drafter | TreeDrafter:
    """The drafter the settings name, built by the registry with the settings' options (a tree
    drafter for the tree drafters; a drafting head with the weights in heads, None: the shipped
    ones). A head verifies through transformers' forward of the target, the one the app's
    plain decoding runs on, so that the race compares the two on the same forward."""
    options = s.options(heads)
    if s.drafter in HEAD_DRAFTERS:
        options = replace(options, make_cache=head_forward(lean_target=False))
    return build_drafter(
        s.drafter, target=pair.target, draft=pair.draft, sampling=s.sampling, options=options
    )


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


def parameter_counts(pair: ModelPair) -> str:
    """'target N params, draft M params' for the load/check status line."""
    models = {"target": pair.target, "draft": pair.draft}
    return ", ".join(
        f"{name} {sum(x.numel() for x in m.parameters()):,} params"
        for name, m in models.items()
        if m is not None
    )


def lab_pair(s: Settings, pair: ModelPair | None, heads: str | None = None) -> LabPair:
    """What the equivalence lab samples: the toy pair and its draft model (pair None), or the
    loaded pair with the drafter the settings name, the prompt formatted as the decode's is
    (the chat template unless raw; a drafting head with the weights in heads).

    On the toy pair a chain drafter is its draft model; a tree drafter grows its trees there
    too, a head tree with the draft model in the head's place (the toy target has no heads).
    """
    if pair is None:
        drafter = TOY_TREES.get(s.drafter, s.drafter) if s.tree else "model"
        return replace(toy_pair(), drafter=drafter, options=s.options(), tree_rule=tree_rule(s))
    return LabPair(
        target=pair.target, draft=pair.draft,
        prompt_ids=prompt_ids(pair.tokenizer, s.prompt, raw=s.raw),
        prompt_format=prompt_format(pair.tokenizer, raw=s.raw),
        stop_ids=stop_ids(pair.target, pair.tokenizer), decode=decoder(pair.tokenizer),
        drafter=s.drafter, options=s.options(heads), tree_rule=tree_rule(s),
    )  # fmt: skip
