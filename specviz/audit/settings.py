"""What an audit asks both sides, and what one request gives back.

A field set to None is left to the engine's default (the request does not carry it); every other
value is sent to both sides alike. Neutral values (top_k 0, top_p 1, repetition penalty 1,
frequency penalty 0) switch the filter off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Token = str | int  # a token as the source names it: its text (endpoints) or its id (in process)
Outcome = tuple[Token, ...]


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The sampling settings of one audit row."""

    temperature: float = 1.0
    top_k: int | None = 0
    top_p: float | None = 1.0
    repetition_penalty: float | None = 1.0
    frequency_penalty: float | None = 0.0

    def __post_init__(self) -> None:
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise ValueError(f"--temperature must be >= 0 (got {self.temperature})")
        if self.top_k is not None and self.top_k < 0:
            raise ValueError(f"--top-k must be >= 0, 0 for off (got {self.top_k})")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"--top-p must be in (0, 1], 1 for off (got {self.top_p})")
        if self.repetition_penalty is not None and self.repetition_penalty <= 0:
            raise ValueError(f"--repetition-penalty must be > 0 (got {self.repetition_penalty})")

    @property
    def greedy(self) -> bool:
        """Temperature 0: the audit checks identity of outputs, not laws."""
        return self.temperature == 0

    @property
    def key(self) -> str:
        """A stable name of these settings ('server' marks an engine default)."""
        parts = {
            "T": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "rep": self.repetition_penalty,
            "freq": self.frequency_penalty,
        }
        return " ".join(f"{k}={'server' if v is None else v}" for k, v in parts.items())

    @property
    def neutral(self) -> bool:
        """Every filter and penalty off and known: the law is softmax(logits / T) alone."""
        return (
            self.top_k == 0
            and self.top_p == 1.0
            and self.repetition_penalty == 1.0
            and self.frequency_penalty == 0.0
        )


@dataclass(frozen=True, kw_only=True)
class Sample:
    """One request's first tokens, with the engine's top logprobs at each position where it
    reports them (token → log-probability, the sampled token included)."""

    tokens: Outcome
    top: tuple[dict[str, float], ...] | None = None

    def to_json(self) -> dict[str, object]:
        """The JSON object a samples file stores."""
        return {"tokens": list(self.tokens), "top": None if self.top is None else list(self.top)}

    @staticmethod
    def from_json(data: dict[str, object]) -> Sample:
        """The Sample a samples file stored."""
        tokens = data["tokens"]
        top = data.get("top")
        assert isinstance(tokens, list)
        return Sample(
            tokens=tuple(tokens),
            top=None if top is None else tuple(top),  # type: ignore[arg-type]
        )
