"""Bugs of batched speculative decoding, each the real batch decoder with one piece of its
BatchRule (specviz.batch.rule) swapped.

They are negative controls for the batch law suite (law_suite.py): each breaks what a batch
must keep, that every row is exact on its own and that the rows are independent requests.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor

from specviz.batch.rule import BatchRule, each_row_alone
from specviz.core.acceptance import AcceptanceRule, Verdict, residual
from specviz.core.drafter import Draft
from specviz.core.sampling import sample, uniform


def truncated_rows(
    p_targets: list[Tensor],
    drafts: list[Draft],
    gammas: list[int],
    generators: list[torch.Generator],
    rule: AcceptanceRule,
) -> list[Verdict]:
    """One row's rejection truncates every row: all keep the fewest drafts any row kept.

    Mirrors a batched verifier that keeps the batch rectangular by cutting every row to the
    shortest accepted run, then draws each row's next token from the residual at that position
    as though its draft there had been rejected (it was accepted, so that token should follow p).
    """
    verdicts = each_row_alone(p_targets, drafts, gammas, generators, rule)
    n = min(v.n_accepted for v in verdicts)
    rows = zip(verdicts, p_targets, drafts, generators, strict=True)
    return [v if v.n_accepted <= n else _cut(v, p, d, gen, n) for v, p, d, gen in rows]


def _cut(
    verdict: Verdict, p_target: Tensor, draft: Draft, generator: torch.Generator, n: int
) -> Verdict:
    """verdict with only n drafts kept and the next token from the residual at draft n."""
    next_dist = residual(p_target[n], draft.q_draft.to(p_target)[n])  # (V,)
    return dataclasses.replace(
        verdict,
        n_accepted=n,
        next_token=sample(next_dist, generator),
        is_bonus=False,
        next_dist=next_dist,
    )


def shared_uniform(
    p_targets: list[Tensor],
    drafts: list[Draft],
    gammas: list[int],
    generators: list[torch.Generator],
    rule: AcceptanceRule,
) -> list[Verdict]:
    """One uniform per draft position, shared by every row of the batch.

    Mirrors a batched verifier drawing one vector of gamma uniforms per round (from the first
    live row's stream) and broadcasting it over the rows instead of drawing a (B, gamma) array.
    Each row's own law stays exact; the rows' accept decisions move together, so they are no
    longer independent requests.
    """
    longest = max(len(d.tokens) for d in drafts)
    shared = uniform(longest, generators[0], p_targets[0])  # (gamma,)

    def uniforms(n: int, _generator: object, like: Tensor) -> Tensor:
        """The shared draws (n,), whatever generator is passed."""
        return shared[:n].to(like)

    same = dataclasses.replace(rule, uniforms=uniforms)
    return each_row_alone(p_targets, drafts, gammas, generators, same)


def crop_to_next_row(lengths: list[int]) -> list[int]:
    """Each row's target cache is cut to the next row's length (the lengths rolled by one row).

    Mirrors per-row lengths applied to the wrong rows: a list kept in one order (e.g. by
    request) used on a cache whose rows are in another. A row then keeps stale rejected drafts
    or loses committed positions, and its next tokens see the wrong context.
    """
    return lengths[1:] + lengths[:1]


@dataclass(frozen=True, kw_only=True)
class BatchMutant:
    """A named batch rule with one piece swapped, and the bug it mirrors."""

    name: str
    description: str
    rule: BatchRule


CACHE_CUT_TO_OTHER_ROW = BatchRule(crop=crop_to_next_row)

MUTANTS: tuple[BatchMutant, ...] = (
    BatchMutant(
        name="rejection_truncates_rows",
        description="every row cut to the fewest drafts any row accepted, then resampled there",
        rule=BatchRule(verify_rows=truncated_rows),
    ),
    BatchMutant(
        name="shared_uniform",
        description="one uniform per draft position shared by all rows (rows not independent)",
        rule=BatchRule(verify_rows=shared_uniform),
    ),
    BatchMutant(
        name="cache_cut_to_other_row",
        description="each row's target cache cut to another row's length",
        rule=CACHE_CUT_TO_OTHER_ROW,
    ),
)
