"""The audit's tests: speculative against plain samples of the first k tokens, and each
position's sampled tokens against the engine's own reported distribution.

Both return specviz.stats.testing's TestResult, their power being the least-favourable one of
specviz.audit.power (the stats suite's own alternative is replaced).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from scipy import stats

from specviz.audit.power import Target, power
from specviz.audit.settings import Outcome, Sample
from specviz.stats.testing import TestResult, pool, two_sample

RANK_CELLS = 10  # the logprob check's cells: the sampled token's rank 1..10, or lower


def capped(a: Sequence[Outcome], b: Sequence[Outcome], cells: int) -> tuple[list[Outcome], ...]:
    """a and b with each outcome replaced by its cell: (i,) for the i-th likeliest of the
    cells - 1 most frequent outcomes of both samples together, (cells - 1,) for the rest."""
    counts = Counter(a) + Counter(b)
    ranked = sorted(counts, key=lambda o: (-counts[o], repr(o)))[: cells - 1]
    index = {o: i for i, o in enumerate(ranked)}
    rest = len(ranked)
    return (
        [(index.get(o, rest),) for o in a],
        [(index.get(o, rest),) for o in b],
    )


def two_sample_k(
    spec: Sequence[Outcome], plain: Sequence[Outcome], target: Target, *, level: float, name: str
) -> TestResult:
    """Chi-square test of H0: the first target.k tokens of spec and plain share one law, on at
    most target.cells cells (sparse ones pooled to expected >= 5), at `level`."""
    a, b = capped([o[: target.k] for o in spec], [o[: target.k] for o in plain], target.cells)
    result = two_sample(a, b, alpha=level, name=name)  # type: ignore[arg-type]
    return replace(
        result,
        power=power(target.tv, len(a), len(b), target.df, level),
        alternative=f"TV {target.tv} on the first {target.k} token(s) (least favourable)",
    )


def rank_law(top: dict[str, float], token: str) -> tuple[np.ndarray, int]:
    """(probabilities of ranks 1..RANK_CELLS and the rest, the sampled token's cell) from one
    position's reported logprobs, at temperature 1 with no filter."""
    ranked = sorted(top.items(), key=lambda item: (-item[1], item[0]))[:RANK_CELLS]
    probs = np.zeros(RANK_CELLS + 1)
    probs[: len(ranked)] = [math.exp(lp) for _, lp in ranked]
    probs[RANK_CELLS] = max(0.0, 1.0 - probs[:RANK_CELLS].sum())
    cell = next((i for i, (t, _) in enumerate(ranked) if t == token), RANK_CELLS)
    return probs, cell


def logprob_check(
    samples: Sequence[Sample], position: int, *, level: float, tv: float, name: str
) -> TestResult | None:
    """Chi-square test of H0: at `position`, each sampled token follows the law the engine
    reported for that request (cells: the token's rank in it), or None without such data.

    The counts of a rank are sums of Bernoullis of unequal means; their variance is at most
    the binomial one, so the statistic is conservative against the chi-square reference.
    """
    rows = [
        rank_law(top[position], str(s.tokens[position])) for s, top in _reported(samples, position)
    ]
    if len(rows) < 10:
        return None
    expected = np.sum([p for p, _ in rows], axis=0)
    observed = np.bincount([c for _, c in rows], minlength=RANK_CELLS + 1).astype(float)
    groups = pool(expected)
    exp_g = np.array([expected[g].sum() for g in groups])
    obs_g = np.array([observed[g].sum() for g in groups])
    df = len(groups) - 1
    statistic = float((((obs_g - exp_g) ** 2) / exp_g).sum()) if df else 0.0
    n = len(rows)
    return TestResult(
        name=name,
        n=n,
        statistic=statistic,
        df=df,
        p_value=float(stats.chi2.sf(statistic, df)) if df else 1.0,
        alpha=level,
        tv=0.5 * float(np.abs(observed - expected).sum()) / n,
        tv_upper=float("nan"),
        power=power(tv, n, 10**12, RANK_CELLS, level),  # one sample: n_eff = n
        alternative=f"TV {tv} on the rank law (least favourable)",
    )


def _reported(
    samples: Sequence[Sample], position: int
) -> list[tuple[Sample, tuple[dict[str, float], ...]]]:
    """The samples that reached position and carry the engine's logprobs there, with them."""
    return [
        (s, s.top)
        for s in samples
        if len(s.tokens) > position and s.top is not None and len(s.top) > position
    ]
