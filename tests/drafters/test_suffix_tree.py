"""The suffix trie and the suffix memory: counts, matches, speculation, eviction, files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from specviz.drafters.suffix.memory import SuffixMemory
from specviz.drafters.suffix.speculate import speculate

from .suffix_oracle import SuffixTrie


def _substring_counts(sequences: list[list[int]], depth: int) -> Counter[tuple[int, ...]]:
    """How often each substring of up to depth tokens occurs, by brute force."""
    counts: Counter[tuple[int, ...]] = Counter()
    for seq in sequences:
        for i in range(len(seq)):
            for j in range(i + 1, min(len(seq), i + depth) + 1):
                counts[tuple(seq[i:j])] += 1
    return counts


def _trie_counts(trie: SuffixTrie) -> Counter[tuple[int, ...]]:
    out: Counter[tuple[int, ...]] = Counter()
    stack = [((), trie.root)]
    while stack:
        path, node = stack.pop()
        for token, child in node.children.items():
            out[(*path, token)] = child.count
            stack.append(((*path, token), child))
    return out


def test_counts_are_substring_occurrences_up_to_the_depth() -> None:
    seqs = [[1, 2, 3, 1, 2, 4], [2, 3, 1, 2, 3]]
    trie = SuffixTrie(max_depth=3)
    trie.append("a", seqs[0][:2])
    trie.append("b", seqs[1])
    trie.append("a", seqs[0][2:])  # incremental: the same as appending it whole
    assert _trie_counts(trie) == _substring_counts(seqs, 3)
    assert trie.root.count == 11
    node = trie.find([1, 2])
    assert node is not None and node.count == 3
    assert {t: c.count for t, c in node.children.items()} == {3: 2, 4: 1}
    assert trie.find([3, 3]) is None


def test_matches_are_the_suffixes_that_occur_shortest_first() -> None:
    trie = SuffixTrie(max_depth=4)
    trie.append(0, [5, 1, 2, 3, 9])
    assert [m for m, _ in trie.matches([7, 1, 2])] == [1, 2]  # (2), (1, 2); not (7, 1, 2)
    assert [m for m, _ in trie.matches([5, 1, 2, 3])] == [1, 2, 3]  # below max_depth only
    assert trie.matches([8]) == []


def test_an_update_visits_at_most_depth_nodes_per_new_token() -> None:
    """Incremental cost: node visits grow with the new tokens, not with what is stored."""
    trie = SuffixTrie(max_depth=8)
    trie.append(0, list(range(1000)))  # a long history
    before = trie.visits
    trie.append(1, [3, 4, 5, 6, 7])
    assert trie.visits - before <= 5 * 8
    before = trie.visits
    trie.append(0, [1, 2])  # extending a long sequence costs the same
    assert trie.visits - before <= 2 * 8


def test_remove_undoes_append() -> None:
    trie = SuffixTrie(max_depth=3)
    trie.append("a", [1, 2, 1, 2, 1])
    trie.append("b", [2, 1, 3])
    trie.remove("a", [1, 2, 1, 2, 1])
    assert _trie_counts(trie) == _substring_counts([[2, 1, 3]], 3)
    assert trie.root.count == 3


def test_speculation_follows_the_most_frequent_path_and_its_bounds() -> None:
    trie = SuffixTrie(max_depth=8)
    for seq in ([1, 2, 3, 4, 5], [1, 2, 3, 4, 6], [1, 2, 3, 7, 8]):
        trie.append(object(), seq)
    common = dict(min_prob=0.0, vocab_size=10, stop_ids=())
    found = speculate([trie], [1, 2], max_tokens=8, factor=2.0, **common)
    # (1, 2) matched: at most 2 * 2 tokens; 3 always, then 4 (2 of 3), then 5 (tie: smaller id)
    assert found.tokens == (3, 4, 5) and found.match_len == 2
    assert found.probs == pytest.approx((1.0, 2 / 3, 1 / 3))
    assert found.score == pytest.approx(2.0)
    assert speculate([trie], [1, 2], max_tokens=8, factor=1.0, **common).tokens == (3, 4)
    assert speculate([trie], [1, 2], max_tokens=1, factor=4.0, **common).tokens == (3,)
    strict = dict(common, min_prob=0.5)
    assert speculate([trie], [1, 2], max_tokens=8, factor=4.0, **strict).tokens == (3, 4)
    stop = dict(common, stop_ids={4})
    assert speculate([trie], [1, 2], max_tokens=8, factor=4.0, **stop).tokens == (3, 4)
    small = dict(common, vocab_size=4)  # tokens >= 4 are never proposed
    assert speculate([trie], [1, 2], max_tokens=8, factor=4.0, **small).tokens == (3,)
    assert speculate([trie], [9], max_tokens=8, factor=4.0, **common).tokens == ()


def test_tree_speculation_is_best_first_with_parents_before_children() -> None:
    trie = SuffixTrie(max_depth=8)
    for seq in ([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 6, 7]):
        trie.append(object(), seq)
    found = speculate(
        [trie], [1, 2], max_tokens=4, factor=4.0, min_prob=0.0, vocab_size=10, stop_ids=(),
        tree=True, max_depth=3,
    )  # fmt: skip
    # 3 (3/4), 4 (3/4 * 2/3), then 6 and 5 (1/4 each: the one found first, 6, first)
    assert found.tokens == (3, 4, 6, 5) and found.parents == (-1, 0, -1, 0)
    assert found.probs == pytest.approx((0.75, 0.5, 0.25, 0.25))
    shallow = speculate(
        [trie], [1, 2], max_tokens=4, factor=4.0, min_prob=0.0, vocab_size=10, stop_ids=(),
        tree=True, max_depth=1,
    )  # fmt: skip
    assert shallow.tokens == (3, 6) and shallow.parents == (-1, -1)


def test_memory_evicts_the_oldest_requests_to_stay_in_its_budget() -> None:
    memory = SuffixMemory(max_tokens=10, max_depth=4)
    memory.add([1, 2, 3, 4])
    memory.add([5, 6, 7])
    memory.add([8, 9, 1])  # 10 tokens: all fit
    assert len(memory) == 10 and len(memory.requests) == 3
    memory.add([2, 2])  # over budget: the oldest goes
    assert memory.requests == ((5, 6, 7), (8, 9, 1), (2, 2))
    assert len(memory) == 8
    assert memory.store.counts() == _substring_counts([list(r) for r in memory.requests], 4)
    memory.add(list(range(20, 35)))  # longer than the budget: its last 10 tokens alone
    assert memory.requests == (tuple(range(25, 35)),)
    assert memory.store.counts() == _substring_counts([list(range(25, 35))], 4)


def test_memory_remembers_outputs_and_prompts_only_when_asked() -> None:
    outputs, both = SuffixMemory(), SuffixMemory(prompts=True)
    for memory in (outputs, both):
        memory.add_request([1, 2, 3, 4, 5], prompt_len=3)
    assert outputs.requests == ((4, 5),) and both.requests == ((1, 2, 3, 4, 5),)
    with pytest.raises(ValueError, match="prompt_len must be in"):
        outputs.add_request([1, 2], prompt_len=3)
    with pytest.raises(ValueError, match="max_tokens must be an integer >= 1"):
        SuffixMemory(max_tokens=0)
    with pytest.raises(ValueError, match="max_depth must be an integer >= 2"):
        SuffixMemory(max_depth=1)


def test_memory_save_and_load_round_trip(tmp_path: Path) -> None:
    memory = SuffixMemory(max_tokens=50, max_depth=5, prompts=True)
    for seq in ([1, 2, 3], [4, 1, 2, 3, 5], [7]):
        memory.add(seq)
    memory.shares["model:trimmed"] = (3, 8)
    path = tmp_path / "memory.json"
    memory.save(path)
    loaded = SuffixMemory.load(path)
    assert loaded.requests == memory.requests
    assert (loaded.max_tokens, loaded.max_depth, loaded.prompts) == (50, 5, True)
    assert loaded.store.counts() == memory.store.counts()
    assert loaded.shares == {"model:trimmed": (3, 8)}
    assert json.loads(path.read_text())["format"] == "specviz-suffix-memory"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "is not JSON"),
        ('{"requests": []}', "is not a suffix memory"),
        ('{"format": "specviz-suffix-memory", "version": 9, "requests": []}', "version 9"),
        ('{"format": "specviz-suffix-memory", "version": 1, "requests": [[1, -2]]}', "token ids"),
        ('{"format": "specviz-suffix-memory", "version": 1, "requests": [["a"]]}', "token ids"),
        (
            '{"format": "specviz-suffix-memory", "version": 1, "max_tokens": 0, "requests": []}',
            "max_tokens must be",
        ),
        (
            '{"format": "specviz-suffix-memory", "version": 1, "requests": [], '
            '"shares": {"model": [3, 2]}}',
            "0 <= kept <= drafted",
        ),
        (
            '{"format": "specviz-suffix-memory", "version": 1, "requests": [], "shares": [1, 2]}',
            '"shares" must map drafter names',
        ),
    ],
)
def test_a_bad_memory_file_says_what_is_wrong(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        SuffixMemory.load(path)
    with pytest.raises(ValueError, match="cannot read it"):
        SuffixMemory.load(tmp_path / "missing.json")
