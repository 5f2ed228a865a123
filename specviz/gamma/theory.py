"""Closed-form expectations of speculative decoding (Leviathan et al. 2023, section 3).

alpha is the per-token acceptance probability, gamma the draft length, c the cost of one draft
step relative to one target step. The bonus token is counted in expected_tokens_per_round.
No torch at import (the app's views use these); `alpha` takes tensors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch-free at import: the app's views use the closed forms below
    from torch import Tensor


def alpha(p_target: Tensor, q_draft: Tensor) -> Tensor:
    """Acceptance probability sum_x min(p(x), q(x)) = 1 - TV(p, q), per row (...,)."""
    return p_target.minimum(q_draft).sum(dim=-1)


def expected_tokens_per_round(alpha: float, gamma: float) -> float:
    """(1 - alpha^(gamma+1)) / (1 - alpha): emitted tokens per round, bonus included.

    A non-integer gamma (a mean drafted length) evaluates the same closed form.
    """
    _check(alpha, gamma)
    return float(gamma + 1) if alpha == 1.0 else (1 - alpha ** (gamma + 1)) / (1 - alpha)


def expected_accepted_per_round(alpha: float, gamma: int) -> float:
    """alpha + ... + alpha^gamma: accepted draft tokens per round (bonus/resample not counted)."""
    return expected_tokens_per_round(alpha, gamma) - 1


def accepted_length_pmf(alpha: float, gamma: int) -> list[float]:
    """P(n drafts accepted) for n = 0..gamma when each is accepted independently w.p. alpha."""
    _check(alpha, gamma)
    return [alpha**n * (1 - alpha) for n in range(gamma)] + [alpha**gamma]


def speedup_bound(alpha: float, gamma: float, c: float) -> float:
    """Expected walltime improvement (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1))."""
    if not (math.isfinite(c) and c >= 0):
        raise ValueError(f"cost ratio c must be a finite number >= 0 (got {c})")
    return expected_tokens_per_round(alpha, gamma) / (gamma * c + 1)


def pass_speedup(alpha: float, gamma: int, plain: float, draft: float, verify: float) -> float:
    """E[tokens a round](alpha, gamma) * plain / (gamma draft + verify): the speedup predicted
    from measured pass costs in seconds (a plain step, a draft step, a verification pass of
    gamma + 1 tokens); an unmeasured alpha (nan: nothing verified) counts as 0."""
    a = min(max(alpha, 0.0), 1.0) if alpha == alpha else 0.0
    return expected_tokens_per_round(a, gamma) * plain / (gamma * draft + verify)


TOKEN_BOUND = 0.5  # the share (r - 1) / gamma from which a verification pass is token-bound


def token_bound_share(ratio: float, gamma: int) -> float:
    """(r - 1) / gamma for r = a gamma + 1-token pass over a plain step: 0 where the pass costs
    a plain step (weight-bound: reading the weights dominates), 1 where it costs gamma + 1."""
    return (ratio - 1.0) / gamma


def token_bound_from(ratios: Sequence[tuple[int, float]], gamma: int) -> int | None:
    """The first batch size (ascending) whose (batch size, r) pass is token-bound, None if none."""
    for size, ratio in sorted(ratios):
        if token_bound_share(ratio, gamma) >= TOKEN_BOUND:
            return size
    return None


def optimal_gamma(alpha: float, c: float, max_gamma: int = 16) -> int:
    """The gamma in 1..max_gamma that maximises speedup_bound."""
    return max(range(1, max_gamma + 1), key=lambda g: speedup_bound(alpha, g, c))


def alpha_to_match(speedup: float, c: float, max_gamma: int = 16) -> float:
    """The least alpha at which a draft of cost ratio c reaches `speedup` at its best gamma.

    nan when no alpha < 1 does (with gamma <= max_gamma); how good a dearer draft must be to pay.
    """

    def best(a: float) -> float:
        return speedup_bound(a, optimal_gamma(a, c, max_gamma), c)

    if best(0.0) >= speedup:
        return 0.0
    if best(1.0 - 1e-12) < speedup:
        return math.nan
    low, high = 0.0, 1.0 - 1e-12  # best() rises with alpha: bisect
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if best(mid) < speedup else (low, mid)
    return high


def _check(alpha: float, gamma: float) -> None:
    """Raise ValueError for alpha outside [0, 1] or gamma < 0."""
    if not (0.0 <= alpha <= 1.0):
        raise ValueError(f"alpha must be in [0, 1] (got {alpha})")
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0 (got {gamma})")
