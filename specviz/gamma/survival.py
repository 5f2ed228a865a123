"""Acceptance by position within a round: how likely the first j drafts are all kept.

Leviathan et al.'s E = (1 - alpha^(gamma+1)) / (1 - alpha) assumes every draft is kept
independently with the same alpha. Real drafts are not: agreement comes in stretches, so a round
that kept its first draft is more likely to keep its second (on the bundled pair's code prompts,
a second draft, once reached, is kept far more often than a first). A per-token alpha
measured while drafting little then undervalues drafting more, and a policy that has shrunk
gamma measures only first drafts, so it stays small.

`KeptByPosition` estimates a_j = P(draft j kept | drafts 1..j-1 kept) from decayed counts (a
Kaplan-Meier estimate whose old rounds fade), shrinking each a_j toward a_(j-1) (a_1 toward 0.5)
by `prior` pseudo-rounds: a position with no data yet inherits the one before it, and with
independent verdicts every a_j estimates the same alpha, so E reduces to the closed form.
"""

from __future__ import annotations


class KeptByPosition:
    """Decayed per-position keep rates of drafts, and the tokens per round they predict."""

    def __init__(self, max_gamma: int, prior: float = 2.0, half_life: float = 32.0) -> None:
        """Positions 1..max_gamma; half_life: verified drafts after which a round counts half."""
        if max_gamma < 1:
            raise ValueError(f"max_gamma must be >= 1 (got {max_gamma})")
        self.prior, self.half_life = prior, half_life
        self.reached = [0.0] * max_gamma  # [j - 1]: decayed rounds that verified draft j
        self.kept = [0.0] * max_gamma  # [j - 1]: decayed rounds that kept draft j

    def add(self, proposed: int, accepted: int) -> None:
        """One round: drafts 1..accepted kept, then draft accepted + 1 rejected if proposed."""
        verified = min(accepted + (1 if accepted < proposed else 0), len(self.reached))
        fade = 0.5 ** (verified / self.half_life)
        self.reached = [n * fade + (j < verified) for j, n in enumerate(self.reached)]
        self.kept = [n * fade + (j < accepted) for j, n in enumerate(self.kept)]

    @property
    def accepted(self) -> float:
        """Kept drafts over all positions (decayed)."""
        return sum(self.kept)

    @property
    def verified(self) -> float:
        """Verified drafts over all positions (decayed)."""
        return sum(self.reached)

    def rates(self) -> list[float]:
        """a_1..a_max: each position's keep rate, shrunk toward the position before it."""
        rates, before = [], 0.5
        for reached, kept in zip(self.reached, self.kept, strict=True):
            before = (kept + self.prior * before) / (reached + self.prior)
            rates.append(before)
        return rates

    def expected_tokens(self, lift: float = 0.0) -> list[float]:
        """Emitted tokens per round (bonus or resample included) for gamma = 0..max_gamma.

        lift: added to every rate (capped below 1), for an optimistic prediction.
        """
        tokens, survive = [1.0], 1.0
        for a in self.rates():
            survive *= min(a + lift, 0.999)
            tokens.append(tokens[-1] + survive)
        return tokens
