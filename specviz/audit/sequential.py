"""When the audit looks at its samples, and when it may stop: a group-sequential design.

Looks at fractions 1/4, 1/2, 3/4 and 1 of the planned N. Error rates are kept by union bounds
(no correlation between looks is assumed, so they hold conservatively):

- alpha spending: look j tests the family (Holm) at level alpha_j, with alpha_j = 0.1 alpha at
  the three interim looks and 0.7 alpha at the last; a rejection at any look stops the audit
  with "not exact". The family-wise false alarm rate over all looks is <= sum alpha_j = alpha.
- beta spending (futility): at an interim look the audit stops with "exact" when every test's
  statistic lies below its futility bound, the BETA_INTERIM / 3 quantile of the statistic under
  that test's least-favourable alternative; a real difference of the target TV stops it so with
  probability <= BETA_INTERIM in all.
- N is the least sample whose last look, at its level 0.7 alpha / m (Holm's smallest), has
  least-favourable power >= goal + BETA_INTERIM, so that the total miss rate (interim futility
  stops plus a last look that does not reject) is <= 1 - goal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specviz.audit.power import Target, futility_bound, required_n
from specviz.stats.testing import TestResult, holm_adjust

LOOKS = (0.25, 0.5, 0.75, 1.0)
ALPHA_SHARES = (0.1, 0.1, 0.1, 0.7)
BETA_INTERIM = 0.02  # spent on the three interim futility stops together
MIN_INTERIM_POWER = 0.5  # a look with less power at its level never stops for futility


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The planned samples per side and prompt of each k, and the levels of each look."""

    n: dict[int, int]  # k → N
    alpha: float
    goal: float  # the power the verdict "exact" is stated at
    tests: int  # the size of the Holm family

    def size(self, k: int, look: int) -> int:
        """Samples per side and prompt of k tokens at look `look` (0-based)."""
        return max(2, round(self.n[k] * LOOKS[look]))

    def worst_level(self, look: int) -> float:
        """Holm's smallest per-test level at a look: the level power is computed at."""
        return self.level(look) / self.tests

    def level(self, look: int) -> float:
        """The family-wise level the look spends."""
        return self.alpha * ALPHA_SHARES[look]

    @property
    def last_look(self) -> int:
        """The index of the last look."""
        return len(LOOKS) - 1


def final_goal(goal: float) -> float:
    """The power the last look alone must reach for a total power of `goal`."""
    return goal + BETA_INTERIM


def plan(
    targets: Sequence[Target], prompts: int, *, alpha: float, goal: float, n: int | None = None
) -> Plan:
    """The least N per side and prompt of each target's k meeting it at the last look's Holm
    level (n: the same given N for every k instead)."""
    tests = len(targets) * prompts
    level = alpha * ALPHA_SHARES[-1] / tests
    sizes = {t.k: n or required_n(t.tv, t.df, level, final_goal(goal)) for t in targets}
    return Plan(n=sizes, alpha=alpha, goal=goal, tests=tests)


def rejected(results: Sequence[TestResult], level: float) -> list[bool]:
    """Holm: which tests of the family reject at family-wise level `level`."""
    return [p < level for p in holm_adjust([r.p_value for r in results])]


def futile(results: Sequence[TestResult], targets: Sequence[Target]) -> bool:
    """True when every test's statistic lies below its interim futility bound.

    Only where the bound's chi-square approximation can speak: every test sees two cells or
    more and has least-favourable power >= MIN_INTERIM_POWER at the look (a rule that stops
    less often keeps its error bound).
    """
    beta = BETA_INTERIM / (len(LOOKS) - 1)
    return all(
        r.df >= 1
        and r.power >= MIN_INTERIM_POWER
        and r.statistic < futility_bound(t.tv, r.n // 2, r.n - r.n // 2, r.df, beta)
        for r, t in zip(results, targets, strict=True)
    )
