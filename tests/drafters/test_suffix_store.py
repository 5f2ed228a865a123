"""The compact suffix store: the reference trie's counts, matches and speculations, its
incremental cost, eviction that keeps the budget and reuses nodes, and its size in bytes.

The speculations are checked against an exhaustive oracle written out below: every match
length of every trie grown in full (the children of each node sorted, none skipped), the best
score winning and ties going to the later candidate."""

from __future__ import annotations

import heapq
import random
import tracemalloc
from collections import Counter
from collections.abc import Collection, Sequence
from typing import Any

import pytest

from specviz.drafters.suffix import speculate as suffix_speculate
from specviz.drafters.suffix.memory import SuffixMemory
from specviz.drafters.suffix.speculate import Speculation, speculate
from specviz.drafters.suffix.store import SuffixStore

from .suffix_oracle import Node, SuffixTrie


def _trie_counts(trie: SuffixTrie) -> dict[tuple[int, ...], int]:
    out: dict[tuple[int, ...], int] = {}
    stack = [((), trie.root)]
    while stack:
        path, node = stack.pop()
        for token, child in node.children.items():
            out[(*path, token)] = child.count
            stack.append(((*path, token), child))
    return out


def _brute_counts(sequences: Sequence[Sequence[int]], depth: int) -> Counter[tuple[int, ...]]:
    counts: Counter[tuple[int, ...]] = Counter()
    for seq in sequences:
        for i in range(len(seq)):
            for j in range(i + 1, min(len(seq), i + depth) + 1):
                counts[tuple(seq[i:j])] += 1
    return counts


def _rebuilt(sequences: Sequence[Sequence[int]], depth: int) -> SuffixStore:
    store = SuffixStore(max_depth=depth)
    for seq in sequences:
        store.add(seq)
    return store


# -- the oracle -------------------------------------------------------------------------------


def _children(node: Node) -> list[tuple[int, Node]]:
    return sorted(node.children.items(), key=lambda item: (-item[1].count, item[0]))


Grown = tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...]]


def _oracle_path(
    node: Node, limit: int, min_prob: float, vocab: int, stops: Collection[int]
) -> Grown:
    tokens: list[int] = []
    probs: list[float] = []
    prob = 1.0
    while len(tokens) < limit:
        ranked = [(t, c) for t, c in _children(node) if 0 <= t < vocab]
        if not ranked or node.count == 0:
            break
        token, child = ranked[0]
        prob *= child.count / node.count
        if prob < min_prob:
            break
        tokens.append(token)
        probs.append(prob)
        if token in stops:
            break
        node = child
    return tuple(tokens), tuple(range(-1, len(tokens) - 1)), tuple(probs)


def _oracle_tree(
    node: Node, limit: int, depth: int, min_prob: float, vocab: int, stops: Collection[int]
) -> Grown:
    tokens: list[int] = []
    parents: list[int] = []
    probs: list[float] = []
    heap: list[tuple[float, int, int, int, int, Node]] = []
    order = 0

    def push(parent_node: Node, parent: int, level: int, prob: float) -> None:
        nonlocal order
        if level >= depth or parent_node.count == 0:
            return
        for token, child in _children(parent_node):
            p = prob * child.count / parent_node.count
            if 0 <= token < vocab and p >= min_prob:
                heapq.heappush(heap, (-p, order, token, parent, level + 1, child))
                order += 1

    push(node, -1, 0, 1.0)
    while heap and len(tokens) < limit:
        neg, _, token, parent, level, child = heapq.heappop(heap)
        tokens.append(token)
        parents.append(parent)
        probs.append(-neg)
        if token not in stops:
            push(child, len(tokens) - 1, level, -neg)
    return tuple(tokens), tuple(parents), tuple(probs)


def _oracle(tries: Sequence[SuffixTrie], context: Sequence[int], **kw: Any) -> Speculation:
    best = Speculation()
    for trie in tries:
        for m in range(1, min(len(context), trie.max_depth - 1) + 1):
            node = trie.find(context[len(context) - m :])
            if node is None:
                break
            limit = min(kw["max_tokens"], int(m * kw["factor"] + 1e-9))
            if limit < 1:
                continue
            args = (kw["min_prob"], kw["vocab_size"], kw["stop_ids"])
            if kw["tree"]:
                cap = kw["max_depth"]
                depth = limit if cap is None else min(limit, cap)
                tokens, parents, probs = _oracle_tree(node, limit, depth, *args)
            else:
                tokens, parents, probs = _oracle_path(node, limit, *args)
            if tokens and sum(probs) >= best.score:
                best = Speculation(
                    tokens=tokens, parents=parents, probs=probs, score=sum(probs), match_len=m
                )
    return best


# -- counts and matches -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vocab", "depth", "seed"), [(2, 4, 0), (3, 6, 1), (5, 24, 2), (4, 2, 3), (1000, 8, 4)]
)
def test_counts_after_adds_and_evictions_equal_a_rebuild_and_the_reference(
    vocab: int, depth: int, seed: int
) -> None:
    rng = random.Random(seed)
    store, reference = SuffixStore(max_depth=depth), SuffixTrie(max_depth=depth)
    held: list[tuple[int, list[int]]] = []
    for key in range(60):
        seq = [rng.randrange(vocab) for _ in range(rng.randrange(1, 40))]
        store.add(seq)
        reference.append(key, seq)
        held.append((key, seq))
        while sum(len(s) for _, s in held) > 250:
            old_key, old = held.pop(0)
            assert store.evict() == tuple(old)
            reference.remove(old_key, old)
        sequences = [s for _, s in held]
        assert store.sequences() == tuple(tuple(s) for s in sequences)
        assert len(store) == sum(map(len, sequences))
        counts = store.counts()
        assert counts == _trie_counts(reference)
        assert counts == _rebuilt(sequences, depth).counts()
        assert store.nodes.live <= 2 * len(store) + 1  # path compression: <= 2 nodes a token
    assert counts == _brute_counts(sequences, depth)


def test_matches_are_those_of_the_reference_trie() -> None:
    rng = random.Random(7)
    store, reference = SuffixStore(max_depth=6), SuffixTrie(max_depth=6)
    for key in range(20):
        seq = [rng.randrange(4) for _ in range(30)]
        store.add(seq)
        reference.append(key, seq)
    for _ in range(200):
        context = [rng.randrange(5) for _ in range(rng.randrange(0, 9))]
        ours = [(m, place.count) for m, place in store.matches(context)]
        theirs = [(m, node.count) for m, node in reference.matches(context)]
        assert ours == theirs
    assert store.matches([9, 9]) == [] and store.find([9]) is None


# -- speculation ------------------------------------------------------------------------------


def _settings(rng: random.Random, vocab: int, tree: bool) -> dict[str, Any]:
    return {
        "max_tokens": rng.choice([1, 2, 4, 8, 16]),
        "factor": rng.choice([0.5, 1.0, 2.0, 4.0]),
        "min_prob": rng.choice([0.0, 0.05, 0.1, 0.3]),
        "vocab_size": vocab - rng.randrange(2),  # sometimes the largest token is cut
        "stop_ids": set(rng.sample(range(vocab), rng.randrange(0, 2))),
        "tree": tree,
        "max_depth": rng.choice([None, 1, 2, 4, 8]),
    }


@pytest.mark.parametrize(
    ("vocab", "depth", "seed"), [(2, 5, 0), (3, 24, 1), (5, 8, 2), (20, 24, 3), (300, 6, 4)]
)
def test_speculate_over_the_store_is_the_exhaustive_reference(
    vocab: int, depth: int, seed: int
) -> None:
    rng = random.Random(seed)
    store, reference = SuffixStore(max_depth=depth), SuffixTrie(max_depth=depth)
    local = SuffixTrie(max_depth=depth)  # a request's own trie beside the memory
    held: list[tuple[int, list[int]]] = []
    for key in range(25):
        seq = [rng.randrange(vocab) for _ in range(rng.randrange(1, 50))]
        store.add(seq)
        reference.append(key, seq)
        held.append((key, seq))
        while sum(len(s) for _, s in held) > 300:
            old_key, old = held.pop(0)
            store.evict()
            reference.remove(old_key, old)
        local.append(0, [rng.randrange(vocab) for _ in range(rng.randrange(0, 8))])
        for _ in range(8):
            source = rng.choice(held)[1]
            start = rng.randrange(len(source))
            noise = [rng.randrange(vocab) for _ in range(rng.randrange(0, 3))]
            context = noise + source[start : start + rng.randrange(1, 40)]
            for tree in (False, True):
                kw = _settings(rng, vocab, tree)
                assert speculate([store], context, **kw) == _oracle([reference], context, **kw)
                both = speculate([store, local], context, **kw)
                assert both == _oracle([reference, local], context, **kw)


def test_speculate_on_repeated_templates_is_the_exhaustive_reference() -> None:
    """Long, frequent matches with a little noise: many candidates of near-equal scores."""
    rng = random.Random(11)
    templates = [[rng.randrange(50) for _ in range(30)] for _ in range(4)]
    store, reference = SuffixStore(), SuffixTrie()
    for key in range(40):
        seq = [t if rng.random() > 0.05 else rng.randrange(50) for t in rng.choice(templates)]
        store.add(seq)
        reference.append(key, seq)
    for _ in range(150):
        template = rng.choice(templates)
        context = template[: rng.randrange(1, 30)]
        for tree in (False, True):
            kw = _settings(rng, 50, tree)
            assert speculate([store], context, **kw) == _oracle([reference], context, **kw)


def test_equal_scores_go_to_the_longest_match_as_in_the_reference() -> None:
    """A text seen once: every match has the same continuation, up to where the trie ends,
    so many lengths tie and the longest of them must win."""
    text = list(range(100, 124))  # 24 distinct tokens: the default depth
    store, reference = SuffixStore(), SuffixTrie()
    store.add(text)
    reference.append(0, text)
    common = {"min_prob": 0.1, "vocab_size": 200, "stop_ids": ()}
    found = speculate([store], text[:20], max_tokens=8, factor=1.0, **common)
    assert found.tokens == (120, 121, 122, 123) and found.match_len == 20
    for k in range(1, 24):
        for tree, factor, cap in ((False, 1.0, None), (False, 2.0, None), (True, 1.0, 4)):
            kw = dict(common, max_tokens=8, factor=factor, tree=tree, max_depth=cap)
            assert speculate([store], text[:k], **kw) == _oracle([reference], text[:k], **kw)


def test_matches_as_frequent_as_one_grown_before_are_read_off_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A text seen once: every match occurs once, so one chain is grown and the others (the
    longer matches, whose trie ends sooner) are its first tokens; the oracle agrees."""
    text = list(range(100, 124))
    store, reference = SuffixStore(), SuffixTrie()
    store.add(text)
    reference.append(0, text)
    grown: list[int] = []
    real = suffix_speculate.best_path

    def counted(*args: Any) -> Any:
        grown.append(1)
        return real(*args)

    monkeypatch.setattr(suffix_speculate, "best_path", counted)
    kw: dict[str, Any] = {"min_prob": 0.1, "vocab_size": 200, "stop_ids": (), "factor": 2.0}
    kw |= {"tree": False, "max_depth": None}
    for k in range(4, 20):
        grown.clear()
        found = speculate([store], text[:k], max_tokens=16, **kw)
        assert found == _oracle([reference], text[:k], max_tokens=16, **kw)
        assert len(grown) == 1, k


# -- cost, eviction, bytes --------------------------------------------------------------------


def test_updates_visit_at_most_depth_nodes_per_token() -> None:
    """Incremental cost: node visits grow with the tokens added or removed, not the store."""
    rng = random.Random(3)
    store = SuffixStore(max_depth=8)
    for _ in range(50):
        store.add([rng.randrange(6) for _ in range(200)])
    before = store.visits
    store.add([rng.randrange(6) for _ in range(40)])
    assert store.visits - before <= 40 * 8
    before = store.visits
    assert len(store.evict()) == 200
    assert store.visits - before <= 200 * 8


def test_eviction_keeps_the_budget_and_reuses_freed_nodes() -> None:
    rng = random.Random(5)
    memory = SuffixMemory(max_tokens=600, max_depth=8)
    for _ in range(50):
        memory.add([rng.randrange(30) for _ in range(rng.randrange(1, 120))])
    settled = memory.nbytes()
    for _ in range(400):
        memory.add([rng.randrange(30) for _ in range(rng.randrange(1, 120))])
        assert len(memory) <= 600
    nodes = memory.store.nodes
    assert nodes.slots <= 2 * 600 + 1  # ids are reused: never more than the most held at once
    assert memory.nbytes() <= 1.5 * settled  # 8x the budget went through; the arrays stayed
    kept = memory.requests
    assert memory.store.counts() == _rebuilt(kept, 8).counts()


def _templates_stream(n: int, seed: int) -> list[list[int]]:
    """Requests of about n tokens in all: three of 20 fixed 100-token templates each, 5 % of
    the tokens replaced at random (vocabulary 32000)."""
    rng = random.Random(seed)
    templates = [[rng.randrange(32000) for _ in range(100)] for _ in range(20)]
    out: list[list[int]] = []
    while sum(map(len, out)) < n:
        picks = [t for _ in range(3) for t in rng.choice(templates)]
        out.append([t if rng.random() >= 0.05 else rng.randrange(32000) for t in picks])
    return out


def test_a_repetitive_stream_costs_at_most_100_bytes_a_token() -> None:
    memory = SuffixMemory(max_tokens=200_000)
    for request in _templates_stream(200_000, seed=1):
        memory.add(request)
    assert len(memory) > 190_000
    assert memory.nbytes() <= 100 * len(memory)


def test_nbytes_is_what_the_allocator_holds() -> None:
    """nbytes() and tracemalloc's count of the memory's allocations agree within 10 %."""
    requests = _templates_stream(20_000, seed=2)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        memory = SuffixMemory(max_tokens=20_000)
        for request in requests:
            memory.add(request)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert 0.9 * held <= memory.nbytes() <= 1.1 * held


def test_positions_wrap_around_2_to_the_32() -> None:
    """Positions are kept modulo 2**32: a store whose text starts just below the wrap (as
    after 2**32 tokens went through) keeps the same counts."""
    rng = random.Random(9)
    store = SuffixStore(max_depth=5)
    store._base = (1 << 32) - 37  # as if that many tokens had been added and evicted before
    held: list[list[int]] = []
    for _ in range(40):
        seq = [rng.randrange(4) for _ in range(rng.randrange(1, 20))]
        store.add(seq)
        held.append(seq)
        while sum(map(len, held)) > 60:
            held.pop(0)
            store.evict()
        assert store.counts() == _brute_counts(held, 5)
    assert store._base < (1 << 32) - 37  # the wrap was crossed


def test_bad_input_says_what_to_change() -> None:
    with pytest.raises(ValueError, match="max_depth must be an integer >= 2"):
        SuffixStore(max_depth=1)
    store = SuffixStore()
    with pytest.raises(ValueError, match=r"token ids must be integers in \[0, 2\*\*32\)"):
        store.add([1, -1])
    with pytest.raises(ValueError, match="token ids must be integers"):
        store.add([1 << 32])
    with pytest.raises(IndexError, match="empty"):
        store.evict()
    with pytest.raises(ValueError, match="token ids must be integers"):
        SuffixMemory().add([3, 1 << 32])
    assert len(store) == 0 and store.sequences() == ()


def test_small_shallow_stores_grow_the_oracles_trees() -> None:
    """Many small stores of a few tokens: shallow tries where a short match's tree is wide, so
    a longer, as frequent match of a larger limit can take more nodes than it did."""
    for seed in range(1200):
        rng = random.Random(seed)
        depth, vocab = rng.choice([4, 5, 6]), rng.choice([3, 4, 6])
        store, reference = SuffixStore(max_depth=depth), SuffixTrie(max_depth=depth)
        for key in range(rng.randrange(1, 6)):
            seq = [rng.randrange(vocab) for _ in range(rng.randrange(2, 15))]
            store.add(seq)
            reference.append(key, seq)
        context = [rng.randrange(vocab) for _ in range(rng.randrange(1, 6))]
        kw: dict[str, Any] = {
            "max_tokens": rng.choice([4, 8, 16]),
            "factor": rng.choice([1.0, 2.0, 3.0]),
            "min_prob": 0.0,
            "vocab_size": vocab,
            "stop_ids": (),
            "tree": True,
            "max_depth": None,
        }
        assert speculate([store], context, **kw) == _oracle([reference], context, **kw), seed
