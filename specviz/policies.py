"""How many tokens to draft each round: fixed, transformers' heuristic, or chosen by theory.

A policy sees only round summaries (counts and timings), never the tokens' values, so any
policy leaves the output law exact; it changes speed only.
"""

from __future__ import annotations

from typing import Protocol

from specviz.events import RoundSummary
from specviz.theory import optimal_gamma


class GammaPolicy(Protocol):
    """Chooses gamma before each round and learns from each round's summary."""

    def next_gamma(self) -> int:
        """Gamma for the coming round (>= 1)."""

    def update(self, summary: RoundSummary) -> None:
        """Observe the round that just ended."""


class FixedGamma:
    """The same gamma every round."""

    def __init__(self, gamma: int) -> None:
        """gamma >= 1."""
        if gamma < 1:
            raise ValueError(f"gamma must be an integer >= 1 (got {gamma})")
        self.gamma = gamma

    def next_gamma(self) -> int:
        """The fixed gamma."""
        return self.gamma

    def update(self, summary: RoundSummary) -> None:
        """Nothing to learn."""


class HeuristicGamma:
    """transformers' schedule: +2 after a round whose drafts were all kept, else -1 (min 1)."""

    def __init__(self, start: int = 4, max_gamma: int = 16) -> None:
        """Start at `start`, never above max_gamma."""
        if not 1 <= start <= max_gamma:
            raise ValueError(f"need 1 <= start <= max_gamma (got start={start}, max={max_gamma})")
        self.gamma, self.max_gamma = start, max_gamma

    def next_gamma(self) -> int:
        """Current gamma."""
        return self.gamma

    def update(self, summary: RoundSummary) -> None:
        """Grow after a full accept of a full-length draft, shrink otherwise."""
        if summary.proposed == 0 or summary.gamma != self.gamma:
            return  # a round capped by max_new_tokens says nothing about gamma
        full = summary.accepted == summary.proposed == summary.gamma
        self.gamma = min(self.max_gamma, self.gamma + 2) if full else max(1, self.gamma - 1)


class TheoryGamma:
    """Gamma maximising the Leviathan bound for the running alpha and cost-ratio estimates."""

    def __init__(self, start: int = 4, max_gamma: int = 16, prior_rounds: float = 2.0) -> None:
        """Start at `start`; alpha is shrunk toward 0.5 by prior_rounds pseudo-rounds."""
        if not 1 <= start <= max_gamma:
            raise ValueError(f"need 1 <= start <= max_gamma (got start={start}, max={max_gamma})")
        self.gamma, self.max_gamma, self.prior = start, max_gamma, prior_rounds
        self.accepted = self.verified = 0.0
        self.draft_seconds = self.draft_calls = self.target_seconds = self.rounds = 0.0

    @property
    def alpha(self) -> float:
        """Running per-token acceptance estimate (accepted / verified, with a weak prior)."""
        return (self.accepted + 0.5 * self.prior) / (self.verified + self.prior)

    @property
    def cost_ratio(self) -> float:
        """Running c = seconds per draft forward / seconds per target forward."""
        if not self.draft_calls or not self.target_seconds:
            return 0.0
        return (self.draft_seconds / self.draft_calls) / (self.target_seconds / self.rounds)

    def next_gamma(self) -> int:
        """argmax over gamma of the speedup bound at the current estimates."""
        return self.gamma

    def update(self, summary: RoundSummary) -> None:
        """Fold in the round's acceptance and timings, then re-optimise gamma."""
        rejected = 1 if summary.accepted < summary.proposed else 0
        self.accepted += summary.accepted
        self.verified += summary.accepted + rejected
        self.draft_seconds += summary.draft_seconds
        self.draft_calls += summary.draft_forward_calls
        self.target_seconds += summary.target_seconds
        self.rounds += 1
        alpha = min(self.alpha, 0.999)
        self.gamma = optimal_gamma(alpha, self.cost_ratio, self.max_gamma)


def make_policy(name: str, gamma: int) -> GammaPolicy:
    """'fixed' | 'heuristic' | 'theory', starting from gamma."""
    policies: dict[str, type[FixedGamma] | type[HeuristicGamma] | type[TheoryGamma]] = {
        "fixed": FixedGamma,
        "heuristic": HeuristicGamma,
        "theory": TheoryGamma,
    }
    if name not in policies:
        raise ValueError(f"gamma policy must be one of {sorted(policies)} (got {name!r})")
    return policies[name](gamma)
