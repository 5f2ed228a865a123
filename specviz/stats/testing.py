"""Hypothesis tests of equality in law, with pooled cells, effect sizes and power.

Every function states its null hypothesis; alpha is the significance level of that one test.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from specviz.stats.laws import Law, Outcome

MIN_EXPECTED = 5.0


@dataclass(frozen=True, kw_only=True)
class TestResult:
    """One test's verdict: reject when p_value < alpha."""

    name: str
    n: int
    statistic: float
    df: int
    p_value: float
    alpha: float
    tv: float  # total variation between the empirical law and the reference
    tv_upper: float  # (1 - alpha) upper confidence bound on the TV between the true laws
    power: float  # power against the stated alternative
    alternative: str

    @property
    def reject(self) -> bool:
        """True when the null (equal laws) is rejected at level alpha."""
        return self.p_value < self.alpha


def pool(expected: np.ndarray, min_expected: float = MIN_EXPECTED) -> list[list[int]]:
    """Groups of cell indices, smallest cells merged until every group expects >= min_expected."""
    order = np.argsort(expected, kind="stable")
    groups: list[list[int]] = []
    current: list[int] = []
    mass = 0.0
    for i in order:
        current.append(int(i))
        mass += float(expected[i])
        if mass >= min_expected:
            groups.append(current)
            current, mass = [], 0.0
    if current:  # leftover small cells join the last (largest so far) group
        if groups:
            groups[-1].extend(current)
        else:
            groups.append(current)
    return groups


def _pooled(values: np.ndarray, groups: list[list[int]]) -> np.ndarray:
    """Sum values within each group."""
    return np.array([values[g].sum() for g in groups], dtype=float)


def tv_upper_bound(tv_hat: float, cells: int, n: int, alpha: float) -> float:
    """TV_hat + eps with P(TV(empirical, true) > eps) <= alpha (Weissman et al. 2003)."""
    eps = 0.5 * math.sqrt(2 * (cells * math.log(2) + math.log(1 / alpha)) / n)
    return min(1.0, tv_hat + eps)


def chi2_power(expected: np.ndarray, alternative: np.ndarray, df: int, alpha: float) -> float:
    """Power of the chi-square test when counts follow `alternative` instead of `expected`."""
    noncentrality = float((((alternative - expected) ** 2) / expected).sum())
    return float(stats.ncx2.sf(stats.chi2.isf(alpha, df), df, noncentrality))


def _shifted(probs: np.ndarray, shift: float) -> np.ndarray:
    """probs with `shift` of mass moved from the most likely cell to the second most likely."""
    alt = probs.copy()
    first, second = np.argsort(probs)[::-1][:2]
    moved = min(shift, float(alt[first]))
    alt[first] -= moved
    alt[second] += moved
    return alt


LAW_TOLERANCE = 1e-4


def goodness_of_fit(
    outcomes: Sequence[Outcome], law: Law, *, alpha: float, shift: float = 0.05, name: str = "joint"
) -> TestResult:
    """G-test of H0: outcomes are i.i.d. draws from `law` (cells pooled to expected >= 5).

    A law computed in float32 sums to 1 only within ~1e-6; it is renormalised (a law off by more
    than LAW_TOLERANCE is an error, not rounding).
    """
    total = sum(law.values())
    if abs(total - 1.0) > LAW_TOLERANCE:
        raise ValueError(f"the law's probabilities sum to {total:.6f}, not 1")
    law = {o: prob / total for o, prob in law.items()}
    n = len(outcomes)
    counts = Counter(outcomes)
    impossible = sum(c for o, c in counts.items() if law.get(o, 0.0) == 0.0)
    cells = sorted(law, key=lambda o: -law[o])
    probs = np.array([law[o] for o in cells])
    observed = np.array([counts[o] for o in cells], dtype=float)
    tv = 0.5 * (np.abs(observed / n - probs).sum() + impossible / n)
    groups = pool(probs * n)
    exp_p, obs_p = _pooled(probs * n, groups), _pooled(observed, groups)
    df = max(len(groups) - 1, 1)
    if impossible or len(groups) < 2:
        statistic = math.inf if impossible else 0.0
        p_value = 0.0 if impossible else 1.0
    else:
        statistic, p_value = stats.power_divergence(obs_p, exp_p, lambda_="log-likelihood")
    return TestResult(
        name=name,
        n=n,
        statistic=float(statistic),
        df=df,
        p_value=float(p_value),
        alpha=alpha,
        tv=float(tv),
        tv_upper=tv_upper_bound(float(tv), len(cells) + (1 if impossible else 0), n, alpha),
        power=chi2_power(exp_p, _shifted(exp_p / n, shift) * n, df, alpha)
        if len(groups) > 1
        else 0.0,
        alternative=f"TV {shift} moved between the two likeliest outcomes",
    )


def two_sample(
    a: Sequence[Outcome],
    b: Sequence[Outcome],
    *,
    alpha: float,
    shift: float = 0.05,
    name: str = "joint (two-sample)",
) -> TestResult:
    """Chi-square contingency test of H0: samples a and b come from the same law."""
    ca, cb = Counter(a), Counter(b)
    cells = sorted(set(ca) | set(cb), key=lambda o: -(ca[o] + cb[o]))
    table = np.array([[ca[o] for o in cells], [cb[o] for o in cells]], dtype=float)
    pooled_probs = table.sum(0) / table.sum()
    groups = pool(pooled_probs * min(len(a), len(b)))
    pooled = np.stack([_pooled(row, groups) for row in table])  # (2, G)
    tv = 0.5 * float(np.abs(table[0] / len(a) - table[1] / len(b)).sum())
    if pooled.shape[1] < 2:  # one cell (e.g. both greedy): nothing to test, no alternative
        statistic, p_value, df = 0.0, 1.0, 0
    else:
        res = stats.chi2_contingency(pooled, correction=False)
        statistic, p_value, df = float(res.statistic), float(res.pvalue), int(res.dof)
    n_eff = len(a) * len(b) / (len(a) + len(b))
    exp_p = _pooled(pooled_probs, groups) * n_eff
    return TestResult(
        name=name,
        n=len(a) + len(b),
        statistic=statistic,
        df=df,
        p_value=p_value,
        alpha=alpha,
        tv=tv,
        tv_upper=min(
            1.0, tv + 2 * (tv_upper_bound(0.0, len(cells), min(len(a), len(b)), alpha / 2))
        ),
        power=chi2_power(exp_p, _shifted(exp_p / n_eff, shift) * n_eff, df, alpha) if df else 0.0,
        alternative=f"TV {shift} moved between the two likeliest outcomes",
    )


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values: reject i when adjusted[i] < family-wise alpha."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def marginal_laws(law: Law, k: int) -> list[Law]:
    """Per-position laws of token i (outcomes shorter than i+1 map to the empty 'ended' cell)."""
    out: list[Law] = [{} for _ in range(k)]
    for seq, prob in law.items():
        for i in range(k):
            cell = seq[i : i + 1]
            out[i][cell] = out[i].get(cell, 0.0) + prob
    return out


def marginals(outcomes: Sequence[Outcome], law: Law, k: int, *, alpha: float) -> list[TestResult]:
    """Per-position goodness of fit with Holm-adjusted p-values (family-wise level alpha)."""
    results = [
        goodness_of_fit([o[i : i + 1] for o in outcomes], m, alpha=alpha, name=f"position {i}")
        for i, m in enumerate(marginal_laws(law, k))
    ]
    adjusted = holm_adjust([r.p_value for r in results])
    return [
        replace(r, p_value=p, name=f"{r.name} (Holm)")
        for r, p in zip(results, adjusted, strict=True)
    ]


def ks_two_sample(a: Sequence[float], b: Sequence[float], *, alpha: float, name: str) -> TestResult:
    """Two-sample Kolmogorov–Smirnov test of H0: the two continuous statistics share a law."""
    res = stats.ks_2samp(a, b)
    n, m = len(a), len(b)
    crit = math.sqrt(-0.5 * math.log(alpha / 2) * (n + m) / (n * m))
    return TestResult(
        name=name,
        n=n + m,
        statistic=float(res.statistic),
        df=0,
        p_value=float(res.pvalue),
        alpha=alpha,
        tv=float(res.statistic),
        tv_upper=min(1.0, float(res.statistic) + crit),
        power=float("nan"),
        alternative="any difference in the CDF (KS distance shown in the TV columns)",
    )


def estimated_power(result: TestResult, level: float) -> float:
    """Power at `level` of a chi-square-type test, noncentrality estimated as statistic - df."""
    if result.df == 0 or not math.isfinite(result.statistic):
        return 1.0 if result.statistic == math.inf else float("nan")
    noncentrality = max(result.statistic - result.df, 0.0)
    return float(stats.ncx2.sf(stats.chi2.isf(level, result.df), result.df, noncentrality))
