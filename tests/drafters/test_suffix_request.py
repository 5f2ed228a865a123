"""The request's flat suffix trie: the reference trie's counts, matches, rankings and
speculations, its incremental cost, its refusals, and that it gives the garbage collector
nothing to walk (a negative control shows the measurement catches a trie of node objects)."""

from __future__ import annotations

import gc
import random
import types
from collections.abc import Callable
from typing import Any

import pytest

from specviz.drafters.suffix import speculate as suffix_speculate
from specviz.drafters.suffix.drafter import SuffixConfig, SuffixTries
from specviz.drafters.suffix.request import RequestTrie
from specviz.drafters.suffix.speculate import speculate
from specviz.drafters.suffix.store import SuffixStore

from .suffix_oracle import SuffixTrie
from .test_suffix_store import _oracle, _settings, _trie_counts


def _grown(vocab: int, depth: int, seed: int) -> tuple[RequestTrie, SuffixTrie, list[int]]:
    """The same random text appended to both tries, in chunks of random sizes."""
    rng = random.Random(seed)
    ours, reference, text = RequestTrie(max_depth=depth), SuffixTrie(max_depth=depth), []
    for _ in range(30):
        chunk = [rng.randrange(vocab) for _ in range(rng.randrange(0, 12))]
        ours.append(chunk)
        reference.append(0, chunk)
        text += chunk
        assert ours.counts() == _trie_counts(reference)
        assert len(ours) == len(text)
        for m in range(depth + 2):  # the text's own suffixes: found without a walk
            mine, theirs = ours.find(text[len(text) - m :]), reference.find(text[len(text) - m :])
            assert (mine and mine.count) == (theirs and theirs.count)
            if mine and theirs:
                assert [t for t, _ in mine.ranked()] == [t for t, _ in theirs.ranked()]
                if m < depth:  # below max_depth every follower is held: no fewer than ours
                    assert mine.followed == theirs.followed  # count - 1: nothing follows the end
    return ours, reference, text


@pytest.mark.parametrize(("vocab", "depth", "seed"), [(2, 2, 0), (3, 5, 1), (7, 24, 2)])
def test_counts_matches_and_rankings_are_those_of_the_reference(
    vocab: int, depth: int, seed: int
) -> None:
    ours, reference, text = _grown(vocab, depth, seed)
    rng = random.Random(seed + 100)
    keeps: list[Callable[[int], bool] | None] = [None, lambda c: c >= 2, lambda c: c >= 5]
    for _ in range(100):
        context = [rng.randrange(vocab + 1) for _ in range(rng.randrange(0, depth + 3))]
        for m in range(len(context) + 1):  # every suffix of the context: a match or none
            node = ours.find(context[len(context) - m :])
            ref = reference.find(context[len(context) - m :])
            assert (node is None) == (ref is None)
            if node is None or ref is None:
                continue
            assert node.count == ref.count
            assert node.followed == ref.followed or m == depth  # (there: ref holds none)
            for keep in keeps:
                assert [(t, c.count) for t, c in node.ranked(keep)] == [
                    (t, c.count) for t, c in ref.ranked(keep)
                ]
    assert ours.find([vocab]) is None and ours.find([-1]) is None and ours.find([1 << 32]) is None
    assert ours.find([]) is not None and ours.find([]).count == len(text)  # type: ignore[union-attr]


@pytest.mark.parametrize(("vocab", "depth", "seed"), [(3, 6, 3), (20, 24, 4)])
def test_speculations_beside_the_memory_are_those_of_the_reference(
    vocab: int, depth: int, seed: int
) -> None:
    """speculate over (memory, request) is the same with either form of the request's trie
    (the reference form is checked against an exhaustive oracle in test_suffix_store)."""
    ours, reference, text = _grown(vocab, depth, seed)
    rng = random.Random(seed + 200)
    store = SuffixStore(max_depth=depth)
    for _ in range(5):
        store.add([rng.randrange(vocab) for _ in range(40)])
    for _ in range(60):
        start = rng.randrange(len(text))
        context = text[start : start + rng.randrange(1, 30)]
        for tree in (False, True):
            kw: dict[str, Any] = {
                "max_tokens": rng.choice([1, 4, 16]),
                "factor": rng.choice([0.5, 1.0, 4.0]),
                "min_prob": rng.choice([0.0, 0.1, 0.3]),
                "vocab_size": vocab,
                "stop_ids": set(rng.sample(range(vocab), rng.randrange(0, 2))),
                "tree": tree,
                "max_depth": rng.choice([None, 2, 8]),
            }
            assert speculate([store, ours], context, **kw) == speculate(
                [store, reference], context, **kw
            )


@pytest.mark.parametrize(("vocab", "depth", "seed"), [(2, 6, 5), (4, 24, 6), (30, 24, 7)])
def test_speculations_from_the_texts_own_end_are_the_exhaustive_reference(
    vocab: int, depth: int, seed: int
) -> None:
    """As a drafter reads it (followed: a string found only as the text's own end is left
    out), the trie gives the oracle's speculations after the text so far, beside a memory."""
    rng = random.Random(seed)
    store, memory = SuffixStore(max_depth=depth), SuffixTrie(max_depth=depth)
    templates = [[rng.randrange(vocab) for _ in range(20)] for _ in range(3)]
    for key in range(6):
        seq = [t if rng.random() > 0.1 else rng.randrange(vocab) for t in rng.choice(templates)]
        store.add(seq)
        memory.append(key, seq)
    ours, reference, text, left_out = (
        RequestTrie(max_depth=depth),
        SuffixTrie(max_depth=depth),
        [],
        0,
    )
    for _ in range(40):
        source = rng.choice([*templates, text[-30:]])
        chunk = source[: rng.randrange(1, 8)] + [rng.randrange(vocab)] * rng.randrange(0, 2)
        ours.append(chunk)
        reference.append(0, chunk)
        text += chunk
        left_out += ours.followed().find(text[-1:]) is None
        for tree in (False, True):
            kw = _settings(rng, vocab, tree)
            assert speculate([ours.followed()], text, **kw) == _oracle([reference], text, **kw)
            both = speculate([store, ours.followed()], text, **kw)
            assert both == _oracle([memory, reference], text, **kw)
    assert left_out  # the end was left out at times: the test reaches that case


def test_followed_finds_what_the_trie_finds_but_the_texts_own_end() -> None:
    trie = RequestTrie(max_depth=4)
    trie.append([1, 2, 3, 1, 2])
    view = trie.followed()
    assert view.find([1, 2]) is not None and view.find([1, 2]).count == 2  # also at the start
    assert view.find([3, 1, 2]) is None  # only as the end: nothing follows it
    assert trie.find([3, 1, 2]) is not None and trie.find([3, 1, 2]).count == 1
    assert view.find([2, 3]) is not None and view.find([9]) is None and view.max_depth == 4


@pytest.mark.parametrize("tree", [False, True])
def test_a_text_repeating_itself_once_grows_one_speculation_a_round(
    monkeypatch: pytest.MonkeyPatch, tree: bool
) -> None:
    """A text that repeats its own start: each match occurs twice, once as the text's own end,
    which nothing follows, so no level of a speculation holds more than 1/2. The first grown,
    of the longest reach, scores half of it, and the longer matches (reaching less, as the
    trie ends below them) cannot pass it: they are not grown. The oracle agrees."""
    start = list(range(100, 140))
    grown: list[int] = []
    name = "best_tree" if tree else "best_path"
    real = getattr(suffix_speculate, name)

    def counted(*args: Any) -> Any:
        grown.append(1)
        return real(*args)

    monkeypatch.setattr(suffix_speculate, name, counted)
    kw: dict[str, Any] = {"min_prob": 0.1, "vocab_size": 200, "stop_ids": (), "factor": 2.0}
    kw |= {"tree": tree, "max_depth": 16 if tree else None, "max_tokens": 16}
    for k in range(8, 20):
        text = [*start, 7, *start[:k]]
        ours, reference = RequestTrie(), SuffixTrie()
        ours.append(text)
        reference.append(0, text)
        grown.clear()
        found = speculate([ours.followed()], text, **kw)
        assert found == _oracle([reference], text, **kw)
        assert found.score == 8.0 and len(grown) == 1, k  # 16 tokens of probability 1/2


def test_an_append_visits_at_most_depth_nodes_per_token() -> None:
    trie, rng = RequestTrie(max_depth=8), random.Random(5)
    for _ in range(20):
        before = trie.visits
        chunk = [rng.randrange(3) for _ in range(rng.randrange(1, 50))]
        trie.append(chunk)
        assert trie.visits - before <= 8 * len(chunk)


def test_bad_depths_and_token_ids_are_refused() -> None:
    for depth in (1, 2.5, True):
        with pytest.raises(ValueError, match="max_depth"):
            RequestTrie(max_depth=depth)  # type: ignore[arg-type]
    trie = RequestTrie()
    for bad in ([-1], [1 << 32]):
        with pytest.raises(ValueError, match="token ids"):
            trie.append(bad)
    assert len(trie) == 0 and trie.counts() == {}


def _tracked_after(build: Callable[[list[int]], object], tokens: list[int]) -> int:
    """How many objects the garbage collector tracks inside what build(tokens) returns: the
    tracked objects reachable from it, as a collection walks them. Classes, modules,
    functions and code are shared by everything and not walked into. Counting what is
    reachable, not every object alive, keeps the measure free of whatever else the
    process happens to allocate meanwhile (caches, the test runner's threads)."""
    shared = (type, types.ModuleType, types.FunctionType, types.CodeType, types.BuiltinFunctionType)
    held = build(tokens)
    seen: set[int] = {id(held)}
    stack: list[object] = [held]
    count = 0
    while stack:
        obj = stack.pop()
        count += gc.is_tracked(obj)
        for ref in gc.get_referents(obj):
            if id(ref) not in seen and not isinstance(ref, shared):
                seen.add(id(ref))
                stack.append(ref)
    return count


def test_the_trie_gives_the_garbage_collector_nothing_to_walk() -> None:
    """A 4,000-token prompt of little repetition: about 24 new substrings per token. The
    flat trie adds a few tracked objects (itself and its list of open suffixes), however
    long the text; the reference trie of node objects,
    the negative control, adds two per substring, so the measure cannot pass it."""
    rng = random.Random(9)
    tokens = [rng.randrange(5000) for _ in range(4000)]

    def flat(ids: list[int]) -> object:
        trie = RequestTrie()
        trie.append(ids)
        return trie

    def nodes(ids: list[int]) -> object:
        trie = SuffixTrie()
        trie.append(0, ids)
        return trie

    def drafter_side(ids: list[int]) -> object:
        tries = SuffixTries(5000, None, SuffixConfig())
        tries.prefill(ids)
        return tries

    assert _tracked_after(flat, tokens) <= 10
    assert _tracked_after(nodes, tokens) >= 2 * 20 * len(tokens)
    assert _tracked_after(drafter_side, tokens) <= 40  # the drafter's tries and their memory
