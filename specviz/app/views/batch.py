"""A batch decode for the Batch tab: its events advanced a batch round at a time, each row's
coloured tokens and numbers, and the batch's tokens per second (no torch here).

Every event names its row (the prompt's index); a batch round ends with the round summary
of the last row still decoding, so the view redraws once per batch round.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from specviz.app.views.cells import Decode, cells_from_events
from specviz.app.views.metrics import summarize
from specviz.app.views.tokens import stream_html
from specviz.core.events import EMITTING, Event, Finished, RoundSummary

EMPTY = "Enter 2 to 8 prompts, one per line, and press Run batch."


@dataclass(kw_only=True)
class BatchRun:
    """One batch decode's lazy events and the log so far; row r's prompt is prompts[r]."""

    stream: Iterator[Event]
    decode: Decode
    prompts: tuple[str, ...]
    seeds: tuple[int, ...]
    prompt_format: str = ""  # 'chat' or 'raw': how every prompt was sent
    log: list[Event] = field(default_factory=list)
    done: bool = False
    started: float = field(default_factory=time.monotonic)
    _live: list[int] = field(default_factory=list, repr=False)
    _texts: dict[int, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        """Every row starts live."""
        self._live = list(range(len(self.prompts)))

    def step(self) -> bool:
        """Consume events through the end of the next batch round; False once done."""
        if self.done:
            return False
        for event in self.stream:
            self.log.append(event)
            if isinstance(event, Finished) and event.row in self._live:
                self._live.remove(event.row)
            if isinstance(event, RoundSummary) and self._live and event.row == self._live[-1]:
                return True
        self.done = True
        return False

    def run_to_end(self) -> Iterator[BatchRun]:
        """Step until finished, yielding self after each batch round and once at the end."""
        while self.step():
            yield self
        yield self

    def text_of(self, token: int) -> str:
        """The token's text, decoded once and remembered."""
        if token not in self._texts:
            self._texts[token] = self.decode(token)
        return self._texts[token]

    def row_events(self, row: int) -> list[Event]:
        """Row row's events so far."""
        return [e for e in self.log if e.row == row]

    @property
    def rounds(self) -> int:
        """Batch rounds so far (the most rounds any row has had)."""
        counts = [0] * len(self.prompts)
        for e in self.log:
            if isinstance(e, RoundSummary):
                counts[e.row] += 1
        return max(counts, default=0)

    @property
    def tokens(self) -> int:
        """Tokens written so far, all rows together."""
        return sum(isinstance(e, EMITTING) for e in self.log)

    @property
    def seconds(self) -> float:
        """The batch's wall time: its last row's finish once done, else the time so far."""
        finished = [e.seconds for e in self.log if isinstance(e, Finished)]
        if self.done and finished:
            return max(finished)
        return time.monotonic() - self.started

    def total(self) -> dict[str, Any]:
        """Rows, batch rounds, tokens, seconds and tokens per second of the whole batch."""
        seconds = self.seconds
        tps = self.tokens / seconds if seconds > 0 else None
        return {
            "rows": len(self.prompts),
            "rounds": self.rounds,
            "new_tokens": self.tokens,
            "seconds": seconds,
            "tokens_per_second": tps,
            "done": self.done,
        }


def _num(value: Any, digits: int = 2) -> str:
    """A number for the row lines, '—' when absent."""
    return "—" if value is None else f"{value:.{digits}f}"


def total_html(total: dict[str, Any]) -> str:
    """The batch's line: rows, batch rounds, tokens and tokens per second of all rows."""
    state = "finished" if total["done"] else "so far"
    line = (
        f"batch of {total['rows']} rows · {total['rounds']} batch rounds · "
        f"{total['new_tokens']} tokens in {total['seconds']:.2f} s ({state}) · "
        f"<b>{_num(total['tokens_per_second'], 1)} tokens/s</b> for the whole batch "
        "(all rows together; live drawing included)"
    )
    return f'<div class="sv-batch-total" data-key="total">{line}</div>'


def row_line(row: int, seed: int, summary: dict[str, Any]) -> str:
    """A row's head: its seed, α, tokens per round, tokens and, once done, why and when."""
    reason = summary.get("finish_reason")
    end = (
        f"finished ({escape(str(reason))}) at {summary['seconds']:.2f} s" if reason else "decoding…"
    )
    return (
        f"<b>row {row}</b> · seed {seed} · "
        f'<span data-key="alpha">α {_num(summary.get("alpha"))}</span> · '
        f'<span data-key="tokens_per_round">'
        f"{_num(summary.get('mean_tokens_per_round_with_bonus'))} tokens/round</span> · "
        f"{summary.get('rounds', 0)} rounds · {summary.get('new_tokens', 0)} tokens · {end}"
    )


def batch_html(run: BatchRun | None) -> str:
    """Every row's tokens coloured by outcome under its numbers, side by side, and the batch's
    line above them (a hint before the first run)."""
    if run is None:
        return f'<div class="sv-batch"><p class="sv-note">{escape(EMPTY)}</p></div>'
    rows = []
    for r, (prompt, seed) in enumerate(zip(run.prompts, run.seeds, strict=True)):
        events = run.row_events(r)
        cells = cells_from_events(events, run.text_of)
        head = row_line(r, seed, summarize(events))
        stream = stream_html(cells, prompt, prompt_format=run.prompt_format)
        rows.append(
            f'<div class="sv-batch-row" data-row="{r}">'
            f'<div class="sv-batch-head">{head}</div>{stream}</div>'
        )
    body = f'<div class="sv-batch-rows">{"".join(rows)}</div>'
    return f'<div class="sv-batch">{total_html(run.total())}{body}</div>'


def row_tokens(run: BatchRun, rows: Sequence[int] | None = None) -> list[list[int]]:
    """The tokens each row (all rows by default) has written so far."""
    chosen = range(len(run.prompts)) if rows is None else rows
    return [[e.token for e in run.row_events(r) if isinstance(e, EMITTING)] for r in chosen]
