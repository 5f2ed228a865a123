"""A counted suffix trie of bounded depth: a node object per substring.

The trie holds every substring of up to max_depth tokens of the sequences put into it; a
node's count is how many times its substring occurs (an occurrence ending at the end of a
sequence counts too). Appending a token to a sequence extends each of the sequence's open
suffixes (those shorter than max_depth) by one node, so an update costs at most max_depth node
visits per new token, whatever the trie holds; removing a sequence walks its suffixes again.

This is the plain form, the one to read first and the reference the tests check the others
against. The drafters use two flat forms that hold the same counts in arrays, with no object
per node: specviz.drafters.suffix.store.SuffixStore for the memory of earlier requests and
specviz.drafters.suffix.request.RequestTrie for a request's own text;
specviz.drafters.suffix.speculate proposes tokens from any of them. Pure Python, no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence

from specviz.drafters.suffix.nodes import DEFAULT_DEPTH


class Node:
    """One trie node: the count of its substring and its children by token."""

    __slots__ = ("children", "count")

    def __init__(self) -> None:
        """An empty node, seen zero times."""
        self.count = 0
        self.children: dict[int, Node] = {}

    @property
    def followed(self) -> int:
        """Its children's counts summed: how many of its occurrences a token follows (below
        max_depth; at max_depth the trie holds no children)."""
        return sum(child.count for child in self.children.values())

    def ranked(self, keep: Callable[[int], bool] | None = None) -> list[tuple[int, Node]]:
        """Children by count, most frequent first (ties: smaller token first), up to the first
        whose count keep rejects (keep must be monotone: true for a count, true above it)."""
        ranked = sorted(self.children.items(), key=lambda item: (-item[1].count, item[0]))
        if keep is None:
            return ranked
        for i, (_token, child) in enumerate(ranked):
            if not keep(child.count):
                return ranked[:i]
        return ranked


class SuffixTrie:
    """Counted trie of all substrings (up to max_depth tokens) of the sequences appended to it.

    Sequences are named by any hashable key; append extends one incrementally, remove takes
    one out (its tokens must be given again). `visits` counts the nodes touched by updates.
    """

    def __init__(self, *, max_depth: int = DEFAULT_DEPTH) -> None:
        """An empty trie holding substrings of up to max_depth (>= 2) tokens."""
        if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 2:
            raise ValueError(f"max_depth must be an integer >= 2 (got {max_depth!r})")
        self.max_depth = max_depth
        self.root = Node()
        self.visits = 0
        self._open: dict[Hashable, list[Node]] = {}  # key -> nodes of its suffixes (< depth)

    def append(self, key: Hashable, tokens: Iterable[int]) -> None:
        """Extend the sequence called key by tokens (at most max_depth visits per token)."""
        open_nodes = self._open.setdefault(key, [self.root])
        for token in tokens:
            grown = [self.root]
            for node in open_nodes:
                child = node.children.get(token)
                if child is None:
                    child = node.children[token] = Node()
                child.count += 1
                if len(grown) < self.max_depth:
                    grown.append(child)
            self.root.count += 1
            self.visits += len(open_nodes)
            open_nodes = grown
        self._open[key] = open_nodes

    def close(self, key: Hashable) -> None:
        """Stop extending key (its substrings stay counted)."""
        self._open.pop(key, None)

    def remove(self, key: Hashable, tokens: Sequence[int]) -> None:
        """Take out the sequence called key, whose tokens are `tokens` (all of them)."""
        self.close(key)
        for start in range(len(tokens)):
            node = self.root
            for token in tokens[start : start + self.max_depth]:
                child = node.children[token]
                child.count -= 1
                self.visits += 1
                if child.count == 0:
                    del node.children[token]
                    break  # the rest of this path hung only from it
                node = child
        self.root.count -= len(tokens)

    def find(self, pattern: Sequence[int]) -> Node | None:
        """The node of pattern, or None when it does not occur."""
        node = self.root
        for token in pattern:
            found = node.children.get(token)
            if found is None:
                return None
            node = found
        return node

    def matches(self, context: Sequence[int]) -> list[tuple[int, Node]]:
        """(m, node) for each m >= 1 whose last m tokens of context occur, shortest first
        (m < max_depth: a match at full depth has nothing below it)."""
        found = []
        for m in range(1, min(len(context), self.max_depth - 1) + 1):
            node = self.find(context[len(context) - m :])
            if node is None:
                break  # a longer suffix holds this one, so it cannot occur either
            found.append((m, node))
        return found
