"""The equivalence lab's statistics: speculative vs plain samples of the first k tokens, tested
with the statistical suite's library, optionally with one of its broken samplers swapped in.

No UI here: the app's Equivalence lab tab (specviz.app.tabs.lab) parses the request and renders
the LabResult this yields.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import torch

from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.drafter import Drafter, SharesTargetCache
from specviz.core.policy import GammaPolicy
from specviz.drafters.hybrid import LookupThenModelDrafter
from specviz.drafters.model import ModelDrafter
from specviz.drafters.names import REGISTRY
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.drafters.suffix.hybrid import SuffixThenModelDrafter
from specviz.stats.laws import (
    EXACT_VARIANT,
    Law,
    Outcome,
    Sampler,
    Variant,
    exact_law,
    outcome,
    plain_sampler,
    speculative_sampler,
)
from specviz.stats.report import rows
from specviz.stats.suite import MAX_ENUMERATED, family_adjusted, law_size, outcome_logprobs
from specviz.stats.testing import (
    TestResult,
    goodness_of_fit,
    ks_two_sample,
    marginal_laws,
    marginals,
    pool,
    two_sample,
)
from specviz.stats.toy import random_pair
from specviz.tree.decoding import TreeDecoder
from specviz.tree.drafter import TreeDrafter
from specviz.tree.verify import EXACT_TREE, TreeRule

REAL = "none (real sampler)"  # the sampler's name when no mutant is swapped in
PLAIN_SEED_OFFSET = 1_000_003  # plain draws use other seeds than speculative ones (as the suite)


class LabPlan(Protocol):
    """What a lab run draws and tests: the sampler variant, N draws per sampler, the first k
    tokens, the family-wise level."""

    @property
    def variant(self) -> Variant:
        """The speculative sampler: EXACT_VARIANT or a mutant."""

    @property
    def n(self) -> int:
        """Draws per sampler."""

    @property
    def k(self) -> int:
        """Tokens per outcome."""

    @property
    def alpha(self) -> float:
        """The family-wise level (Holm)."""


@dataclass(frozen=True, kw_only=True)
class LabResult:
    """One lab run: both samples, the exact laws where known, and the tests as table rows."""

    spec: Sequence[Outcome]
    plain: Sequence[Outcome]
    exact: Law | None  # joint law of the first k tokens, when enumerable
    exact_first: Law | None  # law of the first token
    decode: Callable[[int], str]
    sampler: str
    alpha: float
    rows: Sequence[Sequence[str]]  # specviz.stats.report.rows: one per test
    rejected: int
    seconds: float = 0.0
    prompt_format: str | None = None  # 'chat' or 'raw' for a model pair's prompt; None: toy ids


@dataclass(frozen=True, kw_only=True)
class LabPair:
    """What the samplers run on: target, draft model (None where the drafter needs none), the
    registered drafter and its options, the context and how to show tokens."""

    target: Any
    draft: Any
    prompt_ids: list[int]
    stop_ids: frozenset[int]
    decode: Callable[[int], str]
    drafter: str = "model"  # a name in specviz.drafters.registry.REGISTRY
    options: DrafterOptions = field(default_factory=DrafterOptions)
    prompt_format: str | None = None  # 'chat' or 'raw' (specviz.models.chat); None: token ids
    tree_rule: TreeRule = EXACT_TREE  # what verifies a tree drafter's trees

    @property
    def tree(self) -> bool:
        """True when the drafter proposes trees (the tree decoder samples)."""
        return REGISTRY[self.drafter].tree


def toy_pair() -> LabPair:
    """The suite's toy pair (vocabulary of 6, exact law enumerable), as `specviz verify` uses."""
    target, draft = random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)
    return LabPair(
        target=target,
        draft=draft,
        prompt_ids=[1, 2],
        stop_ids=frozenset(),
        decode=lambda t: f"t{t}",
    )


def model_part(drafter: Drafter) -> ModelDrafter | None:
    """The drafter's draft-model drafter: itself, a hybrid's model (lookup or suffix first),
    else None."""
    if isinstance(drafter, LookupThenModelDrafter | SuffixThenModelDrafter):
        return drafter.model
    return drafter if isinstance(drafter, ModelDrafter) else None


def refuse_tree_mutant(pair: LabPair, variant: Variant) -> None:
    """ValueError for a mutant with a tree drafter: the mutants break chain speculation."""
    if pair.tree and variant is not EXACT_VARIANT:
        raise ValueError(
            f"mutant {variant.name} breaks a piece of chain speculation, and a tree drafter is "
            "verified by the tree decoder: pick the real sampler (the lossy typical acceptance "
            "rule is the tree's broken sampler to test), or a chain drafter"
        )


def lab_drafter(pair: LabPair, variant: Variant) -> Callable[[SamplingConfig], Drafter]:
    """sampling → a fresh drafter of the pair's kind (built by the registry) with the variant's
    drafter class and draft cache swapped in; ValueError where that drafter has no such piece
    (a mutant that would otherwise be silently left out)."""
    refuse_tree_mutant(pair, variant)
    options = replace(pair.options, model_cls=variant.drafter_cls, make_cache=variant.make_cache)

    def make(sampling: SamplingConfig) -> Drafter:
        drafter = build_drafter(
            pair.drafter, target=pair.target, draft=pair.draft, sampling=sampling, options=options
        )
        if not isinstance(drafter, Drafter):
            raise ValueError(f"the {pair.drafter!r} drafter proposes trees: use tree_sampler")
        return drafter

    swaps_drafter = variant.drafter_cls is not ModelDrafter
    if not swaps_drafter and variant.make_cache is None:
        return make  # the variant changes the sampler only, whichever drafter drafts
    probe, label = make(SamplingConfig()), REGISTRY[pair.drafter].label
    model = model_part(probe)
    if swaps_drafter and type(model) is not variant.drafter_cls:
        own = model is not None or REGISTRY[pair.drafter].uses_draft_model  # cross-tokenizer
        why = "builds a drafter of its own" if own else "drafts without a model"
        raise ValueError(
            f"mutant {variant.name} changes the draft model's drafter, and the {label!r} "
            f"drafter {why}: pick a drafter with a draft model, or the early exit with a cache "
            "of its own"
        )
    if variant.make_cache is not None and isinstance(probe, SharesTargetCache):
        raise ValueError(
            f"mutant {variant.name} changes the KV cache, which the {label!r} drafter shares "
            "with the target: pick the early exit with a cache of its own to test it"
        )
    return make


@dataclass(frozen=True)
class LabProgress:
    """How far the draws have come."""

    text: str
    fraction: float


def samplers(
    pair: LabPair,
    req: LabPlan,
    sampling: SamplingConfig,
    gamma: int,
    make_policy: Callable[[], GammaPolicy] | None,
) -> tuple[Sampler, Sampler]:
    """The speculative sampler (real or mutant; a tree drafter's with the pair's tree rule) and
    the plain target sampler of k tokens."""
    variant = req.variant
    refuse_tree_mutant(pair, variant)
    spec = (
        tree_sampler(pair, req, sampling, gamma)
        if pair.tree
        else speculative_sampler(
            pair.target,
            pair.draft,
            pair.prompt_ids,
            sampling=sampling,
            speculation=SpeculationConfig(gamma=gamma, max_new_tokens=max(req.k, gamma + 1)),
            k=req.k,
            stop_ids=pair.stop_ids,
            variant=variant,
            make_drafter=lab_drafter(pair, variant),
            make_policy=make_policy,
        )
    )
    plain = plain_sampler(
        pair.target,
        pair.prompt_ids,
        sampling=sampling,
        max_new_tokens=req.k,
        k=req.k,
        stop_ids=pair.stop_ids,
    )
    return spec, plain


def tree_sampler(pair: LabPair, req: LabPlan, sampling: SamplingConfig, depth: int) -> Sampler:
    """seed → the first k tokens of one tree decode (the pair's tree drafter and rule), long
    enough that the first round's tree reaches its full depth."""
    options = pair.options

    def run(seed: int) -> Outcome:
        seeded = replace(sampling, seed=seed)
        drafter = build_drafter(
            pair.drafter, target=pair.target, draft=pair.draft, sampling=seeded, options=options
        )
        assert isinstance(drafter, TreeDrafter)  # pair.tree
        decoder = TreeDecoder(
            pair.target,
            drafter,
            pair.prompt_ids,
            sampling=seeded,
            max_new_tokens=max(req.k, depth + 1),
            stop_ids=pair.stop_ids,
            rule=pair.tree_rule,
        )
        return outcome(list(decoder.events()), req.k)

    return run


def draw_with_progress(
    sampler: Sampler, n: int, first_seed: int, label: str, done: list[Outcome], every: int
) -> Iterator[LabProgress]:
    """Append n draws (seeds first_seed, first_seed + 1, ...) to done, reporting every few."""
    start = time.perf_counter()
    for i in range(n):
        done.append(sampler(first_seed + i))
        if (i + 1) % every == 0 or i + 1 == n:
            rate = (i + 1) / max(time.perf_counter() - start, 1e-9)
            yield LabProgress(f"{label}: {i + 1}/{n} ({rate:.0f}/s)", (i + 1) / n)


def normalized(law: Law) -> Law:
    """The law rescaled to sum to 1 in float64 (a float32 model's probabilities miss by ~1e-7,
    more than scipy's goodness-of-fit tolerates)."""
    total = math.fsum(law.values())
    return {o: pr / total for o, pr in law.items()}


def comparable(a: list[Outcome], b: list[Outcome]) -> bool:
    """Whether two samples pool (as two_sample pools them) into at least two cells; at T = 0,
    for one, every draw is the same outcome and there is nothing to compare."""
    counts = Counter(a) + Counter(b)
    probs = np.array(list(counts.values()), dtype=float) / (len(a) + len(b))
    return len(pool(probs * min(len(a), len(b)))) >= 2


def equivalence_tests(
    pair: LabPair,
    req: LabPlan,
    sampling: SamplingConfig,
    spec: list[Outcome],
    plain: list[Outcome],
) -> tuple[list[TestResult], Law | None, Law]:
    """The tests, Holm-adjusted as one family; the exact joint law (if enumerable); the first
    token's exact law."""
    a, t = req.alpha, pair.target
    law = None
    results: list[TestResult] = []
    if law_size(int(t.config.vocab_size), req.k) <= MAX_ENUMERATED:
        law = normalized(exact_law(t, pair.prompt_ids, req.k, sampling, pair.stop_ids))
        results.append(goodness_of_fit(spec, law, alpha=a, name="joint vs exact law (G-test)"))
        results += marginals(spec, law, req.k, alpha=a) if req.k > 1 else []
        first_law = marginal_laws(law, req.k)[0]
    else:  # the first token's exact law takes one forward pass
        first_law = normalized(exact_law(t, pair.prompt_ids, 1, sampling, pair.stop_ids))
        first = [o[:1] for o in spec]
        results.append(goodness_of_fit(first, first_law, alpha=a, name="first token vs exact law"))
    pairs = {"joint vs plain samples (chi2)": (spec, plain)}
    if req.k > 1:
        pairs["first token vs plain (chi2)"] = ([o[:1] for o in spec], [o[:1] for o in plain])
    results += [
        two_sample(x, y, alpha=a, name=name) for name, (x, y) in pairs.items() if comparable(x, y)
    ]
    logp = outcome_logprobs(t, pair.prompt_ids, spec + plain, sampling)
    ks = ks_two_sample(logp[: len(spec)], logp[len(spec) :], alpha=a, name="target log-prob (KS)")
    return family_adjusted([*results, ks]), law, first_law


def sampler_label(pair: LabPair, variant: Variant) -> str:
    """The sampler as the lab's status names it: the real one, a mutant, or a lossy tree rule."""
    if variant is not EXACT_VARIANT:
        return f"{variant.name} ({variant.description})"
    if pair.tree and not pair.tree_rule.exact:
        return f"{pair.tree_rule.name} tree rule (LOSSY: does not follow the target's law)"
    return f"{REAL}, tree drafter {pair.drafter}" if pair.tree else REAL


def run_lab(
    pair: LabPair,
    req: LabPlan,
    sampling: SamplingConfig,
    gamma: int,
    make_policy: Callable[[], GammaPolicy] | None = None,
    every: int = 10,
) -> Iterator[LabProgress | LabResult]:
    """Draw N speculative then N plain samples (progress as they come), test, yield the result."""
    spec_sampler, plain_sampler_ = samplers(pair, req, sampling, gamma, make_policy)
    spec: list[Outcome] = []
    plain: list[Outcome] = []
    seed, start, v = sampling.seed, time.perf_counter(), req.variant
    with torch.inference_mode():
        sampler_name = "speculative" if req.variant is EXACT_VARIANT else req.variant.name
        for step in draw_with_progress(spec_sampler, req.n, seed, sampler_name, spec, every):
            yield replace(step, fraction=step.fraction / 2)
        offset = seed + PLAIN_SEED_OFFSET
        for step in draw_with_progress(plain_sampler_, req.n, offset, "plain", plain, every):
            yield replace(step, fraction=0.5 + step.fraction / 2)
        yield LabProgress("testing…", 1.0)
        results, law, first_law = equivalence_tests(pair, req, sampling, spec, plain)
    yield LabResult(
        spec=spec,
        plain=plain,
        exact=law,
        exact_first=first_law,
        decode=pair.decode,
        sampler=sampler_label(pair, v),
        alpha=req.alpha,
        rows=rows(results),
        rejected=sum(r.reject for r in results),
        seconds=time.perf_counter() - start,
        prompt_format=pair.prompt_format,
    )
