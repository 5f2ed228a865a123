"""A suffix drafter's round, explained: where the text matched, how often, and what followed.

A suffix drafter built with explain=True (DrafterOptions.explain) keeps its last speculation
(Looked) and, asked by the decoder, turns it into a SuffixLookup event (specviz.core.events).
The match's counts are counted again from the texts themselves, the memory's requests or the
request's own tokens: the same numbers the suffix trie holds (every occurrence of the matched
tokens, and the token after each), read through the memory's public requests rather than the
trie's storage. That pass over the texts takes time in proportion to what the memory holds,
once a round: this is why explaining is optional.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from specviz.core.events import SuffixLookup
from specviz.drafters.suffix.speculate import Speculation

CANDIDATES = 5  # the most frequent continuations a lookup lists


@dataclass(frozen=True, kw_only=True)
class Looked:
    """One speculation and where it came from.

    context: the matched tokens (the last found.match_len tokens of the text; empty when
    nothing matched); found: the speculation; source: "memory" (earlier requests), "request"
    (the request's own text) or "" (nothing matched).
    """

    context: tuple[int, ...]
    found: Speculation
    source: str


def continuations(
    texts: Iterable[Sequence[int]], context: Sequence[int], vocab_size: int
) -> tuple[int, Counter[int]]:
    """How often context occurs in texts, and how often each token below vocab_size follows it
    (an occurrence at the very end of a text is counted, with nothing after it)."""
    pattern, total, after = tuple(context), 0, Counter[int]()
    if not pattern:
        return 0, after
    m = len(pattern)
    for text in texts:
        seq = tuple(text)
        at = -1
        while True:
            try:
                at = seq.index(pattern[0], at + 1, len(seq) - m + 1)
            except ValueError:
                break
            if seq[at : at + m] == pattern:
                total += 1
                if at + m < len(seq) and 0 <= seq[at + m] < vocab_size:
                    after[seq[at + m]] += 1
    return total, after


def lookup_event(
    round_index: int, looked: Looked, texts: Iterable[Sequence[int]], vocab_size: int
) -> SuffixLookup:
    """The SuffixLookup of round round_index: looked, with its context counted in texts (the
    texts of its source)."""
    total, after = continuations(texts, looked.context, vocab_size)
    ranked = sorted(after.items(), key=lambda item: (-item[1], item[0]))[:CANDIDATES]
    found = looked.found
    return SuffixLookup(
        round=round_index,
        source=looked.source,
        context=looked.context,
        total=total,
        candidates=tuple(ranked),
        tokens=found.tokens,
        parents=found.parents,
        probs=found.probs,
        score=found.score,
    )
