"""A compact counted suffix trie over a queue of sequences, in flat arrays.

It holds the same counts as the plain trie the tests check it against
(tests/drafters/suffix_oracle.py: every substring of up to max_depth tokens of the sequences it
holds, counted by occurrence) and gives the same matches, so speculate() proposes the same
drafts from either. Sequences enter at the back (add) and leave from the front (evict), oldest
first.

Terms. A window is the up to max_depth tokens starting at one position of a sequence; a
substring's count is the number of windows it begins. The trie is path compressed: a node
exists only where windows branch or where a window ends, and an edge spells the tokens
between its nodes, read from the token text by the node's pos (the start of the newest
window through it; windows leave oldest first, so that one leaves last and pos always points
at text still held). Each node costs a fixed number of array slots, and there are at most two
nodes per stored token (fewer where the text repeats). Adding a sequence inserts its windows,
removing one takes them out again and merges nodes that no longer branch: each window walks
at most max_depth edges, so an update costs at most max_depth node visits per token. The
text of removed sequences is cut from the front of the token array once it is at least as
long as the text still held.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence

from specviz.drafters.suffix.nodes import DEFAULT_DEPTH, NIL, ROOT, NodeTable

TOKEN_LIMIT = 1 << 32  # token ids are stored as unsigned 32-bit integers
_MASK = TOKEN_LIMIT - 1  # positions are kept modulo 2**32


class SuffixStore:
    """Counted suffix trie of bounded depth over a queue of sequences, in flat arrays.

    `visits` counts the nodes touched by updates (at most max_depth per token added or
    removed).
    """

    def __init__(self, *, max_depth: int = DEFAULT_DEPTH) -> None:
        """An empty store holding substrings of up to max_depth (>= 2) tokens."""
        if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 2:
            raise ValueError(f"max_depth must be an integer >= 2 (got {max_depth!r})")
        self.max_depth = max_depth
        self.nodes = NodeTable(max_depth)
        self.visits = 0
        self._text = array("I")  # removed sequences' tokens (a prefix), then those held
        self._base = 0  # the position of _text[0], modulo 2**32
        self._gone = 0  # tokens of removed sequences still at the front of _text
        self._lengths = array("I")  # sequence lengths, removed ones first
        self._oldest = 0  # index in _lengths of the oldest sequence held
        self._stored = 0

    def __len__(self) -> int:
        """Tokens held."""
        return self._stored

    @property
    def num_sequences(self) -> int:
        """Sequences held."""
        return len(self._lengths) - self._oldest

    def sequences(self) -> tuple[tuple[int, ...], ...]:
        """The sequences held, oldest first."""
        out, start = [], self._gone
        for length in self._lengths[self._oldest :]:
            out.append(tuple(self._text[start : start + length]))
            start += length
        return tuple(out)

    def nbytes(self) -> int:
        """Bytes held by the store's arrays (nodes, counts, child hash, token text, lengths):
        their allocated buffers as sys.getsizeof reports them."""
        return self.nodes.nbytes() + sys.getsizeof(self._text) + sys.getsizeof(self._lengths)

    # -- updates --------------------------------------------------------------------------

    def add(self, tokens: Sequence[int]) -> None:
        """Put a sequence at the back (ValueError for a token id outside [0, 2**32))."""
        if any(not 0 <= t < TOKEN_LIMIT for t in tokens):
            raise ValueError("token ids must be integers in [0, 2**32)")
        if not tokens:
            return
        start = len(self._text)
        self._text.extend(tokens)
        n, depth = len(tokens), self.max_depth
        for i in range(n):
            self._insert(start + i, min(depth, n - i), (self._base + start + i) & _MASK)
        self._lengths.append(n)
        self._stored += n

    def evict(self) -> tuple[int, ...]:
        """Remove the oldest sequence and return it (IndexError when the store is empty)."""
        if self._oldest >= len(self._lengths):
            raise IndexError("evict from an empty suffix store")
        n, start, depth = self._lengths[self._oldest], self._gone, self.max_depth
        for i in range(n):
            self._remove(start + i, min(depth, n - i))
        tokens = tuple(self._text[start : start + n])
        self._gone += n
        self._oldest += 1
        self._stored -= n
        if 2 * self._gone >= len(self._text):
            del self._text[: self._gone]
            del self._lengths[: self._oldest]
            self._base = (self._base + self._gone) & _MASK
            self._gone = self._oldest = 0
        return tokens

    def _offset(self, node: int) -> int:
        """Where node's occurrence starts in _text."""
        return (self.nodes.pos[node] - self._base) & _MASK

    def _insert(self, at: int, length: int, pos: int) -> None:
        """Count the window _text[at : at + length], which starts at position pos."""
        nodes, text, base = self.nodes, self._text, self._base
        depths, poss, first, labels = nodes.depth, nodes.pos, nodes.first, nodes.label
        nodes.bcount[ROOT] += 1
        node, done = ROOT, 0
        while done < length:
            token = text[at + done]
            child = first[node]  # the most frequent child first, as NodeTable.child does
            if child == NIL or labels[child] != token:
                child = nodes.child(node, token)
            self.visits += 1
            if child == NIL:
                nodes.add_child(node, token, length, pos)
                return
            below = depths[child]
            end = below if below < length else length
            edge = (poss[child] - base) & _MASK
            split = end
            if text[edge + done + 1 : edge + end] != text[at + done + 1 : at + end]:
                split = done + 1
                while text[edge + split] == text[at + split]:
                    split += 1
            if split < below:  # the window leaves the edge (or ends) before its node
                above = nodes.split(child, split, pos, text[edge + split])
                nodes.increment(above)
                if split < length:
                    nodes.add_child(above, text[at + split], length, pos)
                return
            nodes.increment(child)
            poss[child] = pos
            node, done = child, below

    def _remove(self, at: int, length: int) -> None:
        """Uncount the window _text[at : at + length] (counted before)."""
        nodes, text = self.nodes, self._text
        depths, first, labels = nodes.depth, nodes.first, nodes.label
        nodes.bcount[ROOT] -= 1
        node, done = ROOT, 0
        while done < length:
            token = text[at + done]
            child = first[node]  # the most frequent child first, as NodeTable.child does
            if labels[child] != token:  # the window was counted: node has children
                child = nodes.child(node, token)
            self.visits += 1
            if nodes.count(child) == 1:  # a leaf: this window alone ends there
                nodes.remove_leaf(child)
                break
            nodes.decrement(child)
            node, done = child, depths[child]
        if nodes.redundant(node):
            nodes.merge(node)

    # -- reading --------------------------------------------------------------------------

    def token(self, node: int, depth: int) -> int:
        """The token at depth (0-based) of node's string."""
        return self._text[self._offset(node) + depth]

    def find(self, pattern: Sequence[int]) -> Place | None:
        """Where pattern ends in the trie, or None when it does not occur."""
        nodes, depths, text = self.nodes, self.nodes.depth, self._text
        first, labels = nodes.first, nodes.label
        pattern = list(pattern)
        node, done, n = ROOT, 0, len(pattern)
        while done < n:
            child = first[node]  # the most frequent child first, as NodeTable.child does
            if child == NIL or labels[child] != pattern[done]:
                child = nodes.child(node, pattern[done])
                if child == NIL:
                    return None
            node = child
            end = depths[node]
            end = end if end < n else n
            if end > done + 1:
                edge = self._offset(node)
                if text[edge + done + 1 : edge + end].tolist() != pattern[done + 1 : end]:
                    return None
            done = end
        return Place(self, node, done, nodes.count(node))

    def matches(self, context: Sequence[int]) -> list[tuple[int, Place]]:
        """(m, place) for each m >= 1 whose last m tokens of context occur, shortest first
        (m < max_depth: a match at full depth has nothing below it)."""
        tail = list(context[max(0, len(context) - self.max_depth + 1) :])
        found = []
        for m in range(1, len(tail) + 1):
            place = self.find(tail[len(tail) - m :])
            if place is None:
                break
            found.append((m, place))
        return found

    def counts(self) -> dict[tuple[int, ...], int]:
        """Every substring held (up to max_depth tokens) and its count."""
        nodes, out, stack = self.nodes, {}, [ROOT]
        while stack:
            node = stack.pop()
            child = nodes.first[node]
            while child != NIL:
                edge, count = self._offset(child), nodes.count(child)
                for depth in range(nodes.depth[node] + 1, nodes.depth[child] + 1):
                    out[tuple(self._text[edge : edge + depth])] = count
                stack.append(child)
                child = nodes.next[child]
        return out


class Place:
    """A string of the trie: depth tokens along the edge that ends at node (maybe inside it),
    and how many times it occurs (count: a snapshot, valid until the store changes)."""

    __slots__ = ("count", "depth", "node", "store")

    def __init__(self, store: SuffixStore, node: int, depth: int, count: int) -> None:
        """The first depth tokens of node's string (depth <= node's depth), seen count times."""
        self.store, self.node, self.depth, self.count = store, node, depth, count

    @property
    def followed(self) -> int:
        """At least its one-token extensions' counts summed: its count (no fewer is looked
        for)."""
        return self.count

    def ranked(self, keep: Callable[[int], bool] | None = None) -> Iterable[tuple[int, Place]]:
        """Its one-token extensions by count, most frequent first (ties: smaller token first),
        stopping before the first whose count keep rejects (keep must be monotone)."""
        store, node, depth = self.store, self.node, self.depth
        if depth < store.nodes.depth[node]:  # inside an edge: one way on, as frequent
            if keep is not None and not keep(self.count):
                return ()
            return ((store.token(node, depth), Place(store, node, depth + 1, self.count)),)
        return self._children(keep)

    def _children(self, keep: Callable[[int], bool] | None) -> Iterator[tuple[int, Place]]:
        """ranked() at a node: its children run by run (a run: those of one count, most
        frequent first, in no order within), each run sorted by token."""
        store, depth = self.store, self.depth + 1
        nodes = store.nodes
        label, following, bucket, bcount, btail = (
            nodes.label,
            nodes.next,
            nodes.bucket,
            nodes.bcount,
            nodes.btail,
        )
        child = nodes.first[self.node]
        while child != NIL:
            run = bucket[child]
            count, tail = bcount[run], btail[run]
            if keep is not None and not keep(count):
                return
            if child == tail:  # a run of one
                yield label[child], Place(store, child, depth, count)
            else:
                members = [(label[child], child)]
                while child != tail:
                    child = following[child]
                    members.append((label[child], child))
                for token, member in sorted(members):
                    yield token, Place(store, member, depth, count)
            child = following[tail]
