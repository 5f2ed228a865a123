"""Summary numbers of a decode, next to two estimates of its speedup (no torch needed).

The i.i.d. estimate is Leviathan et al.'s closed form (specviz.gamma.theory): it assumes every
draft is kept independently with the same α. Real drafts agree in stretches, so a measured
speedup can beat it; the keep-rate estimate puts the measured per-position keep rates
a_j = P(draft j kept | drafts before it kept) (specviz.gamma.survival) into the same formula.
Neither is a bound. Both assume a chain of drafts: for a tree decode they are left out (a
tree round proposes many more nodes than its kept path can hold).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from specviz.core.events import (
    EMITTING,
    Event,
    Finished,
    RoundSummary,
    Sampled,
    TreeProposed,
    TreeVerified,
)
from specviz.gamma.survival import KeptByPosition
from specviz.gamma.theory import expected_tokens_per_round, speedup_bound


def cost_ratio(rounds: Sequence[RoundSummary]) -> float:
    """c = mean draft seconds per draft call / mean target seconds per round (nan if none)."""
    calls = sum(r.draft_forward_calls for r in rounds)
    target = sum(r.target_seconds for r in rounds)
    if not rounds or target <= 0:
        return math.nan
    if not calls:
        return 0.0  # a drafter without a model (n-gram lookup) makes no forward passes
    return (sum(r.draft_seconds for r in rounds) / calls) / (target / len(rounds))


def summarize(
    events: Sequence[Event], plain_tokens_per_second: float | None = None
) -> dict[str, Any]:
    """The headline numbers of a (possibly unfinished) decode, JSON-ready (nan becomes None)."""
    rounds = [e for e in events if isinstance(e, RoundSummary)]
    tokens = sum(isinstance(e, EMITTING) for e in events)
    finished = next((e for e in events if isinstance(e, Finished)), None)
    target_calls = len(rounds) + sum(isinstance(e, Sampled) for e in events)
    tree = any(isinstance(e, TreeProposed) for e in events)
    numbers = _round_numbers(rounds)
    if tree:  # the chain estimates do not apply to trees
        numbers |= {k: math.nan for k in CHAIN_ESTIMATES}
    out: dict[str, Any] = {
        "new_tokens": tokens,
        "finish_reason": finished.reason if finished else None,
        **numbers,
        **_tree_numbers(events, rounds, tree),
        "target_calls": target_calls,
        "target_calls_per_token": target_calls / tokens if tokens else math.nan,
        **_speed(tokens, finished, plain_tokens_per_second),
    }
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


CHAIN_ESTIMATES = (
    "expected_tokens_per_round",
    "kept_rates_tokens_per_round",
    "iid_speedup_estimate",
    "kept_rates_speedup_estimate",
)


def _tree_numbers(
    events: Sequence[Event], rounds: Sequence[RoundSummary], tree: bool
) -> dict[str, Any]:
    """Whether the output follows the target's law (False once a lossy rule chose a token),
    the tree rule, and the tree rounds' mean size (nan for a chain)."""
    verified = [e for e in events if isinstance(e, TreeVerified)]
    rules = sorted({e.rule for e in verified})
    return {
        "tree": tree,
        "follows_target_law": all(e.exact for e in verified),
        "tree_rule": ", ".join(rules) if rules else None,
        "mean_nodes_per_round": _mean([r.proposed for r in rounds]) if tree else math.nan,
    }


def kept_rates_tokens_per_round(rounds: Sequence[RoundSummary]) -> float:
    """Tokens per round (bonus included) at the largest γ from the rounds' per-position keep
    rates, every round counted alike (nan without rounds)."""
    gamma = max((r.gamma for r in rounds), default=0)
    if not rounds or gamma < 1:
        return math.nan
    kept = KeptByPosition(gamma, half_life=math.inf)  # the whole decode, no round faded
    for r in rounds:
        kept.add(r.proposed, r.accepted)
    return kept.expected_tokens()[gamma]


def _round_numbers(rounds: Sequence[RoundSummary]) -> dict[str, float]:
    """Acceptance, per-round lengths (with and without bonus), c and both speedup estimates."""
    proposed, accepted = sum(r.proposed for r in rounds), sum(r.accepted for r in rounds)
    alpha = accepted / proposed if proposed else math.nan
    gamma = max((r.gamma for r in rounds), default=0)
    c = cost_ratio(rounds)
    kept_tokens = kept_rates_tokens_per_round(rounds)
    return {
        "rounds": len(rounds),
        "gamma": gamma,
        "proposed": proposed,
        "accepted": accepted,
        "alpha": alpha,
        "mean_accepted_per_round_without_bonus": _mean([r.accepted for r in rounds]),
        "mean_tokens_per_round_with_bonus": _mean([r.emitted for r in rounds]),
        "expected_tokens_per_round": expected_tokens_per_round(alpha, gamma)
        if _finite(alpha)
        else math.nan,
        "kept_rates_tokens_per_round": kept_tokens,
        "cost_ratio_c": c,
        "iid_speedup_estimate": speedup_bound(alpha, gamma, c) if _finite(alpha, c) else math.nan,
        "kept_rates_speedup_estimate": kept_tokens / (gamma * c + 1)
        if _finite(kept_tokens, c)
        else math.nan,
    }


def _speed(tokens: int, finished: Finished | None, plain_tps: float | None) -> dict[str, Any]:
    """Wall-clock seconds, tokens/s and, given plain decoding's tokens/s, the measured speedup."""
    seconds = finished.seconds if finished else math.nan
    tps = tokens / seconds if finished and seconds > 0 else math.nan
    return {
        "seconds": seconds,
        "tokens_per_second": tps,
        "plain_tokens_per_second": plain_tps,
        "measured_speedup": tps / plain_tps if plain_tps and _finite(tps) else math.nan,
    }


def _mean(values: Sequence[float]) -> float:
    """Arithmetic mean, nan for no values."""
    return sum(values) / len(values) if values else math.nan


def _finite(*values: float) -> bool:
    """True when every value is a finite number."""
    return all(math.isfinite(v) for v in values)
