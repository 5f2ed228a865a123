"""N-gram lookup as a tree: each distinct earlier continuation of the last n tokens a branch.

Deterministic (no sampling), so the tree is verified by the deterministic rule: a child x is
kept with the working p(x) and, if rejected, x is removed from p before its next sibling is
tried. The q rows record how often each branch followed the n-gram (shown, not used), in a
buffer the drafter reuses (specviz.drafters.sparse_q).
"""

from __future__ import annotations

from collections.abc import Collection

import torch

from specviz.drafters.ngram import check_ngram_sizes
from specviz.drafters.sparse_q import SparseRows
from specviz.tree.proposal import TokenTree


class TreeNgramDrafter:
    """Prompt lookup with branches: the latest continuations of the longest matching n-gram."""

    def __init__(
        self, vocab_size: int, *, nodes: int, depth: int, max_ngram: int = 3, min_ngram: int = 1
    ) -> None:
        """At most `nodes` nodes and `depth` levels; n-grams from max_ngram down to min_ngram."""
        check_ngram_sizes(min_ngram, max_ngram)
        self.vocab_size, self.nodes, self.depth = vocab_size, nodes, depth
        self.max_ngram, self.min_ngram = max_ngram, min_ngram
        self.q = SparseRows(vocab_size, torch.device("cpu"))

    def prefill(self, prefix: list[int]) -> None:
        """Nothing to precompute."""

    def rollback(self, committed: int) -> None:
        """Nothing to roll back (the q buffer is rewritten each round)."""

    def propose_tree(
        self, ids: list[int], max_depth: int, generator: torch.Generator, stop_ids: Collection[int]
    ) -> TokenTree:
        """A trie of the continuations (latest first) that followed ids' last n-gram."""
        tokens: list[int] = []
        parents: list[int] = []
        counts: dict[int, dict[int, int]] = {}  # node -> child token -> continuations through it
        child_of: dict[tuple[int, int], int] = {}
        for continuation in continuations(ids, max_depth, self.max_ngram, self.min_ngram):
            node = -1
            for token in continuation:
                if (node, token) not in child_of:
                    if len(tokens) == self.nodes:
                        break
                    child_of[node, token] = len(tokens)
                    tokens.append(token)
                    parents.append(node)
                seen = counts.setdefault(node, {})
                seen[token] = seen.get(token, 0) + 1
                node = child_of[node, token]
                if token in stop_ids:
                    break
        rows, cols, values = [], [], []
        for node, seen in counts.items():
            total = sum(seen.values())
            for token, count in seen.items():
                rows.append(node + 1)
                cols.append(token)
                values.append(count / total)
        chain, q_draft = self.q.tree(tokens, rows, cols, values)
        return TokenTree(
            tokens=chain,  # (N,)
            parents=tuple(parents),
            q_draft=q_draft,  # (N+1, V) frequencies
            sampled=(False,) * len(tokens),
            forward_calls=0,
        )


def continuations(ids: list[int], depth: int, max_ngram: int, min_ngram: int) -> list[list[int]]:
    """What followed each earlier occurrence of ids' longest matching n-gram, latest first."""
    for n in range(min(max_ngram, len(ids) - 1), min_ngram - 1, -1):
        pattern = ids[-n:]
        found = [
            ids[start + n : start + n + depth]
            for start in range(len(ids) - n - 1, -1, -1)
            if ids[start : start + n] == pattern
        ]
        if found:
            return found
    return []
