"""The audit's statistics: power against simulation, N, pooling, Holm, the sequential rule, and
the interval of repeated audits' rejection share.

Simulations use fixed seeds; each Monte Carlo comparison states its tolerance (about three
standard errors of the simulated rate).
"""

from __future__ import annotations

import numpy as np
import pytest

from specviz.audit.compare import capped, two_sample_k
from specviz.audit.power import DEFAULT_TARGETS, Target, power, required_n
from specviz.audit.repeats import clopper_pearson, repeats_table, summary
from specviz.audit.sequential import LOOKS, futile, plan, rejected
from specviz.stats.testing import holm_adjust

LAW = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02])


def least_favourable(law: np.ndarray, tv: float) -> tuple[np.ndarray, np.ndarray]:
    """Two laws TV tv apart, mean `law`, their difference in proportion to it: d_i = ±tv m_i,
    + on cells holding half the mass (LAW's first two), - on the rest, so sum d = 0 and
    sum (a - b)^2 / m = 4 tv^2, the least-favourable noncentrality."""
    sign = np.where(np.cumsum(law) <= 0.5 + 1e-12, 1.0, -1.0)
    assert abs((law * sign).sum()) < 1e-12
    d = tv * law * sign
    return law + d, law - d


def rejection_rate(a: np.ndarray, b: np.ndarray, n: int, level: float, reps: int) -> float:
    """Share of reps where the audit's two-sample test rejects, samples of n from a and b."""
    rng = np.random.default_rng(0)
    target = Target(k=1, tv=0.1, cells=len(a))
    hits = 0
    for _ in range(reps):
        xa = [(int(x),) for x in rng.choice(len(a), size=n, p=a)]
        xb = [(int(x),) for x in rng.choice(len(b), size=n, p=b)]
        hits += two_sample_k(xa, xb, target, level=level, name="sim").reject
    return hits / reps


def test_least_favourable_pair_is_tv_apart() -> None:
    a, b = least_favourable(LAW, 0.1)
    assert 0.5 * np.abs(a - b).sum() == pytest.approx(0.1)
    assert a.sum() == pytest.approx(1) and b.sum() == pytest.approx(1) and (b > 0).all()


def test_power_matches_simulation_at_the_least_favourable_alternative() -> None:
    n, level, reps = 600, 0.01, 400
    a, b = least_favourable(LAW, 0.1)
    predicted = power(0.1, n, n, len(LAW) - 1, level)
    assert 0.3 < predicted < 0.9  # a rate the simulation can tell apart from 0 and 1
    assert rejection_rate(a, b, n, level, reps) == pytest.approx(predicted, abs=0.08)


def test_the_test_holds_its_level_under_the_null() -> None:
    rate = rejection_rate(LAW, LAW, 600, 0.05, 400)
    assert rate <= 0.05 + 0.035  # three standard errors above the level


def test_power_is_a_lower_bound_for_a_concentrated_difference() -> None:
    """Mass moved between the two likeliest cells: more noncentrality than least favourable."""
    b = LAW.copy()
    b[0] -= 0.1
    b[1] += 0.1
    predicted = power(0.1, 600, 600, len(LAW) - 1, 0.01)
    assert rejection_rate(LAW, b, 600, 0.01, 300) >= predicted - 0.08


def test_required_n_reaches_the_goal_and_no_less_does() -> None:
    n = required_n(0.05, 7, 0.001, 0.97)
    assert power(0.05, n, n, 7, 0.001) >= 0.97 > power(0.05, n - 1, n - 1, 7, 0.001)


def test_plan_meets_the_stated_targets_at_holms_worst_level() -> None:
    design = plan(DEFAULT_TARGETS, 2, alpha=0.01, goal=0.95)
    level = design.worst_level(len(LOOKS) - 1)
    assert design.tests == 8 and level == pytest.approx(0.007 / 8)
    for t in DEFAULT_TARGETS:
        assert power(t.tv, design.n[t.k], design.n[t.k], t.df, level) >= 0.97
    assert design.n[1] > design.n[3]  # the first token's TV 0.05 asks the most


def test_capped_keeps_the_likeliest_outcomes_and_pools_the_rest() -> None:
    a = [(1,), (1,), (2,), (3,), (4,)]
    b = [(1,), (2,), (2,), (5,)]
    ca, cb = capped(a, b, cells=3)
    assert ca == [(0,), (0,), (1,), (2,), (2,)] and cb == [(0,), (1,), (1,), (2,)]


def test_holm_adjusts_in_order() -> None:
    assert holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    results = [
        two_sample_k(
            [(0,)] * 50 + [(1,)] * 50,
            [(0,)] * 50 + [(1,)] * 50,
            DEFAULT_TARGETS[0],
            level=0.01,
            name="x",
        )
    ]
    assert rejected(results, 0.01) == [False]


def test_futility_stops_equal_laws_and_not_different_ones() -> None:
    rng = np.random.default_rng(1)
    target = Target(k=1, tv=0.1, cells=8)
    a, b = least_favourable(LAW, 0.1)

    def result(x: np.ndarray, y: np.ndarray) -> object:
        xs = [(int(v),) for v in rng.choice(8, size=3000, p=x)]
        ys = [(int(v),) for v in rng.choice(8, size=3000, p=y)]
        return two_sample_k(xs, ys, target, level=0.001, name="f")

    assert futile([result(LAW, LAW)], [target])  # type: ignore[list-item]
    assert not futile([result(a, b)], [target])  # type: ignore[list-item]


def test_clopper_pearson_matches_its_closed_forms() -> None:
    # 0 of n: upper (alpha/2)^(1/n) from 1; n of n: lower (alpha/2)^(1/n)
    assert clopper_pearson(0, 20) == pytest.approx((0.0, 1 - 0.025 ** (1 / 20)))
    assert clopper_pearson(20, 20) == pytest.approx((0.025 ** (1 / 20), 1.0))
    low, high = clopper_pearson(7, 20)
    assert low < 7 / 20 < high
    with pytest.raises(ValueError, match="hits <= runs"):
        clopper_pearson(3, 2)


def test_repeats_are_counted_and_tabled() -> None:
    plan = {"n": {"1": 100}, "targets": [{"k": 1, "tv": 0.05, "cells": 8}], "planned_power": 0.97}
    runs = [
        {
            "verdict": v,
            "setting": "T=1.0",
            "stopped_at_look": look,
            "plan": plan,
            "command": "specviz audit --k 1",
            "planted": {"requests": 10, "tv_sum": 0.5},
        }
        for v, look in [("not exact", 1), ("exact", 3), ("not exact", 2)]
    ]
    row = summary("replace TV 0.05", runs)
    assert (row["rejected"], row["runs"], row["planted_tv"]) == (2, 3, 0.05)
    line = repeats_table([row])[2]
    assert "| 2 of 3 |" in line and "| 67% (" in line and "| 1, 2, 3 |" in line
