"""Tree speculative decoding: draft a token tree, score it in one target pass, keep one path.

The target sees [cached prefix | fresh tokens | tree] at once: every node attends to the
whole prefix and to its ancestors and itself, at position (prefix length + depth). After the
verdict the target's cache keeps exactly the prefix and the kept path (a per-layer gather);
the drafter rolls its own cache back and feeds the kept tokens next round.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Generator, Iterator
from typing import Any, cast

import torch
from torch import Tensor
from transformers import PretrainedConfig

from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig, check_max_new_tokens
from specviz.core.decoding import (
    clock,
    end_reason,
    explained,
    make_generator,
    resampled,
    run_rounds,
)
from specviz.core.drafter import ExplainsRounds, SharesTargetCache
from specviz.core.events import (
    Accepted,
    Bonus,
    Event,
    Finished,
    Rejected,
    Resampled,
    RoundSummary,
    TreeProposed,
    TreeVerified,
)
from specviz.core.sampling import logits_to_probs
from specviz.tree.drafter import TreeCache, TreeDrafter
from specviz.tree.proposal import TokenTree
from specviz.tree.verify import EXACT_TREE, TreeRule, TreeVerdict, verify_tree

TREE_ATTENTION = ("eager", "sdpa")  # attention backends that take a custom 4D mask as given


def check_tree_attention(model: Any) -> None:
    """Raise ValueError unless model's attention takes a custom 4D mask (eager or sdpa)."""
    config = getattr(model, "config", None)
    impl = getattr(config, "_attn_implementation", None)
    if isinstance(config, PretrainedConfig) and impl not in TREE_ATTENTION:
        raise ValueError(
            f"tree verification needs an attention backend that takes a custom 4D mask; this "
            f"model uses {impl!r}: load it with attn_implementation='sdpa' (or 'eager')"
        )


def tree_inputs(tree: TokenTree, fresh: int, cached: int, start: int) -> tuple[Tensor, Tensor]:
    """Positions (F+N,) and visibility (F+N, cached+F+N) for fresh tokens then the tree.

    cached: positions in the cache; start: the position of the first fresh token. Fresh tokens
    see the cache and each other causally; node i sees the cache, all fresh tokens, and its
    ancestors and itself; its position is that of the last fresh token plus its depth.
    """
    n = len(tree.parents)
    depths = torch.tensor(tree.depths, dtype=torch.long)
    positions = torch.cat([torch.arange(start, start + fresh), start + fresh - 1 + depths])
    visible = torch.zeros(fresh + n, cached + fresh + n, dtype=torch.bool)
    visible[:, :cached] = True
    visible[:fresh, cached : cached + fresh] = torch.ones(fresh, fresh, dtype=torch.bool).tril()
    visible[fresh:, cached : cached + fresh] = True
    visible[fresh:, cached + fresh :] = tree.visible()
    return positions, visible


class TreeDecoder:
    """Tree speculative sampling: committed ids, the target's cache and the tree drafter."""

    def __init__(
        self,
        target: Any,
        drafter: TreeDrafter,
        prompt_ids: list[int],
        *,
        sampling: SamplingConfig,
        max_new_tokens: int,
        stop_ids: Collection[int] = (),
        rule: TreeRule = EXACT_TREE,
        make_cache: Callable[[Any], TreeCache] = KVCache,
    ) -> None:
        """Set up a decode of prompt_ids; nothing runs until events() is iterated.

        make_cache: the target's cached forward (default transformers' forward with a KVCache);
        a drafter that shares the target's cache (SharesTargetCache) provides it instead.
        """
        check_max_new_tokens(max_new_tokens)
        check_tree_attention(target)
        self.target, self.drafter, self.rule = target, drafter, rule
        self.sampling, self.max_new_tokens, self.stop_ids = sampling, max_new_tokens, stop_ids
        self.device = target.device
        self.ids, self.prompt_len = list(prompt_ids), len(prompt_ids)
        if isinstance(drafter, SharesTargetCache):
            self.target_cache = cast(TreeCache, drafter.target_cache(target))
        else:
            self.target_cache = make_cache(target)
        self.cached = len(self.target_cache)  # committed positions in it (a reused prefix)
        self.generator = make_generator(sampling, self.device)
        self.explains = drafter if isinstance(drafter, ExplainsRounds) else None
        self.rounds = 0  # rounds run so far

    @property
    def new_tokens(self) -> int:
        """Tokens emitted so far."""
        return len(self.ids) - self.prompt_len

    def events(self) -> Iterator[Event]:
        """Run to EOS or max_new_tokens, yielding every event as it happens."""
        return run_rounds(self, self.device)

    def prefill(self) -> list[int]:
        """Cache all prompt tokens but the last in the drafter; the prompt's length."""
        self.drafter.prefill(self.ids[:-1])
        return [len(self.ids)]

    def finish(self, seconds: float) -> list[Finished]:
        """The Finished event once the decode has ended, else none."""
        left = self.max_new_tokens - self.new_tokens
        if (reason := end_reason(self.ids[-1], left, self.stop_ids)) is None:
            return []
        return [Finished(reason=reason, new_tokens=self.new_tokens, seconds=seconds)]

    def round(self) -> Iterator[Event]:
        """Draft a tree, score it in one pass, walk it, emit, keep the path in both caches."""
        round_index, left = self.rounds, self.max_new_tokens - self.new_tokens
        depth = min(self.drafter.depth, left - 1)
        self.rounds += 1
        t0 = clock(self.device)
        tree = self._draft(depth)
        t1 = clock(self.device)
        fresh, held = len(self.ids) - self.cached, len(self.target_cache)
        p_target = self._score(tree)  # (N+1, V)
        t2 = clock(self.device)
        first = self.new_tokens
        if self.explains is not None and depth > 0:
            yield from explained(self.explains, round_index)
        yield TreeProposed(
            round=round_index,
            position=first,
            tokens=tuple(tree.tokens.tolist()),
            parents=tree.parents,
            q_x=tree.q_x(),
            sampled=tree.sampled,
        )
        verdict = verify_tree(p_target, tree, self.generator, self.rule)
        emitted = yield from self._emit(round_index, tree, verdict, p_target)
        self.rule.compact(self.target_cache, held + fresh, verdict.path)
        self.cached += fresh + len(verdict.path)
        self.drafter.rollback(len(self.ids))
        yield RoundSummary(
            round=round_index,
            gamma=depth,
            proposed=len(tree.parents),
            accepted=len(verdict.path),
            emitted=emitted,
            draft_seconds=t1 - t0,
            target_seconds=t2 - t1,
            draft_forward_calls=tree.forward_calls,
            prompt_tokens=fresh - 1,
        )

    def _draft(self, depth: int) -> TokenTree:
        """The drafter's tree, no deeper than depth (an empty tree when depth is 0)."""
        if depth == 0:
            empty = torch.empty(0, dtype=torch.long, device=self.device)
            return TokenTree(
                tokens=empty, parents=(), q_draft=torch.zeros(1, 1), sampled=(), forward_calls=0
            )
        tree = self.drafter.propose_tree(self.ids, depth, self.generator, self.stop_ids)
        if tree.parents and max(tree.depths) > depth:
            raise ValueError(f"the drafter's tree is deeper than the {depth} levels asked for")
        return tree

    def _score(self, tree: TokenTree) -> Tensor:
        """p_target (N+1, V) at the root and after every node, in one target pass."""
        fresh = self.ids[self.cached :]  # the last one is the root
        held = len(self.target_cache)
        positions, visible = tree_inputs(tree, len(fresh), held, self.cached)
        tokens = torch.cat([torch.tensor(fresh), tree.tokens.cpu()]).to(self.device)
        logits = self.target_cache.forward(
            tokens,
            keep=len(tree.parents) + 1,
            positions=positions.to(self.device),
            visible=visible.to(self.device),
        )
        return logits_to_probs(logits, self.sampling)

    def _emit(
        self, round_index: int, tree: TokenTree, verdict: TreeVerdict, p_target: Tensor
    ) -> Generator[Event, None, int]:
        """Yield a verdict per tried node, the path, the next token; returns tokens emitted."""
        first, depths = self.new_tokens, tree.depths
        emitted, stopped = 0, False
        for trial in verdict.trials:
            cls = Accepted if trial.accepted else Rejected
            yield cls(
                round=round_index,
                position=first + depths[trial.node] - 1,
                draft_index=trial.node,
                token=int(tree.tokens[trial.node]),
                p_x=trial.p_x,
                q_x=trial.q_x,
                u=trial.u,
                accept_prob=trial.accept_prob,
            )
            if trial.accepted:
                self.ids.append(int(tree.tokens[trial.node]))
                emitted += 1
                stopped = self.ids[-1] in self.stop_ids
                if stopped:  # an accepted stop token ends the decode
                    break
        yield TreeVerified(
            round=round_index, path=verdict.path, rule=self.rule.name, exact=self.rule.exact
        )
        if not stopped:
            yield self._next_event(round_index, first + emitted, tree, verdict, p_target)
            self.ids.append(verdict.next_token)
            emitted += 1
        return emitted

    def _next_event(
        self,
        round_index: int,
        position: int,
        tree: TokenTree,
        verdict: TreeVerdict,
        p_target: Tensor,
    ) -> Resampled | Bonus:
        """The event for the token that follows the kept path."""
        node, token = (verdict.path[-1] if verdict.path else -1), verdict.next_token
        p = p_target[node + 1]  # (V,)
        if verdict.is_bonus:
            return Bonus(round=round_index, position=position, token=token, p_x=float(p[token]))
        q = tree.q_draft[node + 1].to(p)  # (V,)
        kids = tree.children(node)
        if tree.sampled[kids[0]]:
            mass = float(torch.clamp(p - q, min=0.0).sum())
        else:  # chosen children: what p leaves outside them
            mass = 1.0 - float(p[torch.unique(tree.tokens[kids].to(p.device))].sum())
        return resampled(round_index, position, token, p, q, verdict.next_dist, mass)
