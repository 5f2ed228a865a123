"""Plain and speculative decoding of B requests at once, every row exact on its own.

Each round, every live row drafts up to gamma tokens (its own gamma, fewer when fewer are
left), one target pass scores all rows' drafts, and each row is verified alone: its own
uniforms from its own generator, its own number of accepted tokens, its own resample or bonus.
Then each row's caches are rolled back to that row's committed tokens (specviz.batch.cache),
and rows that reached EOS or max_new_tokens leave the batch. Row r seeded s draws exactly what a
decode of prompt r alone with seed s draws, so its output law is the target's for that prompt.

A server may cap γ by the batch's size (gamma_cap: specviz.batch.gamma). A row then drafts what
the cap allows that round, as a decode alone with that γ schedule would. The cap is fixed
before the round's draws (by how many rows decode), so each round is an exact step whatever γ
it drafts, and the law stays the target's (as with the dynamic γ policies).

Rows may differ in prompt, length, temperature, top-k/top-p and seed, and a request may join a
running batch (continuous batching, BatchSpeculativeDecoder.join): it enters at the next round
boundary, so what it draws does not depend on what else is in the batch.

Every event carries its row: the request's index in the prompts given, then one per join.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from specviz.batch.cache import BatchCache, admitted, batch_cache
from specviz.batch.drafters import BatchDrafter, ExplainsRows, Joining, RemembersRows
from specviz.batch.rule import EXACT_BATCH, BatchRule
from specviz.core.acceptance import EXACT, AcceptanceRule, Verdict
from specviz.core.config import SamplingConfig, SpeculationConfig, check_max_new_tokens
from specviz.core.decoding import clock, end_reason, run_rounds, verdict_events
from specviz.core.drafter import Draft
from specviz.core.events import Event, Finished, Prefill, Proposed, RoundSummary, Sampled
from specviz.core.sampling import logits_to_probs, sample


def row_generators(
    sampling: SamplingConfig, rows: int, device: torch.device, seeds: Sequence[int] | None
) -> list[torch.Generator]:
    """One generator per row: seeds[r], or sampling.seed + r (never shared, never global)."""
    chosen = list(seeds) if seeds is not None else [sampling.seed + r for r in range(rows)]
    if len(chosen) != rows:
        raise ValueError(f"{len(chosen)} seeds for {rows} prompts: give one seed per prompt")
    return [torch.Generator(device=device).manual_seed(s) for s in chosen]


def batch_autoregressive_events(
    target: Any,
    prompts: Sequence[list[int]],
    *,
    sampling: SamplingConfig,
    max_new_tokens: int,
    stop_ids: Collection[int] = (),
    seeds: Sequence[int] | None = None,
) -> Iterator[Event]:
    """Plain sampling of every prompt at once, one target pass per step for all live rows."""
    check_max_new_tokens(max_new_tokens)
    device = target.device
    generators = row_generators(sampling, len(prompts), device, seeds)
    cache, ids = batch_cache(target), [list(p) for p in prompts]
    cache.add_rows(len(prompts))
    live, start = list(range(len(prompts))), clock(device)
    for r, prompt in enumerate(prompts):
        yield Prefill(prompt_tokens=len(prompt), target_seconds=0.0, draft_seconds=0.0, row=r)
    while live:
        t0 = clock(device)
        fresh = [ids[r][n:] for r, n in zip(live, cache.lengths, strict=True)]
        probs = logits_to_probs(cache.forward(fresh, keep=1)[:, -1], sampling)  # (B, V)
        seconds, done = clock(device) - t0, []
        for i, r in enumerate(live):
            token = sample(probs[i], generators[r])
            position = len(ids[r]) - len(prompts[r])
            yield Sampled(
                position=position,
                token=token,
                p_x=float(probs[i, token]),
                target_seconds=seconds,
                row=r,
            )
            ids[r].append(token)
            if token in stop_ids or position + 1 == max_new_tokens:
                reason = "eos" if token in stop_ids else "max_new_tokens"
                yield Finished(
                    reason=reason, new_tokens=position + 1, seconds=clock(device) - start, row=r
                )
                done.append(i)
        live = [r for i, r in enumerate(live) if i not in done]
        if done and live:  # the finished rows leave the batch (nothing to keep after the last)
            cache.keep_rows([i for i in range(cache.rows) if i not in done])


@dataclass(kw_only=True)
class Request:
    """One row's request and what it has written: ids (prompt then emitted tokens), its own
    sampling settings, token budget, generator and γ, the drafter that drafts it, and its
    rounds so far."""

    prompt_tokens: int
    ids: list[int]
    sampling: SamplingConfig
    max_new_tokens: int
    generator: torch.Generator
    gamma: int
    drafter: str = ""  # the key of the drafter that drafts it (specviz.batch.routed)
    rounds: int = 0

    @property
    def new_tokens(self) -> int:
        """Tokens emitted so far."""
        return len(self.ids) - self.prompt_tokens


class BatchSpeculativeDecoder:
    """Speculative sampling of many requests together; each row verified and rolled back alone.

    The prompts given are rows 0..B-1; join adds a request later (continuous batching): it
    enters the batch at the next round boundary, and every row leaves when it ends (or when
    leave drops it). A row is a request's number: every event names it.
    """

    def __init__(
        self,
        target: Any,
        drafter: BatchDrafter,
        prompts: Sequence[list[int]],
        *,
        sampling: SamplingConfig,
        speculation: SpeculationConfig,
        stop_ids: Collection[int] = (),
        rule: AcceptanceRule = EXACT,
        seeds: Sequence[int] | None = None,
        batch_rule: BatchRule = EXACT_BATCH,
        cache: BatchCache | None = None,
        gamma_cap: Callable[[int], int] | None = None,
    ) -> None:
        """Set up the decode; nothing runs until events() (or advance()) is iterated. drafter:
        a batch drafter (specviz.batch.drafters.build_batch_drafter); rule verifies each row,
        batch_rule combines the rows (specviz.batch.rule); sampling and speculation's
        max_new_tokens: the given prompts' (a joining request brings its own); gamma: every
        row's; cache: the target's empty batch cache (None: specviz.batch.cache.batch_cache's,
        the lean forward where it runs the target); gamma_cap(B): the most draft tokens a row
        drafts while B rows decode (specviz.batch.gamma.GammaByRows; None: each row's γ)."""
        self.target, self.drafter, self.rule, self.batch_rule = target, drafter, rule, batch_rule
        self.gamma, self.stop_ids, self.device = speculation.gamma, stop_ids, target.device
        self.gamma_cap = gamma_cap
        self.requests: dict[int, Request] = {}  # the rows decoding or about to enter
        self.cache = batch_cache(target) if cache is None else cache
        self.live: list[int] = []  # the rows in the batch, in cache order
        self.cached: list[int] = []  # target positions each live row's cache holds
        self.entering: list[int] = []  # rows that join at the next round boundary
        self.leaving: set[int] = set()  # rows dropped at the next round boundary
        self.next_row = 0
        generators = row_generators(sampling, len(prompts), self.device, seeds)
        for prompt, generator in zip(prompts, generators, strict=True):
            self._add(prompt, sampling, speculation.max_new_tokens, generator, self.gamma)

    def join(
        self,
        prompt: list[int],
        *,
        sampling: SamplingConfig,
        max_new_tokens: int,
        seed: int,
        gamma: int | None = None,
        drafter: str = "",
    ) -> int:
        """Add a request; it enters the batch at the next round boundary. Returns its row.
        gamma: its draft tokens a round (None: the decoder's); drafter: which drafter drafts it,
        for a drafter that routes rows (specviz.batch.routed)."""
        check_max_new_tokens(max_new_tokens)
        generator = torch.Generator(device=self.device).manual_seed(seed)
        return self._add(prompt, sampling, max_new_tokens, generator, gamma or self.gamma, drafter)

    def _add(
        self,
        prompt: Sequence[int],
        sampling: SamplingConfig,
        max_new_tokens: int,
        generator: torch.Generator,
        gamma: int,
        drafter: str = "",
    ) -> int:
        row, self.next_row = self.next_row, self.next_row + 1
        self.requests[row] = Request(
            prompt_tokens=len(prompt),
            ids=list(prompt),
            sampling=sampling,
            max_new_tokens=max_new_tokens,
            generator=generator,
            gamma=gamma,
            drafter=drafter,
        )
        self.entering.append(row)
        return row

    def leave(self, row: int) -> None:
        """Drop row (a cancelled request) at the next round boundary; no event says so."""
        if row in self.requests:
            self.leaving.add(row)

    @property
    def rows(self) -> int:
        """The requests decoding or about to enter."""
        return len(self.requests)

    def new_tokens(self, r: int) -> int:
        """Tokens request r has emitted so far."""
        return self.requests[r].new_tokens

    def events(self) -> Iterator[Event]:
        """Run every row to EOS or max_new_tokens, yielding every event as it happens."""
        return run_rounds(self, self.device)

    def advance(self) -> Iterator[Event]:
        """One step of continuous batching: drop the rows that left, admit the rows that
        joined (their Prefill events), one round of every live row, and the Finished events
        of the rows that ended. Nothing happens when no row is decoding or entering."""
        self._drop(self.leaving)
        start = clock(self.device)
        entered = self.entering
        for row, n in zip(entered, self.prefill(), strict=True):
            yield Prefill(prompt_tokens=n, target_seconds=0.0, draft_seconds=0.0, row=row)
        if self.live:
            yield from self.round()
            yield from self.finish(clock(self.device) - start)

    def prefill(self) -> list[int]:
        """The entering rows join the batch (their prompts, but the last token, handed to the
        drafter; on a ragged cache the target reads them in the next round's pass); their
        prompts' lengths."""
        entering, self.entering = self.entering, []
        requests = [self.requests[r] for r in entering]
        prefixes = [q.ids[:-1] for q in requests]
        self.drafter.join(
            [
                Joining(prefix=p, sampling=q.sampling, drafter=q.drafter)
                for p, q in zip(prefixes, requests, strict=True)
            ]
        )
        self.cached += admitted(self.cache, prefixes)
        self.live += entering
        return [q.prompt_tokens for q in requests]

    def finish(self, seconds: float) -> list[Finished]:
        """A Finished event for each row that just ended (a drafter that learns from requests
        is given each); those rows leave the batch."""
        ended: list[Finished] = []
        for i, r in enumerate(self.live):
            q = self.requests[r]
            left = q.max_new_tokens - q.new_tokens
            if (reason := end_reason(q.ids[-1], left, self.stop_ids)) is not None:
                if isinstance(self.drafter, RemembersRows):  # a request run to its end
                    self.drafter.remember_row(i, list(q.ids), q.prompt_tokens)
                ended.append(
                    Finished(reason=reason, new_tokens=q.new_tokens, seconds=seconds, row=r)
                )
        self._drop({e.row for e in ended if e.row is not None})
        return ended

    def _drop(self, rows: set[int]) -> None:
        """Rows leave the batch and are forgotten (their caches' rows too)."""
        if not rows:
            return
        kept = [i for i, r in enumerate(self.live) if r not in rows]
        if len(kept) < len(self.live):
            self.cache.keep_rows(kept)
            self.drafter.keep_rows(kept)
            self.cached = [self.cached[i] for i in kept]
            self.live = [self.live[i] for i in kept]
        self.entering = [r for r in self.entering if r not in rows]
        for r in rows:
            self.requests.pop(r, None)
        self.leaving -= rows

    def round(self) -> Iterator[Event]:
        """Draft every live row, score all in one target pass, verify each row, roll back."""
        live = self.live
        requests = [self.requests[r] for r in live]
        gammas = self._gammas(requests)
        t0 = clock(self.device)
        asked = [g + self.rule.lookahead if g else 0 for g in gammas]
        generators = [q.generator for q in requests]
        drafts = self.drafter.propose([q.ids for q in requests], asked, generators, self.stop_ids)
        t1 = clock(self.device)
        fresh = [
            q.ids[n:] + d.tokens.tolist()
            for q, n, d in zip(requests, self.cached, drafts, strict=True)
        ]
        keep = max(len(d.tokens) for d in drafts) + 1
        logits = self.cache.forward(fresh, keep=keep)  # (B, keep, V)
        timing = {"draft_seconds": t1 - t0, "target_seconds": clock(self.device) - t1}
        p_targets = [  # row i's (k_i + 1, V): its drafts' positions and the bonus position
            self.rule.warp_target(logits[i, keep - len(d.tokens) - 1 :], q.sampling)
            for i, (q, d) in enumerate(zip(requests, drafts, strict=True))
        ]
        verdicts = self.batch_rule.verify_rows(p_targets, drafts, gammas, generators, self.rule)
        for i, r in enumerate(live):
            carried = len(fresh[i]) - len(drafts[i].tokens) - 1  # prompt tokens scored too
            if isinstance(self.drafter, ExplainsRows) and gammas[i] > 0:
                detail = self.drafter.explain_row(i, requests[i].rounds)
                yield from [] if detail is None else [dataclasses.replace(detail, row=r)]
            yield from self._conclude(
                r,
                gammas[i],
                drafts[i],
                verdicts[i],
                p_targets[i],
                {**timing, "prompt_tokens": carried},
            )
        self.cached = [len(q.ids) - 1 for q in requests]
        self.cache.crop(self.batch_rule.crop(self.cached))
        self.drafter.rollback([len(q.ids) for q in requests])

    def _gammas(self, requests: Sequence[Request]) -> list[int]:
        """Each row's draft tokens this round: its γ, at most the cap for this many rows, and
        fewer where fewer tokens are left."""
        cap = self.gamma_cap(len(requests)) if self.gamma_cap is not None else None
        out = []
        for q in requests:
            gamma = q.gamma if cap is None else min(q.gamma, cap)
            out.append(min(gamma, q.max_new_tokens - q.new_tokens - 1))
        return out

    def _conclude(
        self,
        r: int,
        gamma: int,
        draft: Draft,
        verdict: Verdict,
        p_target: Tensor,
        timing: dict[str, Any],
    ) -> Iterator[Event]:
        """Row r's proposals, verdicts and round summary; its tokens are committed."""
        q = self.requests[r]
        first, round_index = q.new_tokens, q.rounds
        tokens = draft.tokens.tolist()
        for i, token in enumerate(tokens):
            q_x = float(draft.q_draft[i, token])
            yield Proposed(
                round=round_index, position=first + i, draft_index=i, token=token, q_x=q_x, row=r
            )
        events, committed = verdict_events(
            round_index, first, draft, verdict, p_target, self.stop_ids
        )
        yield from (dataclasses.replace(e, row=r) for e in events)
        q.ids += committed
        q.rounds += 1
        yield RoundSummary(
            round=round_index,
            gamma=gamma,
            proposed=len(tokens),
            accepted=verdict.n_accepted,
            emitted=len(committed),
            draft_forward_calls=draft.forward_calls,
            row=r,
            **timing,
        )
