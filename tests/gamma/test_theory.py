"""Closed-form theory against brute force."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch

from specviz.gamma.theory import (
    accepted_length_pmf,
    alpha,
    expected_accepted_per_round,
    expected_tokens_per_round,
    optimal_gamma,
    speedup_bound,
)


def test_alpha_is_one_minus_total_variation() -> None:
    p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    q = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    assert float(alpha(p, q)) == pytest.approx(1 - 0.5 * float((p - q).abs().sum()))


@pytest.mark.parametrize("a", [0.0, 0.3, 0.8, 1.0])
@pytest.mark.parametrize("gamma", [1, 4, 8])
def test_expected_tokens_is_a_geometric_sum(a: float, gamma: int) -> None:
    brute = sum(a**i for i in range(gamma + 1))
    assert expected_tokens_per_round(a, gamma) == pytest.approx(brute)
    assert expected_accepted_per_round(a, gamma) == pytest.approx(brute - 1)
    pmf = accepted_length_pmf(a, gamma)
    assert sum(pmf) == pytest.approx(1.0)
    assert sum(n * pr for n, pr in enumerate(pmf)) == pytest.approx(brute - 1)


def test_theory_imports_without_torch() -> None:  # the app's views use it and must stay light
    code = "import specviz.gamma.theory, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_speedup_bound_and_optimal_gamma() -> None:
    assert speedup_bound(0.8, 4, 0.0) == pytest.approx(expected_tokens_per_round(0.8, 4))
    # by hand: (1 - 0.6^4) / ((1 - 0.6)(3 * 0.05 + 1)) = 0.8704 / 0.46
    assert speedup_bound(0.6, 3, 0.05) == pytest.approx(0.8704 / 0.46, rel=1e-12)
    best = optimal_gamma(0.8, 0.05)
    assert all(speedup_bound(0.8, best, 0.05) >= speedup_bound(0.8, g, 0.05) for g in range(1, 17))
    assert optimal_gamma(0.3, 0.5) == 1
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1\]"):
        expected_tokens_per_round(1.2, 3)
    with pytest.raises(ValueError, match="cost ratio c must be"):
        speedup_bound(0.5, 3, -1.0)


def test_alpha_to_match_inverts_the_bound_at_the_best_gamma() -> None:
    from specviz.gamma.theory import alpha_to_match

    for a, c in ((0.6, 0.037), (0.3, 0.1), (0.9, 0.25)):
        target = speedup_bound(a, optimal_gamma(a, c), c)
        assert alpha_to_match(target, c) == pytest.approx(a, abs=1e-9)
    # a dearer draft needs more: the trimmed draft's 2.01x at c = 0.037 asks 0.64 at c = 0.057
    assert 0.6 < alpha_to_match(2.011, 0.057) < alpha_to_match(2.011, 0.1) < 1
    assert math.isnan(alpha_to_match(2.011, 0.5))  # (γ + 1) / (γ c + 1) < 2.011 for γ <= 16
    assert alpha_to_match(0.5, 0.25) == 0.0  # any draft beats half speed
