"""Per-position keep rates: exact counting, and the closed form when verdicts are independent."""

from __future__ import annotations

import math
import random

import pytest

from specviz.gamma.survival import KeptByPosition
from specviz.gamma.theory import expected_tokens_per_round


def test_counts_each_position_reached_and_kept() -> None:
    model = KeptByPosition(max_gamma=4, prior=2.0, half_life=math.inf)
    model.add(proposed=3, accepted=1)  # draft 1 kept, draft 2 rejected, draft 3 never verified
    model.add(proposed=4, accepted=4)  # all kept
    model.add(proposed=2, accepted=2)  # both kept (a short draft): drafts 3, 4 not reached
    assert model.reached == [3, 3, 1, 1] and model.kept == [3, 2, 1, 1]
    a1 = (3 + 2 * 0.5) / (3 + 2)
    a2 = (2 + 2 * a1) / (3 + 2)
    a3 = (1 + 2 * a2) / (1 + 2)
    a4 = (1 + 2 * a3) / (1 + 2)
    assert model.rates() == pytest.approx([a1, a2, a3, a4])
    survive = [a1, a1 * a2, a1 * a2 * a3, a1 * a2 * a3 * a4]
    assert model.expected_tokens() == pytest.approx(
        [1.0] + [1 + sum(survive[:g]) for g in range(1, 5)]
    )


def test_old_rounds_fade_with_the_half_life() -> None:
    model = KeptByPosition(max_gamma=2, half_life=4.0)
    model.add(proposed=2, accepted=2)
    model.add(proposed=2, accepted=0)  # one verified draft: older counts keep 0.5 ** (1 / 4)
    fade = 0.5**0.25
    assert model.reached == pytest.approx([fade + 1, fade]) and model.kept == pytest.approx(
        [fade, fade]
    )


def test_unreached_positions_inherit_the_one_before() -> None:
    model = KeptByPosition(max_gamma=6)
    for _ in range(50):
        model.add(proposed=1, accepted=0)
    rates = model.rates()
    assert rates[0] < 0.05 and rates == pytest.approx([rates[0]] * 6)


def test_independent_verdicts_give_the_closed_form() -> None:
    """Seeded draws (3,000 rounds of up to 4 drafts kept w.p. 0.6): within 4 standard errors."""
    rng, alpha, model = random.Random(0), 0.6, KeptByPosition(max_gamma=4, half_life=math.inf)
    for _ in range(3000):
        accepted = 0
        while accepted < 4 and rng.random() < alpha:
            accepted += 1
        model.add(proposed=4, accepted=accepted)
    for rate, reached in zip(model.rates(), model.reached, strict=True):
        assert abs(rate - alpha) < 4 * math.sqrt(alpha * (1 - alpha) / reached)
    closed = [expected_tokens_per_round(alpha, g) for g in range(5)]
    assert model.expected_tokens() == pytest.approx(closed, rel=0.03)


def test_lift_raises_every_rate_and_stays_below_one() -> None:
    model = KeptByPosition(max_gamma=3)
    for _ in range(20):
        model.add(proposed=3, accepted=3)
    assert model.expected_tokens(lift=0.5) == pytest.approx(
        [1, 1.999, 1.999 + 0.999**2, 1.999 + 0.999**2 + 0.999**3]
    )
    assert model.expected_tokens(lift=0.01) > model.expected_tokens()


def test_bad_size() -> None:
    with pytest.raises(ValueError, match="max_gamma must be >= 1"):
        KeptByPosition(max_gamma=0)
