"""What a drafting head would keep along one target decode: a replay's input for the heads.

A draft model's q at a position depends only on the tokens before it, so one draft step per
position gives every round's verdicts (specviz.bench.lookahead). A drafting head's does not:
the first token of a round reads the target's real feature, and each later one the head's own
guess at it (EAGLE) or the same last real feature through a head further ahead (Medusa). So a
round starting at output position i is drafted here as the real loop drafts it, with the
target's features of every committed token but the last and the head fed the target's own
tokens after that (a kept draft is the token the target wrote): q_j^(i)(y) for each depth j.
A round's verdicts are independent given the target's path, so drawing one uniform per
(start, depth) gives rounds with the law of real ones at T > 0; at T = 0 they are certain and
the rounds are the real ones. The first round drafts nothing: the target has not yet scored
the prompt (specviz.heads.drafters).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from specviz.bench.lookahead import Lookahead, TargetPath
from specviz.core.sampling import logits_to_probs
from specviz.heads.cache import MedusaCache
from specviz.heads.drafters import HeadDrafter


def most_drafted(drafter: HeadDrafter, limit: int) -> int:
    """The most tokens the head drafts a round: limit, and no more than Medusa's heads."""
    head = drafter.head
    return min(limit, head.heads.k) if isinstance(head, MedusaCache) else limit


@torch.no_grad()
def head_keeps(
    drafter: HeadDrafter, target: Any, path: TargetPath, most: int
) -> list[tuple[float, ...]]:
    """[i][j]: min(1, q(y)/p(y)) of the (j+1)-th draft of a round starting at output position
    i, where the target wrote y; a row ends where a draft is never kept (q(y) = 0), at `most`
    drafts or at the path's end. Row 0 is empty (the first round drafts nothing)."""
    forward = drafter.target_cache(target)  # a fresh forward of the target, recording features
    device = drafter.device
    ids, tokens = list(path.prompt_ids), path.tokens
    rows: list[tuple[float, ...]] = [()]
    for i in range(1, len(tokens)):
        ids.append(tokens[i - 1])
        forward.forward(torch.tensor(ids[len(forward) : -1], device=device), keep=1)
        drafter.rollback(len(ids))  # as after a round: the head keeps what fits the committed
        pending, row = ids[len(drafter.head) :], []
        for j in range(min(most, len(tokens) - i)):
            logits = drafter.head.forward(torch.tensor(pending, device=device), keep=1)[-1]
            q = logits_to_probs(logits[: drafter.vocab_size], drafter.sampling)
            y = tokens[i + j]
            row.append(min(1.0, float(q[y]) / path.p_tokens[i + j]))
            if row[-1] == 0.0:
                break
            pending = [y]
        rows.append(tuple(row))
    return rows


def head_lookahead(
    keeps: Sequence[Sequence[float]], most: int, generator: torch.Generator
) -> Lookahead:
    """Draw each (start, depth) verdict (u < keep) and count the kept run of each start; the
    head offers `most` drafts a round, none in the first."""
    u = torch.rand(len(keeps), max(most, 1), generator=generator, dtype=torch.float64).tolist()
    kept = []
    for row, draws in zip(keeps, u, strict=True):
        run = 0
        while run < len(row) and draws[run] < row[run]:
            run += 1
        kept.append(run)
    offered = tuple(0 if i == 0 else most for i in range(len(keeps)))
    return Lookahead(kept=tuple(kept), offered=offered, forwards=True)


def head_lookaheads(
    drafter: HeadDrafter, target: Any, path: TargetPath, draws: int, seed: int, limit: int
) -> list[Lookahead]:
    """draws lookaheads of one path with the head (one where every verdict is certain), each
    round drafting at most `limit` tokens (and no more than the head can)."""
    most = most_drafted(drafter, limit)
    keeps = head_keeps(drafter, target, path, most)
    generator = torch.Generator().manual_seed(seed)
    certain = all(k in (0.0, 1.0) for row in keeps for k in row)
    return [head_lookahead(keeps, most, generator) for _ in range(1 if certain else draws)]
