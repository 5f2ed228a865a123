"""Suffix decoding (SuffixDecoding, arXiv 2411.04975): draft from memory, no model.

Two suffix tries propose: the request's own (specviz.drafters.suffix.request), over its prompt
and the tokens committed so far (updated as they commit), and a SuffixMemory over earlier
requests (a compact specviz.drafters.suffix.store), which the caller owns and may share
between drafters, save and load; specviz.drafters.suffix.speculate reads both. Each round the
drafter matches the last tokens of the text in both, follows the most frequent continuations,
and keeps the speculation with the best score; a match of m tokens allows at most factor * m
draft tokens, and a token is kept while its path's frequency is at least min_prob.

Memory is fed when a decode ends: specviz.api calls `remember(ids, prompt_len)` on a drafter
that has it, and the drafter adds the request's output (with its prompt, for a memory built
with prompts=True) to the memory. A decode that is not
run to its end is not remembered. The same drafter may decode request after request: prefill
starts a fresh trie of the request's own.

Proposals are deterministic functions of the committed text and the memory, so a chain's q is
one-hot and a tree's children are verified by the deterministic-sibling rule: the output law
stays exactly the target's at any temperature. q is written into a buffer each drafter reuses
(specviz.drafters.sparse_q): a round's cost is its lookup, not a fresh k × V tensor.

Built with explain=True, a drafter says how it drafted each round: explain(round) is the
SuffixLookup event (specviz.core.events) the decoders emit before the proposal, with the
matched tokens, where they matched, their counted continuations and the speculation
(specviz.drafters.suffix.explain).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import torch

from specviz.core.drafter import Draft
from specviz.core.events import SuffixLookup
from specviz.drafters.options import SUFFIX_FACTOR
from specviz.drafters.sparse_q import SparseRows
from specviz.drafters.suffix.explain import Looked, lookup_event
from specviz.drafters.suffix.memory import SuffixMemory
from specviz.drafters.suffix.request import RequestTrie
from specviz.drafters.suffix.speculate import Speculation, speculate
from specviz.drafters.suffix.trie import Trie
from specviz.tree.proposal import TokenTree


@dataclass(frozen=True, kw_only=True)
class SuffixConfig:
    """How far to speculate: at most factor * (match length) tokens, each kept while the
    frequency of its path in memory is at least min_prob."""

    factor: float = SUFFIX_FACTOR
    min_prob: float = 0.1

    def __post_init__(self) -> None:
        check_suffix(self.factor, self.min_prob)


def check_suffix(factor: float, min_prob: float) -> None:
    """ValueError unless factor > 0 and 0 <= min_prob <= 1."""
    if not factor > 0:
        raise ValueError(f"the suffix factor must be > 0 (got {factor}): try 1.0 to 4.0")
    if not 0.0 <= min_prob <= 1.0:
        raise ValueError(f"the suffix min_prob must be in [0, 1] (got {min_prob})")


@dataclass(frozen=True, kw_only=True)
class Bounds:
    """What one speculation may propose: at most max_tokens tokens, nothing after a stop id;
    tree: a tree (no deeper than max_depth, None: no bound) rather than a chain."""

    max_tokens: int
    stop_ids: Collection[int]
    tree: bool = False
    max_depth: int | None = None


class SuffixTries:
    """The request's own trie (over its prompt and committed tokens) beside the shared memory."""

    def __init__(
        self,
        vocab_size: int,
        memory: SuffixMemory | None,
        config: SuffixConfig,
        explain: bool = False,
    ) -> None:
        """memory None: a private, fresh SuffixMemory; explain: keep each speculation for
        lookup (specviz.drafters.suffix.explain)."""
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1 (got {vocab_size})")
        self.vocab_size, self.config, self.explain = vocab_size, config, explain
        self.memory = SuffixMemory() if memory is None else memory
        self.local = RequestTrie(max_depth=self.memory.max_depth)
        self.seen: list[int] = []  # the tokens in the request's trie
        self.last: Looked | None = None  # the last speculation, when explaining

    def prefill(self, prefix: list[int]) -> None:
        """Start the request's trie afresh with prefix."""
        self.local = RequestTrie(max_depth=self.memory.max_depth)
        self.seen = []
        self.catch_up(prefix)

    def catch_up(self, ids: Sequence[int]) -> None:
        """Add the tokens of ids past those already in the request's trie (rebuilding it if
        ids does not extend them)."""
        n = len(self.seen)
        if n > len(ids) or (n and ids[n - 1] != self.seen[-1]):
            self.prefill(list(ids))
            return
        fresh = [int(t) for t in ids[n:]]
        self.local.append(fresh)
        self.seen += fresh

    def rollback(self, committed: int) -> None:
        """Forget tokens past committed (only committed tokens are ever added)."""
        if committed < len(self.seen):
            self.prefill(self.seen[:committed])

    def speculate(
        self,
        ids: Sequence[int],
        max_tokens: int,
        stop_ids: Collection[int],
        *,
        tree: bool = False,
        max_depth: int | None = None,
    ) -> Speculation:
        """The best speculation after ids from the memory and the request's own trie."""
        self.catch_up(ids)
        bounds = Bounds(max_tokens=max_tokens, stop_ids=stop_ids, tree=tree, max_depth=max_depth)
        own = self.local.followed()
        found = self._speculate((self.memory.store, own), ids, bounds)  # own wins ties
        if self.explain:
            self.last = self._looked(ids, found, bounds)
        return found

    def _speculate(self, tries: Iterable[Trie], ids: Sequence[int], bounds: Bounds) -> Speculation:
        """speculate over tries with this drafter's config, within bounds."""
        return speculate(
            tries,
            ids,
            max_tokens=bounds.max_tokens,
            factor=self.config.factor,
            min_prob=self.config.min_prob,
            vocab_size=self.vocab_size,
            stop_ids=bounds.stop_ids,
            tree=bounds.tree,
            max_depth=bounds.max_depth,
        )

    def _looked(self, ids: Sequence[int], found: Speculation, bounds: Bounds) -> Looked:
        """found with its match and its source: the request's own text when its trie alone
        speculates the same (it wins ties), else the memory."""
        if not found.tokens:
            return Looked(context=(), found=found, source="")
        own = self._speculate((self.local.followed(),), ids, bounds)
        context = tuple(ids[len(ids) - found.match_len :])
        return Looked(context=context, found=found, source="request" if own == found else "memory")

    def lookup(self, round_index: int) -> SuffixLookup | None:
        """The last speculation as round round_index's SuffixLookup (None unless explaining),
        its match counted in the texts it matched in."""
        if self.last is None:
            return None
        texts = (self.seen,) if self.last.source == "request" else self.memory.requests
        return lookup_event(round_index, self.last, texts, self.vocab_size)

    def remember(self, ids: list[int], prompt_len: int) -> None:
        """Give the finished request (prompt_len prompt tokens, then its output) to memory."""
        self.memory.add_request(ids, prompt_len)


class SuffixTriesDrafter:
    """What both suffix drafters share: the request's trie beside the memory, fed and rolled
    back as tokens commit, and a reusable one-hot q buffer."""

    def __init__(
        self,
        vocab_size: int,
        memory: SuffixMemory | None,
        config: SuffixConfig | None,
        explain: bool,
        device: torch.device,
    ) -> None:
        """Tries for a target of vocab_size tokens over memory (None: a private fresh one)."""
        self.tries = SuffixTries(vocab_size, memory, config or SuffixConfig(), explain)
        self.vocab_size = vocab_size
        self.q = SparseRows(vocab_size, device)

    @property
    def memory(self) -> SuffixMemory:
        """The memory of earlier requests this drafter reads and feeds."""
        return self.tries.memory

    def prefill(self, prefix: list[int]) -> None:
        """Start the request's own trie with the prompt."""
        self.tries.prefill(prefix)

    def rollback(self, committed: int) -> None:
        """Only committed tokens enter the tries: nothing to undo past them."""
        self.tries.rollback(committed)

    def remember(self, ids: list[int], prompt_len: int) -> None:
        """Add the finished request to memory."""
        self.tries.remember(ids, prompt_len)

    def explain(self, round_index: int) -> SuffixLookup | None:
        """The last proposal's match and speculation (None unless built with explain)."""
        return self.tries.lookup(round_index)


class SuffixDrafter(SuffixTriesDrafter):
    """Suffix decoding as a chain: the likeliest continuation of the best match."""

    def __init__(
        self,
        vocab_size: int,
        *,
        memory: SuffixMemory | None = None,
        config: SuffixConfig | None = None,
        device: str = "cpu",
        explain: bool = False,
    ) -> None:
        """Draft for a target of vocab_size tokens from memory (None: a private fresh one);
        explain: say how each round drafted (explain)."""
        self.device = torch.device(device)
        super().__init__(vocab_size, memory, config, explain, self.device)

    def speculation(self, ids: list[int], gamma: int, stop_ids: Collection[int]) -> Speculation:
        """The chain this drafter would propose after ids, with its score."""
        return self.tries.speculate(ids, gamma, stop_ids)

    def propose(
        self,
        ids: list[int],
        gamma: int,
        generator: torch.Generator,
        stop_ids: Collection[int],
    ) -> Draft:
        """Up to gamma tokens (k,), with one-hot q_draft (k, V); the generator is not used."""
        return self.draft(self.speculation(ids, gamma, stop_ids))

    def draft(self, found: Speculation) -> Draft:
        """A chain speculation as a Draft: tokens (k,) and one-hot q_draft (k, V)."""
        tokens, q_draft = self.q.chain(list(found.tokens))
        return Draft(tokens=tokens, q_draft=q_draft, forward_calls=0)


class TreeSuffixDrafter(SuffixTriesDrafter):
    """Suffix decoding as a tree: the likeliest continuations of the best match, best first."""

    def __init__(
        self,
        vocab_size: int,
        *,
        nodes: int,
        depth: int,
        memory: SuffixMemory | None = None,
        config: SuffixConfig | None = None,
        explain: bool = False,
    ) -> None:
        """At most `nodes` nodes and `depth` levels a tree, from memory (None: a fresh one);
        explain: say how each round drafted (explain)."""
        if nodes < 1 or depth < 1:
            raise ValueError(f"nodes and depth must be >= 1 (got nodes={nodes}, depth={depth})")
        super().__init__(vocab_size, memory, config, explain, torch.device("cpu"))
        self.nodes, self.depth = nodes, depth

    def propose_tree(
        self, ids: list[int], max_depth: int, generator: torch.Generator, stop_ids: Collection[int]
    ) -> TokenTree:
        """A deterministic tree (N nodes) no deeper than max_depth; q_draft (N+1, V) shows each
        node's children's frequencies, normalised (not used by the deterministic rule)."""
        found = self.tries.speculate(
            ids, self.nodes, stop_ids, tree=True, max_depth=min(max_depth, self.depth)
        )
        n = len(found.tokens)
        raw = [
            found.probs[i] / (found.probs[parent] if parent >= 0 else 1.0)
            for i, parent in enumerate(found.parents)
        ]
        sums: dict[int, float] = {}
        for parent, r in zip(found.parents, raw, strict=True):
            sums[parent] = sums.get(parent, 0.0) + r
        rows = [parent + 1 for parent in found.parents]
        values = [
            r / s if (s := sums[p]) > 0 else r for p, r in zip(found.parents, raw, strict=True)
        ]
        tokens, q_draft = self.q.tree(list(found.tokens), rows, list(found.tokens), values)
        return TokenTree(
            tokens=tokens,  # (N,)
            parents=found.parents,
            q_draft=q_draft,  # (N+1, V)
            sampled=(False,) * n,
            forward_calls=0,
        )
