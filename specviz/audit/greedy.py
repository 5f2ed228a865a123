"""Greedy identity at temperature 0: does speculation change the output, and if so, is it a
numerical tie or a bug?

Speculation verifies several positions in one batched forward; its logits differ from one-token
steps in the last bits, so where the top two tokens are nearly tied the argmax may flip. At the
first position where the outputs differ, the gap between the two largest log-probabilities the
plain side reported there tells which: below the tie threshold (TIE_NATS by default) the flip is
numerics; above it the two sides computed different distributions, a bug.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specviz.audit.settings import Sample

TIE_NATS = 0.05  # a top-2 log-probability gap below this is a numerical tie


@dataclass(frozen=True, kw_only=True)
class GreedyCase:
    """One prompt's greedy outputs compared: where they first differ and the top-2 gap there."""

    prompt: int
    identical: bool
    position: int | None = None
    gap: float | None = None  # None: the source reported no logprobs there
    tie: bool | None = None

    @property
    def kind(self) -> str:
        """'identical', 'tie' (numerics), 'bug' or 'unknown' (no logprobs to tell)."""
        if self.identical:
            return "identical"
        if self.tie is None:
            return "unknown"
        return "tie" if self.tie else "bug"


def first_difference(a: Sequence[object], b: Sequence[object]) -> int | None:
    """The first index where a and b differ (a length difference counts), None if equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def top2_gap(sample: Sample, position: int) -> float | None:
    """Largest minus second largest reported log-probability at position (None if absent)."""
    if sample.top is None or len(sample.top) <= position:
        return None
    values = sorted(sample.top[position].values(), reverse=True)
    return values[0] - values[1] if len(values) > 1 else None


def compare(prompt: int, spec: Sample, plain: Sample, tie: float = TIE_NATS) -> GreedyCase:
    """The greedy case of one prompt (the gap read off the plain side, else the speculative)."""
    position = first_difference(spec.tokens, plain.tokens)
    if position is None:
        return GreedyCase(prompt=prompt, identical=True)
    gap = top2_gap(plain, position)
    gap = top2_gap(spec, position) if gap is None else gap
    return GreedyCase(
        prompt=prompt,
        identical=False,
        position=position,
        gap=gap,
        tie=None if gap is None else gap < tie,
    )


def greedy_verdict(cases: Sequence[GreedyCase]) -> str:
    """'not exact' for any bug, 'inconclusive' for an unexplained difference, else 'exact'."""
    kinds = {c.kind for c in cases}
    if "bug" in kinds:
        return "not exact"
    return "inconclusive" if "unknown" in kinds else "exact"
