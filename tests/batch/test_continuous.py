"""Continuous batching: requests join a running batch and leave it, each row exact on its own.

Every row is compared with the same request decoded alone (float64 tiny models, so the batch's
padding changes no token): at T = 0 the tokens are equal, and at T > 0 a row seeded s writes
exactly what the single decode seeded s writes, whatever else is in the batch and whenever the
row joined.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from specviz.batch.decoding import BatchSpeculativeDecoder
from specviz.batch.drafters import build_batch_drafter
from specviz.batch.routed import RoutedDrafter
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.decoding import SpeculativeDecoder
from specviz.core.events import EMITTING, Event, Finished, Prefill, RoundSummary, SuffixLookup
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.drafters.suffix.memory import SuffixMemory

from ..conftest import PairFactory


@dataclass(frozen=True)
class Ask:
    """One request: its prompt, settings and budget, and the round before which it joins."""

    prompt: list[int]
    sampling: SamplingConfig
    max_new: int
    joins_at: int


ASKS = [
    Ask([3, 4, 5, 6, 7, 8, 3, 4, 5], SamplingConfig(temperature=0), 14, 0),
    Ask([12, 13], SamplingConfig(temperature=1.0, seed=5), 10, 0),
    Ask([20, 21, 22, 20, 21], SamplingConfig(temperature=0.7, top_p=0.9, seed=9), 12, 2),
    Ask([7, 8, 9, 7, 8], SamplingConfig(temperature=1.0, top_k=5, seed=3), 8, 3),
    Ask([5], SamplingConfig(temperature=0), 6, 5),
]
GAMMA = 3


def alone(target, draft, name: str, ask: Ask, gamma: int = GAMMA) -> list[int]:
    """The request decoded by itself with the one-request drafter of the same name."""
    drafter = build_drafter(name, target=target, draft=draft, sampling=ask.sampling)
    speculation = SpeculationConfig(gamma=gamma, max_new_tokens=ask.max_new)
    decoder = SpeculativeDecoder(
        target, drafter, ask.prompt, sampling=ask.sampling, speculation=speculation
    )
    return [e.token for e in decoder.events() if isinstance(e, EMITTING)]


def serve(
    decoder: BatchSpeculativeDecoder, asks: list[Ask], routes: list[tuple[str, int]] | None = None
) -> tuple[dict[int, int], list[Event]]:
    """Advance round by round, each request joining before its round (with its drafter and γ
    where routes gives them); its row, every event."""
    rows: dict[int, int] = {}
    events: list[Event] = []
    step = 0
    while step < 100 and (decoder.rows or len(rows) < len(asks)):
        for i, ask in enumerate(asks):
            if ask.joins_at == step:
                drafter, gamma = routes[i] if routes else ("", None)
                rows[i] = decoder.join(
                    ask.prompt,
                    sampling=ask.sampling,
                    max_new_tokens=ask.max_new,
                    seed=ask.sampling.seed,
                    gamma=gamma,
                    drafter=drafter,
                )
        events += decoder.advance()
        step += 1
    return rows, events


def new_decoder(target, draft, name: str) -> BatchSpeculativeDecoder:
    """A decoder with no rows yet: every request joins."""
    drafter = build_batch_drafter(name, target=target, draft=draft)
    speculation = SpeculationConfig(gamma=GAMMA, max_new_tokens=1)
    return BatchSpeculativeDecoder(
        target, drafter, [], sampling=SamplingConfig(), speculation=speculation
    )


def tokens(events: list[Event], row: int) -> list[int]:
    """The tokens row emitted."""
    return [e.token for e in events if isinstance(e, EMITTING) and e.row == row]


@pytest.mark.parametrize("name", ["model", "ngram", "ngram+model"])
def test_joining_rows_each_write_what_they_write_alone(pair: PairFactory, name) -> None:
    target, draft = pair("llama")
    decoder = new_decoder(target, draft, name)
    rows, events = serve(decoder, ASKS)
    for i, ask in enumerate(ASKS):
        assert tokens(events, rows[i]) == alone(target, draft, name, ask), (name, i)
    prefills = [e.row for e in events if isinstance(e, Prefill)]
    assert prefills == [rows[i] for i in range(len(ASKS))]  # each joined once, in order
    finished = [e for e in events if isinstance(e, Finished)]
    assert sorted(e.row for e in finished) == sorted(rows.values())
    assert decoder.rows == 0 and decoder.cache.rows == 0  # everything released at the end


def test_a_row_that_leaves_frees_its_place_and_changes_no_other_row(pair: PairFactory) -> None:
    target, draft = pair("llama")
    decoder = new_decoder(target, draft, "model")
    first = [ASKS[0], ASKS[1], ASKS[2]]
    rows = {
        i: decoder.join(
            a.prompt, sampling=a.sampling, max_new_tokens=a.max_new, seed=a.sampling.seed
        )
        for i, a in enumerate(first)
    }
    events = list(decoder.advance())
    decoder.leave(rows[1])
    while decoder.rows:
        events += decoder.advance()
        assert rows[1] not in decoder.live
    assert not any(isinstance(e, Finished) and e.row == rows[1] for e in events)
    for i in (0, 2):
        assert tokens(events, rows[i]) == alone(target, draft, "model", first[i]), i


def test_one_batch_drafter_serves_batch_after_batch(pair: PairFactory) -> None:
    target, draft = pair("llama")
    drafter = build_batch_drafter("ngram+model", target=target, draft=draft)
    speculation = SpeculationConfig(gamma=GAMMA, max_new_tokens=10)
    sampling = SamplingConfig(temperature=1.0, seed=4)
    prompts = [ASKS[0].prompt, ASKS[2].prompt]
    outputs = []
    for _ in range(2):
        decoder = BatchSpeculativeDecoder(
            target, drafter, prompts, sampling=sampling, speculation=speculation
        )
        events = list(decoder.events())
        outputs.append([tokens(events, r) for r in range(2)])
    assert outputs[0] == outputs[1]


def test_rows_of_different_drafters_and_gammas_share_one_batch(pair: PairFactory) -> None:
    """A RoutedDrafter: each row drafted by the drafter it names, at its own γ, in one batch
    (one target pass a round); each row writes what it writes alone."""
    target, draft = pair("llama")
    names = ["model", "ngram", "ngram+model", "model", "ngram"]
    gammas = [3, 4, 2, 5, 3]
    drafter = RoutedDrafter(lambda name: build_batch_drafter(name, target=target, draft=draft))
    decoder = BatchSpeculativeDecoder(
        target, drafter, [], sampling=SamplingConfig(), speculation=SpeculationConfig()
    )
    rows, events = serve(decoder, ASKS, list(zip(names, gammas, strict=True)))
    for i, ask in enumerate(ASKS):
        expected = alone(target, draft, names[i], ask, gamma=gammas[i])
        assert tokens(events, rows[i]) == expected, (names[i], i)
    assert not drafter.parts and not drafter.names  # every drafter let go with its last row


def test_suffix_rows_share_one_memory_learn_from_finished_rows_and_explain(
    pair: PairFactory,
) -> None:
    """Suffix decoding in a batch: every row reads one memory, each row run to its end is
    remembered (prompt then output, as a decode alone remembers it) and a row that leaves is
    not; each round that drafts says how (a SuffixLookup of its row). Greedy rows write what
    they write alone; the sampled rows' law is tests/batch/test_law.py's."""
    target, draft = pair("llama")
    memory = SuffixMemory(prompts=True)
    options = DrafterOptions(memory=memory, explain=True)
    drafter = build_batch_drafter("suffix", target=target, draft=None, options=options)
    decoder = BatchSpeculativeDecoder(
        target, drafter, [], sampling=SamplingConfig(), speculation=SpeculationConfig(gamma=GAMMA)
    )
    rows, events = serve(decoder, ASKS)
    for i in (0, 4):  # the greedy ones
        assert tokens(events, rows[i]) == alone(target, draft, "suffix", ASKS[i]), i
    assert any(e.proposed for e in events if isinstance(e, RoundSummary))  # suffixes drafted
    ended = [e.row for e in events if isinstance(e, Finished)]
    written = [tuple(ASKS[rows_of(rows, r)].prompt) + tuple(tokens(events, r)) for r in ended]
    assert memory.requests == tuple(written)  # in the order they ended
    for r in rows.values():
        drafting = [e.round for e in events if isinstance(e, RoundSummary) and e.row == r]
        explained = [e.round for e in events if isinstance(e, SuffixLookup) and e.row == r]
        assert explained == drafting[: len(explained)] and len(explained) >= len(drafting) - 1
    left = decoder.join([3, 4, 5], sampling=SamplingConfig(), max_new_tokens=20, seed=0)
    list(decoder.advance())
    decoder.leave(left)
    list(decoder.advance())
    assert decoder.rows == 0 and len(memory.requests) == len(ASKS)  # the cancelled one: not kept


def rows_of(rows: dict[int, int], row: int) -> int:
    """The ask whose request is row."""
    return next(i for i, r in rows.items() if r == row)
