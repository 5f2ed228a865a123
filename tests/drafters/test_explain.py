"""Drafters that explain their rounds: suffix lookups and cross-tokenizer translations, as
events the chain and tree decoders emit right before each proposal."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from specviz.api import GenerationResult, speculative_generate
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.events import (
    CrossTranslation,
    Event,
    Proposed,
    RoundSummary,
    SuffixLookup,
    TreeProposed,
)
from specviz.drafters.names import CROSS_TOKENIZER_DRAFTERS
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.drafters.suffix.drafter import SuffixConfig, SuffixDrafter
from specviz.drafters.suffix.explain import CANDIDATES, continuations
from specviz.drafters.suffix.memory import SuffixMemory
from specviz.jsonl import from_json, read_jsonl, to_json, write_jsonl

from ..conftest import PairFactory
from .cross_pairs import TOKENIZERS, tiny_llama

GREEDY = SamplingConfig(temperature=0)
SUFFIX_DRAFTERS = ("suffix", "tree-suffix", "suffix+model")
TIMINGS = ("seconds", "draft_seconds", "target_seconds")


def rounds_of(events: tuple[Event, ...]) -> list[list[Event]]:
    """The events of each round, from its first event to its RoundSummary."""
    rounds: list[list[Event]] = [[]]
    for event in events[1:-1]:  # past Prefill, before Finished
        rounds[-1].append(event)
        if isinstance(event, RoundSummary):
            rounds.append([])
    return rounds[:-1]


def gamma_of(events: list[Event]) -> int:
    """The γ a round asked for (its RoundSummary's, the round's last event)."""
    summary = events[-1]
    assert isinstance(summary, RoundSummary)
    return summary.gamma


def timeless(events: tuple[Event, ...], without: type[Any] | None = None) -> list[str]:
    """The events as JSON without their timings (and without those of type without)."""
    kept = [e for e in events if without is None or not isinstance(e, without)]
    return [to_json(replace(e, **{k: 0.0 for k in TIMINGS if hasattr(e, k)})) for e in kept]


def decode(target: Any, drafter: Any, tokenizer: Any, prompt: Any) -> GenerationResult:
    return speculative_generate(
        target, drafter, tokenizer, prompt, sampling=GREEDY,
        speculation=SpeculationConfig(gamma=4, max_new_tokens=30), stop=(),
    )  # fmt: skip


def test_the_new_events_round_trip_through_json_lines(tmp_path: Path) -> None:
    events: list[Event] = [
        SuffixLookup(
            round=3, row=1, source="memory", context=(4, 5), total=7,
            candidates=((6, 4), (9, 2)), tokens=(6, 1, 9), parents=(-1, 0, -1),
            probs=(4 / 7, 0.25, 2 / 7), score=4 / 7 + 0.25 + 2 / 7, drafted_by="model",
            min_score=1.5,
        ),
        SuffixLookup(
            round=0, source="", context=(), total=0, candidates=(), tokens=(), parents=(),
            probs=(), score=0.0,
        ),
        CrossTranslation(
            round=2, draft_tokens=(10, 11), draft_texts=("é\n", " «x»"), text="é\n «x»",
            target_tokens=(1, 2, 3), stable=2, proposed=1,
        ),
    ]  # fmt: skip
    assert [from_json(to_json(e)) for e in events] == events
    write_jsonl(events, tmp_path / "events.jsonl")
    assert list(read_jsonl(tmp_path / "events.jsonl")) == events


def test_continuations_count_every_occurrence_and_what_follows() -> None:
    texts = [(1, 2, 3, 1, 2, 4, 1, 2), [5, 1, 2, 3, 9]]
    total, after = continuations(texts, [1, 2], vocab_size=9)
    assert total == 4  # the one at the very end of the first text counts, with nothing after
    assert dict(after) == {3: 2, 4: 1}  # 9 is past the vocabulary: never a candidate
    assert continuations(texts, [7], 9) == (0, {}) and continuations(texts, [], 9) == (0, {})


def test_a_lookup_names_its_match_its_counts_and_the_speculation() -> None:
    memory = SuffixMemory()
    for text in ([7, 1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 6]):
        memory.add(text)
    drafter = SuffixDrafter(10, memory=memory, config=SuffixConfig(factor=4.0), explain=True)
    drafter.prefill([8, 8])
    draft = drafter.propose([8, 8, 1, 2], 4, torch.Generator(), ())
    lookup = drafter.explain(5)
    assert isinstance(lookup, SuffixLookup) and lookup.round == 5
    assert lookup.source == "memory" and lookup.context == (1, 2) and lookup.total == 3
    assert lookup.candidates == ((3, 2), (6, 1))
    assert lookup.tokens == tuple(draft.tokens.tolist()) == (3, 4)  # 4 and 5 tie: 4 first
    assert lookup.parents == (-1, 0) and lookup.probs == pytest.approx((2 / 3, 1 / 3))
    assert lookup.score == sum(lookup.probs)
    assert lookup.drafted_by == "suffix" and lookup.min_score is None


def test_the_requests_own_text_is_named_as_the_source_and_wins_ties() -> None:
    memory = SuffixMemory()
    memory.add([1, 2, 3])
    memory.add([1, 2, 7])
    # factor 0.5: one token after a match of two; memory and request both give 3 at 1/2
    drafter = SuffixDrafter(10, memory=memory, config=SuffixConfig(factor=0.5), explain=True)
    drafter.prefill([1, 2, 3, 9])
    drafter.propose([1, 2, 3, 9, 1, 2], 4, torch.Generator(), ())
    lookup = drafter.explain(0)
    assert lookup is not None and lookup.source == "request" and lookup.context == (1, 2)
    assert lookup.total == 2 and lookup.candidates == ((3, 1),)  # (1, 2) ends the text once
    assert lookup.tokens == (3,) and lookup.probs == (0.5,)
    drafter.prefill([5, 6])  # another request: only memory continues (1, 2)
    drafter.propose([5, 6, 1, 2], 4, torch.Generator(), ())
    other = drafter.explain(0)
    assert other is not None and other.source == "memory" and other.total == 2
    assert other.candidates == ((3, 1), (7, 1))
    drafter.propose([1, 2, 3, 9, 4], 4, torch.Generator(), ())  # 4 occurs nowhere
    nothing = drafter.explain(1)
    assert nothing is not None and nothing.source == "" and nothing.context == ()
    assert nothing.tokens == () and nothing.total == 0 and nothing.candidates == ()
    quiet = SuffixDrafter(10, memory=memory)
    quiet.prefill([1])
    quiet.propose([1, 2], 4, torch.Generator(), ())
    assert quiet.explain(0) is None  # built without explain: nothing recorded


@pytest.mark.parametrize("name", SUFFIX_DRAFTERS)
def test_decoders_emit_a_lookup_before_each_suffix_proposal(
    name: str, pair: PairFactory, tokenizer: Any
) -> None:
    target, draft = pair("llama")
    prompt = tokenizer("the cat sat on the mat. the cat sat on the")["input_ids"]
    memory = SuffixMemory()

    def run(memory: SuffixMemory, explain: bool) -> GenerationResult:
        options = DrafterOptions(memory=memory, suffix_min_score=1.5, explain=explain)
        built = build_drafter(name, target=target, draft=draft, sampling=GREEDY, options=options)
        return decode(target, built, tokenizer, prompt)

    first = run(memory, explain=True)
    quiet = run(SuffixMemory.from_json(memory.to_json()), explain=False)  # the same memory
    again = run(memory, explain=True)
    assert timeless(quiet.events) == timeless(again.events, without=SuffixLookup)
    assert [from_json(to_json(e)) for e in again.events] == list(again.events)
    for result in (first, again):
        for events in rounds_of(result.events):
            summary = events[-1]
            assert isinstance(summary, RoundSummary)
            if summary.gamma == 0:  # nothing asked of the drafter: nothing to explain
                assert not any(isinstance(e, SuffixLookup) for e in events)
                continue
            lookup, proposal = events[0], events[1]
            assert isinstance(lookup, SuffixLookup) and lookup.round == summary.round
            if lookup.drafted_by == "model":
                assert lookup.min_score == 1.5 and lookup.score < 1.5
                continue
            if isinstance(proposal, TreeProposed):
                assert (proposal.tokens, proposal.parents) == (lookup.tokens, lookup.parents)
            else:
                proposed = tuple(e.token for e in events if isinstance(e, Proposed))
                assert proposed == lookup.tokens
            if lookup.tokens:  # a continuation's frequency is its count over the total
                counts = dict(lookup.candidates)
                assert lookup.probs[0] == pytest.approx(counts[lookup.tokens[0]] / lookup.total)
                assert len(lookup.candidates) <= CANDIDATES
    sources = {e.source for e in again.events if isinstance(e, SuffixLookup)}
    assert "memory" in sources  # the earlier requests' output is matched
    assert "memory" not in {e.source for e in first.events if isinstance(e, SuffixLookup)}


@pytest.mark.parametrize("drafter", CROSS_TOKENIZER_DRAFTERS)
def test_cross_drafters_translate_in_the_open(drafter: str) -> None:
    tt, dt = TOKENIZERS["char"](), TOKENIZERS["char_bpe"]()
    target, draft = tiny_llama(len(tt), 1), tiny_llama(len(dt), 2)
    options = DrafterOptions(tokenizer=tt, draft_tokenizer=dt, explain=True)
    built = build_drafter(drafter, target=target, draft=draft, sampling=GREEDY, options=options)
    result = decode(target, built, tt, "the cat sat")
    assert [from_json(to_json(e)) for e in result.events] == list(result.events)
    shown = [e for e in result.events if isinstance(e, CrossTranslation)]
    asked = [events for events in rounds_of(result.events) if gamma_of(events)]
    assert len(shown) == len(asked) > 0
    for events, translation in zip(asked, shown, strict=True):
        assert events[0] is translation  # first in its round, before the proposal
        proposed = tuple(e.token for e in events if isinstance(e, Proposed))
        assert proposed == translation.target_tokens[: translation.proposed]
        assert translation.proposed <= translation.stable <= len(translation.target_tokens)
        texts = tuple(dt.decode([t]) for t in translation.draft_tokens)
        assert translation.draft_texts == texts
        words = [t for t in translation.target_tokens if t != tt.eos_token_id]
        if drafter == "cross:text" and words:  # the text, in the target's tokens
            assert tt.decode(words) == translation.text
    assert sum(len(t.draft_tokens) for t in shown) > 0
