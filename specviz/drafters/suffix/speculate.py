"""Speculations from counted suffix tries: the likeliest continuations of the context's matches.

A speculation starts where the last m tokens of a context end in a trie (its match, m from 1
up to the longest that occurs, below the trie's max_depth) and follows the likeliest
continuations: the probability of a child is count(child) / count(parent) times its parent's,
and a node is kept while that product is at least min_prob. Its score is the sum of the kept
probabilities (the expected number of accepted tokens, were the frequencies the target's law).
A match of m tokens allows at most floor(factor * m) tokens (its limit, capped by max_tokens).

Each (trie, m) is a candidate, ordered by trie (as given), then by m; the best score wins,
and of equal scores the last candidate in that order. The answer is that of growing every
candidate, but fewer are grown: a candidate is skipped when an upper bound on its score shows
it cannot win. A speculation scores at most its number of levels: a chain's probabilities
are at most 1, and the probabilities of a tree's nodes at one level sum to at most 1 (children's
counts sum to at most their parent's). So a chain or a tree scores at most its reach (below);
a tree's float sum may pass it by rounding, so its bound adds ROUNDING.
Candidates are tried by decreasing bound. Before one is grown, a second bound is checked: no
level holds more probability than the share of the match's occurrences a token follows
(TrieNode.followed over its count; at a level d, only occurrences followed by d tokens count),
so a speculation scores at most its reach times that share (plus ROUNDING, for the float sums
of probabilities below 1). A match in the request's own text always has one occurrence
nothing follows, its own end: a string seen once before has a share of 1/2 there.
A candidate is also skipped when a longer match of the same trie with the same count was grown
before it: equal counts mean the two matches end at the same places in the text, so they have
the same continuations (down to where the trie ends below the longer one), and the shorter
match's speculation is a prefix of the longer one's, or empty like it, and loses the tie.
It is a prefix when it reaches no deeper: a chain stops at the same tokens; a tree of the same
reach is taken in the same order (the order does not depend on the limit), so one of a smaller
limit is the first nodes of the other. Reach: the levels below the match a speculation can
fill, its depth or fewer where the trie ends.
The other way round, a longer chain as frequent as a shorter one grown before it is that one's
first tokens, as many as its reach allows (_cut): it is read off, not grown. A longer tree is the
shorter one's tree when both have the same limit and that tree took no node below the longer
match's reach (_same_tree).

Pure Python, no torch; tries are read through the small Trie and TrieNode protocols, which
specviz.drafters.suffix.store.SuffixStore, specviz.drafters.suffix.request.RequestTrie and the
plain trie the tests check them against (tests/drafters/suffix_oracle.py) follow.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from specviz.drafters.suffix.trie import Trie, TrieNode


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

Grown = tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...]]


Candidate = tuple[float, int, int, int, int, int]
"""Growing from a match: (bound, reach, trie, m, limit, depth). The match of m tokens in trie
number `trie` grows at most limit tokens, no deeper than depth; reach: the levels it can fill
(depth, or fewer where the trie ends); bound: at most this score (its reach, plus ROUNDING for
a tree). Plain tuples, so that sorting them orders by bound, then reach, then latest first."""

ROUNDING = 1e-9
"""More than the rounding error of a tree's score: at most a few hundred probabilities, each
at most 1, summed in float64."""


class Grew(NamedTuple):
    """A candidate grown: its match length, limit and reach, whether it came up empty, and
    what it grew (a named tuple, like Candidate: a round records dozens)."""

    m: int
    limit: int
    reach: int
    empty: bool
    grown: Grown


class Matches:
    """A trie's matches of a context's suffixes: the longest (the longest possible tried
    first, then found by bisection, since a suffix of an occurring string occurs too), and the
    others' nodes and counts on demand.

    Counts do not grow with m (a longer match occurs only where its suffixes do), so where
    two lengths have the same count every length between them has it too; a count is
    looked up by bisecting between the nearest lengths already known.
    """

    def __init__(self, trie: Trie, context: Sequence[int]) -> None:
        """Find the longest m (< trie.max_depth) whose last m tokens of context occur."""
        self.trie, self.context = trie, context
        self.found: dict[int, TrieNode] = {}
        self.counts: dict[int, int] = {}
        self.known: list[int] = []  # the lengths in counts, ascending
        low, high = 0, min(len(context), trie.max_depth - 1)
        if high and self._look(high):  # text seen before often matches as far as it can
            low = high
        high -= 1
        while low < high:
            mid = (low + high + 1) // 2
            if self._look(mid):
                low = mid
            else:
                high = mid - 1
        self.longest = low  # 0: nothing matches

    def _look(self, m: int) -> bool:
        """Find the last m tokens (m >= 1); whether they occur."""
        node = self.trie.find(self.context[len(self.context) - m :])
        if node is not None:
            self.found[m] = node
            if m not in self.counts:
                self._know(m, node.count)
        return node is not None

    def _know(self, m: int, count: int) -> None:
        """Record the count of the last m tokens."""
        self.counts[m] = count
        bisect.insort(self.known, m)

    def node(self, m: int) -> TrieNode:
        """The node of the last m tokens (1 <= m <= longest)."""
        if m not in self.found:
            self._look(m)
        return self.found[m]

    def count(self, m: int) -> int:
        """How often the last m tokens occur (1 <= m <= longest)."""
        counts, known = self.counts, self.known
        while m not in counts:
            at = bisect.bisect_left(known, m)  # known[at] > m: the longest is known
            below, above = known[at - 1] if at else 0, known[at]
            if below and counts[below] == counts[above]:
                self._know(m, counts[above])
            else:
                self._look((below + above) // 2 if below + 1 < m else m)
        return counts[m]


def speculate(
    tries: Iterable[Trie],
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

    tree: a best-first tree of up to limit nodes, no deeper than max_depth, else the likeliest
    path. Tokens >= vocab_size are never proposed and nothing follows a stop token.
    """
    tries = list(tries)
    found = [Matches(trie, context) for trie in tries]
    plan = candidates(tries, [f.longest for f in found], max_tokens, factor, tree, max_depth)
    best, best_score, best_at = EMPTY, -1.0, (-1, -1)  # any speculation beats none
    grown: dict[tuple[int, int], list[Grew]] = {}  # by (trie, count of the match)
    for bound, reach, t, m, limit, depth in plan:
        if bound < best_score:
            break  # the rest are bounded lower still
        if bound == best_score and (t, m) < best_at:
            continue  # at best a tie, which the later candidate wins
        count = found[t].count(m)
        same = grown.setdefault((t, count), [])
        if same and any(_covers(before, m, limit, reach, tree) for before in same):
            continue
        read = _same_tree(same, m, limit, reach) if tree else _cut(same, m, reach)
        if read is None:  # to be grown, unless the share bound says it cannot win
            node = found[t].node(m)
            most = reach * node.followed / count + ROUNDING  # see the module's docstring
            if most < best_score or (most == best_score and (t, m) < best_at):
                continue
            read = (best_tree if tree else best_path)(
                node, limit, depth, min_prob, vocab_size, stop_ids
            )
        tokens, parents, probs = read
        same.append(Grew(m, limit, reach, not tokens, (tokens, parents, probs)))
        score = sum(probs)
        if tokens and _beats(score, (t, m), best_score, best_at):
            best, best_score, best_at = (
                Speculation(tokens=tokens, parents=parents, probs=probs, score=score, match_len=m),
                score,
                (t, m),
            )
    return best


def candidates(
    tries: Sequence[Trie],
    longest: Sequence[int],
    max_tokens: int,
    factor: float,
    tree: bool,
    max_depth: int | None,
) -> list[Candidate]:
    """Every (trie, m <= its longest match) allowing a token, by decreasing bound, then
    reach (the likelier to score high first), then latest first."""
    out = []
    cap = max_depth if tree and max_depth is not None else max_tokens
    for t, (trie, top) in enumerate(zip(tries, longest, strict=True)):
        below = trie.max_depth
        for m in range(1, top + 1):
            limit = int(m * factor + 1e-9)
            if limit < 1:
                continue
            limit = limit if limit < max_tokens else max_tokens
            depth = limit if limit < cap else cap
            reach = depth if depth < below - m else below - m
            out.append((reach + ROUNDING if tree else reach, reach, t, m, limit, depth))
    return sorted(out, reverse=True)


def _beats(score: float, at: tuple[int, int], best: float, best_at: tuple[int, int]) -> bool:
    """Whether score at (trie, m) would win over the best so far (ties: the later one)."""
    return score > best or (score == best and at > best_at)


def _covers(before: Grew, m: int, limit: int, reach: int, tree: bool) -> bool:
    """Whether a match of m tokens, as frequent as before's (same trie), can only give
    before's speculation or a prefix of it, and lose the tie to it."""
    if before.m <= m:
        return False
    if before.empty:
        return True
    if tree:
        return before.reach == reach and before.limit >= limit
    return before.reach >= reach


def _cut(same: Sequence[Grew], m: int, reach: int) -> Grown | None:
    """The chain of a match of m tokens read off a shorter match's chain, as frequent (same
    trie), grown before it; None when there is none.

    Equal counts mean the same continuations, down to where the trie ends below the longer
    match (its reach), so the longer match's chain is the shorter one's first tokens, at most
    reach of them. The shorter one holds them all: it was grown first, so its reach is at least
    this one's (candidates come by decreasing reach), and its chain stops short of its reach
    only where the continuations stop it, as they stop this one.
    """
    for before in same:
        if before.m < m:
            tokens, _, probs = before.grown
            k = min(len(tokens), reach)
            return tokens[:k], tuple(range(-1, k - 1)), probs[:k]
    return None


def _same_tree(same: Sequence[Grew], m: int, limit: int, reach: int) -> Grown | None:
    """The tree of a match of m tokens where a shorter match's tree, as frequent (same trie),
    grown before it with the same limit, is it; None when there is none.

    Below both matches the continuations are the same down to the longer one's reach (as for
    _cut). A best-first tree of the same limit that took no node deeper than that reach is
    taken in the same order from either: the nodes it passed over deeper down never came first.
    """
    for before in same:
        if before.m < m and before.limit == limit:
            parents = before.grown[1]
            depths: list[int] = []
            for parent in parents:
                depths.append(depths[parent] + 1 if parent >= 0 else 1)
            if not depths or max(depths) <= reach:
                return before.grown
    return None


def _step_keeps(prob: float, total: int, min_prob: float) -> Callable[[int], bool]:
    """Whether a chain's next token of count (under a node of count total, reached with
    probability prob) keeps the chain's probability >= min_prob."""
    return lambda count: prob * (count / total) >= min_prob


def _branch_keeps(prob: float, total: int, min_prob: float) -> Callable[[int], bool]:
    """Whether a tree's child of count (under a node of count total and probability prob)
    has probability >= min_prob."""
    return lambda count: prob * count / total >= min_prob


def best_path(
    node: TrieNode,
    limit: int,
    _depth: int,
    min_prob: float,
    vocab_size: int,
    stop_ids: Collection[int],
) -> Grown:
    """Up to limit tokens following the most frequent child at each step (a chain): the
    first child below vocab_size, kept while the product of count ratios is >= min_prob."""
    tokens: list[int] = []
    probs: list[float] = []
    prob = 1.0
    while len(tokens) < limit and node.count > 0:
        total = node.count
        step = None
        for extension in node.ranked(_step_keeps(prob, total, min_prob)):
            if 0 <= extension[0] < vocab_size:
                step = extension
                break
        if step is None:  # no child, or the first below vocab_size is too rare
            break
        token, child = step
        prob *= child.count / total
        tokens.append(token)
        probs.append(prob)
        if token in stop_ids:
            break
        node = child
    return tuple(tokens), tuple(range(-1, len(tokens) - 1)), tuple(probs)


def best_tree(
    node: TrieNode,
    limit: int,
    depth: int,
    min_prob: float,
    vocab_size: int,
    stop_ids: Collection[int],
) -> Grown:
    """Up to limit nodes, likeliest first (so each parent comes before its children and
    siblings come in decreasing frequency), no deeper than depth.

    A parent offers its children below vocab_size whose probability is >= min_prob, most
    frequent first, and no more of them than nodes are still to be taken: a sibling ranked
    past that many could only be taken after all of those before it.
    """
    tokens: list[int] = []
    parents: list[int] = []
    probs: list[float] = []
    order = 0  # ties keep the order pushed: deterministic
    heap: list[tuple[float, int, int, int, int, TrieNode]] = []

    def push(parent_node: TrieNode, parent: int, level: int, prob: float) -> None:
        nonlocal order
        total = parent_node.count
        if level >= depth or total == 0:
            return
        room = limit - len(tokens)
        for token, child in parent_node.ranked(_branch_keeps(prob, total, min_prob)):
            if room == 0:
                break
            if 0 <= token < vocab_size:
                p = prob * child.count / total
                heapq.heappush(heap, (-p, order, token, parent, level + 1, child))
                order += 1
                room -= 1

    push(node, -1, 0, 1.0)
    while heap and len(tokens) < limit:
        neg, _, token, parent, level, child = heapq.heappop(heap)
        tokens.append(token)
        parents.append(parent)
        probs.append(-neg)
        if token not in stop_ids:
            push(child, len(tokens) - 1, level, -neg)
    return tuple(tokens), tuple(parents), tuple(probs)
