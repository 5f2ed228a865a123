"""What every audited engine offers the audit: one seeded request, on either side.

A source names itself, refuses (ValueError, before any sampling) settings it cannot honour,
checks that it can run at all (preflight), and draws one Sample: the first tokens of one request
with speculation on ('spec') or off ('plain'), with a given seed.
"""

from __future__ import annotations

from typing import Literal, Protocol

from specviz.audit.settings import Sample, Settings

Side = Literal["spec", "plain"]
SIDES: tuple[Side, Side] = ("spec", "plain")


class Source(Protocol):
    """An engine with speculation that can be switched off."""

    @property
    def name(self) -> str:
        """The engine and how it speculates, as the audit table names it."""
        ...

    @property
    def token_outcomes(self) -> bool:
        """True when a request's outcome is its token sequence: one request of the longest k
        then serves every k (its prefixes); False: one request of exactly k tokens each."""
        ...

    @property
    def sides_at_once(self) -> bool:
        """True when the two sides may be asked at the same time (two servers, or one that
        serves requests in parallel); False: one request at a time."""
        ...

    def check(self, settings: Settings) -> None:
        """ValueError, saying what to change, for settings this source cannot honour."""
        ...

    def preflight(self) -> None:
        """ValueError, in one line, when the source cannot be audited (unreachable, ...)."""
        ...

    def sample(
        self, side: Side, prompt: str, settings: Settings, *, seed: int, tokens: int, top: bool
    ) -> Sample:
        """The first `tokens` tokens of one request with this seed, on one side; top: with the
        engine's top logprobs at each position (the outcome is then the token sequence)."""
        ...


def refuse(settings: Settings, unsupported: dict[str, str], where: str) -> None:
    """ValueError naming the first setting in use that `where` has no way to apply.

    unsupported: setting field → its flag; a field is in use when it is set to anything but
    its neutral value (None, an engine default, counts as not in use).
    """
    neutral = {"top_k": 0, "top_p": 1.0, "repetition_penalty": 1.0, "frequency_penalty": 0.0}
    for field, flag in unsupported.items():
        value = getattr(settings, field)
        if value is not None and value != neutral[field]:
            raise ValueError(
                f"{where} cannot apply {flag} {value}: drop {flag} (or audit an engine that has it)"
            )
