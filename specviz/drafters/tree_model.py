"""A draft model growing a token tree, one draft pass per level, under a node budget.

Two ways to choose a node's children:
- top-k (EAGLE-2 style, deterministic): each level expands the `width` candidates with the
  highest cumulative log-probability into their top `width` tokens; the final tree keeps the
  `nodes` candidates of highest cumulative log-probability (a child never scores above its
  parent, so the kept set holds every kept node's ancestors). Verified by the deterministic
  rule (p alone). Ranks come from the draft's unwarped softmax, so a greedy decode (one-hot
  q) still gets a real tree; tokens the warped q excludes are never proposed.
- sampled (SpecInfer style): every node of a level gets `width` children drawn i.i.d. from
  q, breadth-first until `nodes` are placed. Verified by recursive rejection against q.

Each level's new nodes go through the draft model together, each seeing the prefix and its
own ancestors (a 4D mask). The drafter's cache is cut back to the prefix after drafting and
the kept tokens are fed at the start of the next round.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig
from specviz.core.sampling import logits_to_probs, sample
from specviz.tree.drafter import TreeCache
from specviz.tree.proposal import TokenTree


@dataclass(frozen=True, kw_only=True)
class TreeShape:
    """A tree's budget: at most `nodes` nodes, `depth` levels, `width` children per node."""

    nodes: int = 8
    depth: int = 4
    width: int = 4

    def __post_init__(self) -> None:
        for name in ("nodes", "depth", "width"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"tree {name} must be an integer >= 1 (got {value!r})")


@dataclass
class _Node:
    token: int
    parent: int  # index into the candidate list, -1 for the root
    depth: int
    score: float  # cumulative log-probability from the root (the draft's unwarped softmax)
    q: Tensor | None = None  # the draft's warped distribution after this node, once expanded
    slot: int = -1  # its position in the draft's cache, once expanded


class TreeModelDrafter:
    """Grows a tree with a draft model: top-k children (deterministic) or sampled from q."""

    def __init__(
        self,
        model: Any,
        sampling: SamplingConfig,
        vocab_size: int,
        *,
        shape: TreeShape,
        sampled: bool,
        make_cache: Callable[[Any], TreeCache] = KVCache,
    ) -> None:
        """Wrap model; its q is warped by the same sampling config as the target's p.

        make_cache: the draft's cached forward (default transformers' forward with a KVCache;
        the registry passes specviz.fast.lean's for small Llama drafts).
        """
        self.model, self.sampling, self.vocab_size = model, sampling, vocab_size
        self.shape, self.sampled, self.depth = shape, sampled, shape.depth
        self.cache = make_cache(model)
        self.device = model.device

    def prefill(self, prefix: list[int]) -> None:
        """Start a request: forget any earlier one, then cache the draft's keys/values for
        prefix."""
        self.cache.crop(0)
        if prefix:
            self.cache.forward(torch.tensor(prefix, device=self.device), keep=1)

    def rollback(self, committed: int) -> None:
        """Keep at most committed - 1 cached positions (the rest is fed next round)."""
        self.cache.crop(committed - 1)

    def propose_tree(
        self, ids: list[int], max_depth: int, generator: torch.Generator, stop_ids: Collection[int]
    ) -> TokenTree:
        """A tree of up to shape.nodes continuations of ids, at most max_depth deep."""
        pending = torch.tensor(ids[len(self.cache) :], device=self.device)
        root = self._dists(self.cache.forward(pending, keep=1)[-1])  # (V,), (V,)
        base = len(self.cache)  # the prefix, the root included
        pool: list[_Node] = []
        frontier: list[tuple[int, tuple[Tensor, Tensor]]] = [(-1, root)]
        calls = 1
        for depth in range(1, max_depth + 1):
            fresh = self._children(pool, frontier, depth, generator)
            if depth == max_depth or not fresh:
                break
            expand = [i for i in fresh if pool[i].token not in stop_ids]
            if self.sampled:  # as many parents as the budget has room for children of
                room = self.shape.nodes - len(pool)
                expand = expand[: -(-room // self.shape.width)]
            else:  # top-k: only the best `width` of the level grow further
                expand = sorted(expand, key=lambda i: -pool[i].score)[: self.shape.width]
            if not expand:
                break
            frontier = list(zip(expand, self._expand(pool, expand, base), strict=True))
            calls += 1
        self.cache.crop(base)
        return self._tree(pool, root[0], calls)

    def _dists(self, logits: Tensor) -> tuple[Tensor, Tensor]:
        """The draft's warped q (V,) and unwarped log-softmax (V,) over the target's vocabulary."""
        logits = logits[: self.vocab_size]
        return logits_to_probs(logits, self.sampling), torch.log_softmax(logits.double(), -1)

    def _children(
        self,
        pool: list[_Node],
        frontier: list[tuple[int, tuple[Tensor, Tensor]]],
        depth: int,
        generator: torch.Generator,
    ) -> list[int]:
        """Add the children of every frontier node to pool; return their indices."""
        added: list[int] = []
        for parent, (q, logp) in frontier:
            score = pool[parent].score if parent >= 0 else 0.0
            for token in self._pick(q, logp, generator):
                if self.sampled and len(pool) >= self.shape.nodes:
                    return added
                pool.append(_Node(token, parent, depth, score + float(logp[token])))
                added.append(len(pool) - 1)
        return added

    def _pick(self, q: Tensor, logp: Tensor, generator: torch.Generator) -> list[int]:
        """A node's children: `width` i.i.d. draws from q, or the top `width` tokens by logp."""
        if self.sampled:
            if float(q.max()) == 1.0:  # one-hot q (greedy): every draw is the same token
                return [int(q.argmax())]
            return [sample(q, generator) for _ in range(self.shape.width)]
        allowed = logp if self.sampling.greedy else logp.masked_fill(q <= 0, -math.inf)
        top = allowed.topk(min(self.shape.width, int((allowed > -math.inf).sum())))
        return [int(t) for t in top.indices.tolist()]

    def _expand(
        self, pool: list[_Node], expand: list[int], base: int
    ) -> list[tuple[Tensor, Tensor]]:
        """Run the draft on the nodes `expand` in one pass; return their (q, logp) rows."""
        held = len(self.cache)
        visible = torch.zeros(len(expand), held + len(expand), dtype=torch.bool)
        visible[:, :base] = True
        for row, i in enumerate(expand):
            visible[row, held + row] = True
            node = pool[i]
            while node.parent >= 0:
                node = pool[node.parent]
                visible[row, node.slot] = True
        for row, i in enumerate(expand):
            pool[i].slot = held + row
        tokens = torch.tensor([pool[i].token for i in expand], device=self.device)
        positions = torch.tensor([base - 1 + pool[i].depth for i in expand], device=self.device)
        logits = self.cache.forward(
            tokens, keep=len(expand), positions=positions, visible=visible.to(self.device)
        )
        rows = [self._dists(row) for row in logits]
        for i, (q, _) in zip(expand, rows, strict=True):
            pool[i].q = q
        return rows

    def _tree(self, pool: list[_Node], root_q: Tensor, calls: int) -> TokenTree:
        """The kept candidates as a TokenTree, parents first."""
        if self.sampled:
            kept = list(range(len(pool)))
        else:  # the `nodes` best by cumulative log q (shallower first on ties)
            ranked = sorted(range(len(pool)), key=lambda i: (-pool[i].score, pool[i].depth, i))
            chosen: set[int] = set()
            for i in ranked:
                if len(chosen) < self.shape.nodes and (
                    pool[i].parent < 0 or pool[i].parent in chosen
                ):
                    chosen.add(i)
            kept = sorted(chosen, key=lambda i: (pool[i].depth, i))
        index = {old: new for new, old in enumerate(kept)}
        zeros = torch.zeros_like(root_q)
        q_rows = [root_q, *(q if (q := pool[i].q) is not None else zeros for i in kept)]
        return TokenTree(
            tokens=torch.tensor([pool[i].token for i in kept], dtype=torch.long),
            parents=tuple(index[pool[i].parent] if pool[i].parent >= 0 else -1 for i in kept),
            q_draft=torch.stack(q_rows),
            sampled=(self.sampled,) * len(kept),
            forward_calls=calls,
        )
