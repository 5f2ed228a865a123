"""Each drafted token's q is the law it was drawn from: EAGLE-3, Medusa, chains, sampled trees.

Setup: a tiny Llama target (float64), random heads scoring a subset S of the vocabulary (q must
be exactly 0 off S), one fixed context. The drafter is driven as a decoder drives it: its
target cache scores the prompt (the decoder's first pass), a next token is committed, then N
(N_CHAIN, N_TREE) first-round proposals are drawn with generators seeded 0..N-1, the drafter
rolled back after each (so every proposal starts from the same state: the q rows must agree).

Test: G-test (specviz.stats.testing.goodness_of_fit, cells pooled to expected >= 5) of H0 'the
drafted tokens are i.i.d. draws from the recorded q row', at ALPHA = 0.01 each, for the first
drafted token (all of a tree's root children), and for the second given the first (a chain's
second token; a tree's children of a depth-1 node). A token off the row's support rejects at
once. Negative control: the same tokens against the recorded q with SHIFT = 0.05 of mass moved
from its likeliest token to the next must be rejected; the power of that control (noncentral
chi-square under the true q, pooled as the test pools) is computed and asserted >= 0.99.
Seeds are fixed, so every verdict is deterministic.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
import torch
from torch import Tensor

from specviz.core.config import SamplingConfig
from specviz.drafters.tree_model import TreeShape
from specviz.heads.build import target_forward
from specviz.heads.cache import HeadCache
from specviz.heads.drafters import HeadDrafter, HeadTreeDrafter
from specviz.heads.eagle import Eagle3Head
from specviz.heads.eagle_lean import LeanEagle3Cache
from specviz.stats.laws import Law
from specviz.stats.testing import chi2_power, goodness_of_fit, pool
from tests.conftest import VOCAB, tiny_model
from tests.heads.helpers import random_head, random_module

ALPHA = 0.01
SHIFT = 0.05  # TV of the negative control's perturbation
N_CHAIN, N_TREE = 9000, 1500  # proposals per case (a tree draws SHAPE.width children a node)
PROMPT = [5, 6, 7, 8, 5, 6]
NEXT = 9  # the token the target's first pass committed
HEAD_TOKENS = torch.arange(1, 17)  # S: q = 0 on token 0 and on 17..32
SAMPLING = SamplingConfig(temperature=0.8, top_p=0.97)  # a warped q
GAMMA = 2
SHAPE = TreeShape(nodes=9, depth=2, width=3)
LM_SCALE = 1.5
CASES = [("eagle3", False), ("medusa", False), ("eagle3", True), ("medusa", True)]


@pytest.fixture(scope="module")
def target() -> Any:
    return tiny_model("llama", seed=5, scale=3.0)


def _head(kind: str, target: Any) -> HeadCache:
    """A random head of kind. EAGLE-3's output matrix is scaled by LM_SCALE, so that its q is
    about as peaked as the target's (scale 3): the second token's law given the likeliest first
    then gets enough draws for the control's power."""
    if kind != "eagle3":
        return random_head(kind, target, seed=11, head_tokens=HEAD_TOKENS)
    module = random_module(kind, target, seed=11, head_tokens=HEAD_TOKENS)
    assert isinstance(module, Eagle3Head)
    with torch.no_grad():
        module.lm.mul_(LM_SCALE)
    return LeanEagle3Cache(target, module)


def _ready(kind: str, tree: bool, target: Any) -> tuple[Any, list[int]]:
    """A head drafter whose target cache has scored the prompt, and the committed ids."""
    cache = _head(kind, target)
    forward = target_forward(kind, lean=True)
    if tree:
        drafter: Any = HeadTreeDrafter(
            cache, SAMPLING, shape=SHAPE, sampled=True, make_target_cache=forward
        )
    else:
        drafter = HeadDrafter(cache, SAMPLING, make_target_cache=forward)
    drafter.target_cache(target).forward(torch.tensor(PROMPT))  # the decoder's first pass
    return drafter, [*PROMPT, NEXT]


def _proposals(drafter: Any, ids: list[int], tree: bool, n: int) -> list[Any]:
    """n first-round drafts (chains of GAMMA tokens, or trees of SHAPE), seeds 0..n-1."""
    out = []
    for seed in range(n):
        generator = torch.Generator().manual_seed(seed)
        if tree:
            out.append(drafter.propose_tree(ids, SHAPE.depth, generator, ()))
        else:
            out.append(drafter.propose(ids, GAMMA, generator, ()))
        drafter.rollback(len(ids))
    return out


def _law(q: Tensor) -> Law:
    """The one-token law of q (V,)."""
    return {(t,): float(q[t]) for t in range(q.shape[0]) if q[t] > 0}


def _shifted(q: Tensor) -> Tensor:
    """q with SHIFT of mass moved from its likeliest token to the second likeliest."""
    alt = q.clone()
    first, second = q.argsort(descending=True)[:2].tolist()
    alt[first] -= SHIFT
    alt[second] += SHIFT
    return alt


def _control_power(q: Tensor, alt: Tensor, n: int) -> float:
    """Power of the G-test of H0 'draws from alt' when they come from q (cells pooled as the
    test pools them, by alt's expected counts)."""
    support = [t for t in range(q.shape[0]) if alt[t] > 0]
    expected = np.array([float(alt[t]) for t in support]) * n
    truth = np.array([float(q[t]) for t in support]) * n
    groups = pool(expected)
    exp = np.array([expected[g].sum() for g in groups])
    act = np.array([truth[g].sum() for g in groups])
    return chi2_power(exp, act, len(groups) - 1, ALPHA)


def _check_law(tokens: list[int], rows: list[Tensor], what: str) -> None:
    """Every row equal (the same state drafted from), the tokens drawn from it; control."""
    q = rows[0]
    for row in rows[1:]:
        torch.testing.assert_close(row, q, rtol=0, atol=1e-12)
    outcomes = [(t,) for t in tokens]
    assert len(Counter(tokens)) >= 3, f"{what}: a degenerate law tests nothing"
    result = goodness_of_fit(outcomes, _law(q), alpha=ALPHA)
    assert not result.reject, f"{what}: p = {result.p_value:.2e} (n = {len(tokens)})"
    alt = _shifted(q)
    control = goodness_of_fit(outcomes, _law(alt), alpha=ALPHA)
    power = _control_power(q, alt, len(tokens))
    assert power >= 0.99, f"{what}: the control's power is only {power:.3f}"
    assert control.reject, f"{what}: the shifted q slipped through (p = {control.p_value:.3f})"


def _check_rows(q_draft: Tensor, used: list[int]) -> None:
    """Rows `used` are laws (sum 1) on S alone; the others (never run) are all zero."""
    off = torch.ones(VOCAB, dtype=torch.bool)
    off[HEAD_TOKENS] = False
    for i, row in enumerate(q_draft):
        assert torch.all(row[off] == 0), f"row {i} puts mass off the head tokens"
        assert torch.all(row >= 0)
        total = float(row.sum())
        assert total == pytest.approx(1.0 if i in used else 0.0, abs=1e-12), (i, total)


@pytest.mark.parametrize(("kind", "tree"), CASES, ids=lambda c: str(c))
def test_q_rows_are_laws_on_the_head_tokens(target: Any, kind: str, tree: bool) -> None:
    drafter, ids = _ready(kind, tree, target)
    for proposal in _proposals(drafter, ids, tree, n=50):
        if tree:  # the root's row, and a node's where it was expanded (it has children)
            used = [0, *(p + 1 for p in set(proposal.parents) if p >= 0)]
        else:
            used = list(range(GAMMA))
            assert proposal.tokens.shape == (GAMMA,)
        _check_rows(proposal.q_draft, used)
        assert set(proposal.tokens.tolist()) <= set(HEAD_TOKENS.tolist())


@pytest.mark.parametrize("kind", ["eagle3", "medusa"])
def test_chain_tokens_follow_their_q(target: Any, kind: str) -> None:
    """First token ~ q_draft[0]; second ~ q_draft[1] given the first (EAGLE feeds the first
    token back; Medusa's second guess ignores it, so its row is one law for every first)."""
    drafter, ids = _ready(kind, False, target)
    drafts = _proposals(drafter, ids, tree=False, n=N_CHAIN)
    firsts = [int(d.tokens[0]) for d in drafts]
    _check_law(firsts, [d.q_draft[0] for d in drafts], f"{kind}: first token")
    if kind == "eagle3":
        common = Counter(firsts).most_common(1)[0][0]
        drafts = [d for d in drafts if int(d.tokens[0]) == common]
    _check_law(
        [int(d.tokens[1]) for d in drafts], [d.q_draft[1] for d in drafts], f"{kind}: second"
    )


@pytest.mark.parametrize("kind", ["eagle3", "medusa"])
def test_sampled_tree_children_follow_their_parents_q(target: Any, kind: str) -> None:
    """The root's children ~ q_draft[0] (width i.i.d. draws a tree); a depth-1 node's children
    ~ its row (EAGLE: given the node's token; Medusa: one law at depth 2 for every parent)."""
    drafter, ids = _ready(kind, True, target)
    trees = _proposals(drafter, ids, tree=True, n=N_TREE)
    roots = [(tree, i) for tree in trees for i, p in enumerate(tree.parents) if p == -1]
    assert all(len(tree.children(-1)) == SHAPE.width for tree in trees)
    _check_law(
        [int(tree.tokens[i]) for tree, i in roots],
        [tree.q_draft[0] for tree, _ in roots],
        f"{kind} tree: root children",
    )
    kids = [(tree, i) for tree in trees for i, p in enumerate(tree.parents) if p >= 0]
    if kind == "eagle3":
        parent = [int(tree.tokens[tree.parents[i]]) for tree, i in kids]
        common = Counter(parent).most_common(1)[0][0]
        kids = [kid for kid, token in zip(kids, parent, strict=True) if token == common]
    _check_law(
        [int(tree.tokens[i]) for tree, i in kids],
        [tree.q_draft[tree.parents[i] + 1] for tree, i in kids],
        f"{kind} tree: depth-2 children",
    )
