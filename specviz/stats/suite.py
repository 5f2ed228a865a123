"""The equivalence suite: for each setting, speculative samples against the exact target law
(where it can be enumerated) and against plain target samples; plus checks against theory."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
from scipy import stats

from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.events import Accepted, Event, Rejected, RoundSummary
from specviz.core.policy import GammaPolicy
from specviz.core.sampling import logits_to_probs
from specviz.gamma.theory import expected_tokens_per_round
from specviz.stats.laws import (
    EXACT_VARIANT,
    AnyDrafter,
    Law,
    Outcome,
    Variant,
    draw,
    exact_law,
    plain_sampler,
    speculative_sampler,
)
from specviz.stats.testing import (
    TestResult,
    goodness_of_fit,
    holm_adjust,
    ks_two_sample,
    marginals,
    two_sample,
)

MAX_ENUMERATED = 50_000  # cells of the exact law we are willing to enumerate


@dataclass(frozen=True, kw_only=True)
class Setting:
    """One configuration under test: warping, gamma, length, stop tokens, outcome length k."""

    name: str
    sampling: SamplingConfig
    speculation: SpeculationConfig
    k: int
    stop_ids: frozenset[int] = field(default_factory=frozenset)


def default_settings(stop_id: int = 0) -> list[Setting]:
    """gamma 1/2/4/8; T 0.5/1/1.5; top-k; top-p; EOS and max_new_tokens inside a round.

    max_new_tokens is at least gamma + 1 so the first round drafts all gamma tokens (the decoder
    caps gamma at the tokens still to write); the outcome is the first k tokens of that decode.
    """
    t1 = SamplingConfig(temperature=1.0)
    grid = [
        Setting(name=f"gamma={g} T=1", sampling=t1, speculation=_spec(g, 3), k=3)
        for g in (1, 2, 4, 8)
    ]
    grid += [
        Setting(
            name=f"gamma=4 T={t}",
            sampling=SamplingConfig(temperature=t),
            speculation=_spec(4, 3),
            k=3,
        )
        for t in (0.5, 1.5)
    ]
    grid += [
        Setting(
            name="gamma=4 top_k=3", sampling=SamplingConfig(top_k=3), speculation=_spec(4, 3), k=3
        ),
        Setting(
            name="gamma=2 T=0.7 top_p=0.8",
            sampling=SamplingConfig(temperature=0.7, top_p=0.8),
            speculation=_spec(2, 3),
            k=3,
        ),
        Setting(
            name="gamma=4 EOS in round",
            sampling=t1,
            speculation=_spec(4, 4),
            k=4,
            stop_ids=frozenset({stop_id}),
        ),
        Setting(
            name="gamma=8 max_new_tokens=2",
            sampling=t1,
            speculation=SpeculationConfig(gamma=8, max_new_tokens=2),
            k=2,
        ),
    ]
    return grid


def tree_settings(depth: int = 4, stop_id: int = 0) -> list[Setting]:
    """Settings for a tree drafter of `depth` levels: the joint law of 3 tokens at T 1, at T 0.7
    with top-p 0.8, and greedy; and of 4 tokens with a stop token. The first round has room for
    the whole tree (max_new_tokens >= depth + 1); gamma records the depth (a tree ignores it)."""
    t1 = SamplingConfig(temperature=1.0)
    grid = [
        ("tree T=1", t1, 3, frozenset[int]()),
        ("tree T=0.7 top_p=0.8", SamplingConfig(temperature=0.7, top_p=0.8), 3, frozenset()),
        ("tree greedy", SamplingConfig(temperature=0.0), 3, frozenset()),
        ("tree EOS in round", t1, 4, frozenset({stop_id})),
    ]
    return [
        Setting(name=name, sampling=sampling, speculation=_spec(depth, k), k=k, stop_ids=stop)
        for name, sampling, k, stop in grid
    ]


def _spec(gamma: int, k: int) -> SpeculationConfig:
    """gamma, with room for a full first round and for the k tokens under test."""
    return SpeculationConfig(gamma=gamma, max_new_tokens=max(k, gamma + 1))


@torch.no_grad()
def outcome_logprobs(
    model: Any, prompt_ids: list[int], outcomes: Sequence[Outcome], sampling: SamplingConfig
) -> list[float]:
    """log P(outcome) under plain sampling from model (a continuous-ish statistic per sample)."""
    device = next(model.parameters()).device
    memo: dict[Outcome, float] = {}
    for o in set(outcomes):
        ids = torch.tensor([prompt_ids + list(o)], device=device)
        probs = logits_to_probs(model(input_ids=ids).logits[0], sampling)  # (L, V)
        start = len(prompt_ids) - 1
        picked = probs[torch.arange(start, start + len(o)), torch.tensor(o)]
        memo[o] = float(picked.log().sum())
    return [memo[o] for o in outcomes]


def law_size(vocab: int, k: int) -> int:
    """Upper bound on the number of cells of a k-token law."""
    return int(vocab**k)


def check_setting(
    target: Any,
    draft: Any,
    prompt_ids: list[int],
    setting: Setting,
    *,
    n: int,
    alpha: float,
    variant: Variant = EXACT_VARIANT,
    first_seed: int = 0,
    make_drafter: Callable[[SamplingConfig], AnyDrafter] | None = None,
    make_policy: Callable[[], GammaPolicy] | None = None,
) -> list[TestResult]:
    """All equivalence tests of one setting (each at level alpha; adjust across them later)."""
    spec = draw(
        speculative_sampler(
            target,
            draft,
            prompt_ids,
            sampling=setting.sampling,
            speculation=setting.speculation,
            k=setting.k,
            stop_ids=setting.stop_ids,
            variant=variant,
            make_drafter=make_drafter,
            make_policy=make_policy,
        ),
        n,
        first_seed,
    )
    plain = draw(
        plain_sampler(
            target,
            prompt_ids,
            sampling=setting.sampling,
            max_new_tokens=setting.speculation.max_new_tokens,
            k=setting.k,
            stop_ids=setting.stop_ids,
        ),
        n,
        first_seed + 1_000_003,
    )
    results: list[TestResult] = []
    k = min(setting.k, setting.speculation.max_new_tokens)
    if law_size(int(target.config.vocab_size), k) <= MAX_ENUMERATED:
        law: Law = exact_law(target, prompt_ids, k, setting.sampling, setting.stop_ids)
        results.append(goodness_of_fit(spec, law, alpha=alpha, name="joint vs exact law (G-test)"))
        results += marginals(spec, law, k, alpha=alpha)
    results.append(two_sample(spec, plain, alpha=alpha, name="joint vs plain samples (chi2)"))
    logp_spec = outcome_logprobs(target, prompt_ids, spec, setting.sampling)
    logp_plain = outcome_logprobs(target, prompt_ids, plain, setting.sampling)
    results.append(ks_two_sample(logp_spec, logp_plain, alpha=alpha, name="target log-prob (KS)"))
    return [replace(r, name=f"{setting.name}: {r.name}") for r in results]


def family_adjusted(results: Sequence[TestResult]) -> list[TestResult]:
    """Holm-adjust p-values across a whole family of tests (family-wise error rate alpha)."""
    adjusted = holm_adjust([r.p_value for r in results])
    return [replace(r, p_value=p) for r, p in zip(results, adjusted, strict=True)]


def run_suite(
    target: Any,
    draft: Any,
    prompt_ids: list[int],
    settings: Sequence[Setting],
    *,
    n: int,
    alpha: float,
    variant: Variant = EXACT_VARIANT,
    progress: Callable[[int, int, str], None] = lambda _i, _n, _s: None,
    make_drafter: Callable[[SamplingConfig], AnyDrafter] | None = None,
) -> list[TestResult]:
    """Every setting's tests, Holm-adjusted as one family at level alpha."""
    results: list[TestResult] = []
    for i, setting in enumerate(settings):
        progress(i, len(settings), setting.name)
        results += check_setting(
            target,
            draft,
            prompt_ids,
            setting,
            n=n,
            alpha=alpha,
            variant=variant,
            make_drafter=make_drafter,
        )
    progress(len(settings), len(settings), "done")
    return family_adjusted(results)


def acceptance_vs_logged(runs: Sequence[Sequence[Event]], gamma: int) -> list[float]:
    """Per draft position: p-value of H0 'accept rate = alpha from the logged p and q' (z-test).

    E[min(1, p(x)/q(x))] with x ~ q is alpha = sum min(p, q), so min(1, p/q) recomputed from the
    logged p(x) and q(x) is an unbiased estimate of the position's alpha.
    """
    p_values = []
    for i in range(gamma):
        verdicts = [
            e
            for run in runs
            for e in run
            if isinstance(e, Accepted | Rejected) and e.draft_index == i
        ]
        kept = np.array([isinstance(e, Accepted) for e in verdicts], dtype=float)
        probs = np.array([min(1.0, e.p_x / e.q_x) for e in verdicts])
        var = float((probs * (1 - probs)).sum())
        if not len(verdicts):
            continue
        if var == 0:
            p_values.append(1.0 if np.array_equal(kept, probs) else 0.0)
            continue
        z = float((kept - probs).sum()) / math.sqrt(var)
        p_values.append(float(2 * stats.norm.sf(abs(z))))
    return p_values


def accepted_length_vs_theory(
    runs: Sequence[Sequence[Event]], gamma: int, alpha_const: float
) -> float:
    """p-value of H0 'mean tokens per full round = (1 - a^(g+1)) / (1 - a)' (one-sample t-test)."""
    emitted = [
        e.emitted for run in runs for e in run if isinstance(e, RoundSummary) and e.gamma == gamma
    ]
    expected = expected_tokens_per_round(alpha_const, gamma)
    return float(stats.ttest_1samp(emitted, expected).pvalue)


def constant_alpha(
    target: Any, draft: Any, sampling: SamplingConfig, context: Collection[int]
) -> float:
    """sum min(p, q) in one context (constant for stats.toy.constant_alpha_pair)."""
    with torch.no_grad():
        ids = torch.tensor([list(context)])
        p = logits_to_probs(target(input_ids=ids).logits[0, -1], sampling)
        q = logits_to_probs(draft(input_ids=ids).logits[0, -1], sampling)
    return float(torch.minimum(p, q).sum())
