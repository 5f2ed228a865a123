"""Plain and speculative decoding of B requests at once, every row exact on its own.

Each round, every live row drafts up to gamma tokens (its own gamma when fewer are left), one
target pass scores all rows' drafts, and each row is verified alone: its own uniforms from its
own generator, its own number of accepted tokens, its own resample or bonus. Then each row's
caches are rolled back to that row's committed tokens (specviz.batch.cache), and rows that
reached EOS or max_new_tokens leave the batch. Row r seeded s draws exactly what a decode of
prompt r alone with seed s draws, so its output law is the target's for that prompt.

Every event carries its row: the request's index in the prompts given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor

from specviz.batch.cache import BatchKVCache
from specviz.batch.drafters import BatchDrafter
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
    cache, ids = BatchKVCache(target, len(prompts)), [list(p) for p in prompts]
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


class BatchSpeculativeDecoder:
    """Speculative sampling of B prompts together; each row verified and rolled back alone."""

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
    ) -> None:
        """Set up the decode; nothing runs until events() is iterated. drafter: built for
        len(prompts) rows (specviz.batch.drafters.build_batch_drafter); rule verifies each row,
        batch_rule combines the rows (specviz.batch.rule)."""
        self.target, self.drafter, self.rule, self.batch_rule = target, drafter, rule, batch_rule
        self.sampling, self.speculation, self.stop_ids = sampling, speculation, stop_ids
        self.device = target.device
        self.prompts = [list(p) for p in prompts]
        self.ids = [list(p) for p in prompts]
        self.generators = row_generators(sampling, len(prompts), self.device, seeds)
        self.cache = BatchKVCache(target, len(prompts))
        self.cached = [0] * len(prompts)  # target positions each row's cache holds
        self.live = list(range(len(prompts)))  # request of each batch row, in cache order
        self.rounds = [0] * len(prompts)

    def new_tokens(self, r: int) -> int:
        """Tokens request r has emitted so far."""
        return len(self.ids[r]) - len(self.prompts[r])

    def events(self) -> Iterator[Event]:
        """Run every row to EOS or max_new_tokens, yielding every event as it happens."""
        return run_rounds(self, self.device)

    def prefill(self) -> list[int]:
        """Cache every row's prompt but its last token in the drafter; the prompts' lengths."""
        self.drafter.prefill([p[:-1] for p in self.prompts])
        return [len(p) for p in self.prompts]

    def finish(self, seconds: float) -> list[Finished]:
        """A Finished event for each row that just ended; those rows leave the batch."""
        ended: list[Finished] = []
        kept: list[int] = []
        for i, r in enumerate(self.live):
            left = self.speculation.max_new_tokens - self.new_tokens(r)
            if (reason := end_reason(self.ids[r][-1], left, self.stop_ids)) is None:
                kept.append(i)
                continue
            ended.append(
                Finished(reason=reason, new_tokens=self.new_tokens(r), seconds=seconds, row=r)
            )
        if ended and kept:  # the finished rows leave the batch (nothing to keep after the last)
            self.cache.keep_rows(kept)
            self.drafter.keep_rows(kept)
            self.cached = [self.cached[i] for i in kept]
        self.live = [self.live[i] for i in kept]
        return ended

    def round(self) -> Iterator[Event]:
        """Draft every live row, score all in one target pass, verify each row, roll back."""
        live = self.live
        gammas = [
            min(self.speculation.gamma, self.speculation.max_new_tokens - self.new_tokens(r) - 1)
            for r in live
        ]
        t0 = clock(self.device)
        asked = [g + self.rule.lookahead if g else 0 for g in gammas]
        generators = [self.generators[r] for r in live]
        drafts = self.drafter.propose([self.ids[r] for r in live], asked, generators, self.stop_ids)
        t1 = clock(self.device)
        fresh = [
            self.ids[r][n:] + d.tokens.tolist()
            for r, n, d in zip(live, self.cached, drafts, strict=True)
        ]
        keep = max(len(d.tokens) for d in drafts) + 1
        logits = self.cache.forward(fresh, keep=keep)  # (B, keep, V)
        timing = {"draft_seconds": t1 - t0, "target_seconds": clock(self.device) - t1}
        p_targets = [  # row i's (k_i + 1, V): its drafts' positions and the bonus position
            self.rule.warp_target(logits[i, keep - len(d.tokens) - 1 :], self.sampling)
            for i, d in enumerate(drafts)
        ]
        verdicts = self.batch_rule.verify_rows(p_targets, drafts, gammas, generators, self.rule)
        for i, r in enumerate(live):
            carried = len(fresh[i]) - len(drafts[i].tokens) - 1  # prompt tokens scored too
            yield from self._conclude(
                r,
                gammas[i],
                drafts[i],
                verdicts[i],
                p_targets[i],
                {**timing, "prompt_tokens": carried},
            )
        self.cached = [len(self.ids[r]) - 1 for r in live]
        self.cache.crop(self.batch_rule.crop(self.cached))
        self.drafter.rollback([len(self.ids[r]) for r in live])

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
        first, round_index = self.new_tokens(r), self.rounds[r]
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
        self.ids[r] += committed
        self.rounds[r] += 1
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
