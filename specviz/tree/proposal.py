"""A drafter's token tree: nodes with token, parent, depth and the law each was drawn from.

Nodes are numbered 0..N-1 with every parent before its children; parents[i] is -1 for a child
of the root (the last committed token), and depth(i) = 1 + depth(parents[i]). q_draft[0] is
the drafter's distribution at the root and q_draft[i + 1] the one at node i (zeros where the
drafter never ran on node i). Children are either *sampled* (i.i.d. draws from the parent's
q) or *deterministic* (chosen without sampling: top-k of q, n-gram lookup; their q is then
shown, not used). A chain is a tree with one child per node.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True, kw_only=True)
class TokenTree:
    """A drafter's proposal: tokens (N,), parents, q_draft (N+1, V), sampled (per node).

    A deterministic drafter may hand out tokens and q_draft as views of buffers it rewrites at
    its next proposal (specviz.drafters.sparse_q): read a tree within its round, or copy it."""

    tokens: Tensor
    parents: tuple[int, ...]
    q_draft: Tensor
    sampled: tuple[bool, ...]
    forward_calls: int

    def __post_init__(self) -> None:
        n = len(self.parents)
        if self.tokens.shape != (n,) or len(self.sampled) != n or self.q_draft.shape[0] != n + 1:
            raise ValueError(f"a tree of {n} nodes needs {n} tokens, {n} laws and {n + 1} q rows")
        for i, parent in enumerate(self.parents):
            if not -1 <= parent < i:
                raise ValueError(f"node {i}'s parent {parent} must come before it (or be -1)")
        first: dict[int, int] = {}  # parent -> its first child
        for i, parent in enumerate(self.parents):
            if self.sampled[i] != self.sampled[first.setdefault(parent, i)]:
                raise ValueError(f"node {i}'s siblings must share one law (sampled or not)")

    @property
    def depths(self) -> tuple[int, ...]:
        """depth of each node (the root's children are at depth 1)."""
        out: list[int] = []
        for parent in self.parents:
            out.append(1 + (out[parent] if parent >= 0 else 0))
        return tuple(out)

    def children(self, node: int) -> list[int]:
        """The children of node (-1: the root), in the order they are tried."""
        return [i for i, parent in enumerate(self.parents) if parent == node]

    def path(self, node: int) -> list[int]:
        """The nodes from the root's child down to node."""
        out = []
        while node >= 0:
            out.append(node)
            node = self.parents[node]
        return out[::-1]

    def visible(self) -> Tensor:
        """(N, N) bool: node i may attend to node j when j is i or one of its ancestors."""
        n = len(self.parents)
        seen = torch.eye(n, dtype=torch.bool)
        for i, parent in enumerate(self.parents):
            if parent >= 0:
                seen[i] |= seen[parent]
        return seen

    def q_x(self) -> tuple[float, ...]:
        """q(token) of each node under its parent's distribution."""
        rows = torch.tensor(self.parents, device=self.q_draft.device) + 1
        tokens = self.tokens.to(self.q_draft.device)
        return tuple(self.q_draft[rows, tokens].tolist()) if self.parents else ()


def chain(tokens: Tensor, q_draft: Tensor, forward_calls: int) -> TokenTree:
    """A chain drafter's tokens (k,) and q_draft (k, V) as a tree with one child per node."""
    k = tokens.shape[0]
    vocab = q_draft.shape[-1] if q_draft.dim() == 2 else 1
    rows = torch.cat([q_draft.reshape(k, vocab), q_draft.new_zeros(1, vocab)])  # (k+1, V)
    return TokenTree(
        tokens=tokens,
        parents=tuple(range(-1, k - 1)),
        q_draft=rows,
        sampled=(True,) * k,
        forward_calls=forward_calls,
    )


def top_k_capacity(depth: int, width: int) -> int:
    """The most nodes a top-k tree of this depth and width holds: width at the first level,
    width² at each later one (the width best nodes of a level grow width children each)."""
    return width + (depth - 1) * width * width


def top_k_shape(nodes: int, depth: int, width: int) -> TokenTree:
    """A top-k shaped tree of `nodes` nodes, filled level by level: `width` children of the
    root, then `width` children for each of a level's first `width` nodes, down to `depth`.

    Its tokens are zeros: it gives a pass over a tree of that shape (whose cost does not depend
    on the tokens). ValueError when the shape cannot hold that many nodes.
    """
    most = top_k_capacity(depth, width)
    if nodes > most:
        raise ValueError(
            f"a tree of depth {depth} and width {width} holds at most {most} nodes "
            f"(got {nodes}): raise --tree-width or --tree-depth, or lower the node budget"
        )
    parents: list[int] = []
    level = [-1]
    while len(parents) < nodes:
        grown: list[int] = []
        for parent in level[:width]:
            for _ in range(width):
                if len(parents) < nodes:
                    parents.append(parent)
                    grown.append(len(parents) - 1)
        level = grown
    return TokenTree(
        tokens=torch.zeros(nodes, dtype=torch.long),
        parents=tuple(parents),
        q_draft=torch.zeros(nodes + 1, 1),
        sampled=(False,) * nodes,
        forward_calls=0,
    )
