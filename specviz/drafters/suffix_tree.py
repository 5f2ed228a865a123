"""A counted suffix trie of bounded depth, and the speculations it scores by frequency.

The trie holds every substring of up to max_depth tokens of the sequences put into it; a
node's count is how many times its substring occurs (an occurrence ending at the end of a
sequence counts too). Appending a token to a sequence extends each of the sequence's open
suffixes (those shorter than max_depth) by one node, so an update costs at most max_depth node
visits per new token, whatever the trie holds; removing a sequence walks its suffixes again.

A speculation starts where the last m tokens of a context end in the trie (its match, m from 1
up to the longest that occurs) and follows the likeliest continuations: the probability of a
child is count(child) / count(parent) times its parent's, and a node is kept while that product
is at least min_prob. Its score is the sum of the kept probabilities (the expected number of
accepted tokens, were the frequencies the target's law). Pure Python, no torch.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass

DEFAULT_DEPTH = 24  # deepest substring stored (vLLM's default for suffix decoding)


class Node:
    """One trie node: the count of its substring and its children by token."""

    __slots__ = ("children", "count")

    def __init__(self) -> None:
        """An empty node, seen zero times."""
        self.count = 0
        self.children: dict[int, Node] = {}

    def ranked(self) -> list[tuple[int, Node]]:
        """Children by count, most frequent first (ties: smaller token first)."""
        return sorted(self.children.items(), key=lambda item: (-item[1].count, item[0]))


@dataclass(frozen=True, kw_only=True)
class Speculation:
    """Proposed tokens (N,) as a tree (parents[i] < i, -1: a child of the match's end), the
    probability of each node (N,), their sum (score) and the match length it grew from."""

    tokens: tuple[int, ...] = ()
    parents: tuple[int, ...] = ()
    probs: tuple[float, ...] = ()
    score: float = 0.0
    match_len: int = 0


EMPTY = Speculation()


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


def speculate(
    tries: Iterable[SuffixTrie],
    context: Sequence[int],
    *,
    max_tokens: int,
    factor: float,
    min_prob: float,
    vocab_size: int,
    stop_ids: Collection[int],
    tree: bool = False,
    max_depth: int | None = None,
) -> Speculation:
    """The best-scoring speculation after context over every trie and match length.

    A match of m tokens allows at most floor(factor * m) tokens (and max_tokens); tree: a
    best-first tree of that many nodes, no deeper than max_depth, else the likeliest path.
    Tokens >= vocab_size are never proposed and nothing follows a stop token.
    """
    best = EMPTY
    for trie in tries:
        for m, node in trie.matches(context):
            limit = min(max_tokens, int(m * factor + 1e-9))
            if limit < 1:
                continue
            depth = limit if max_depth is None or not tree else min(limit, max_depth)
            grown = (best_tree if tree else best_path)(
                node, limit, depth, min_prob, vocab_size, stop_ids
            )
            if grown[0] and sum(grown[2]) >= best.score:
                tokens, parents, probs = grown
                best = Speculation(
                    tokens=tokens, parents=parents, probs=probs, score=sum(probs), match_len=m
                )
    return best


Grown = tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...]]


def best_path(
    node: Node,
    limit: int,
    _depth: int,
    min_prob: float,
    vocab_size: int,
    stop_ids: Collection[int],
) -> Grown:
    """Up to limit tokens following the most frequent child at each step (a chain)."""
    tokens: list[int] = []
    probs: list[float] = []
    prob = 1.0
    while len(tokens) < limit:
        ranked = [(t, c) for t, c in node.ranked() if 0 <= t < vocab_size]
        if not ranked or node.count == 0:
            break
        token, child = ranked[0]
        prob *= child.count / node.count
        if prob < min_prob:
            break
        tokens.append(token)
        probs.append(prob)
        if token in stop_ids:
            break
        node = child
    return tuple(tokens), tuple(range(-1, len(tokens) - 1)), tuple(probs)


def best_tree(
    node: Node,
    limit: int,
    depth: int,
    min_prob: float,
    vocab_size: int,
    stop_ids: Collection[int],
) -> Grown:
    """Up to limit nodes, likeliest first (so each parent comes before its children and
    siblings come in decreasing frequency), no deeper than depth."""
    tokens: list[int] = []
    parents: list[int] = []
    probs: list[float] = []
    order = 0  # ties keep the order pushed: deterministic
    heap: list[tuple[float, int, int, int, int, Node]] = []

    def push(parent_node: Node, parent: int, level: int, prob: float) -> None:
        nonlocal order
        if level >= depth or parent_node.count == 0:
            return
        for token, child in parent_node.ranked():
            p = prob * child.count / parent_node.count
            if 0 <= token < vocab_size and p >= min_prob:
                heapq.heappush(heap, (-p, order, token, parent, level + 1, child))
                order += 1

    push(node, -1, 0, 1.0)
    while heap and len(tokens) < limit:
        neg, _, token, parent, level, child = heapq.heappop(heap)
        tokens.append(token)
        parents.append(parent)
        probs.append(-neg)
        if token not in stop_ids:
            push(child, len(tokens) - 1, level, -neg)
    return tuple(tokens), tuple(parents), tuple(probs)
