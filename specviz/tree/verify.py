"""Tree verification: walk the tree from the root, trying each node's children in order.

Terms: p_target (N+1, V) is the target's warped distribution at the root (row 0) and after
node i (row i + 1); q is the drafter's distribution the children of a node came from; r is
the working distribution at the node being expanded, at first p_target there. Each child x
is kept with the step's P(keep) against a fresh uniform u; on rejection r becomes the step's
updated r (specviz.core.acceptance: sampled_step, deterministic_step). The first kept child
becomes the node; when none is kept the next token is drawn from r; at a leaf, the bonus
token is drawn from p_target there. With the exact steps every emitted token follows p; the
typical rule (Medusa's typical acceptance) does not, and is labelled so wherever it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from specviz.core.acceptance import Step, deterministic_step, sampled_step, typical_step
from specviz.core.sampling import sample, uniform
from specviz.tree.drafter import TreeCache
from specviz.tree.proposal import TokenTree


def keep_path(cache: TreeCache, base: int, path: tuple[int, ...]) -> None:
    """Keep the cache's first `base` positions (the prefix and the fresh tokens) and the kept
    path's nodes (node i sits at base + i); drop every other node."""
    keep = torch.cat([torch.arange(base), base + torch.tensor(path, dtype=torch.long)])
    cache.keep_only(keep)


@dataclass(frozen=True, kw_only=True)
class TreeRule:
    """The swappable pieces of tree verification; only exact rules follow the target's law.

    sampled and deterministic are the steps for children drawn from q and for children chosen
    without sampling; uniforms(k, generator, like) draws the k uniforms of one node's children;
    compact(cache, base, path) cuts the target's cache after a verdict, base being the
    positions before the tree's first node and path the kept nodes.
    """

    name: str = "exact"
    exact: bool = True
    sampled: Step = sampled_step
    deterministic: Step = deterministic_step
    uniforms: Callable[[int, torch.Generator, Tensor], Tensor] = uniform
    compact: Callable[[TreeCache, int, tuple[int, ...]], None] = keep_path


EXACT_TREE = TreeRule()
TYPICAL = TreeRule(name="typical", exact=False, sampled=typical_step, deterministic=typical_step)


@dataclass(frozen=True, kw_only=True)
class Trial:
    """One child tried: its target p(x), draft q(x), P(keep) and the uniform drawn."""

    node: int
    p_x: float
    q_x: float
    accept_prob: float
    u: float
    accepted: bool


@dataclass(frozen=True, kw_only=True)
class TreeVerdict:
    """Outcome of one tree round: the kept path, every trial, and the token that follows."""

    path: tuple[int, ...]
    trials: tuple[Trial, ...]
    next_token: int
    is_bonus: bool
    next_dist: Tensor  # (V,) what next_token was drawn from (the last r, or p at a leaf)


def verify_tree(
    p_target: Tensor, tree: TokenTree, generator: torch.Generator, rule: TreeRule = EXACT_TREE
) -> TreeVerdict:
    """Walk tree given p_target (N+1, V): row 0 at the root, row i + 1 after node i."""
    node, path, trials = -1, list[int](), list[Trial]()
    while kids := tree.children(node):
        kept, tried, r = try_children(p_target[node + 1], tree, kids, generator, rule)
        trials += tried
        if kept is None:  # every child rejected: the next token comes from what is left of p
            token = sample(r, generator)
            return TreeVerdict(
                path=tuple(path),
                trials=tuple(trials),
                next_token=token,
                is_bonus=False,
                next_dist=r,
            )
        node = kept
        path.append(node)
    p = p_target[node + 1]  # (V,) a leaf was kept: the bonus token comes from p after it
    token = sample(p, generator)
    return TreeVerdict(
        path=tuple(path), trials=tuple(trials), next_token=token, is_bonus=True, next_dist=p
    )


def try_children(
    p: Tensor, tree: TokenTree, kids: list[int], generator: torch.Generator, rule: TreeRule
) -> tuple[int | None, list[Trial], Tensor]:
    """Try the children kids of one node against p (V,): the kept one (or None), the trials,
    and the working distribution r after the last rejection."""
    parent = tree.parents[kids[0]]
    r, q = p, tree.q_draft[parent + 1].to(p)  # (V,), (V,)
    step = rule.sampled if tree.sampled[kids[0]] else rule.deterministic
    u = rule.uniforms(len(kids), generator, r)  # (k,) one fresh uniform per child
    trials = []
    for i, child in enumerate(kids):
        x = int(tree.tokens[child])
        keep, after = step(r, q, x)
        accepted = bool(u[i] < keep)
        trials.append(
            Trial(
                node=child,
                p_x=float(p[x]),
                q_x=float(q[x]),
                accept_prob=float(keep),
                u=float(u[i]),
                accepted=accepted,
            )
        )
        if accepted:
            return child, trials, r
        r = after
    return None, trials, r
