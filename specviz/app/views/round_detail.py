"""How a round was drafted, for the round detail panel, and the suffix memory's line.

A suffix drafter's round (a SuffixLookup event): the tokens it matched, where (the memory of
earlier requests, or this request's own text), what followed them there with its counts, and
the speculation it grew, each node with its frequency. A cross-tokenizer drafter's round (a
CrossTranslation event): the draft's tokens, their text, and that text in the target's tokens.
Pure functions of the events and a token-to-text function (the target's); no gradio, no torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from specviz.app.views.cells import Decode
from specviz.app.views.tokens import visible
from specviz.core.events import (
    Accepted,
    CrossTranslation,
    DrafterRound,
    Event,
    RoundSummary,
    SuffixLookup,
)

SOURCES = {
    "memory": "in the memory of earlier requests",
    "request": "in this request's own prompt and output",
}
TALLY = {  # a suffix round's kind → how the tally names it
    "memory": "from memory",
    "request": "from its own text",
    "model": "left to the draft model",
    "": "with no match",
}
HINT = (
    "Pick a suffix drafter (drafting from memory) or a cross-tokenizer drafter, then Generate "
    "or Step: how each round drafted shows here. Click a token to see its round."
)
MEMORY_NOTE = "the suffix drafters draft from it; a decode of theirs run to its end adds its output"


def drafter_rounds(events: Iterable[Event]) -> dict[int, DrafterRound]:
    """Each round's SuffixLookup or CrossTranslation, by round number."""
    return {e.round: e for e in events if isinstance(e, SuffixLookup | CrossTranslation)}


def kept_drafts(events: Iterable[Event], number: int) -> set[int]:
    """The draft indices (a tree's nodes) that round `number` kept."""
    return {e.draft_index for e in events if isinstance(e, Accepted) and e.round == number}


def round_detail_html(events: Sequence[Event], number: int | None, decode: Decode) -> str:
    """The panel for round `number` (None, or a round with nothing to show: the latest that
    has something), under a tally of the decode's suffix rounds; a hint when no round has."""
    detail = drafter_rounds(events)
    if not detail:
        return f'<div class="sv-round-detail"><em>{escape(HINT)}</em></div>'
    shown = detail.get(number) if number is not None else None
    shown = shown or detail[max(detail)]
    if isinstance(shown, SuffixLookup):
        body = lookup_html(shown, kept_drafts(events, shown.round), decode)
    else:
        body = translation_html(shown, decode)
    return (
        f'<div class="sv-round-detail" data-round="{shown.round}" data-kind="{shown.kind}">'
        f"{tally_html(events)}{body}</div>"
    )


def text_of(tokens: Iterable[int], decode: Decode) -> str:
    """The tokens' text on one line, in quotes: newlines and tabs as ↵ and →, escaped."""
    return quoted("".join(decode(t) for t in tokens))


def quoted(text: str) -> str:
    """Text on one line, in quotes: newlines and tabs as ↵ and →, escaped."""
    one_line = visible(text).replace("\n", "").replace("\t", "")
    return escape(f"«{one_line}»")


def lookup_html(lookup: SuffixLookup, kept: set[int], decode: Decode) -> str:
    """A suffix round: its match, the match's continuations and the speculation grown."""
    head = f"<b>Round {lookup.round}: suffix lookup</b>"
    if not lookup.context:
        return (
            f"{head}<p>No match: the last token has no continuation in the memory or in this "
            "request, so nothing was drafted; the target's pass gave the round's one token.</p>"
        )
    m = len(lookup.context)
    what, occur = (
        ("the last token", "it occurs") if m == 1 else (f"the last {m} tokens", "they occur")
    )
    match = (
        f"<p>Matched {what} {text_of(lookup.context, decode)} {SOURCES.get(lookup.source, '')}, "
        f"where {occur} {lookup.total} time{'s' * (lookup.total != 1)}.</p>"
    )
    after = " · ".join(
        f'<span class="sv-candidate">{text_of([t], decode)} ×{n}</span>'
        for t, n in lookup.candidates
    )
    candidates = f"<p>What followed there (most frequent first): {after or '—'}</p>"
    left = lookup.drafted_by == "model"
    used = lookup.min_score is None or not left
    spec = (
        f"<p>Speculation, score {lookup.score:.2f} (each node's frequency, summed: the "
        f"tokens the round expects to keep){'' if used else ', not proposed'}:</p>"
        f'<ul class="sv-spec-tree">{_branch(lookup, -1, kept if used else set(), decode)}</ul>'
    )
    if left:
        spec += (
            f'<p class="sv-note">Score {lookup.score:.2f} &lt; {lookup.min_score or 0:.2f} '
            "(the least a suffix chain must promise): the draft model drafted this round.</p>"
        )
    elif lookup.min_score is not None and lookup.score < lookup.min_score:
        spec += (
            f'<p class="sv-note">Score {lookup.score:.2f} &lt; {lookup.min_score:.2f}, but the '
            "draft model is held back (the target kept too few of its drafts in this request): "
            "the weak chain is proposed instead.</p>"
        )
    return f"{head}{match}{candidates}{spec}"


def _branch(lookup: SuffixLookup, parent: int, kept: set[int], decode: Decode) -> str:
    """The speculation's nodes under parent as list items, each with its frequency; nodes the
    round kept are marked."""
    items = []
    for i, up in enumerate(lookup.parents):
        if up != parent:
            continue
        cls = "sv-spec-kept" if i in kept else "sv-spec-node"
        mark = " ✓ kept" if i in kept else ""
        sub = _branch(lookup, i, kept, decode)
        items.append(
            f'<li><span class="{cls}" data-node="{i}">{text_of([lookup.tokens[i]], decode)} '
            f"<small>{lookup.probs[i]:.2f}{mark}</small></span>"
            f"{f'<ul>{sub}</ul>' if sub else ''}</li>"
        )
    return "".join(items)


def translation_html(t: CrossTranslation, decode: Decode) -> str:
    """A cross-tokenizer round: draft tokens → their text → the target's tokens, those
    proposed marked, the unstable ones set apart."""
    draft = "".join(
        f'<span class="sv-xtok" title="draft id {d}">{quoted(text)}</span>'
        for d, text in zip(t.draft_tokens, t.draft_texts, strict=True)
    )
    target = "".join(
        f'<span class="sv-xtok sv-xtok-{_state(t, i)}" title="target id {tok}: '
        f'{_state(t, i)}">{text_of([tok], decode)}</span>'
        for i, tok in enumerate(t.target_tokens)
    )
    return (
        f"<b>Round {t.round}: cross-tokenizer translation</b>"
        f"<p>The draft wrote {len(t.draft_tokens)} of its own tokens: {draft or '—'}</p>"
        f"<p>→ their text: {quoted(t.text)}</p>"
        f"<p>→ in the target's tokens: {target or '—'}</p>"
        f'<p class="sv-note">{escape(proposed_note(t))}</p>'
    )


def proposed_note(t: CrossTranslation) -> str:
    """Which of the target tokens were proposed, and why the others were not."""
    n = len(t.target_tokens)
    if t.proposed == n:
        return f"Proposed all {n}."
    why = []
    if n > t.stable:
        why.append(
            f"{n - t.stable} not stable: it may still merge with text the draft has not written"
        )
    if t.stable > t.proposed:
        why.append(f"{t.stable - t.proposed} stable but past γ or a stop token")
    return f"Proposed the first {t.proposed} of {n} ({'; '.join(why)})."


def _state(t: CrossTranslation, i: int) -> str:
    """'proposed', 'stable' (stable, cut by γ or a stop) or 'unstable' for target token i."""
    return "proposed" if i < t.proposed else "stable" if i < t.stable else "unstable"


def tally_html(events: Sequence[Event]) -> str:
    """One line: the decode's suffix rounds by where they drafted from, with the drafts kept
    per round of each kind (empty without suffix rounds)."""
    kept = {e.round: e.accepted for e in events if isinstance(e, RoundSummary)}
    kinds: dict[str, list[int]] = {}
    for e in events:
        if isinstance(e, SuffixLookup):
            kind = "model" if e.drafted_by == "model" else e.source
            kinds.setdefault(kind, []).append(kept.get(e.round, 0))
    parts = [
        f"{len(n)} round{'s' * (len(n) != 1)} {TALLY[kind]} ({sum(n) / len(n):.1f} kept a round)"
        for kind in TALLY
        if (n := kinds.get(kind))
    ]
    return f'<p class="sv-tally">This decode: {" · ".join(parts)}</p>' if parts else ""


def memory_html(requests: int, tokens: int) -> str:
    """The suffix memory's line: how many requests and tokens it holds."""
    held = (
        "empty"
        if not requests
        else f"{requests} request{'s' * (requests != 1)}, {tokens} token{'s' * (tokens != 1)}"
    )
    return (
        f'<div class="sv-memory" data-requests="{requests}" data-tokens="{tokens}">'
        f"<b>Suffix memory</b>: {held} ({escape(MEMORY_NOTE)})</div>"
    )
