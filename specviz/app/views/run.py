"""A decode in progress: the lazy event stream, what it has produced, advanced a round at a time."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from specviz.app.views.cells import Cell, Decode, cells_from_events
from specviz.app.views.metrics import summarize
from specviz.app.views.tree import TreeRound, tree_rounds
from specviz.core.events import EMITTING, Event, Finished, RoundSummary, Sampled, TreeVerified

STEP_ENDS = (RoundSummary, Sampled, Finished)  # a step stops after one of these
# The decode in short (Run.result), after its drafter, γ and prompt format: summarize's names.
RESULT_NUMBERS: tuple[str, ...] = ("new_tokens", "rounds", "alpha", "tokens_per_second")
RESULT_NUMBERS += ("seconds", "finish_reason", "target_calls")


@dataclass(kw_only=True)
class Run:
    """One decode's lazy events and the log so far; lives in a per-session gr.State."""

    stream: Iterator[Event]
    decode: Decode
    prompt: str = ""
    prompt_format: str = ""  # 'chat' or 'raw' (specviz.models.chat): how the prompt was sent
    settings: dict[str, Any] = field(default_factory=dict)  # what the summary and export show
    request: Any = None  # the validated settings that started it (a Step with others restarts)
    detokenize: Callable[[Sequence[int]], str] | None = None  # token ids → text, all at once
    stop: frozenset[int] = frozenset()  # the stop tokens, left out of text()
    log: list[Event] = field(default_factory=list)
    done: bool = False
    plain_tokens_per_second: float | None = None
    _texts: dict[int, str] = field(default_factory=dict, repr=False)

    def step(self) -> bool:
        """Consume events through the next round (or plain token, or finish); False once done."""
        if self.done:
            return False
        for event in self.stream:
            self.log.append(event)
            if isinstance(event, Finished):
                self.done = True
            if isinstance(event, STEP_ENDS):
                return True
        self.done = True
        return False

    def run_to_end(self) -> Iterator[Run]:
        """Step until finished, yielding self after each step (for streaming views)."""
        while self.step():
            yield self

    def finish(self) -> dict[str, Any]:
        """Run to the end with nothing in between (honest timing) and describe the result."""
        for _ in self.run_to_end():
            pass
        tokens = [c.token for c in self.cells() if c.emitted]
        text = "".join(self.text_of(t) for t in tokens)
        return {**self.summary(), "tokens": tokens, "text": text, "done": True}

    def text(self) -> str:
        """The text committed so far: the emitted tokens (no rejected draft) but the stop token,
        decoded together as specviz.speculative_generate's result decodes them."""
        tokens = [e.token for e in self.log if isinstance(e, EMITTING) and e.token not in self.stop]
        if self.detokenize is None:
            return "".join(self.text_of(t) for t in tokens)
        return self.detokenize(tokens)

    def result(self) -> dict[str, Any]:
        """The decode in short, JSON-ready: drafter, γ (none for a tree drafter), prompt format,
        new tokens, rounds, α (the share of drafts kept), tokens/s, seconds, why it finished,
        target calls, and whether it follows the target's law."""
        numbers = summarize(self.log)
        setting = {key: self.settings.get(key) for key in ("drafter", "gamma")}
        head = {**setting, "prompt_format": self.prompt_format}
        return {**head, **{k: numbers[k] for k in RESULT_NUMBERS}, "exact": self.exact}

    def text_of(self, token: int) -> str:
        """The token's text, decoded once and remembered."""
        if token not in self._texts:
            self._texts[token] = self.decode(token)
        return self._texts[token]

    def cells(self) -> list[Cell]:
        """The token cells of the log so far."""
        return cells_from_events(self.log, self.text_of)

    def cell(self, index: int) -> Cell | None:
        """The cell at index, or None when there is no such token yet."""
        cells = self.cells()
        return cells[index] if 0 <= index < len(cells) else None

    @property
    def rounds(self) -> list[RoundSummary]:
        """The round summaries so far."""
        return [e for e in self.log if isinstance(e, RoundSummary)]

    @property
    def trees(self) -> list[TreeRound]:
        """The tree rounds so far (empty unless a tree drafter drafts)."""
        return tree_rounds(self.log)

    @property
    def exact(self) -> bool:
        """False once a lossy rule chose a token: the output then is not the target's law."""
        return all(e.exact for e in self.log if isinstance(e, TreeVerified))

    @property
    def finished(self) -> Finished | None:
        """The Finished event, once the decode has ended."""
        return next((e for e in reversed(self.log) if isinstance(e, Finished)), None)

    def summary(self) -> dict[str, Any]:
        """Headline numbers (see metrics.summarize) plus the settings that produced them."""
        return {**summarize(self.log, self.plain_tokens_per_second), "settings": self.settings}
