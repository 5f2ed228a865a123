"""The round detail panel's formatting, from hand-made events (no gradio, no models)."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from html import unescape

from specviz.app.views.round_detail import (
    HINT,
    drafter_rounds,
    memory_html,
    round_detail_html,
    tally_html,
)
from specviz.core.events import (
    Accepted,
    CrossTranslation,
    Event,
    Proposed,
    RoundSummary,
    SuffixLookup,
)

TEXTS = {1: "the", 2: " cat", 3: " sat", 4: " on", 5: " mat", 6: "\n", 7: " dog"}


def decode(token: int) -> str:
    return TEXTS[token]


def plain(html: str) -> str:
    """The text a reader sees: tags dropped, entities unescaped."""
    return unescape(re.sub(r"<[^>]+>", "", html))


def summary(number: int, accepted: int) -> RoundSummary:
    return RoundSummary(
        round=number, gamma=4, proposed=4, accepted=accepted, emitted=accepted + 1,
        draft_seconds=0.0, target_seconds=0.0, draft_forward_calls=0,
    )  # fmt: skip


def accepted(number: int, index: int) -> Accepted:
    return Accepted(
        round=number, position=index, draft_index=index, token=3, p_x=1.0, q_x=1.0, u=0.5,
        accept_prob=1.0,
    )  # fmt: skip


LOOKUP = SuffixLookup(
    round=1, source="memory", context=(1, 2), total=3, candidates=((3, 2), (7, 1)),
    tokens=(3, 4, 7), parents=(-1, 0, -1), probs=(2 / 3, 0.5, 1 / 3), score=1.5,
)  # fmt: skip


def test_a_suffix_round_shows_its_match_counts_and_speculation_tree() -> None:
    events: list[Event] = [LOOKUP, accepted(1, 0), accepted(1, 1), summary(1, 2)]
    html = round_detail_html(events, 1, decode)
    text = plain(html)
    assert 'data-round="1"' in html and 'data-kind="suffix_lookup"' in html
    assert "Matched the last 2 tokens «the cat» in the memory of earlier requests" in text
    assert "where they occur 3 times" in text
    assert "« sat» ×2 · « dog» ×1" in text  # the continuations, most frequent first
    assert "score 1.50" in text
    assert text.count("✓ kept") == 2 and "0.67 ✓ kept" in text and "0.50 ✓ kept" in text
    assert "« dog» 0.33" in text  # the sibling, not kept
    sat = html.index('data-node="0"')
    on, dog = html.index('data-node="1"'), html.index('data-node="2"')
    assert sat < on < dog and "<ul>" in html[sat:dog]  # " on" hangs under " sat"
    assert "This decode: 1 round from memory (2.0 kept a round)" in text
    lines = replace(LOOKUP, context=(5, 6))
    assert "the last 2 tokens « mat↵» in" in plain(round_detail_html([lines], 1, decode))


def test_a_round_without_a_match_and_a_round_left_to_the_draft_model() -> None:
    none = SuffixLookup(
        round=0, source="", context=(), total=0, candidates=(), tokens=(), parents=(), probs=(),
        score=0.0,
    )  # fmt: skip
    left = SuffixLookup(
        round=2, source="request", context=(2,), total=2, candidates=((3, 1),), tokens=(3,),
        parents=(-1,), probs=(0.5,), score=0.5, drafted_by="model", min_score=1.0,
    )  # fmt: skip
    events: list[Event] = [none, summary(0, 0), left, accepted(2, 0), summary(2, 1)]
    assert "No match" in round_detail_html(events, 0, decode)
    text = plain(round_detail_html(events, 2, decode))
    assert "Matched the last token « cat» in this request's own prompt and output" in text
    assert "where it occurs 2 times" in text
    assert "not proposed" in text and "Score 0.50 < 1.00" in text and "draft model drafted" in text
    assert "✓ kept" not in text  # the kept draft was the model's, not this speculation's
    assert "1 round left to the draft model (1.0 kept a round)" in text
    assert "1 round with no match (0.0 kept a round)" in text
    held = replace(left, drafted_by="suffix")  # the weak chain, the model held back
    text = plain(round_detail_html([held, accepted(2, 0), summary(2, 1)], 2, decode))
    assert "not proposed" not in text and "✓ kept" in text and "draft model drafted" not in text
    assert "Score 0.50 < 1.00, but the draft model is held back" in text
    strong = replace(held, score=1.5)  # a chain above the minimum: no note
    assert "held back" not in plain(round_detail_html([strong, summary(2, 0)], 2, decode))


def test_a_cross_round_shows_draft_tokens_text_and_target_tokens() -> None:
    shown = CrossTranslation(
        round=3, draft_tokens=(40, 41), draft_texts=("the", " ca"), text="the ca",
        target_tokens=(1, 2, 3), stable=2, proposed=1,
    )  # fmt: skip
    html = round_detail_html([shown, summary(3, 1)], None, decode)
    text = plain(html)
    assert 'data-kind="cross_translation"' in html and "cross-tokenizer translation" in text
    assert "2 of its own tokens" in text and "«the»" in text and "« ca»" in text
    assert "→ their text: «the ca»" in text
    for token, state in ((1, "proposed"), (2, "stable"), (3, "unstable")):
        assert f'title="target id {token}: {state}"' in html
    assert "Proposed the first 1 of 3 (1 not stable: it may still merge" in text
    assert "; 1 stable but past γ or a stop token)" in text
    whole = replace(shown, stable=3, proposed=3)
    assert "Proposed all 3." in plain(round_detail_html([whole], 3, decode))
    assert tally_html([shown]) == ""  # the tally counts suffix rounds only


def test_a_round_is_picked_by_number_else_the_latest_else_a_hint() -> None:
    later = SuffixLookup(
        round=4, source="request", context=(5,), total=1, candidates=(), tokens=(), parents=(),
        probs=(), score=0.0,
    )  # fmt: skip
    events: list[Event] = [LOOKUP, summary(1, 0), later, summary(4, 0)]
    assert set(drafter_rounds(events)) == {1, 4}
    assert 'data-round="1"' in round_detail_html(events, 1, decode)
    assert 'data-round="4"' in round_detail_html(events, None, decode)
    assert 'data-round="4"' in round_detail_html(events, 2, decode)  # none for 2: the latest
    proposed: list[Event] = [Proposed(round=0, position=0, draft_index=0, token=1, q_x=1.0)]
    assert plain(round_detail_html(proposed, 0, decode)) == HINT


def test_the_memory_line_says_what_it_holds() -> None:
    assert "empty" in memory_html(0, 0)
    one = memory_html(1, 1)
    assert "1 request, 1 token " in one and 'data-requests="1"' in one
    assert "3 requests, 120 tokens" in memory_html(3, 120)


def test_the_formatting_loads_without_gradio_or_torch() -> None:
    loaded = "sorted({'gradio', 'torch'} & set(sys.modules))"
    code = f"import sys, specviz.app.views.round_detail; print({loaded})"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
