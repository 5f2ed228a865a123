"""The gamma policy protocol and the fixed policy: how many tokens to draft each round.

A policy sees only round summaries (counts and timings), never the tokens' values, so any
policy leaves the output law exact; it changes speed only (specviz.gamma holds the others).
"""

from __future__ import annotations

from typing import Protocol

from specviz.core.events import RoundSummary


class GammaPolicy(Protocol):
    """Chooses gamma before each round and learns from each round's summary."""

    def next_gamma(self) -> int:
        """Gamma for the coming round (>= 0; 0 makes the round a plain target step)."""

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
