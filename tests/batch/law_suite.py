"""The equivalence suite for batched speculative decoding: each row's law, and rows independent.

A batch of B prompts decoded together (specviz.batch) must give each row the law a decode of
that prompt alone has (the target's plain law), whatever the other rows are doing; and the B
rows must be independent requests. check_batch_setting tests both for one Setting: per row the
joint law of its first k tokens against the exact law (G-test, where it can be enumerated) and
against plain samples of that prompt alone (chi-square); per pair of rows the independence of
their outcomes (chi-square contingency on the pair of first tokens and on the pair of whole
outcomes).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from scipy import stats

from specviz.batch.decoding import BatchSpeculativeDecoder
from specviz.batch.drafters import BatchDrafter, BatchModelDrafter
from specviz.batch.rule import EXACT_BATCH, BatchRule
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.events import EMITTING, Event
from specviz.stats.laws import Outcome, draw, exact_law, plain_sampler
from specviz.stats.suite import MAX_ENUMERATED, Setting, law_size
from specviz.stats.testing import (
    MIN_EXPECTED,
    TestResult,
    chi2_power,
    goodness_of_fit,
    pool,
    tv_upper_bound,
    two_sample,
)

BatchOutcome = tuple[Outcome, ...]  # one outcome per row, in prompt order
BatchSampler = Callable[[int], BatchOutcome]  # seed → one outcome per row
MakeBatchDrafter = Callable[[], BatchDrafter]  # a fresh batch drafter
PLAIN_SEED_OFFSET = 1_000_003  # plain samples' seeds start here (never a batch row's)


def row_seeds(seed: int, rows: int) -> list[int]:
    """The rows' seeds for batch seed `seed`: seed * rows + r, so no two rows share one."""
    return [seed * rows + r for r in range(rows)]


def check_prompts(prompts: Sequence[Sequence[int]]) -> None:
    """Raise ValueError unless there is at least one prompt and each has a token."""
    if not prompts:
        raise ValueError("a batch needs at least one prompt: pass a list of token id lists")
    empty = [r for r, p in enumerate(prompts) if not p]
    if empty:
        raise ValueError(f"prompts {empty} are empty: give every row at least one token")


def row_outcomes(events: Sequence[Event], rows: int, k: int) -> BatchOutcome:
    """Each row's first k emitted tokens of one batch event stream."""
    tokens: list[list[int]] = [[] for _ in range(rows)]
    for e in events:
        if isinstance(e, EMITTING):
            tokens[e.row].append(e.token)
    return tuple(tuple(t[:k]) for t in tokens)


def batch_sampler(
    target: Any,
    draft: Any,
    prompts: Sequence[list[int]],
    *,
    sampling: SamplingConfig,
    speculation: SpeculationConfig,
    k: int,
    stop_ids: Collection[int] = (),
    batch_rule: BatchRule = EXACT_BATCH,
    make_drafter: MakeBatchDrafter | None = None,
    gamma_cap: Callable[[int], int] | None = None,
) -> BatchSampler:
    """seed → each row's first k tokens of one batch decode, row r seeded seed * B + r.

    make_drafter() builds another batch drafter (e.g. build_batch_drafter("ngram",
    ...)) instead of the draft model's BatchModelDrafter; batch_rule swaps a piece of the batch
    round (specviz.batch.rule; the mutants of tests/batch/mutants.py); gamma_cap caps each
    row's γ by the batch's size (specviz.batch.gamma).
    """
    check_prompts(prompts)
    rows, vocab = len(prompts), int(target.config.vocab_size)

    def run(seed: int) -> BatchOutcome:
        seeded = replace(sampling, seed=seed)
        drafter = make_drafter() if make_drafter is not None else BatchModelDrafter(draft, vocab)
        decoder = BatchSpeculativeDecoder(
            target,
            drafter,
            prompts,
            sampling=seeded,
            speculation=speculation,
            stop_ids=stop_ids,
            seeds=row_seeds(seed, rows),
            batch_rule=batch_rule,
            gamma_cap=gamma_cap,
        )
        return row_outcomes(list(decoder.events()), rows, k)

    return run


def draw_batches(sampler: BatchSampler, n: int, first_seed: int = 0) -> list[BatchOutcome]:
    """n batches' outcomes with seeds first_seed, first_seed + 1, ..."""
    return [sampler(seed) for seed in range(first_seed, first_seed + n)]


def _margin_groups(values: Sequence[Hashable], threshold: float) -> dict[Hashable, int]:
    """Each value's pooled category: rare values merged until each category counts >= threshold."""
    counts = Counter(values)
    cells = sorted(counts, key=lambda v: (-counts[v], repr(v)))
    groups = pool(np.array([counts[v] for v in cells], dtype=float), threshold)
    return {cells[i]: g for g, members in enumerate(groups) for i in members}


def _dependent(expected: np.ndarray, shift: float) -> np.ndarray:
    """expected counts (R, C) with `shift` of the mass moved onto the two likeliest diagonal
    cells from the two cells crossing them: a positive dependence at TV shift."""
    alt, n = expected.copy(), expected.sum()
    (i1, i2), (j1, j2) = (np.argsort(expected.sum(axis=a))[::-1][:2] for a in (1, 0))
    moved = min(shift * n / 2, float(alt[i1, j2]), float(alt[i2, j1]))
    alt[i1, j1] += moved
    alt[i2, j2] += moved
    alt[i1, j2] -= moved
    alt[i2, j1] -= moved
    return alt


def independence(
    a: Sequence[Hashable],
    b: Sequence[Hashable],
    *,
    alpha: float,
    shift: float = 0.05,
    name: str = "independence",
) -> TestResult:
    """Chi-square contingency test of H0: a[i] and b[i] are independent (pairs of draws).

    Each margin's rare values are pooled until every cell of the table expects >= 5; tv is the
    TV between the empirical joint law and the product of its margins.
    """
    n = len(a)
    if len(b) != n or n == 0:
        raise ValueError(f"independence needs two samples of one non-zero size (got {n}, {len(b)})")
    threshold = math.sqrt(MIN_EXPECTED * n)  # cell expects (count_a * count_b) / n >= 5
    ga, gb = _margin_groups(a, threshold), _margin_groups(b, threshold)
    table = np.zeros((max(ga.values()) + 1, max(gb.values()) + 1))  # (R, C)
    for x, y in zip(a, b, strict=True):
        table[ga[x], gb[y]] += 1
    expected = np.outer(table.sum(axis=1), table.sum(axis=0)) / n  # (R, C)
    tv = 0.5 * float(np.abs(table - expected).sum()) / n
    df = (table.shape[0] - 1) * (table.shape[1] - 1)
    if df == 0:  # one margin takes a single value: nothing to test, no alternative
        statistic, p_value, power = 0.0, 1.0, 0.0
    else:
        res = stats.chi2_contingency(table, correction=False)
        statistic, p_value = float(res.statistic), float(res.pvalue)
        power = chi2_power(expected.ravel(), _dependent(expected, shift).ravel(), df, alpha)
    bound = sum(tv_upper_bound(0.0, cells, n, alpha / 3) for cells in (table.size, *table.shape))
    return TestResult(
        name=name,
        n=n,
        statistic=statistic,
        df=df,
        p_value=p_value,
        alpha=alpha,
        tv=tv,
        tv_upper=min(1.0, tv + bound),
        power=power,
        alternative=f"TV {shift} moved onto the two likeliest diagonal cells",
    )


def rows_independent(
    batches: Sequence[BatchOutcome], *, alpha: float, pairs: Sequence[tuple[int, int]]
) -> list[TestResult]:
    """For each pair of rows (a, b): independence of their first tokens and of their outcomes."""
    results: list[TestResult] = []
    for a, b in pairs:
        firsts = ([o[a][:1] for o in batches], [o[b][:1] for o in batches])
        whole = ([o[a] for o in batches], [o[b] for o in batches])
        results.append(independence(*firsts, alpha=alpha, name=f"rows {a},{b}: first tokens"))
        results.append(independence(*whole, alpha=alpha, name=f"rows {a},{b}: outcomes"))
    return results


def check_batch_setting(
    target: Any,
    draft: Any,
    prompts: Sequence[list[int]],
    setting: Setting,
    *,
    n: int,
    alpha: float,
    batch_rule: BatchRule = EXACT_BATCH,
    make_drafter: MakeBatchDrafter | None = None,
    first_seed: int = 0,
    pairs: Sequence[tuple[int, int]] | None = None,
    gamma_cap: Callable[[int], int] | None = None,
) -> list[TestResult]:
    """Every row's law tests and every pair's independence tests for n batches of `setting`.

    Each test is at level alpha; adjust across the family (suite.family_adjusted). pairs: the
    pairs of rows tested for independence (default: all of them); gamma_cap: batch_sampler's.
    """
    check_prompts(prompts)
    if n < 2:
        raise ValueError(f"n must be at least 2 batches (got {n})")
    rows = range(len(prompts))
    pairs = list(itertools.combinations(rows, 2)) if pairs is None else list(pairs)
    wrong = [(a, b) for a, b in pairs if a == b or a not in rows or b not in rows]
    if wrong:
        raise ValueError(f"pairs {wrong} are not two different rows of {len(prompts)}")
    batches = draw_batches(
        batch_sampler(
            target,
            draft,
            prompts,
            sampling=setting.sampling,
            speculation=setting.speculation,
            k=setting.k,
            stop_ids=setting.stop_ids,
            batch_rule=batch_rule,
            make_drafter=make_drafter,
            gamma_cap=gamma_cap,
        ),
        n,
        first_seed,
    )
    results: list[TestResult] = []
    for r, prompt in enumerate(prompts):
        results += _row_law(target, prompt, setting, [o[r] for o in batches], alpha, first_seed, r)
    results += rows_independent(batches, alpha=alpha, pairs=pairs)
    return [replace(res, name=f"{setting.name}: {res.name}") for res in results]


def _row_law(
    target: Any,
    prompt: list[int],
    setting: Setting,
    outcomes: list[Outcome],
    alpha: float,
    first_seed: int,
    r: int,
) -> list[TestResult]:
    """Row r's outcomes against the exact law of its prompt alone and against plain samples."""
    n, k = len(outcomes), min(setting.k, setting.speculation.max_new_tokens)
    results: list[TestResult] = []
    if law_size(int(target.config.vocab_size), k) <= MAX_ENUMERATED:
        law = exact_law(target, prompt, k, setting.sampling, setting.stop_ids)
        results.append(goodness_of_fit(outcomes, law, alpha=alpha, name=f"row {r} vs exact law"))
    plain = draw(
        plain_sampler(  # k tokens have the law of the first k of a longer decode
            target,
            prompt,
            sampling=setting.sampling,
            max_new_tokens=k,
            k=k,
            stop_ids=setting.stop_ids,
        ),
        n,
        first_seed + PLAIN_SEED_OFFSET + r * n,
    )
    results.append(two_sample(outcomes, plain, alpha=alpha, name=f"row {r} vs plain samples"))
    return results
