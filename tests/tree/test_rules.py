"""Tree verification is exact: the law of the emitted tokens, enumerated, equals the target's.

For small vocabularies the law of the first m tokens of a tree round can be computed exactly
from the implementation's own step functions and the walk of specviz.tree.verify: the
children of a node are tried in order against r (at first the target's p there), child x is
kept with the step's P(keep), r becomes the step's r after a rejection, and when every child
is rejected the next token is drawn from the last r; a kept leaf is followed by the bonus
token from p after it. Sampled children are i.i.d. draws from the parent's q, so their law is
a sum over every combination of draws, weighted by its q-probability. Tokens after the round
follow the target (the next round starts afresh). Exact rules must give the target's own law
to 1e-9 in float64; broken steps (negative controls) must miss it by more than 1e-3.

A sampling check runs verify_tree itself: a G-test at ALPHA = 0.01 with fixed seeds against
the enumerated law, and the same test rejecting a broken rule whose power is computed.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np
import pytest
import torch
from torch import Tensor

from specviz.core.acceptance import Step, deterministic_step, sampled_step, typical_step
from specviz.core.sampling import sample
from specviz.stats.testing import chi2_power, goodness_of_fit, pool
from specviz.tree.proposal import TokenTree
from specviz.tree.verify import EXACT_TREE, TreeRule, verify_tree

V = 5
SEEDS = (0, 1, 2)
ALPHA = 0.01
TOLERANCE = 1e-9  # exact rules: float64 rounding only
MISS = 1e-3  # broken rules: off by more than this for some shape

# A node's children: (token, or None for a child drawn from the parent's q; its own children).
Kids = tuple[tuple[int | None, "Kids"], ...]
Law = dict[tuple[int, ...], float]
Dist = Callable[[tuple[int, ...]], Tensor]  # context (tokens after the prompt) -> (V,)

LEAF: Kids = ()
S = None  # a sampled child
SAMPLED: dict[str, Kids] = {
    "one child": ((S, LEAF),),
    "3 siblings": ((S, LEAF),) * 3,
    "siblings with children": ((S, ((S, LEAF), (S, LEAF))), (S, ((S, LEAF),))),
    "deeper mixed": (
        (S, ((S, ((S, LEAF),)), (S, LEAF))),
        (S, LEAF),
        (S, ((S, ((S, LEAF), (S, LEAF))),)),
    ),
}
DETERMINISTIC: dict[str, Kids] = {  # fixed tokens, duplicates included
    "one child": ((2, LEAF),),
    "3 siblings": ((2, LEAF), (0, LEAF), (2, LEAF)),
    "siblings with children": ((1, ((3, LEAF), (1, LEAF))), (4, ((0, LEAF),))),
    "deeper mixed": (
        (3, ((3, ((1, LEAF),)), (0, LEAF))),
        (1, LEAF),
        (3, ((2, ((2, LEAF), (4, LEAF))),)),
    ),
}
MIXED: Kids = ((4, ((S, LEAF), (S, LEAF))), (0, LEAF), (2, ((S, ((S, LEAF),)),)))  # n-gram + q


def model(seed: int, sparse: bool) -> Dist:
    """A context-dependent next-token law (float64); sparse: two tokens get probability 0."""

    @cache
    def dist(ctx: tuple[int, ...]) -> Tensor:
        code = sum((t + 1) * (V + 1) ** i for i, t in enumerate(ctx))
        gen = torch.Generator().manual_seed(10_007 * seed + code)
        logits = 1.5 * torch.randn(V, generator=gen, dtype=torch.float64)
        if sparse:
            logits[torch.randperm(V, generator=gen)[:2]] = -torch.inf
        return torch.softmax(logits, dim=-1)

    return dist


def pairs() -> list[tuple[Dist, Dist]]:
    """(p, q) pairs: dense and sparse, for every seed (p and q from different seeds)."""
    return [(model(s, sparse), model(100 + s, sparse)) for s in SEEDS for sparse in (False, True)]


def _prepend(law: Law, token: int, rest: Law, weight: float) -> None:
    """law += weight * (token followed by rest)."""
    for tail, prob in rest.items():
        key = (token, *tail)
        law[key] = law.get(key, 0.0) + weight * prob


def plain_law(p: Dist, m: int) -> Callable[[tuple[int, ...]], Law]:
    """ctx -> the target's law of its next m tokens (m - len(ctx) of them after ctx)."""

    @cache
    def law(ctx: tuple[int, ...]) -> Law:
        if len(ctx) == m:
            return {(): 1.0}
        out: Law = {}
        for t, prob in enumerate(p(ctx).tolist()):
            if prob > 0:
                _prepend(out, t, law((*ctx, t)), prob)
        return out

    return law


def tree_law(p: Dist, q: Dist, kids: Kids, m: int, sampled: Step, deterministic: Step) -> Law:
    """The law of the first m tokens a tree round emits (then the target's, by plain_law)."""
    after = plain_law(p, m)

    @cache
    def walk(ctx: tuple[int, ...], kids: Kids) -> Law:
        if len(ctx) == m:
            return {(): 1.0}
        if not kids:  # a kept leaf: the bonus token from p, then the next round
            return after(ctx)
        out: Law = {}
        step = sampled if kids[0][0] is None else deterministic
        for tokens, weight in draws(q(ctx), kids):
            r, none = p(ctx), weight
            for x, (_, grandkids) in zip(tokens, kids, strict=True):
                keep, r_after = step(r, q(ctx), x)
                _prepend(out, x, walk((*ctx, x), grandkids), none * float(keep))
                none *= 1.0 - float(keep)
                r = r_after
            for t, prob in enumerate((r / r.sum()).tolist()):  # sample() normalises r
                if prob > 0:
                    _prepend(out, t, after((*ctx, t)), none * prob)
        return out

    return walk((), kids)


def draws(q: Tensor, kids: Kids) -> list[tuple[tuple[int, ...], float]]:
    """Every combination of the children's tokens with its probability (1 when fixed)."""
    combos: list[tuple[tuple[int, ...], float]] = [((), 1.0)]
    for token, _ in kids:
        options = [(token, 1.0)] if token is not None else list(enumerate(q.tolist()))
        combos = [((*c, t), w * qt) for c, w in combos for t, qt in options if qt > 0]
    return combos


def error(law: Law, reference: Law) -> float:
    """max |law - reference| over every outcome."""
    return max(abs(law.get(o, 0.0) - reference.get(o, 0.0)) for o in law.keys() | reference.keys())


def worst(kids: Kids, sampled: Step, deterministic: Step) -> float:
    """The largest error over every (p, q) pair and m = 1, 2, 3."""
    return max(
        error(tree_law(p, q, kids, m, sampled, deterministic), plain_law(p, m)(()))
        for p, q in pairs()
        for m in (1, 2, 3)
    )


ALL_SHAPES = [
    *(pytest.param(k, id=f"sampled: {n}") for n, k in SAMPLED.items()),
    *(pytest.param(k, id=f"deterministic: {n}") for n, k in DETERMINISTIC.items()),
    pytest.param(MIXED, id="deterministic root, sampled below"),
]


@pytest.mark.parametrize("kids", ALL_SHAPES)
def test_exact_steps_give_the_target_law(kids: Kids) -> None:
    assert worst(kids, sampled_step, deterministic_step) < TOLERANCE


@pytest.mark.parametrize("shape", SAMPLED)
def test_the_deterministic_step_is_exact_for_sampled_children_too(shape: str) -> None:
    """Keeping x with r(x) and removing it on rejection needs only children drawn apart from
    the target's randomness, so it is exact here too (recursive rejection keeps more)."""
    assert worst(SAMPLED[shape], deterministic_step, deterministic_step) < TOLERANCE


def test_the_enumerated_law_sums_to_one_and_has_second_tokens() -> None:
    """The enumeration itself: a law over pairs of tokens, for every shape and (p, q)."""
    p, q = pairs()[0]
    for kids in (*SAMPLED.values(), *DETERMINISTIC.values(), MIXED):
        law = tree_law(p, q, kids, 2, sampled_step, deterministic_step)
        assert abs(sum(law.values()) - 1.0) < TOLERANCE
        assert all(len(o) == 2 for o in law)


def _kept_r(step: Step) -> Step:
    """step's P(keep), but r left as it was after a rejection."""
    return lambda r, q, x: (step(r, q, x)[0], r)


def _unnormalised(r: Tensor, q: Tensor, x: int) -> tuple[Tensor, Tensor]:
    """The deterministic step zeroing r(x) after a rejection but not renormalising."""
    left = r.clone()
    left[x] = 0.0
    return r[x], left


BROKEN_SAMPLED = {"typical": typical_step, "r not updated": _kept_r(sampled_step)}
BROKEN_DETERMINISTIC = {
    "typical": typical_step,
    "r not updated": _kept_r(deterministic_step),
    "r(x) zeroed, not renormalised": _unnormalised,
    "sampled step on chosen children": sampled_step,
}


@pytest.mark.parametrize("name", BROKEN_SAMPLED)
def test_broken_sampled_steps_miss_the_target_law(name: str) -> None:
    step = BROKEN_SAMPLED[name]
    misses = {shape: worst(kids, step, deterministic_step) for shape, kids in SAMPLED.items()}
    assert max(misses.values()) > MISS, misses


@pytest.mark.parametrize("name", BROKEN_DETERMINISTIC)
def test_broken_deterministic_steps_miss_the_target_law(name: str) -> None:
    step = BROKEN_DETERMINISTIC[name]
    misses = {shape: worst(kids, sampled_step, step) for shape, kids in DETERMINISTIC.items()}
    assert max(misses.values()) > MISS, misses


# --- verify_tree itself, sampled -------------------------------------------------------------

N = 20_000
SHAPE = SAMPLED["siblings with children"]
BROKEN_RULE = TreeRule(name="r not updated", sampled=_kept_r(sampled_step))


def a_tree(p: Dist, q: Dist, kids: Kids, gen: torch.Generator) -> tuple[Tensor, TokenTree]:
    """Draw the sampled children from q; p_target (N+1, V) and the tree, parents first."""
    tokens: list[int] = []
    parents: list[int] = []
    ctxs: list[tuple[int, ...]] = [()]  # row i: the context at the root (0) or after node i - 1
    level = [(-1, (), kids)]
    while level:
        grown = []
        for parent, ctx, children in level:
            for token, grandkids in children:
                x = sample(q(ctx), gen) if token is None else token
                tokens.append(x)
                parents.append(parent)
                ctxs.append((*ctx, x))
                grown.append((len(tokens) - 1, (*ctx, x), grandkids))
        level = grown
    tree = TokenTree(
        tokens=torch.tensor(tokens),
        parents=tuple(parents),
        q_draft=torch.stack([q(c) for c in ctxs]),
        sampled=tuple(t is None for t in _flat(kids)),
        forward_calls=0,
    )
    return torch.stack([p(c) for c in ctxs]), tree


def _flat(kids: Kids) -> list[int | None]:
    """The kids' tokens breadth-first (the order a_tree numbers them)."""
    out, level = [], list(kids)
    while level:
        out += [t for t, _ in level]
        level = [k for _, grand in level for k in grand]
    return out


def two_tokens(p: Dist, q: Dist, rule: TreeRule, seed: int) -> list[tuple[int, ...]]:
    """N draws of the first two tokens: verify_tree's path and next token, then p if short."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(N):
        p_target, tree = a_tree(p, q, SHAPE, gen)
        verdict = verify_tree(p_target, tree, gen, rule)
        emitted = [int(tree.tokens[i]) for i in verdict.path] + [verdict.next_token]
        if len(emitted) == 1:  # the next round's first token follows the target
            emitted.append(sample(p(tuple(emitted)), gen))
        out.append(tuple(emitted[:2]))
    return out


def test_a_tree_numbers_the_shape_as_the_enumeration_does() -> None:
    p, q = pairs()[0]
    _, tree = a_tree(p, q, SHAPE, torch.Generator().manual_seed(0))
    assert tree.parents == (-1, -1, 0, 0, 1)


def test_verify_tree_samples_the_enumerated_law() -> None:
    """G-test at ALPHA of verify_tree's draws against the law; a broken rule is rejected, with
    the test's power against its enumerated law computed first.

    At level 0.01 about one seed in a hundred rejects the exact sampler by chance: over seeds
    0 to 10 its p-values were 0.74, 0.008, 0.72, 0.62, 0.14, 0.20, 0.016, 0.08, 0.40, 0.95 and
    0.06 (and 0.12 for 100,000 draws); the schedule below is seed 0, then seed 1."""
    p, q = pairs()[0]
    law = tree_law(p, q, SHAPE, 2, sampled_step, deterministic_step)
    assert error(law, plain_law(p, 2)(())) < TOLERANCE
    broken = tree_law(p, q, SHAPE, 2, BROKEN_RULE.sampled, deterministic_step)
    cells = sorted(law, key=lambda o: -law[o])
    groups = pool(np.array([law[o] for o in cells]) * N)
    expected = np.array([sum(law[cells[i]] for i in g) for g in groups]) * N
    alternative = np.array([sum(broken.get(cells[i], 0.0) for i in g) for g in groups]) * N
    power = chi2_power(expected, alternative, len(groups) - 1, ALPHA)
    assert power >= 0.99, f"negative control too weak: power {power:.4f}"

    exact = goodness_of_fit(two_tokens(p, q, EXACT_TREE, seed=0), law, alpha=ALPHA)
    assert not exact.reject, exact
    caught = goodness_of_fit(two_tokens(p, q, BROKEN_RULE, seed=1), law, alpha=ALPHA)
    assert caught.reject, caught
