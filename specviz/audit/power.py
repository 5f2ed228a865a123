"""Power of the two-sample test before sampling, and the N that reaches a stated power.

Method (noncentral chi-square, least-favourable alternative). With n_a and n_b samples, the
two-sample chi-square statistic over C cells is asymptotically noncentral chi-square with C - 1
degrees of freedom and noncentrality lambda = n_eff * sum_i d_i^2 / m_i, where n_eff = n_a n_b /
(n_a + n_b), d = p_a - p_b and m the pooled law. For a total variation distance delta between the
laws on those cells, sum |d_i| = 2 delta and sum m_i = 1, so by Cauchy-Schwarz
sum d_i^2 / m_i >= (sum |d_i|)^2 = 4 delta^2: lambda >= 4 delta^2 n_eff, with equality when the
difference is spread in proportion to the law. The power computed at that least-favourable
lambda, with the most cells the test keeps (more degrees of freedom lose power), bounds the power
against every alternative at TV >= delta on the test's cells. tests/audit checks it against
simulation with fixed seeds.
"""

from __future__ import annotations

from dataclasses import dataclass

from scipy import stats

MAX_N = 10_000_000


@dataclass(frozen=True, kw_only=True)
class Target:
    """A power requirement: TV tv on the law of the first k tokens, tested on at most `cells`
    cells (the cells - 1 likeliest outcomes and the rest pooled)."""

    k: int
    tv: float
    cells: int

    @property
    def df(self) -> int:
        """The test's most degrees of freedom."""
        return self.cells - 1


# TV 0.05 on the first token, 0.1 on the joint law of 2, 3 and 4 tokens
DEFAULT_TARGETS = (
    Target(k=1, tv=0.05, cells=8),
    Target(k=2, tv=0.1, cells=16),
    Target(k=3, tv=0.1, cells=16),
    Target(k=4, tv=0.1, cells=16),
)


def noncentrality(tv: float, n_a: int, n_b: int) -> float:
    """The least-favourable noncentrality 4 tv^2 n_eff of two samples of n_a and n_b."""
    return 4.0 * tv**2 * n_a * n_b / (n_a + n_b)


def power(tv: float, n_a: int, n_b: int, df: int, level: float) -> float:
    """Least-favourable power of the level-`level` chi-square test on df degrees of freedom."""
    critical = stats.chi2.isf(level, df)
    return float(stats.ncx2.sf(critical, df, noncentrality(tv, n_a, n_b)))


def required_n(tv: float, df: int, level: float, goal: float) -> int:
    """The least n per side (equal sides) whose least-favourable power reaches goal."""
    low, high = 2, MAX_N
    if power(tv, high, high, df, level) < goal:
        raise ValueError(f"no N up to {MAX_N} reaches power {goal} against TV {tv}")
    while low < high:
        mid = (low + high) // 2
        if power(tv, mid, mid, df, level) >= goal:
            high = mid
        else:
            low = mid + 1
    return low


def futility_bound(tv: float, n_a: int, n_b: int, df: int, beta: float) -> float:
    """The beta-quantile of the statistic under the least-favourable alternative: a statistic
    below it is unlikely (probability <= beta) were the laws TV tv apart."""
    return float(stats.ncx2.ppf(beta, max(df, 1), noncentrality(tv, n_a, n_b)))
