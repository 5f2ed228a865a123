"""The request's own counted suffix trie: one sequence growing at its end, in flat arrays.

It holds what the plain trie of the tests (tests/drafters/suffix_oracle.py) holds for one
sequence (a node per substring of up to max_depth tokens, counted by occurrence) and gives the
same matches and ranked continuations, so speculate() proposes the same drafts from either. A
request's text only grows (a rollback starts a fresh trie:
specviz.drafters.suffix.drafter.SuffixTries).

Terms. A node is an integer id, an index into array.array columns: count (occurrences of its
substring), label (the token by which it hangs from its parent), first (its first child) and
next (its next sibling); the root is node 0 and its count is the number of tokens. A child is
found in one dict keyed by parent * 2**32 + label. Appending a token extends each of the
sequence's open suffixes (those shorter than max_depth) by one node: at most max_depth node
visits per token, whatever the trie holds.

Why flat: the columns and the dict hold plain integers, which Python's garbage collector does
not track, so a trie of any length adds nothing for it to walk. A trie of node objects adds
two tracked objects per new substring (the node and its dict of children), up to max_depth per
token of the prompt, and those keep the collector's full passes (which walk every tracked
object of the process, the models' included) running inside the drafter's proposals.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence

from specviz.drafters.suffix.nodes import DEFAULT_DEPTH

NIL = -1
ROOT = 0
TOKEN_LIMIT = 1 << 32  # token ids are integers in [0, 2**32)


class RequestTrie:
    """Counted trie of all substrings (up to max_depth tokens) of one growing sequence.

    `visits` counts the nodes touched by appends (at most max_depth per token).
    """

    def __init__(self, *, max_depth: int = DEFAULT_DEPTH) -> None:
        """An empty trie holding substrings of up to max_depth (>= 2) tokens."""
        if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 2:
            raise ValueError(f"max_depth must be an integer >= 2 (got {max_depth!r})")
        self.max_depth = max_depth
        self.visits = 0
        self.count = array("q", [0])
        self.label = array("I", [0])
        self.first = array("i", [NIL])
        self.next = array("i", [NIL])
        self._child: dict[int, int] = {}  # parent * 2**32 + token -> child
        self.open_nodes = [ROOT]  # [m]: the node of the sequence's last m tokens (m < max_depth)
        self._tail: list[int] = []  # the sequence's last len(open_nodes) - 1 tokens

    def __len__(self) -> int:
        """Tokens appended."""
        return self.count[ROOT]

    def append(self, tokens: Sequence[int]) -> None:
        """Extend the sequence by tokens (ValueError for a token id outside [0, 2**32))."""
        if tokens and (min(tokens) < 0 or max(tokens) >= TOKEN_LIMIT):
            raise ValueError("token ids must be integers in [0, 2**32)")
        count, label, first, following = self.count, self.label, self.first, self.next
        child_of, depth, open_nodes = self._child, self.max_depth, self.open_nodes
        get = child_of.get
        for token in tokens:
            grown = [ROOT]
            put = grown.append
            for node in open_nodes:
                key = node << 32 | token
                child = get(key)
                if child is None:
                    child = child_of[key] = len(count)
                    count.append(0)
                    label.append(token)
                    following.append(first[node])
                    first.append(NIL)
                    first[node] = child
                count[child] += 1
                put(child)
            if len(grown) > depth:  # the longest open suffix has reached max_depth
                grown.pop()
            count[ROOT] += 1
            self.visits += len(open_nodes)
            open_nodes = grown
        self.open_nodes = open_nodes
        tail = self._tail + list(tokens)
        self._tail = tail[len(tail) - (len(open_nodes) - 1) :]

    def find(self, pattern: Sequence[int]) -> RequestNode | None:
        """The node of pattern, or None when it does not occur. A pattern that ends the
        sequence (as a drafter's context does) is found without a walk."""
        if self.ends_with(pattern):
            return RequestNode(self, self.open_nodes[len(pattern)])
        node, child_of = ROOT, self._child
        for token in pattern:
            if not 0 <= token < TOKEN_LIMIT:
                return None
            found = child_of.get(node << 32 | token)
            if found is None:
                return None
            node = found
        return RequestNode(self, node)

    def ends_with(self, pattern: Sequence[int]) -> bool:
        """Whether pattern (shorter than max_depth) is the sequence's last len(pattern) tokens."""
        m = len(pattern)
        return m < len(self.open_nodes) and list(pattern) == self._tail[len(self._tail) - m :]

    def followed(self) -> Followed:
        """This trie as a drafter reads it (Followed): the sequence's own end left out."""
        return Followed(self)

    def children(self, node: int) -> list[tuple[int, int]]:
        """(token, child) of every child of node, in no particular order."""
        out, label, following = [], self.label, self.next
        child = self.first[node]
        while child != NIL:
            out.append((label[child], child))
            child = following[child]
        return out

    def counts(self) -> dict[tuple[int, ...], int]:
        """Every substring held (up to max_depth tokens) and its count."""
        out: dict[tuple[int, ...], int] = {}
        stack: list[tuple[tuple[int, ...], int]] = [((), ROOT)]
        while stack:
            path, node = stack.pop()
            for token, child in self.children(node):
                out[(*path, token)] = self.count[child]
                stack.append(((*path, token), child))
        return out


class Followed:
    """A RequestTrie read for speculation: where a string occurs only as the sequence's own end,
    nothing follows it, so it is not found.

    A drafter matches the end of the sequence in the trie, and that end always matches itself:
    each suffix of it up to max_depth - 1 tokens is found, counted once for its own occurrence.
    Where that is its only occurrence it has no continuation, and every such match would grow an
    empty speculation. Leaving them out changes no speculation (an empty one never wins), and
    spares a round a dozen of those growths. Every other string is found as in the trie: a
    string that occurs elsewhere too is found with the count and continuations it has there.
    """

    __slots__ = ("trie",)

    def __init__(self, trie: RequestTrie) -> None:
        """A view of trie (it follows the trie as it grows)."""
        self.trie = trie

    @property
    def max_depth(self) -> int:
        """The longest substring held."""
        return self.trie.max_depth

    def find(self, pattern: Sequence[int]) -> RequestNode | None:
        """The node of pattern, or None when it does not occur or occurs only as the end."""
        node = self.trie.find(pattern)
        if node is None or node.count > 1 or not pattern:
            return node
        return None if self.trie.ends_with(pattern) else node


class RequestNode:
    """A substring held by a RequestTrie: its count and its one-token extensions (a view,
    valid until the trie grows)."""

    __slots__ = ("node", "trie")

    def __init__(self, trie: RequestTrie, node: int) -> None:
        """Node number node of trie."""
        self.trie, self.node = trie, node

    @property
    def count(self) -> int:
        """How many times the substring occurs."""
        return self.trie.count[self.node]

    @property
    def followed(self) -> int:
        """How many of its occurrences a token follows: all but the one that ends the
        sequence, if one does (one of the trie's open suffixes). Below max_depth that is its
        children's counts summed; at max_depth the trie holds no children."""
        node, trie = self.node, self.trie
        return trie.count[node] - (node != ROOT and node in trie.open_nodes)

    def ranked(self, keep: Callable[[int], bool] | None = None) -> list[tuple[int, RequestNode]]:
        """Children by count, most frequent first (ties: smaller token first), up to the first
        whose count keep rejects (keep must be monotone: true for a count, true above it)."""
        trie, count = self.trie, self.trie.count
        ranked = sorted(trie.children(self.node), key=lambda item: (-count[item[1]], item[0]))
        out = []
        for token, child in ranked:
            if keep is not None and not keep(count[child]):
                break
            out.append((token, RequestNode(trie, child)))
        return out
