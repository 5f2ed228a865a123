"""Frozen dataclasses for every decoding event (specviz.jsonl writes and reads them).

Positions count generated tokens from 0. Probabilities are those of the warped (temperature,
top-k, top-p) distributions: p for the target, q for the drafter. row is the request an event
belongs to when a batch is decoded together (specviz.batch), 0 for a single decode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True, kw_only=True)
class _Row:
    """The field every event has: the request it belongs to, in a batch."""

    row: int = 0


@dataclass(frozen=True, kw_only=True)
class Prefill(_Row):
    """The prompt was handed to the models: the drafter cached it (draft_seconds).

    The target scores the prompt in its first pass, as transformers does: target_seconds is 0.
    """

    kind: ClassVar[str] = "prefill"
    prompt_tokens: int
    target_seconds: float
    draft_seconds: float


@dataclass(frozen=True, kw_only=True)
class Proposed(_Row):
    """The drafter proposed `token` for `position`, drawn from q (q_x = q(token))."""

    kind: ClassVar[str] = "proposed"
    round: int
    position: int
    draft_index: int
    token: int
    q_x: float


@dataclass(frozen=True, kw_only=True)
class TreeProposed(_Row):
    """A tree drafter proposed nodes for positions position + depth - 1 (parents: -1 = root).

    q_x[i] = q(tokens[i]) under its parent's distribution; sampled[i] is False for children
    chosen without sampling (top-k, n-gram). The verdicts that follow name nodes by index.
    """

    kind: ClassVar[str] = "tree"
    round: int
    position: int
    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    q_x: tuple[float, ...]
    sampled: tuple[bool, ...]


@dataclass(frozen=True, kw_only=True)
class TreeVerified(_Row):
    """The kept root-to-node path of a tree round, and the rule that chose it.

    exact is False for a lossy rule (typical acceptance): its tokens do not follow the target.
    """

    kind: ClassVar[str] = "tree_verified"
    round: int
    path: tuple[int, ...]
    rule: str
    exact: bool


@dataclass(frozen=True, kw_only=True)
class _Verified(_Row):
    """Fields shared by the verdicts on a draft token."""

    round: int
    position: int
    draft_index: int
    token: int
    p_x: float
    q_x: float
    u: float
    accept_prob: float


@dataclass(frozen=True, kw_only=True)
class Accepted(_Verified):
    """A draft token was kept: u < min(1, p/q) (in a tree, u < the rule's P(keep);
    draft_index is then the node)."""

    kind: ClassVar[str] = "accepted"


@dataclass(frozen=True, kw_only=True)
class Rejected(_Verified):
    """A draft token was discarded: u >= min(1, p/q). Nothing is emitted for it."""

    kind: ClassVar[str] = "rejected"


@dataclass(frozen=True, kw_only=True)
class Resampled(_Row):
    """After a rejection, `token` was drawn from norm(max(0, p - q)) at the same position.

    residual_mass = sum(max(0, p - q)) = 1 - alpha at this position; top lists the leading
    candidates as (token, residual prob, p, q).
    """

    kind: ClassVar[str] = "resampled"
    round: int
    position: int
    token: int
    p_x: float
    q_x: float
    residual_x: float
    residual_mass: float
    top: tuple[tuple[int, float, float, float], ...]


@dataclass(frozen=True, kw_only=True)
class Bonus(_Row):
    """All drafts were kept; `token` was drawn from the target's next distribution p."""

    kind: ClassVar[str] = "bonus"
    round: int
    position: int
    token: int
    p_x: float


@dataclass(frozen=True, kw_only=True)
class Sampled(_Row):
    """Plain decoding: `token` was drawn from p at `position` in one target forward pass."""

    kind: ClassVar[str] = "sampled"
    position: int
    token: int
    p_x: float
    target_seconds: float


@dataclass(frozen=True, kw_only=True)
class RoundSummary(_Row):
    """End of a speculative round: counts and forward-pass timings."""

    kind: ClassVar[str] = "round"
    round: int
    gamma: int
    proposed: int
    accepted: int
    emitted: int
    draft_seconds: float
    target_seconds: float
    draft_forward_calls: int
    prompt_tokens: int = 0  # prompt tokens the target pass scored too (the first round's)


@dataclass(frozen=True, kw_only=True)
class SuffixLookup(_Row):
    """How a suffix drafter (specviz.drafters.suffix) drafted a round, emitted before its proposal.

    context: the matched tokens, the last len(context) committed ones (empty: nothing matched);
    source: where they matched, "memory" (earlier requests) or "request" (this request's own
    prompt and output), "" when nothing matched; total: how often context occurs there;
    candidates: its most frequent continuations there, (token, count), most frequent first
    (the top few only, and an occurrence at the very end of a text has none, so the counts
    may add up to less than total). tokens, parents, probs and score: the speculation grown
    from the match (parents[i] < i, -1 = a continuation of the context itself; probs[i]: the
    frequency of the path to node i; score: their sum, the expected accepted tokens were the
    frequencies the target's law). drafted_by: "suffix", or "model" when a suffix-then-model
    drafter left the round to its draft model because score < min_score (the proposal that
    follows is then the draft model's); min_score: that threshold (None: no draft model).
    """

    kind: ClassVar[str] = "suffix_lookup"
    round: int
    source: str
    context: tuple[int, ...]
    total: int
    candidates: tuple[tuple[int, int], ...]
    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    probs: tuple[float, ...]
    score: float
    drafted_by: str = "suffix"
    min_score: float | None = None


@dataclass(frozen=True, kw_only=True)
class CrossTranslation(_Row):
    """How a cross-tokenizer drafter (specviz.drafters.cross_text, cross_tli) drafted a round,
    emitted before its proposal: the draft's tokens, their text, and that text in the target's
    tokens.

    draft_tokens: the ids the draft wrote, in its own vocabulary; draft_texts: each one's text
    (decoded alone); text: the text they add after the committed text; target_tokens: that text
    in the target's tokens (then the target's end-of-sequence token when the draft ended its
    text); stable: how many of target_tokens come first and stay the same whatever the draft
    writes next (the string-level drafter proposes no others: its last token may still merge
    with text to come); proposed: how many of them were proposed (cut to gamma, and after a
    stop token), the first `proposed`.
    """

    kind: ClassVar[str] = "cross_translation"
    round: int
    draft_tokens: tuple[int, ...]
    draft_texts: tuple[str, ...]
    text: str
    target_tokens: tuple[int, ...]
    stable: int
    proposed: int


DrafterRound = SuffixLookup | CrossTranslation  # what a drafter says of its last proposal


@dataclass(frozen=True, kw_only=True)
class Finished(_Row):
    """Decoding stopped: reason is 'eos' or 'max_new_tokens'."""

    kind: ClassVar[str] = "finished"
    reason: str
    new_tokens: int
    seconds: float


Event = (
    Prefill
    | Proposed
    | TreeProposed
    | TreeVerified
    | Accepted
    | Rejected
    | Resampled
    | Bonus
    | Sampled
    | RoundSummary
    | Finished
    | SuffixLookup
    | CrossTranslation
)
EMITTING = (Accepted, Resampled, Bonus, Sampled)  # each emitted token comes from one of these
