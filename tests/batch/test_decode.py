"""Batched decoding row by row against each prompt decoded alone (float64 tiny models)."""

from __future__ import annotations

import pytest
import torch

from specviz.batch.decoding import BatchSpeculativeDecoder, batch_autoregressive_events
from specviz.batch.drafters import BatchModelDrafter, Joining, build_batch_drafter
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.decoding import SpeculativeDecoder
from specviz.core.events import EMITTING, Event, Finished, RoundSummary
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter
from specviz.jsonl import from_json, to_json
from specviz.plain import autoregressive_events

from ..conftest import VOCAB, PairFactory

PROMPTS = [[3, 4, 5, 6, 7, 8, 9, 10, 11], [12, 13], [5], [20, 21, 22, 20, 21], [7, 8, 9, 7]]
GREEDY = SamplingConfig(temperature=0)


def row_tokens(events: list[Event], row: int) -> list[int]:
    """The tokens row emitted."""
    return [e.token for e in events if isinstance(e, EMITTING) and e.row == row]


def alone(target, prompt, sampling, n, stop=()) -> list[int]:
    """Plain decoding of prompt by itself."""
    events = autoregressive_events(
        target, prompt, sampling=sampling, max_new_tokens=n, stop_ids=stop
    )
    return [e.token for e in events if isinstance(e, EMITTING)]


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
@pytest.mark.parametrize("rows", [2, 3, 5])
def test_greedy_batch_is_greedy_target_decoding_row_by_row(pair: PairFactory, arch, rows) -> None:
    target, draft = pair(arch)
    prompts = PROMPTS[:rows]
    spec = SpeculationConfig(gamma=3, max_new_tokens=14)
    drafter = BatchModelDrafter(draft, VOCAB)
    decoder = BatchSpeculativeDecoder(target, drafter, prompts, sampling=GREEDY, speculation=spec)
    events = list(decoder.events())
    plain = list(batch_autoregressive_events(target, prompts, sampling=GREEDY, max_new_tokens=14))
    for r, prompt in enumerate(prompts):
        expected = alone(target, prompt, GREEDY, 14)
        assert row_tokens(events, r) == expected, r
        assert row_tokens(plain, r) == expected, r
    accepted = [e.accepted for e in events if isinstance(e, RoundSummary)]
    assert len(set(accepted)) > 1  # rows kept different numbers of drafts: the rounds were ragged


@pytest.mark.parametrize("drafter", ["ngram", "trimmed"])
def test_greedy_batch_with_the_other_batched_drafters(pair: PairFactory, drafter) -> None:
    target, draft = pair("llama")
    spec = SpeculationConfig(gamma=4, max_new_tokens=12)
    if drafter == "ngram":
        batch = build_batch_drafter("ngram", target=target, draft=None)
    else:
        batch = BatchModelDrafter(draft, VOCAB, head_tokens=torch.arange(0, VOCAB, 2))
    events = list(
        BatchSpeculativeDecoder(target, batch, PROMPTS, sampling=GREEDY, speculation=spec).events()
    )
    for r, prompt in enumerate(PROMPTS):
        assert row_tokens(events, r) == alone(target, prompt, GREEDY, 12), r
    assert sum(e.accepted for e in events if isinstance(e, RoundSummary)) > 0


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampled_row_r_is_the_single_decode_seeded_seed_plus_r(
    pair: PairFactory, temperature
) -> None:
    """Each row draws from its own generator exactly what the prompt alone would draw."""
    target, draft = pair("llama")
    sampling = SamplingConfig(temperature=temperature, top_p=0.9, seed=11)
    spec = SpeculationConfig(gamma=3, max_new_tokens=12)
    drafter = BatchModelDrafter(draft, VOCAB)
    events = list(
        BatchSpeculativeDecoder(
            target, drafter, PROMPTS, sampling=sampling, speculation=spec
        ).events()
    )
    plain = list(batch_autoregressive_events(target, PROMPTS, sampling=sampling, max_new_tokens=12))
    for r, prompt in enumerate(PROMPTS):
        seeded = SamplingConfig(temperature=temperature, top_p=0.9, seed=11 + r)
        single = SpeculativeDecoder(
            target, ModelDrafter(draft, seeded, VOCAB), prompt, sampling=seeded, speculation=spec
        )
        expected = [e.token for e in single.events() if isinstance(e, EMITTING)]
        assert row_tokens(events, r) == expected, r
        assert row_tokens(plain, r) == alone(target, prompt, seeded, 12), r


def test_rows_stop_at_their_own_eos_and_leave_the_batch(pair: PairFactory) -> None:
    target, draft = pair("llama")
    full = alone(target, PROMPTS[0], GREEDY, 12)
    stop = frozenset({full[4]})  # row 0 meets it by its fifth token; others may not at all
    spec = SpeculationConfig(gamma=4, max_new_tokens=12)
    drafter = BatchModelDrafter(draft, VOCAB)
    decoder = BatchSpeculativeDecoder(
        target, drafter, PROMPTS, sampling=GREEDY, speculation=spec, stop_ids=stop
    )
    events = list(decoder.events())
    finished = {e.row: e for e in events if isinstance(e, Finished)}
    assert sorted(finished) == list(range(5))
    for r, prompt in enumerate(PROMPTS):
        expected = alone(target, prompt, GREEDY, 12, stop)
        assert row_tokens(events, r) == expected, r
        assert finished[r].new_tokens == len(expected)
        assert finished[r].reason == ("eos" if expected[-1] in stop else "max_new_tokens")
    assert finished[0].reason == "eos" and finished[0].new_tokens <= 5
    rounds_after = [
        e.row for e in events[events.index(finished[0]) :] if isinstance(e, RoundSummary)
    ]
    assert 0 not in rounds_after  # a finished row is not drafted or scored again


def test_every_event_names_its_row_and_keeps_it_through_json(pair: PairFactory) -> None:
    target, draft = pair("llama")
    spec = SpeculationConfig(gamma=2, max_new_tokens=6)
    drafter = BatchModelDrafter(draft, VOCAB)
    events = list(
        BatchSpeculativeDecoder(
            target, drafter, PROMPTS[:3], sampling=GREEDY, speculation=spec
        ).events()
    )
    assert {e.row for e in events} == {0, 1, 2}
    for r in range(3):
        mine = [e for e in events if e.row == r]
        assert mine[0].kind == "prefill" and mine[-1].kind == "finished"
        assert [e.position for e in mine if isinstance(e, EMITTING)] == list(range(6))
    assert [from_json(to_json(e)) for e in events] == events


def test_ngram_rows_are_independent_drafters(pair: PairFactory) -> None:
    """Per-row lookup sees its own row only: row 1's drafts come from row 1's text."""
    target, _ = pair("llama")
    batch = build_batch_drafter("ngram", target=target, draft=None)
    ids = [[1, 2, 3, 1, 2], [4, 5, 6, 4, 5]]
    batch.join([Joining(prefix=row[:-1], sampling=GREEDY) for row in ids])
    gen = [torch.Generator().manual_seed(0) for _ in ids]
    drafts = batch.propose(ids, [2, 2], gen, ())
    single = NgramDrafter(VOCAB).propose(ids[1], 2, gen[1], ())
    assert drafts[1].tokens.tolist() == single.tokens.tolist() == [6, 4]
    assert drafts[0].tokens.tolist() == [3, 1]
