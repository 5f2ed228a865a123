"""Frozen, keyword-only configs for sampling and speculation, validated on construction."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class SamplingConfig:
    """How logits become a distribution; applied identically to target and draft.

    temperature 0 means greedy (one-hot argmax); top_k 0 and top_p 1.0 disable those filters.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, int | float):
            raise ValueError(f"temperature must be a number >= 0 (got {self.temperature!r})")
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise ValueError(
                f"temperature must be a finite number >= 0, 0 for greedy (got {self.temperature})"
            )
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise ValueError(
                f"top_k must be an integer >= 0; use 0 to disable (got {self.top_k!r})"
            )
        if (
            isinstance(self.top_p, bool)
            or not isinstance(self.top_p, int | float)
            or not (0.0 < self.top_p <= 1.0)
        ):
            raise ValueError(
                f"top_p must be in (0, 1]; use 1.0 to disable nucleus sampling (got {self.top_p!r})"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0 (got {self.seed!r})")

    @property
    def greedy(self) -> bool:
        """True when temperature is 0: every distribution is the one-hot argmax."""
        return self.temperature == 0


@dataclass(frozen=True, kw_only=True)
class SpeculationConfig:
    """How many tokens the drafter proposes per round (gamma) and how many to generate."""

    gamma: int = 4
    max_new_tokens: int = 64

    def __post_init__(self) -> None:
        if isinstance(self.gamma, bool) or not isinstance(self.gamma, int) or self.gamma < 1:
            raise ValueError(f"gamma must be an integer >= 1 (got {self.gamma!r})")
        check_max_new_tokens(self.max_new_tokens)


def check_max_new_tokens(max_new_tokens: int) -> None:
    """Raise ValueError unless max_new_tokens is an integer >= 1."""
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, int)
        or max_new_tokens < 1
    ):
        raise ValueError(f"max_new_tokens must be an integer >= 1 (got {max_new_tokens!r})")
