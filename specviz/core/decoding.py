"""Plain and speculative decoding as generators of events, sharing one KV-cached forward path."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator
from typing import Any, Protocol

import torch
from torch import Tensor

from specviz.core.acceptance import EXACT, AcceptanceRule, Verdict, verify_round
from specviz.core.cache import CachedForward, KVCache
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.drafter import Draft, Drafter, ExplainsRounds, SharesTargetCache
from specviz.core.events import (
    Accepted,
    Bonus,
    Event,
    Finished,
    Prefill,
    Proposed,
    Rejected,
    Resampled,
    RoundSummary,
)
from specviz.core.policy import FixedGamma, GammaPolicy

RESIDUAL_TOP = 5  # candidates of the residual distribution recorded per resample


def clock(device: torch.device) -> float:
    """Wall-clock seconds, after waiting for queued CUDA work on device."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def make_generator(sampling: SamplingConfig, device: torch.device) -> torch.Generator:
    """A fresh generator on device, seeded from the sampling config (never the global RNG)."""
    return torch.Generator(device=device).manual_seed(sampling.seed)


class Rounds(Protocol):
    """A decoder run round by round over its rows (the requests; one unless batched)."""

    def prefill(self) -> list[int]:
        """Hand every row's prompt to the drafter; returns each row's prompt length."""

    def round(self) -> Iterator[Event]:
        """One round of every live row: its events, its tokens committed."""

    def finish(self, seconds: float) -> list[Finished]:
        """A Finished event (seconds: since the decode began) for each row that just ended,
        which leaves the decode."""


def run_rounds(decoder: Rounds, device: torch.device) -> Iterator[Event]:
    """Prefill, then rounds until every row has ended (stop token or max_new_tokens).

    The target gets no prompt pass of its own: its first verification pass scores the prompt
    together with the first drafts (one target call fewer, as in transformers).
    """
    start = clock(device)
    prompts = decoder.prefill()
    seconds = clock(device) - start
    for row, n in enumerate(prompts):
        yield Prefill(prompt_tokens=n, target_seconds=0.0, draft_seconds=seconds, row=row)
    live = len(prompts)
    while live:
        yield from decoder.round()
        ended = decoder.finish(clock(device) - start)
        live -= len(ended)
        yield from ended


def end_reason(last: int, left: int, stop_ids: Collection[int]) -> str | None:
    """Why a row ends after a round whose last token is last, with left more tokens allowed:
    "eos" (a stop token), "max_new_tokens" (none left), or None (it goes on)."""
    if last in stop_ids:
        return "eos"
    return None if left > 0 else "max_new_tokens"


def target_cache(
    target: Any, drafter: Drafter, make_cache: Callable[[Any], CachedForward] | None
) -> CachedForward:
    """The target's cached forward: the drafter's share of it, make_cache's, or a KVCache."""
    if isinstance(drafter, SharesTargetCache):
        if make_cache is not None:
            raise ValueError(
                f"{type(drafter).__name__} shares the target's cache; do not pass make_cache"
            )
        return drafter.target_cache(target)
    return (make_cache or KVCache)(target)


class SpeculativeDecoder:
    """Speculative sampling state: the committed ids, the target's cache and the drafter."""

    def __init__(
        self,
        target: Any,
        drafter: Drafter,
        prompt_ids: list[int],
        *,
        sampling: SamplingConfig,
        speculation: SpeculationConfig,
        stop_ids: Collection[int] = (),
        rule: AcceptanceRule = EXACT,
        make_cache: Callable[[Any], CachedForward] | None = None,
        policy: GammaPolicy | None = None,
    ) -> None:
        """Set up a decode of prompt_ids; nothing runs until events() is iterated.

        make_cache: the target's cached forward (default KVCache); a drafter that shares the
        target's cache (SharesTargetCache) provides it instead.
        """
        self.policy = policy or FixedGamma(speculation.gamma)
        self.target, self.drafter, self.rule = target, drafter, rule
        self.sampling, self.speculation, self.stop_ids = sampling, speculation, stop_ids
        self.device = target.device
        self.ids = list(prompt_ids)
        self.prompt_len = len(prompt_ids)
        self.target_cache = target_cache(target, drafter, make_cache)
        self.generator = make_generator(sampling, self.device)
        self.explains = drafter if isinstance(drafter, ExplainsRounds) else None
        self.rounds = 0  # rounds run so far

    def events(self) -> Iterator[Event]:
        """Run to EOS or max_new_tokens, yielding every event as it happens."""
        return run_rounds(self, self.device)

    @property
    def new_tokens(self) -> int:
        """Tokens emitted so far."""
        return len(self.ids) - self.prompt_len

    def prefill(self) -> list[int]:
        """Cache all prompt tokens but the last in the drafter; the prompt's length."""
        self.drafter.prefill(self.ids[:-1])
        return [len(self.ids)]

    def finish(self, seconds: float) -> list[Finished]:
        """The Finished event once the decode has ended, else none."""
        left = self.speculation.max_new_tokens - self.new_tokens
        if (reason := end_reason(self.ids[-1], left, self.stop_ids)) is None:
            return []
        return [Finished(reason=reason, new_tokens=self.new_tokens, seconds=seconds)]

    def round(self) -> Iterator[Event]:
        """Draft, score all drafts in one target pass, verify, emit, roll both caches back."""
        round_index, left = self.rounds, self.speculation.max_new_tokens - self.new_tokens
        gamma = min(self.policy.next_gamma(), left - 1)
        self.rounds += 1
        t0 = clock(self.device)
        draft = self._draft(gamma)
        t1 = clock(self.device)
        carried = len(self.ids) - 1 - len(self.target_cache)  # prompt tokens in the first pass
        p_target = self._score(draft.tokens)  # (k+1, V)
        t2 = clock(self.device)
        first = self.new_tokens
        if self.explains is not None and gamma > 0:
            yield from explained(self.explains, round_index)
        for i, token in enumerate(draft.tokens.tolist()):
            q_x = float(draft.q_draft[i, token])
            yield Proposed(
                round=round_index, position=first + i, draft_index=i, token=token, q_x=q_x
            )
        verdict = verify_round(p_target, draft, gamma, self.generator, self.rule)
        events, committed = verdict_events(
            round_index, first, draft, verdict, p_target, self.stop_ids
        )
        yield from events
        self.ids += committed
        self.target_cache.crop(len(self.ids) - 1)
        self.drafter.rollback(len(self.ids))
        summary = RoundSummary(
            round=round_index,
            gamma=gamma,
            proposed=len(draft.tokens),
            accepted=verdict.n_accepted,
            emitted=len(committed),
            draft_seconds=t1 - t0,
            target_seconds=t2 - t1,
            draft_forward_calls=draft.forward_calls,
            prompt_tokens=carried,
        )
        self.policy.update(summary)
        yield summary

    def _draft(self, gamma: int) -> Draft:
        """Ask for up to gamma tokens and the rule's lookahead past them (none when gamma is 0)."""
        if gamma == 0:
            empty = torch.empty(0, dtype=torch.long, device=self.device)
            return Draft(tokens=empty, q_draft=torch.empty(0, 0), forward_calls=0)
        asked = gamma + self.rule.lookahead
        return self.drafter.propose(self.ids, asked, self.generator, self.stop_ids)

    def _score(self, draft_tokens: Tensor) -> Tensor:
        """p_target (k+1, V) for each draft position and the bonus position, in one pass."""
        fresh = torch.tensor(self.ids[len(self.target_cache) :], device=self.device)
        k = draft_tokens.shape[0]
        tokens = torch.cat([fresh, draft_tokens.to(self.device)])
        logits = self.target_cache.forward(tokens, keep=k + 1)  # (k+1, V)
        return self.rule.warp_target(logits, self.sampling)


def explained(drafter: ExplainsRounds, round_index: int) -> list[Event]:
    """The drafter's account of the proposal it just made, if it gives one (none or one event)."""
    detail = drafter.explain(round_index)
    return [] if detail is None else [detail]


def verdict_events(
    round_index: int,
    first: int,
    draft: Draft,
    verdict: Verdict,
    p_target: Tensor,
    stop_ids: Collection[int],
) -> tuple[list[Event], list[int]]:
    """One verdict's accept/reject/resample/bonus events and the tokens it commits (first: the
    position of the round's first draft token)."""
    n, tokens = verdict.n_accepted, draft.tokens.tolist()
    events: list[Event] = []
    for i in range(n if verdict.is_bonus else n + 1):
        verdict_cls = Rejected if i == n else Accepted
        at = {"position": first + i, "draft_index": i, "token": tokens[i], **verdict.fields(i)}
        events.append(verdict_cls(round=round_index, **at))
        if i < n and tokens[i] in stop_ids:
            return events, tokens[: i + 1]  # an accepted stop token ends the round (and decode)
    events.append(next_event(round_index, first + n, draft, verdict, p_target))
    return events, [*tokens[:n], verdict.next_token]


def next_event(
    round_index: int, position: int, draft: Draft, verdict: Verdict, p_target: Tensor
) -> Resampled | Bonus:
    """The event for the token that follows the accepted drafts."""
    n, token = verdict.n_accepted, verdict.next_token
    p = p_target[n]  # (V,)
    if verdict.is_bonus:
        return Bonus(round=round_index, position=position, token=token, p_x=float(p[token]))
    q = draft.q_draft[n].to(p)  # (V,)
    mass = float(torch.clamp(p - q, min=0.0).sum())
    return resampled(round_index, position, token, p, q, verdict.next_dist, mass)


def resampled(
    round_index: int, position: int, token: int, p: Tensor, q: Tensor, dist: Tensor, mass: float
) -> Resampled:
    """The event for `token` drawn from dist (V,) after a rejection, p and q (V,) beside it."""
    top = dist.topk(min(RESIDUAL_TOP, p.shape[0]))
    return Resampled(
        round=round_index,
        position=position,
        token=token,
        p_x=float(p[token]),
        q_x=float(q[token]),
        residual_x=float(dist[token]),
        residual_mass=mass,
        top=tuple(
            (int(t), float(r), float(p[t]), float(q[t]))
            for r, t in zip(top.values.tolist(), top.indices.tolist(), strict=True)
        ),
    )
