"""What speculate() reads of a counted suffix trie: any trie that answers these serves.

The memory's compact store (specviz.drafters.suffix.store), the request's own trie
(specviz.drafters.suffix.request) and the plain trie the tests check them against all do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol


class TrieNode(Protocol):
    """A string held by a counted trie: how often it occurs and its one-token extensions."""

    @property
    def count(self) -> int:
        """How many times the string occurs."""
        ...

    @property
    def followed(self) -> int:
        """At least its one-token extensions' counts summed (how many of its occurrences a
        token follows, where the trie holds them all), at most count."""
        ...

    def ranked(self, keep: Callable[[int], bool] | None = None) -> Iterable[tuple[int, TrieNode]]:
        """(token, extension) by count, most frequent first (ties: smaller token first), up to
        the first whose count keep rejects (keep is monotone in the count)."""
        ...


class Trie(Protocol):
    """A counted trie of all substrings (up to max_depth tokens) of the sequences it holds."""

    @property
    def max_depth(self) -> int:
        """The longest substring held."""
        ...

    def find(self, pattern: Sequence[int]) -> TrieNode | None:
        """Where pattern ends in the trie, or None when it does not occur."""
        ...
