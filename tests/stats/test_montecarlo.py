"""Monte-Carlo: first-token frequencies of speculative sampling vs the exact target law.

Chi-square goodness of fit at significance level ALPHA = 0.01 with a fixed seed schedule; the
same test must reject a broken sampler (residual replaced by p), whose power is computed.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import torch
from scipy import stats

from specviz.api import speculative_generate
from specviz.core.acceptance import EXACT, AcceptanceRule
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.sampling import logits_to_probs

from ..conftest import PairFactory

ALPHA = 0.01
N = 1500
SAMPLING = SamplingConfig(temperature=1.0)
BROKEN = AcceptanceRule(residual=lambda p, q: p)  # forgets max(0, p - q)


def _pool(
    expected: np.ndarray, observed: np.ndarray, min_expected: float = 5.0
) -> tuple[np.ndarray, np.ndarray]:
    """Merge cells whose expected count is below min_expected into one pooled cell."""
    small = expected < min_expected
    if small.any():
        expected = np.append(expected[~small], expected[small].sum())
        observed = np.append(observed[~small], observed[small].sum())
    return expected, observed


def _first_tokens(target, draft, tokenizer, prompt: list[int], rule: AcceptanceRule) -> np.ndarray:
    counts: Counter[int] = Counter()
    for seed in range(N):
        result = speculative_generate(
            target,
            draft,
            tokenizer,
            prompt,
            sampling=SamplingConfig(temperature=1.0, seed=seed),
            speculation=SpeculationConfig(gamma=2, max_new_tokens=3),
            rule=rule,
            stop=(),
        )
        counts[result.tokens[0]] += 1
    return np.array([counts[v] for v in range(target.config.vocab_size)], dtype=float)


def _chi2_pvalue(law: np.ndarray, observed: np.ndarray) -> float:
    expected, obs = _pool(law * N, observed)
    return float(stats.chisquare(obs, expected).pvalue)


def test_first_token_law_matches_target_and_catches_broken_residual(
    pair: PairFactory, tokenizer
) -> None:
    target, draft = pair("gpt2")
    prompt = tokenizer("the cat sat on")["input_ids"]
    with torch.no_grad():
        ids = torch.tensor([prompt])
        p = logits_to_probs(target(ids).logits[0, -1], SAMPLING)
        q = logits_to_probs(draft(ids).logits[0, -1], SAMPLING)
    law = p.numpy()

    # the broken sampler's exact first-token law, from its own pieces, sizes the test's power
    a = BROKEN.acceptance_prob(p, q)
    broken_law = (q * a + (q * (1 - a)).sum() * BROKEN.residual(p, q)).numpy()
    expected, shifted = _pool(law * N, broken_law * N)
    df = len(expected) - 1
    noncentrality = float((((shifted - expected) ** 2) / expected).sum())
    power = float(stats.ncx2.sf(stats.chi2.isf(ALPHA, df), df, noncentrality))
    assert power >= 0.99, f"negative control too weak: power {power:.3f}"

    assert _chi2_pvalue(law, _first_tokens(target, draft, tokenizer, prompt, EXACT)) > ALPHA
    assert _chi2_pvalue(law, _first_tokens(target, draft, tokenizer, prompt, BROKEN)) < ALPHA
